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

package builder

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func TestValidatePlacement(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{convoy.LabelJobName: "llm"}}
	term := func(sel *metav1.LabelSelector, key string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{LabelSelector: sel, TopologyKey: key}
	}
	const zone = convoy.LabelTopologyZone
	cases := []struct {
		name      string
		framework convoy.Framework
		gpus      *int32
		scheduler string
		terms     []corev1.PodAffinityTerm
		want      string // the refused field, or "" when the job passes
	}{
		{name: "apart by hostname", terms: []corev1.PodAffinityTerm{term(own, convoy.LabelHostname)}},
		{name: "apart by zone", terms: []corev1.PodAffinityTerm{term(own, convoy.LabelHostname), term(own, zone)},
			want: "spec.scheduling.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[1].topologyKey"},
		{name: "a selector of the workers' role", terms: []corev1.PodAffinityTerm{term(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: convoy.LabelReplicaRole, Operator: metav1.LabelSelectorOpIn, Values: []string{"worker"}}}}, zone)},
			want: "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"},
		{name: "one rank only still selects a worker", terms: []corev1.PodAffinityTerm{term(&metav1.LabelSelector{MatchLabels: map[string]string{
			convoy.LabelReplicaRank: "3"}}, zone)}, want: "[0].topologyKey"},
		{name: "other jobs' pods", terms: []corev1.PodAffinityTerm{term(&metav1.LabelSelector{MatchLabels: map[string]string{convoy.LabelJobName: "other"}}, zone)}},
		{name: "the parameter servers only", framework: convoy.FrameworkTensorFlow, terms: []corev1.PodAffinityTerm{term(&metav1.LabelSelector{MatchLabels: map[string]string{
			convoy.LabelReplicaRole: "ps"}}, zone)}},
		{name: "no GPUs: no gang plan", gpus: ptr.To[int32](0), terms: []corev1.PodAffinityTerm{term(own, zone)}},
		{name: "another scheduler", scheduler: "default-scheduler", terms: []corev1.PodAffinityTerm{term(own, zone)}},
		{name: "other namespaces", terms: []corev1.PodAffinityTerm{{LabelSelector: own, TopologyKey: zone, Namespaces: []string{"elsewhere"}}}},
		{name: "its own namespace named", terms: []corev1.PodAffinityTerm{{LabelSelector: own, TopologyKey: zone, Namespaces: []string{"elsewhere", "team"}}},
			want: "[0].topologyKey"},
		{name: "every namespace", terms: []corev1.PodAffinityTerm{{LabelSelector: own, TopologyKey: zone, NamespaceSelector: &metav1.LabelSelector{}}},
			want: "[0].topologyKey"},
		{name: "namespaces by label: left to the scheduler", terms: []corev1.PodAffinityTerm{{LabelSelector: own, TopologyKey: zone,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}}},
		{name: "matchLabelKeys still select the pod itself", terms: []corev1.PodAffinityTerm{{LabelSelector: own, TopologyKey: zone,
			MatchLabelKeys: []string{convoy.LabelReplicaRank}}}, want: "[0].topologyKey"},
		{name: "mismatchLabelKeys: left to the scheduler", terms: []corev1.PodAffinityTerm{{LabelSelector: own, TopologyKey: zone,
			MismatchLabelKeys: []string{convoy.LabelReplicaRank}}}},
		{name: "no selector selects nothing", terms: []corev1.PodAffinityTerm{term(nil, zone)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := &convoy.TrainingJob{
				ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "team"},
				Spec: convoy.TrainingJobSpec{Framework: convoy.FrameworkPyTorch, NumWorkers: 4, GPUsPerWorker: ptr.To[int32](8),
					Scheduling: &convoy.SchedulingSpec{SchedulerName: tc.scheduler, Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: tc.terms}}}},
			}
			if tc.framework != "" {
				job.Spec.Framework = tc.framework
				job.Spec.NumParameterServers = 2
			}
			if tc.gpus != nil {
				job.Spec.GPUsPerWorker = tc.gpus
			}
			errs := ValidatePlacement(job, plugin(t, job.Spec.Framework))
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("got %d errors %v, want one at %s", len(errs), errs, tc.want)
			}
			msg := errs[0].Error()
			if !strings.HasSuffix(errs[0].Field, tc.want) || !strings.Contains(msg, `"topology.kubernetes.io/zone"`) ||
				!strings.Contains(msg, "use topologyKey kubernetes.io/hostname") {
				t.Errorf("error %q, want it at %s, naming the key and the fix", msg, tc.want)
			}
		})
	}
}
