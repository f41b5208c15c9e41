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
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// maxKeptViews is how many views are kept, one per class of gang (viewClass): gangs of a few
// classes (CPU and memory requests, tolerations) that come in turn do not remake every node.
const maxKeptViews = 4

// keptViews are the views new plans share (see keptView), the last used first. State.mu guards
// them.
type keptViews struct {
	views []*fleetView
	// last is the view the last plan was made in; nil after a one-off view.
	last *fleetView
}

// fleetView is a view new plans of one class share: the planner's cluster of the class's last
// plan, kept from one plan to the next and remade only at the nodes that changed since (see
// keptView).
type fleetView struct {
	cl *planner.Cluster
	// nodes holds, by position in the view, what the node there was made from.
	nodes []fleetNode
	// pos maps each node's name to its position.
	pos map[string]int
	// class is what the nodes were made for besides the nodes themselves.
	class viewClass
	// special are the positions made for the last gang alone (its own pods' GPUs, its own slots,
	// the nodes it avoids): they are remade for the next one.
	special []int
	// valid is false until a view is kept, after a view of a gang whose nodes cannot be kept
	// (inter-pod terms, a required domain), and once a caller changed the view (see spoil).
	valid bool
	// gpusRead and claimsRead are how far the view read the inventory's and the plan book's
	// change logs.
	gpusRead, claimsRead uint64
}

// changeLog lists the nodes that changed, in order (a GPUNode set or deleted, the claims on a
// node), for each kept view to catch up on from where it last read.
type changeLog struct {
	names []string
	// first is the position of names[0]: the names before it were dropped.
	first uint64
}

// maxChangeLog bounds a changeLog: a view that fell further behind is made anew.
const maxChangeLog = 1 << 16

func (l *changeLog) add(name string) {
	if len(l.names) == maxChangeLog {
		l.forget(l.first + maxChangeLog/2)
	}
	l.names = append(l.names, name)
}

// end is the position after the last name.
func (l *changeLog) end() uint64 { return l.first + uint64(len(l.names)) }

// since returns the names from position at on; false when some of them were dropped.
func (l *changeLog) since(at uint64) ([]string, bool) {
	if at < l.first {
		return nil, false
	}
	return l.names[at-l.first:], true
}

// forget drops the names before position at.
func (l *changeLog) forget(at uint64) {
	if at > l.first {
		l.names = l.names[min(at-l.first, uint64(len(l.names))):]
		l.first = at
	}
}

// pick returns the kept view of class c, else a new one or the least recently used, first in
// views from then on.
func (k *keptViews) pick(c viewClass) *fleetView {
	i := slices.IndexFunc(k.views, func(f *fleetView) bool { return f.class.same(c) })
	if i < 0 {
		if len(k.views) < maxKeptViews {
			k.views = append(k.views, &fleetView{})
		}
		i = len(k.views) - 1
	}
	f := k.views[i]
	copy(k.views[1:i+1], k.views[:i])
	k.views[0] = f
	return f
}

// spoil tells the kept views that a caller changed cl's nodes: if cl is a kept view's, the next
// plan in it remakes every node.
func (k *keptViews) spoil(cl *planner.Cluster) {
	for _, f := range k.views {
		if f.cl == cl {
			f.valid = false
		}
	}
}

// read forgets what every kept view has read of the change logs.
func (k *keptViews) read(gpus, claims *changeLog) {
	g, c := gpus.end(), claims.end()
	for _, f := range k.views {
		g, c = min(g, f.gpusRead), min(c, f.claimsRead)
	}
	gpus.forget(g)
	claims.forget(c)
}

// fleetNode is what a node of the kept view was made from: the snapshot's NodeInfo, at its
// generation, and the node's base.
type fleetNode struct {
	ni   fwk.NodeInfo
	gen  int64
	base *nodeBase
}

// viewClass is what a view's nodes depend on of the gang, besides its own pods' GPUs, its own slots
// and the nodes it avoids: gangs of one class share the kept view.
type viewClass struct {
	// template's tolerations and required node affinity decide eligibility.excluded.
	template *corev1.Pod
	limits   Limits
	dra      bool
	// extended says that a DeviceClass backs the gang's extended resource (gang.extended).
	extended bool
	// devices is the gang's deviceFilter key.
	devices  string
	priority int32
	podNeeds bool
}

func (c viewClass) same(o viewClass) bool {
	return c.template != nil && o.template != nil && c.dra == o.dra && c.extended == o.extended && c.devices == o.devices && c.priority == o.priority &&
		c.podNeeds == o.podNeeds && slices.Equal(c.limits, o.limits) && sameNodeNeeds(c.template, o.template)
}

// sameNodeNeeds reports whether pods a and b ask the same of a node's taints and labels:
// eligibility.excluded answers the same for both on every node.
func sameNodeNeeds(a, b *corev1.Pod) bool {
	if a == b {
		return true
	}
	return apiequality.Semantic.DeepEqual(a.Spec.Tolerations, b.Spec.Tolerations) &&
		maps.Equal(a.Spec.NodeSelector, b.Spec.NodeSelector) &&
		apiequality.Semantic.DeepEqual(requiredNodeAffinity(a), requiredNodeAffinity(b))
}

