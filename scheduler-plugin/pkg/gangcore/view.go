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
	"cmp"
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// viewOptions say what a view is for.
type viewOptions struct {
	gang *gang
	elig eligibility
	// victims builds Cluster.Victims for preemption; lone pods are victims only with lonePods.
	victims  bool
	lonePods bool
}

// view turns the snapshot into the planner's cluster for g, every node made anew: a one-off view
// (preemption's, the admission check's), where a new plan's is kept (keptView).
func (s *State) view(ctx context.Context, nodes []fwk.NodeInfo, o viewOptions) (*planner.Cluster, *victimTable) {
	// The node list of the view before last is no longer read (planFor and preemption use a view
	// under s.mu, and the last view's only until the next one's ShareIndex): fill it again rather
	// than allocate 5,000 nodes' worth per plan.
	buf := s.last.spare
	s.last.spare = nil
	if cap(buf) < len(nodes) {
		buf = make([]planner.Node, 0, len(nodes))
	}
	cl := &planner.Cluster{Nodes: buf[:0], PartlyUsedFirst: s.opts.PartlyUsedFirst, Levels: s.opts.names()}
	var vt *victimTable
	if o.victims {
		vt = &victimTable{index: map[string]int{}, leaving: map[string][]*corev1.Pod{}}
	}
	claims := s.book.claims(o.gang)
	held := s.heldNodes(o.gang)
	anchor := s.anchorNode(nodes, o.gang.anchor)
	gpus, changed := s.inventory.lockForView()
	defer s.inventory.unlockView()
	s.nodes.sync(gpus, changed, len(nodes))
	for i, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		b := s.nodes.at(i, ni, gpus, s.book)
		// Each node starts as its base, in place: a planner.Node is some 200 bytes, and 5,000 of
		// them copied through return values cost more than the rest of the loop's bookkeeping.
		cl.Nodes = append(cl.Nodes, b.pn)
		// Most nodes of a busy cluster have no free GPU: without victims to count, such a node is
		// its base, and its eligibility does not matter.
		if vt == nil && b.pn.Free == 0 && !held[node.Name] {
			continue
		}
		s.nodeFor(ctx, &cl.Nodes[len(cl.Nodes)-1], ni, b, o, claims[node.Name], vt, anchor)
	}
	if vt != nil {
		s.fillWorkLost(ctx, vt)
		cl.Victims = vt.list
		cl.Needs = o.elig.limits.Needs()
	}
	// Node names and labels rarely change between plans: keep the planner's topology index.
	shared := s.last.cluster != nil && cl.ShareIndex(s.last.cluster)
	if !shared && len(s.fleet.views) > 0 && s.fleet.views[0].cl != nil {
		cl.ShareIndex(s.fleet.views[0].cl)
	}
	if s.last.cluster != nil {
		s.last.spare = s.last.cluster.Nodes
	}
	s.last.cluster = cl
	s.fleet.last = nil
	return cl, vt
}

// nodeFor makes pn, a copy of base b, node ni of the view for o.gang: b less claims, with the
// gang's own pods' GPUs free again, and what the gang's pods may take of it: excluded, or how many
// fit beside their GPUs. With vt, the node's victims are numbered too.
func (s *State) nodeFor(ctx context.Context, pn *planner.Node, ni fwk.NodeInfo, b *nodeBase, o viewOptions, claims []claim, vt *victimTable, anchor *corev1.Node) {
	node := ni.Node()
	viewOf(pn, b, o.gang, claims, vt, o.lonePods)
	if f := o.gang.devices; f != nil && b.dra {
		// Devices the gang's claims do not select are no room for it, nor are victims' there.
		m := f.matching(ctx, b)
		pn.Free &= m.set
		for i := range pn.Holders {
			pn.Holders[i].GPUs &= m.set
		}
	}
	_, avoided := o.elig.avoid[node.Name]
	// A gang's GPUs are of one kind: DRA claims or the extended resource, which a DeviceClass may
	// back with a DRA node's devices.
	otherKind := b.dra != o.gang.dra && b.pn.GPUs > 0 && (!b.dra || o.gang.extended == nil)
	pn.Excluded = avoided || otherKind || o.elig.excluded(node) || !s.sameDomain(anchor, node, o.gang)
	if !pn.Excluded && o.elig.interPod.excludes(ctx, ni) {
		pn.Excluded = vt == nil || !s.evictionAdmits(ctx, pn, ni, o, vt)
	}
	if pn.Excluded {
		return
	}
	var leaving []*corev1.Pod
	if vt != nil {
		leaving = vt.leaving[node.Name]
	}
	spreadCap := o.elig.interPod.maxPods(ni, o.gang.pendingUIDs)
	pn.MaxPods = fewer(o.elig.limits.MaxPodsWithout(ni, leaving), spreadCap)
	pn.Fill = o.elig.limits.Fill(ni)
	if o.gang.podNeeds != nil && spreadCap >= 0 {
		// Pods that ask different CPU and memory: the planner counts the node's room from what
		// it has spare, pod by pod.
		pn.Spare, pn.SpreadCap = o.elig.limits.Spare(ni, leaving), spreadCap
	}
	if vt != nil && pn.MaxPods != 0 && (pn.MaxPods < 0 || pn.MaxPods < pn.GPUs) {
		// Victims' pods hold CPU and memory too: evicted, they give them back.
		s.spareForVictims(pn, b, ni, o, vt, leaving, spreadCap)
	}
}

