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
	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// capacityRequirement is the node requirements of spec.scheduling.capacity: spot selects nodes
// with the first spot label (the one deploy/queue's spot flavors carry), on-demand excludes each,
// any adds nothing. One term, so that Kueue's flavor assigner, which keeps only the keys its
// flavors use, still tells the flavors apart.
func capacityRequirement(c convoy.CapacityType, spot []convoy.SpotNodeLabel) []corev1.NodeSelectorRequirement {
	if len(spot) == 0 {
		spot = []convoy.SpotNodeLabel{convoy.DefaultSpotNodeLabel}
	}
	switch c {
	case convoy.CapacitySpot:
		return []corev1.NodeSelectorRequirement{{Key: spot[0].Key, Operator: corev1.NodeSelectorOpIn, Values: []string{spot[0].Value}}}
	case convoy.CapacityOnDemand:
		var reqs []corev1.NodeSelectorRequirement
		for _, l := range spot {
			reqs = append(reqs, corev1.NodeSelectorRequirement{Key: l.Key, Operator: corev1.NodeSelectorOpNotIn, Values: []string{l.Value}})
		}
		return reqs
	}
	return nil
}

// withCapacity returns affinity with the capacity's requirements added to every required node
// affinity term (a new term when there is none); affinity itself is not changed.
func withCapacity(affinity *corev1.Affinity, c convoy.CapacityType, spot []convoy.SpotNodeLabel) *corev1.Affinity {
	reqs := capacityRequirement(c, spot)
	if len(reqs) == 0 {
		return affinity
	}
	out := affinity.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	required := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		required = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
		out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = required
	}
	for i := range required.NodeSelectorTerms {
		required.NodeSelectorTerms[i].MatchExpressions = append(required.NodeSelectorTerms[i].MatchExpressions, reqs...)
	}
	return out
}
