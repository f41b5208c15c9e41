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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func TestWithCapacity(t *testing.T) {
	zone := corev1.NodeSelectorRequirement{Key: convoy.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}
	spot := corev1.NodeSelectorRequirement{Key: convoy.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}
	notSpot := []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"spot"}}}
	gke := []convoy.SpotNodeLabel{{Key: "cloud.google.com/gke-spot", Value: "true"}, {Key: "cloud.google.com/gke-preemptible", Value: "true"}}
	gkeSpot := corev1.NodeSelectorRequirement{Key: "cloud.google.com/gke-spot", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}
	gkeNotSpot := []corev1.NodeSelectorRequirement{
		{Key: "cloud.google.com/gke-spot", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}},
		{Key: "cloud.google.com/gke-preemptible", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}},
	}
	required := func(terms ...[]corev1.NodeSelectorRequirement) *corev1.Affinity {
		a := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
		for _, reqs := range terms {
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
				a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: reqs})
		}
		return a
	}
	cases := map[string]struct {
		affinity *corev1.Affinity
		capacity convoy.CapacityType
		spot     []convoy.SpotNodeLabel
		want     *corev1.Affinity
	}{
		"any adds nothing":                       {capacity: convoy.CapacityAny},
		"unset adds nothing":                     {affinity: required([]corev1.NodeSelectorRequirement{zone}), want: required([]corev1.NodeSelectorRequirement{zone})},
		"spot":                                   {capacity: convoy.CapacitySpot, want: required([]corev1.NodeSelectorRequirement{spot})},
		"on-demand lacks Karpenter's spot label": {capacity: convoy.CapacityOnDemand, want: required(notSpot)},
		"spot has the first configured label":    {capacity: convoy.CapacitySpot, spot: gke, want: required([]corev1.NodeSelectorRequirement{gkeSpot})},
		"on-demand lacks each configured label":  {capacity: convoy.CapacityOnDemand, spot: gke, want: required(gkeNotSpot)},
		"spot joins every term of the user's": {
			affinity: required([]corev1.NodeSelectorRequirement{zone}, nil),
			capacity: convoy.CapacitySpot,
			want:     required([]corev1.NodeSelectorRequirement{zone, spot}, []corev1.NodeSelectorRequirement{spot}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.affinity.DeepCopy()
			if diff := cmp.Diff(tc.want, withCapacity(tc.affinity, tc.capacity, tc.spot)); diff != "" {
				t.Errorf("withCapacity (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.affinity); diff != "" {
				t.Errorf("withCapacity changed the job's affinity (-before,+after):\n%s", diff)
			}
		})
	}
}
