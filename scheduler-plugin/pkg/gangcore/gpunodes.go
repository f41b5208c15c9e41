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

package gangcore

import (
	"maps"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// gpuNode is what the plugins need of a GPUNode, computed once per update.
type gpuNode struct {
	total     int
	unhealthy int
	healthy   planner.GPUSet
	topology  *planner.GPUTopology
	// allocated maps "namespace/pod" to the GPUs the node agent saw it hold.
	allocated map[string]planner.GPUSet
}

// equal reports whether two inventories have the same GPUs, health, holders and links.
func (g *gpuNode) equal(o *gpuNode) bool {
	return g.total == o.total && g.unhealthy == o.unhealthy && g.healthy == o.healthy &&
		maps.Equal(g.allocated, o.allocated) && g.topology.Equal(o.topology)
}

// free is how many healthy GPUs no pod holds.
func (g *gpuNode) free() int {
	free := g.healthy
	for _, set := range g.allocated {
		free &^= set
	}
	return free.Len()
}

// linkScore rates one GPU pair of a GPUNode's link matrix.
func linkScore(l convoy.GPULink) int {
	switch l.Type {
	case convoy.LinkNVLink:
		return planner.NVLinkScore + int(max(l.NVLinks, 1))
	case convoy.LinkPIX:
		return planner.PIXScore
	case convoy.LinkPXB:
		return planner.PXBScore
	case convoy.LinkPHB:
		return planner.PHBScore
	case convoy.LinkNODE:
		return planner.NODEScore
	case convoy.LinkSYS:
		return planner.SYSScore
	}
	return planner.UnknownScore
}

// newGPUNode converts a GPUNode. Only Healthy GPUs are schedulable: Unhealthy and Unknown are not.
// NVLink domains are those of convoy.NVLinkDomains, which the node agent publishes too.
func newGPUNode(g *convoy.GPUNode) *gpuNode {
	n := 0
	for _, d := range g.Status.GPUs {
		if int(d.Index) < planner.MaxGPUsPerNode {
			n = max(n, int(d.Index)+1)
		}
	}
	out := &gpuNode{total: len(g.Status.GPUs), allocated: map[string]planner.GPUSet{}}
	t := planner.NewGPUTopology(n)
	for _, d := range g.Status.GPUs {
		i := int(d.Index)
		if i >= planner.MaxGPUsPerNode {
			continue
		}
		if d.Health == convoy.GPUHealthy {
			out.healthy |= planner.NewGPUSet(i)
		} else {
			out.unhealthy++
		}
		if d.AllocatedTo != "" {
			out.allocated[d.AllocatedTo] |= planner.NewGPUSet(i)
		}
	}
	for _, l := range g.Status.Links {
		a, b := int(l.A), int(l.B)
		if a >= n || b >= n || a < 0 || b < 0 {
			continue
		}
		t.SetLink(a, b, linkScore(l))
	}
	for p, domain := range convoy.NVLinkDomains(g.Name, g.Status.GPUs, g.Status.Links) {
		if i := int(g.Status.GPUs[p].Index); i < n && domain != "" {
			t.SetDomain(i, domain)
		}
	}
	out.topology = t
	return out
}
