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

package v1alpha1

import (
	"cmp"
	"fmt"
	"slices"
)

// NVLinkDomains returns the NVLink domain of each of a node's GPUs, in the order of gpus. A GPU's
// domain is its own nvlinkDomain where set (the node agent publishes the GPU fabric clique there),
// else the node-local island of GPUs that NVLink links join, named "<node>/nvlink-<k>" with k
// counting the node's islands by their lowest GPU index. A GPU without NVLink peers and without a
// published domain has none (""). Links name GPUs by index; links to an index no GPU has are
// ignored. The node agent writes these names into GPUNode status and the scheduler reads GPUNodes
// through it, so both name a domain the same way.
func NVLinkDomains(node string, gpus []GPUDevice, links []GPULink) []string {
	// pos maps a GPU index to its position in gpus; parent is a union-find over positions.
	pos := make(map[int32]int, len(gpus))
	for p, g := range gpus {
		pos[g.Index] = p
	}
	parent := make([]int, len(gpus))
	for p := range parent {
		parent[p] = p
	}
	var find func(int) int
	find = func(p int) int {
		if parent[p] != p {
			parent[p] = find(parent[p])
		}
		return parent[p]
	}
	linked := make([]bool, len(gpus))
	for _, l := range links {
		a, okA := pos[l.A]
		b, okB := pos[l.B]
		if l.Type != LinkNVLink || !okA || !okB || a == b {
			continue
		}
		linked[a], linked[b] = true, true
		parent[find(a)] = find(b)
	}
	// Islands are numbered in the order of their lowest GPU index without a published domain.
	order := make([]int, len(gpus))
	for p := range order {
		order[p] = p
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(gpus[a].Index, gpus[b].Index) })
	islands := map[int]int{}
	out := make([]string, len(gpus))
	for _, p := range order {
		switch {
		case gpus[p].NVLinkDomain != "":
			out[p] = gpus[p].NVLinkDomain
		case linked[p]:
			root := find(p)
			k, ok := islands[root]
			if !ok {
				k = len(islands)
				islands[root] = k
			}
			out[p] = fmt.Sprintf("%s/nvlink-%d", node, k)
		}
	}
	return out
}
