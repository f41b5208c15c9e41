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
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// nodeCache holds each node's base: what its GPUs look like before any gang's view of them. A
// view of 5,000 nodes recomputes only the bases whose node or GPUNode changed since the last one.
// It has no lock: State.mu guards it, as every view is made under State.mu.
type nodeCache struct {
	opts *Options
	// dra counts the GPUs of nodes and pods that DRA hands out (dra.go).
	dra *draGPUs
	// bases holds the bases by node name. byPosition holds the same bases in the order of the last
	// view's nodes, which the snapshot keeps from one cycle to the next, so that a view finds a
	// node's base without looking its name up.
	bases      map[string]*nodeBase
	byPosition []*nodeBase
}

func newNodeCache(opts *Options) *nodeCache {
	return &nodeCache{opts: opts, bases: map[string]*nodeBase{}}
}

// nodeBase is what a node's GPUs look like before any gang's view of them: its labels, its free
// GPUs after every pod on it, and those pods' holds. It is cached per node and recomputed only
// when the node's NodeInfo generation or GPUNode changes.
type nodeBase struct {
	generation int64
	gn         *gpuNode
	// stale marks a base replaced in bases, or dropped from it: its node or GPUNode changed.
	stale bool
	pn    planner.Node
	// room is the device plugin's allocatable less the pods' requests.
	room    int
	holders []hold
	// leaving is how many GPUs pods that terminate hold (see leavingMessage).
	leaving int
	// dra says that its GPUs are the devices its ResourceSlices publish (see gang.dra), numbered
	// as devices has them.
	dra     bool
	devices []draDevice
	// match holds, by deviceFilter key, which devices match the selectors of gangs with that key.
	match map[string]*deviceMatch
}

// hold is one pod's GPUs on a node.
type hold struct {
	pod  *corev1.Pod
	gpus planner.GPUSet
	n    int
}

// forget drops the base of a deleted node.
func (c *nodeCache) forget(name string) {
	if b := c.bases[name]; b != nil {
		b.stale = true
		delete(c.bases, name)
	}
}

// sync drops the bases whose GPUNode changed (changed, from the inventory's read) and sizes
// byPosition for a view of n nodes.
func (c *nodeCache) sync(gpus map[string]*gpuNode, changed map[string]bool, n int) {
	for name := range changed {
		if b := c.bases[name]; b != nil && b.gn != gpus[name] {
			b.stale = true
			delete(c.bases, name)
		}
	}
	if len(c.byPosition) != n {
		c.byPosition = make([]*nodeBase, n)
	}
}

// at returns the base of ni, the i-th node of the view being made (see sync); gpus are the
// inventory's nodes, as sync had them. The base at the node's position in the last view, if it is
// the node's and still current, saves two lookups by name (gpus, bases) per node and plan: most
// nodes of a view of 5,000 take no lookup at all.
func (c *nodeCache) at(i int, ni fwk.NodeInfo, gpus map[string]*gpuNode, book *planBook) *nodeBase {
	b := c.byPosition[i]
	if name := ni.Node().Name; b == nil || b.stale || b.pn.Name != name || b.generation != ni.GetGeneration() {
		b = c.base(ni, gpus[name], book)
		c.byPosition[i] = b
	}
	return b
}