// lastView is what a one-off view keeps of the one before: its cluster, whose topology index the
// next view with the same nodes shares, and the node list of the view before it, for the next view
// to fill. State.mu guards it.
type lastView struct {
	cluster *planner.Cluster
	spare   []planner.Node
}

// evictionAdmits reports whether evicting victims with pods on a node the inter-pod filters
// reject would let the gang's pod pass them there: its anti-affinity, or theirs, is what stands
// in the way. The victims are those of the pods holding GPUs there and of the pods holding none (a
// parameter server, a lone pod when lone pods may be preempted). It tries one victim, then every
// two, and so on, in that order (past eight victims: all of them, less each one the others do not
// need), and marks the node as requiring the first set that admits the pod (planner.Node.Requires): a plan takes the node only by evicting that whole set. The other
// victims' GPUs there are left out of pn (neither free nor to be freed), so that no plan counts on
// them. A node where even evicting every victim would not do (a pod that may not be evicted stands
// in the way) stays out.
func (s *State) evictionAdmits(ctx context.Context, pn *planner.Node, ni fwk.NodeInfo, o viewOptions, vt *victimTable) bool {
	// Victims of the gang's priority or more are never evicted: sets with them are not weighed.
	var victims []int
	candidate := func(v int) {
		if v >= 0 && vt.list[v].Priority < o.gang.priority && !slices.Contains(victims, v) {
			victims = append(victims, v)
		}
	}
	for _, h := range pn.Holders {
		candidate(h.Victim)
	}
	for _, pi := range ni.GetPods() {
		if p := pi.GetPod(); s.PodGPUs(p) == 0 {
			candidate(vt.add(p, o.gang, 0, o.lonePods))
		}
	}
	admits := func(set []int) bool {
		var pods []*corev1.Pod
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if slices.ContainsFunc(set, func(v int) bool { return GangKey(p) == vt.list[v].Key }) {
				pods = append(pods, p)
			}
		}
		return o.elig.interPod.passesWithout(ctx, ni, pods)
	}
	// Past maxRequired victims on one node the sets are not weighed one by one: when evicting all
	// of them admits the pod, each is dropped that the others do not need, those of the highest
	// priority first.
	const maxRequired = 8
	var found []int
	for k := 1; k <= len(victims) && found == nil; k++ {
		if len(victims) > maxRequired && k < len(victims) {
			continue
		}
		forEachSubset(victims, k, func(set []int) bool {
			if admits(set) {
				found = slices.Clone(set)
				return false
			}
			return true
		})
	}
	if found == nil {
		return false
	}
	if len(victims) > maxRequired {
		slices.SortStableFunc(found, func(a, b int) int { return cmp.Compare(vt.list[b].Priority, vt.list[a].Priority) })
		for i := 0; i < len(found); {
			if rest := slices.Delete(slices.Clone(found), i, i+1); admits(rest) {
				found = rest
				continue
			}
			i++
		}
	}
	pn.Holders = slices.DeleteFunc(pn.Holders, func(h planner.Holder) bool { return h.Victim >= 0 && !slices.Contains(found, h.Victim) })
	pn.Requires = found
	return true
}

// forEachSubset calls f with each subset of k elements of items, in order, until f returns false.
func forEachSubset(items []int, k int, f func([]int) bool) {
	set := make([]int, 0, k)
	var walk func(from int) bool
	walk = func(from int) bool {
		if len(set) == k {
			return f(set)
		}
		for i := from; i <= len(items)-(k-len(set)); i++ {
			set = append(set, items[i])
			if !walk(i + 1) {
				return false
			}
			set = set[:len(set)-1]
		}
		return true
	}
	walk(0)
}