func requiredNodeAffinity(p *corev1.Pod) *corev1.NodeSelector {
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

// keptView is view for a new plan, without victims, made in the kept view of the gang's class: a
// node is remade only when its NodeInfo, its GPUNode or the claims on it changed since the class's
// last plan, or when that plan's gang or this one sees it apart from others (its own pods' GPUs,
// its own slots, a node it avoids). A view of a class not kept, or of a gang whose view depends on
// every node (inter-pod terms, a domain its bound pods require), has every node remade. The
// cluster is the view's until its next plan: a caller that changes its nodes calls spoil. It
// returns nil when a node has no Node; view then makes a one-off view.
func (s *State) keptView(ctx context.Context, nodes []fwk.NodeInfo, o viewOptions) *planner.Cluster {
	g := o.gang
	held := s.heldNodes(g)
	anchor := s.anchorNode(nodes, g.anchor)
	class := viewClass{template: o.elig.template, limits: o.elig.limits, dra: g.dra, extended: g.extended != nil, priority: g.priority, podNeeds: g.podNeeds != nil}
	if g.devices != nil {
		class.devices = g.devices.key
	}
	keep := o.elig.interPod == nil && (anchor == nil || !g.required)
	f := s.fleet.pick(class)
	gpus, changed := s.inventory.lockForView()
	defer s.inventory.unlockView()
	s.nodes.sync(gpus, changed, len(nodes))
	gpuNames, gpusOK := s.inventory.log.since(f.gpusRead)
	claimNames, claimsOK := s.book.log.since(f.claimsRead)
	full := !f.valid || len(f.nodes) != len(nodes) || !f.class.same(class) || !keep || !gpusOK || !claimsOK
	if len(f.nodes) != len(nodes) {
		f.nodes = make([]fleetNode, len(nodes))
		f.cl = &planner.Cluster{Nodes: make([]planner.Node, len(nodes)), PartlyUsedFirst: s.opts.PartlyUsedFirst, Levels: s.opts.names()}
		f.pos = nil
	}
	renamed, reindex := f.pos == nil, false
	remake := func(i int) bool {
		ni := nodes[i]
		node := ni.Node()
		if node == nil {
			return false
		}
		b := s.nodes.at(i, ni, gpus, s.book)
		pn := &f.cl.Nodes[i]
		if pn.Name != node.Name {
			renamed = true
		}
		if pn.Name != b.pn.Name || pn.Zone != b.pn.Zone || pn.Block != b.pn.Block || pn.Rack != b.pn.Rack || !slices.Equal(pn.Domains, b.pn.Domains) {
			reindex = true
		}
		*pn = b.pn
		f.nodes[i] = fleetNode{ni: ni, gen: ni.GetGeneration(), base: b}
		if b.pn.Free == 0 && !held[node.Name] {
			return true
		}
		s.nodeFor(ctx, pn, ni, b, o, s.book.claimsOn(g, node.Name), nil, anchor)
		return true
	}
	for i, ni := range nodes {
		if e := &f.nodes[i]; full || ni != e.ni || ni.GetGeneration() != e.gen {
			if !remake(i) {
				// The kept view has a node at every position.
				f.valid, s.fleet.last = false, nil
				return nil
			}
		}
	}
	if renamed {
		f.pos = make(map[string]int, len(nodes))
		for i := range f.cl.Nodes {
			f.pos[f.cl.Nodes[i].Name] = i
		}
	}
	// The nodes changed apart from their NodeInfo: their GPUNode, or the claims on them.
	if !full {
		for _, i := range f.special {
			remake(i)
		}
		for _, name := range slices.Concat(gpuNames, claimNames) {
			if i, ok := f.pos[name]; ok {
				remake(i)
			}
		}
	}
	f.gpusRead, f.claimsRead = s.inventory.log.end(), s.book.log.end()
	s.fleet.read(&s.inventory.log, &s.book.log)
	// The nodes this gang sees apart from others.
	f.special = f.special[:0]
	own := slices.Collect(maps.Keys(held))
	own = append(own, s.book.slotNodes(g.key)...)
	own = slices.AppendSeq(own, maps.Keys(o.elig.avoid))
	for _, name := range own {
		if i, ok := f.pos[name]; ok {
			f.special = append(f.special, i)
		}
	}
	if !full {
		for _, name := range own {
			if i, ok := f.pos[name]; ok {
				remake(i)
			}
		}
	}
	if reindex {
		// Names or domains changed: the planner's topology index is made again.
		f.cl = &planner.Cluster{Nodes: f.cl.Nodes, PartlyUsedFirst: s.opts.PartlyUsedFirst, Levels: s.opts.names()}
	}
	f.class, f.valid, s.fleet.last = class, keep, f
	return f.cl
}

// leaving is nodeCache.leaving for the kept view.
func (f *fleetView) leaving() (gpus, nodes int) {
	for _, e := range f.nodes {
		if e.base != nil && e.base.leaving > 0 {
			gpus, nodes = gpus+e.base.leaving, nodes+1
		}
	}
	return gpus, nodes
}

// heldNodes are the nodes where g's own pending pods hold GPUs (reserved, not yet bound): they
// count as free for the new plan.
func (s *State) heldNodes(g *gang) map[string]bool {
	held := maps.Clone(g.moveFrom)
	for uid := range g.pendingUIDs {
		if r, ok := s.book.reserved[uid]; ok {
			if held == nil {
				held = map[string]bool{}
			}
			held[r.node] = true
		}
	}
	return held
}

// anchorNode is the node named name among nodes; nil for "" or a node not there.
func (s *State) anchorNode(nodes []fwk.NodeInfo, name string) *corev1.Node {
	if name == "" {
		return nil
	}
	for _, f := range s.fleet.views {
		if i, ok := f.pos[name]; ok && i < len(nodes) {
			if n := nodes[i].Node(); n != nil && n.Name == name {
				return n
			}
		}
	}
	for _, ni := range nodes {
		if n := ni.Node(); n != nil && n.Name == name {
			return n
		}
	}
	return nil
}
