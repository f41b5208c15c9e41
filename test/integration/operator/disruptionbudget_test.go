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

package operator

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/util"
)

// TestGangDisruptionBudgetRefusesEvictions: with --gang-disruption-budget, a job gets a
// PodDisruptionBudget of its own name, controlled by it, over its gang's pods with minAvailable the
// gang: the Eviction API refuses to evict a pod of the running gang (429), also after a restart,
// whose pods are named apart from the first attempt's. The operator's own restart is not held back.
func TestGangDisruptionBudgetRefusesEvictions(t *testing.T) {
	e := newEnv(t)
	e.startOperator(func(o *operator.Options) { o.DisruptionBudget = true })
	e.create(utiltesting.MakeTrainingJob("held", e.ns).Workers(2).FailurePolicy(convoy.RestartOnFailure, 3).Obj())
	pods := e.startGang("held", 2, 0)
	job := e.job("held")

	pdb := &policyv1.PodDisruptionBudget{}
	if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "held"}, pdb); err != nil {
		t.Fatalf("the job's PodDisruptionBudget: %v", err)
	}
	if !metav1.IsControlledBy(pdb, job) {
		t.Errorf("PodDisruptionBudget owners %v, want the job as controller", pdb.OwnerReferences)
	}
	if m := pdb.Spec.MinAvailable; m == nil || m.IntValue() != 2 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget minAvailable %v, maxUnavailable %v; want minAvailable 2, the gang", m, pdb.Spec.MaxUnavailable)
	}
	evict := func(pod *corev1.Pod) error {
		return e.k.SubResource("eviction").Create(t.Context(), pod, &policyv1.Eviction{})
	}
	refused := func(name string) {
		t.Helper()
		pod := e.pods("held")[name]
		if pod == nil {
			t.Fatalf("no pod %s of the gang: %v", name, e.pods("held"))
		}
		e.eventually("the budget to count the gang of "+name, func() (bool, string) {
			p := &policyv1.PodDisruptionBudget{}
			if err := e.k.Get(t.Context(), client.ObjectKeyFromObject(pdb), p); err != nil {
				return false, err.Error()
			}
			return p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 2, fmt.Sprintf("%+v", p.Status)
		})
		if err := evict(pod); !apierrors.IsTooManyRequests(err) {
			t.Errorf("evicting %s of the running gang: %v, want 429 Too Many Requests", name, err)
		}
		if p := e.pods("held")[name]; p == nil || p.UID != pod.UID {
			t.Errorf("pod %s is gone after a refused eviction", name)
		}
	}
	refused(util.WorkerPod("held", 0, 0))

	// A failed worker restarts the gang: the operator deletes the pods, which the budget does not stop.
	e.finishPod(util.WorkerPod("held", 1, 0), 1)
	pods = e.waitPods("held", 2, 1)
	for _, rank := range []int32{0, 1} {
		if name := util.WorkerPod("held", rank, 1); pods[name] == nil || pods[name].Spec.Hostname != fmt.Sprintf("held-worker-%d", rank) {
			t.Errorf("restart 1 has no pod %s with hostname held-worker-%d: %v", name, rank, pods)
		}
	}
	e.bindAll("held")
	e.waitState("held", convoy.StateRunning)
	refused(util.WorkerPod("held", 0, 1))
}