// sameDomain keeps a gang that already has a bound pod (on anchor) inside anchor's domain of its
// required level.
func (s *State) sameDomain(anchor, node *corev1.Node, g *gang) bool {
	if anchor == nil || !g.required {
		return true
	}
	switch {
	case g.level == planner.LevelNVLink, g.level == planner.LevelNode:
		return node.Name == anchor.Name
	case g.level < planner.LevelRack, g.level >= planner.LevelCluster:
		return true
	}
	// The levels from the outermost to the gang's.
	n := len(s.opts.Levels)
	for _, l := range s.opts.Levels[:max(n-int(g.level-planner.LevelRack), 0)] {
		if node.Labels[l.NodeLabel] != anchor.Labels[l.NodeLabel] {
			return false
		}
	}
	return true
}

// nodeView is one node for gang g: its base, with the GPUs of g's own pending pods free again (g
// is being planned anew), less the claims of other gangs' plans of g's priority or more, and never
// more than the device plugin's allocatable leaves. With vt it also numbers the pods' victims.
//
// Pods nominated by GangPreemption hold claims through their gang's plan; the scheduling queue's
// nominated pods are not read here: that takes the queue's locks, once per node, and a plan at
// 5,000 nodes took 100-300 ms while binds flooded the queue with events. Nodes' Filter still
// accounts for nominated pods.
func nodeView(b *nodeBase, g *gang, claims []claim, vt *victimTable, lonePods bool) planner.Node {
	pn := b.pn
	viewOf(&pn, b, g, claims, vt, lonePods)
	return pn
}

// viewOf makes pn, a copy of b.pn, nodeView's node, in place.
func viewOf(pn *planner.Node, b *nodeBase, g *gang, claims []claim, vt *victimTable, lonePods bool) {
	free, room := pn.Free, b.room
	if vt == nil {
		// Holders matter to preemption alone: only the gang's own pods' GPUs are counted back.
		for _, h := range b.holders {
			if g.pendingUIDs[h.pod.UID] {
				free |= h.gpus
				room += h.n
			}
		}
	} else {
		pn.Holders = make([]planner.Holder, 0, len(b.holders))
		for _, h := range b.holders {
			if g.pendingUIDs[h.pod.UID] {
				free |= h.gpus
				room += h.n
				continue
			}
			if leavingFor(h.pod, g) {
				free |= h.gpus
				room += h.n
				vt.leaving[pn.Name] = append(vt.leaving[pn.Name], h.pod)
				continue
			}
			pn.Holders = append(pn.Holders, planner.Holder{Victim: vt.add(h.pod, g, h.n, lonePods), GPUs: h.gpus})
		}
	}
	for _, c := range claims {
		if pn.Indexed && c.indexed {
			free &^= c.gpus
		} else {
			room -= c.gpus.Len()
		}
	}
	if free.Len() > room {
		free &^= highest(free, free.Len()-max(room, 0))
	}
	pn.Free = free
}

// spareForVictims gives pn, a node of a preemption's view whose CPU, memory or pod slots bound the
// gang's pods, what it has spare of them (the pods leaving it counted as gone) and what each pod
// of a victim there holds (planner.Node.Spare, planner.Holder.Uses), victims' pods without GPUs
// added as holders of no GPUs. pn.Holders are nodeView's: b's holders less g's own pending pods
// and the pods leaving; spreadCap is the bound the pods' spread among themselves puts on the
// gang's pods there (interPod.maxPods).
func (s *State) spareForVictims(pn *planner.Node, b *nodeBase, ni fwk.NodeInfo, o viewOptions, vt *victimTable, leaving []*corev1.Pod, spreadCap int) {
	if spreadCap < 0 {
		return
	}
	k, any := 0, false
	for _, h := range b.holders {
		if o.gang.pendingUIDs[h.pod.UID] || leavingFor(h.pod, o.gang) {
			continue
		}
		if pn.Holders[k].Victim >= 0 {
			pn.Holders[k].Uses = o.elig.limits.Uses(h.pod)
			any = true
		}
		k++
	}
	// Pods without GPUs hold CPU and memory too: those of lower priority are victims (a CPU
	// batch job on a GPU node), or leave already.
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if s.PodGPUs(p) > 0 || o.gang.pendingUIDs[p.UID] || corev1helpers.PodPriority(p) >= o.gang.priority {
			continue
		}
		if leavingFor(p, o.gang) {
			leaving = append(slices.Clip(leaving), p)
			continue
		}
		if v := vt.add(p, o.gang, 0, o.lonePods); v >= 0 {
			pn.Holders = append(pn.Holders, planner.Holder{Victim: v, Uses: o.elig.limits.Uses(p)})
			any = true
		}
	}
	if any {
		pn.Spare, pn.SpreadCap = o.elig.limits.Spare(ni, leaving), spreadCap
	}
}
