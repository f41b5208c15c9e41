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
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func TestManages(t *testing.T) {
	team, _ := ParseNamespaceSelector("convoy.dev/team")
	teamNS, otherNS := map[string]string{"convoy.dev/team": "a"}, map[string]string{}
	queued := &convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{convoy.QueueNameLabel: "training"}}}
	bare := &convoy.TrainingJob{}
	cases := map[string]struct {
		m              Management
		job            *convoy.TrainingJob
		ns             map[string]string
		alwaysSelector bool
		want           bool
	}{
		"a job that names a queue":                               {job: queued, ns: otherNS, want: true},
		"a job without a queue, not managed":                     {job: bare, ns: teamNS},
		"a job without a queue in a selected namespace":          {m: Management{WithoutQueueName: true, NamespaceSelector: team}, job: bare, ns: teamNS, want: true},
		"a job without a queue elsewhere":                        {m: Management{WithoutQueueName: true, NamespaceSelector: team}, job: bare, ns: otherNS},
		"a job without a queue, every namespace selected":        {m: Management{WithoutQueueName: true}, job: bare, ns: otherNS, want: true},
		"a job that names a queue elsewhere":                     {m: Management{WithoutQueueName: true, NamespaceSelector: team}, job: queued, ns: otherNS, want: true},
		"a job that names a queue elsewhere, selector respected": {m: Management{WithoutQueueName: true, NamespaceSelector: team}, job: queued, ns: otherNS, alwaysSelector: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			features.SetFeatureGateDuringTest(t, features.ManagedJobsNamespaceSelectorAlwaysRespected, tc.alwaysSelector)
			if got := tc.m.Manages(tc.job, tc.ns); got != tc.want {
				t.Errorf("Manages = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDeployedOperatorManagesAsKueue: the operator's flags in deploy/operator make the same jobs
// Kueue's as Kueue's configuration in deploy/kueue.
func TestDeployedOperatorManagesAsKueue(t *testing.T) {
	data, err := os.ReadFile("../deploy/kueue/controller_manager_config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &configapi.Configuration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		t.Fatal(err)
	}
	kueueSays, err := ManagementOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile("../deploy/operator/manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]string{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		d := &appsv1.Deployment{}
		if err := yaml.Unmarshal([]byte(doc), d); err != nil || d.Kind != "Deployment" {
			continue
		}
		for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
			k, v, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			flags[k] = v
		}
	}
	selector, err := ParseNamespaceSelector(flags["kueue-managed-jobs-namespace-selector"])
	if err != nil {
		t.Fatal(err)
	}
	type rule struct{ WithoutQueueName, Selector, Gates string }
	var gates []string
	for name, on := range cfg.FeatureGates {
		gates = append(gates, name+"="+map[bool]string{true: "true", false: "false"}[on])
	}
	want := rule{WithoutQueueName: map[bool]string{true: "true", false: "false"}[kueueSays.WithoutQueueName],
		Selector: kueueSays.NamespaceSelector.String(), Gates: strings.Join(slices.Sorted(slices.Values(gates)), ",")}
	got := rule{WithoutQueueName: flags["kueue-manage-jobs-without-queue-name"], Selector: selector.String(),
		Gates: strings.Join(slices.Sorted(slices.Values(strings.Split(flags["kueue-feature-gates"], ","))), ",")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deploy/operator's flags and deploy/kueue's configuration disagree (-kueue,+operator):\n%s", diff)
	}
}