// base returns the node's cached base, computing it when the snapshot or GPUNode (gn) changed.
// The GPUs a pod holds come from gn, else from the pod's reservation in book, else from its
// convoy.dev/gpu-indices annotation.
func (c *nodeCache) base(ni fwk.NodeInfo, gn *gpuNode, book *planBook) *nodeBase {
	node := ni.Node()
	if b := c.bases[node.Name]; b != nil && b.generation == ni.GetGeneration() && b.gn == gn {
		return b
	}
	b := &nodeBase{generation: ni.GetGeneration(), gn: gn}
	pn := planner.Node{Name: node.Name, Domains: c.opts.domains(node)}
	pn.CPU, pn.Memory = ni.GetAllocatable().GetMilliCPU(), ni.GetAllocatable().GetMemory()
	alloc := int(ni.GetAllocatable().GetScalarResources()[c.opts.GPUResource])
	b.room = alloc - int(ni.GetRequested().GetScalarResources()[c.opts.GPUResource])
	var free planner.GPUSet
	var claimed map[string]planner.GPUSet
	switch {
	case alloc == 0 && (gn == nil || c.dra.nodeGPUs(node.Name) > 0):
		// A node without the device plugin's GPUs has those its DRA driver publishes; its
		// GPUNode, if any, numbers them and gives their NVLink links and islands (draGPUs.node).
		// The devices claims are allocated are taken.
		dn := c.dra.node(node.Name, gn)
		pn.Indexed, pn.GPUs, pn.Unhealthy, pn.Topology = true, len(dn.devices), dn.unhealthy, dn.topology
		b.room, b.dra, b.devices, claimed = len(dn.devices), true, dn.devices, dn.claimed
		free = dn.healthy
		for _, set := range claimed {
			free &^= set
		}
		gn = nil
	case gn != nil:
		pn.Indexed, pn.GPUs, pn.Unhealthy, pn.Topology = true, gn.total, gn.unhealthy, gn.topology
		free = gn.healthy
	default:
		pn.GPUs = min(alloc, planner.MaxGPUsPerNode)
		free = planner.FirstGPUs(pn.GPUs)
	}
	var unknown []int
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		n := c.podGPUs(p)
		if n == 0 {
			continue
		}
		if p.DeletionTimestamp != nil {
			b.leaving += n
		}
		var set planner.GPUSet
		for _, k := range podClaims(p) {
			set |= claimed[k]
		}
		if set == 0 {
			set = knownGPUs(p, gn, book)
		}
		if set == 0 {
			unknown = append(unknown, len(b.holders))
		}
		free &^= set
		b.holders = append(b.holders, hold{pod: p, gpus: set, n: n})
	}
	// Pods whose GPUs are not known hold some of the free ones: the highest, by convention.
	for _, i := range unknown {
		set := highest(free, b.holders[i].n)
		free &^= set
		b.holders[i].gpus = set
	}
	pn.Free = free
	b.pn = pn
	if old := c.bases[node.Name]; old != nil {
		old.stale = true
	}
	c.bases[node.Name] = b
	return b
}

// podGPUs is State.PodGPUs.
func (c *nodeCache) podGPUs(p *corev1.Pod) int {
	if n := GPURequest(p, c.opts.GPUResource); n > 0 {
		return n
	}
	return c.dra.podGPUs(p)
}

// leaving returns how many GPUs pods that terminate hold, and on how many nodes, in the last view,
// made for n nodes; zero when the last view was of other nodes.
func (c *nodeCache) leaving(n int) (gpus, nodes int) {
	if len(c.byPosition) != n {
		return 0, 0
	}
	for _, b := range c.byPosition {
		if b != nil && b.leaving > 0 {
			gpus, nodes = gpus+b.leaving, nodes+1
		}
	}
	return gpus, nodes
}

// highest returns the n highest GPUs of s.
func highest(s planner.GPUSet, n int) planner.GPUSet {
	var out planner.GPUSet
	for i := planner.MaxGPUsPerNode - 1; i >= 0 && n > 0; i-- {
		if s.Has(i) {
			out |= planner.NewGPUSet(i)
			n--
		}
	}
	return out
}

// knownGPUs returns the GPUs a pod holds, where known: from the node agent's GPUNode, else from
// the scheduler's own reservation or the pod's convoy.dev/gpu-indices annotation. Zero when unknown.
func knownGPUs(p *corev1.Pod, gn *gpuNode, book *planBook) planner.GPUSet {
	if gn != nil {
		if set := gn.allocated[p.Namespace+"/"+p.Name]; set != 0 {
			return set
		}
	}
	if r, ok := book.reserved[p.UID]; ok && r.gpus != 0 {
		return r.gpus
	}
	if set, ok := ParseGPUIndices(p.Annotations[AnnotationGPUIndices]); ok {
		return set
	}
	return 0
}
