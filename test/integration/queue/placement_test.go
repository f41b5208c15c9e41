/*
Copyright The Convoy Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package queue

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TestAntiAffinityTheSchedulerCannotHonourIsRefused applies jobs through the real API server and
// the placement webhook as deploy/kueue/webhook.yaml registers it: a job whose workers must keep a
// zone apart from one another is refused when it is created, with the field and the fix, and
// nothing is stored; one that keeps them a node apart is created; changing its term to the zone
// is refused and leaves the job as it was. The webhook is called for jobs that name no queue too.
func TestAntiAffinityTheSchedulerCannotHonourIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	apart := func(name, topologyKey string) *convoy.TrainingJob {
		job := trainingJob(e.ns, name, "", "", 4, 2)
		job.Spec.Scheduling.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{convoy.LabelJobName: name}},
				TopologyKey:   topologyKey,
			}},
		}}
		return job
	}
	const field = "spec.scheduling.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field+`: Invalid value: "topology.kubernetes.io/zone"`) ||
			!strings.Contains(err.Error(), "use topologyKey kubernetes.io/hostname") {
			t.Errorf("%s: %v; want it refused, naming %s and the fix", what, err, field)
		}
	}

	refused("creating a job whose workers keep a zone apart", e.k.Create(ctx, apart("by-zone", convoy.LabelTopologyZone)))
	if err := e.k.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "by-zone"}, &convoy.TrainingJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused job: %v, want it not stored", err)
	}

	e.create(apart("by-node", convoy.LabelHostname))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := e.job(e.ns, "by-node")
		j.Spec.Scheduling.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = convoy.LabelTopologyZone
		return e.k.Update(ctx, j)
	})
	refused("changing the term to the zone", err)
	if got := e.job(e.ns, "by-node").Spec.Scheduling.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey; got != convoy.LabelHostname {
		t.Errorf("after the refused update the job keeps pods apart by %q, want %s", got, convoy.LabelHostname)
	}
}
