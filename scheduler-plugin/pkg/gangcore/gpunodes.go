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
	"sync"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// gpuInventory holds the GPU inventory the node agents publish in GPUNode objects, by node, and
// the nodes whose GPUNode was set or deleted since the last view read it: the node cache drops
// their bases there (see nodeCache.sync); log lists the same for the kept views, which remake
// them (see keptView).
type gpuInventory struct {
	// mu guards nodes, changed and log. A view holds it while it reads the nodes' inventories.
	mu      sync.RWMutex
	nodes   map[string]*gpuNode
	changed map[string]bool
	log     changeLog
}

func newGPUInventory() *gpuInventory {
	return &gpuInventory{nodes: map[string]*gpuNode{}, changed: map[string]bool{}}
}

// set records the node's inventory and returns the one it replaces, nil for a new node.
func (inv *gpuInventory) set(name string, n *gpuNode) (old *gpuNode) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	old = inv.nodes[name]
	inv.nodes[name] = n
	inv.changed[name] = true
	inv.log.add(name)
	return old
}

// remove forgets the node's inventory: its GPUNode was deleted.
func (inv *gpuInventory) remove(name string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	delete(inv.nodes, name)
	inv.changed[name] = true
	inv.log.add(name)
}

// touched lists the nodes for the kept views to remake though neither their NodeInfo nor their
// GPUNode changed: their DRA devices did (a ResourceSlice, or a claim allocated or released).
func (inv *gpuInventory) touched(names []string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, name := range names {
		inv.log.add(name)
	}
}

// get returns the node's inventory, nil when the node has no GPUNode.
func (inv *gpuInventory) get(name string) *gpuNode {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.nodes[name]
}

// lockForView locks the inventory for a view and returns every node's inventory and the nodes
// changed since the last view; unlockView forgets those changes and unlocks. In between the view
// must not call the inventory's other methods. (Not a callback: the view's loop over 5,000 nodes
// runs faster in the view's own frame.)
func (inv *gpuInventory) lockForView() (nodes map[string]*gpuNode, changed map[string]bool) {
	inv.mu.Lock()
	return inv.nodes, inv.changed
}

func (inv *gpuInventory) unlockView() {
	clear(inv.changed)
	inv.mu.Unlock()
}

// gpuNode is what the plugins need of a GPUNode, computed once per update.
type gpuNode struct {
	total     int
	unhealthy int
	healthy   planner.GPUSet
	topology  *planner.GPUTopology
	// allocated maps "namespace/pod" to the GPUs the node agent saw it hold.
	allocated map[string]planner.GPUSet
	// uuids maps each GPU's UUID to its index: a DRA device names its GPU by its uuid attribute.
	uuids map[string]int
}

// equal reports whether two inventories have the same GPUs, health, holders and links.
func (g *gpuNode) equal(o *gpuNode) bool {
	return g.total == o.total && g.unhealthy == o.unhealthy && g.healthy == o.healthy &&
		maps.Equal(g.allocated, o.allocated) && maps.Equal(g.uuids, o.uuids) && g.topology.Equal(o.topology)
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

// cachedGPUNode is the GPUNode informer's transform: it drops what newGPUNode never reads before
// the cache keeps the object, its managedFields and each GPU's own NVLink list (the pairs in
// status.links stay). On an 8-GPU NVSwitch node the agent's lists and the managedFields that
// server-side apply keeps for them are most of the object.
func cachedGPUNode(in any) (any, error) {
	if g, ok := in.(*convoy.GPUNode); ok {
		g.ManagedFields = nil
		for i := range g.Status.GPUs {
			g.Status.GPUs[i].NVLinks = nil
		}
	}
	return in, nil
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
	out := &gpuNode{total: len(g.Status.GPUs), allocated: map[string]planner.GPUSet{}, uuids: map[string]int{}}
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
		if d.UUID != "" {
			out.uuids[d.UUID] = i
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
