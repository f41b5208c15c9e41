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

package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Cluster is the planner's view of the cluster: its nodes and the victims preemption may choose
// from. Place and Preempt do not change it; Apply does.
type Cluster struct {
	Nodes   []Node
	Victims []Victim

	// Needs is what each pod of the gang asks of the resources Node.Spare counts, in the same
	// order: with them preemption knows how many pods a node takes once victims give their
	// Holder.Uses back. Nil when no node has Spare.
	Needs []int64

	// PartlyUsedFirst has a gang that needs several nodes of a rack take every partly used node
	// there, least room first, before it opens a free one: fewer GPUs stranded on partly used
	// nodes, at the cost of more nodes per gang than the fewest (GangPlacementArgs.NodePacking
	// PartlyUsedFirst). By default the gang takes the fewest nodes, of the least room.
	PartlyUsedFirst bool

	// Levels names the cluster's topology levels, outer to inner, as Node.Domains gives each
	// node's values (at most MaxLevels); nil for DefaultLevels. Messages name domains by them.
	Levels []string

	idx *index
	// evicted, while Preempt places the gang after a set of victims, says which are gone: their
	// CPU and memory are free too (Node.Spare).
	evicted func(int) bool
	// free and counts are Place's and placeIn's buffers of a node's (or domain's) worth, kept for
	// their next call: a Cluster kept from one gang to the next (as the scheduler's is) plans
	// without allocating them again. Like the index, they make Place and Preempt calls on one
	// Cluster not safe to run at once.
	free   []GPUSet
	counts []int32
}

// index maps every node to its domain at each topology level, and each domain to its parent,
// children and nodes. Level LevelNode's domains are the nodes themselves; LevelCluster has one
// domain. A level merged into the one outside it (no node has a value of it), and the levels past
// the cluster's outermost up to LevelCluster, repeat another: a domain there is its own only child.
type index struct {
	// outer is the outermost topology level.
	outer Level
	// canon[l] is the level that level l repeats, or l.
	canon    [numLevels]Level
	count    [numLevels]int
	names    [numLevels][]string
	of       [numLevels][]int32   // of[L][node]: the node's domain at level L
	parent   [numLevels][]int32   // parent[L][d]: the level L+1 domain holding domain d
	children [numLevels][][]int32 // children[L][d]: the level L-1 domains inside domain d
	nodes    [numLevels][][]int32 // nodes[L][d]: the nodes inside domain d
}

// ShareIndex lets c use prev's topology index when both have the same nodes, in the same order,
// with the same topology domains: callers that build a Cluster per decision skip rebuilding it.
// It reports whether it did.
func (c *Cluster) ShareIndex(prev *Cluster) bool {
	ix := prev.idx
	if ix == nil || len(prev.Nodes) != len(c.Nodes) {
		return false
	}
	for i := range c.Nodes {
		a, b := &c.Nodes[i], &prev.Nodes[i]
		if a.Name != b.Name || a.Zone != b.Zone || a.Block != b.Block || a.Rack != b.Rack || !sameDomains(a.Domains, b.Domains) {
			return false
		}
	}
	c.idx = ix
	return true
}

// levels is the number of the cluster's topology levels.
func (c *Cluster) levels() int {
	if c.Levels == nil {
		return len(DefaultLevels)
	}
	return len(c.Levels)
}

// LevelName is the name of level l in messages: a topology level's name from Levels.
func (c *Cluster) LevelName(l Level) string {
	n := c.levels()
	if l >= LevelRack && l < LevelCluster {
		names := c.Levels
		if names == nil {
			names = DefaultLevels
		}
		if i := n - 1 - int(l-LevelRack); i >= 0 {
			return names[i]
		}
		return names[0]
	}
	return l.noun()
}

// sameDomains compares two nodes' Domains, first by their backing array: callers that copy a
// node per decision share it.
func sameDomains(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || slices.Equal(a, b)
}

func (c *Cluster) index() *index {
	if c.idx != nil && len(c.idx.of[LevelNode]) == len(c.Nodes) {
		return c.idx
	}
	ix := &index{}
	n := len(c.Nodes)
	depth := min(c.levels(), MaxLevels)
	ix.outer = LevelRack + Level(max(depth, 1)-1)
	values := func(nd *Node) []string {
		if nd.Domains == nil && c.Levels == nil {
			return []string{nd.Zone, nd.Block, nd.Rack}
		}
		return nd.Domains
	}
	// A level no node has a value of is merged into the one outside it, where some level has
	// values: the cluster's nodes without a clique label are grouped by rack, as without the level.
	present := make([]bool, depth)
	any := false
	for i := range c.Nodes {
		for k, v := range values(&c.Nodes[i]) {
			if k < depth && v != "" {
				present[k], any = true, true
			}
		}
	}
	for l := range Level(numLevels) {
		ix.canon[l] = l
	}
	for k := range depth {
		if l := TopologyLevel(k, depth); any && !present[k] {
			ix.canon[l] = LevelCluster
			if k > 0 {
				ix.canon[l] = ix.canon[l+1]
			}
		}
	}
	for l := ix.outer + 1; l < LevelCluster; l++ {
		ix.canon[l] = ix.canon[ix.outer]
	}
	ids := map[string]int32{}
	intern := func(l Level, key string) int32 {
		k := string(rune('0'+l)) + "\x00" + key
		if id, ok := ids[k]; ok {
			return id
		}
		id := int32(ix.count[l])
		ids[k] = id
		ix.count[l]++
		ix.names[l] = append(ix.names[l], key)
		return id
	}
	for l := LevelNode; l <= LevelCluster; l++ {
		if ix.canon[l] == l {
			ix.of[l] = make([]int32, n)
		}
	}
	part := func(value, node string) string {
		if value == "" {
			return "(" + node + ")"
		}
		return value
	}
	intern(LevelCluster, "cluster")
	var path strings.Builder
	for i := range c.Nodes {
		nd := &c.Nodes[i]
		vs := values(nd)
		path.Reset()
		for k := range depth {
			l := TopologyLevel(k, depth)
			if ix.canon[l] != l {
				continue
			}
			v := ""
			if k < len(vs) {
				v = vs[k]
			}
			if path.Len() > 0 {
				path.WriteByte('/')
			}
			path.WriteString(part(v, nd.Name))
			ix.of[l][i] = intern(l, path.String())
		}
		if depth == 0 {
			ix.of[LevelRack][i] = intern(LevelRack, part("", nd.Name))
		}
		ix.of[LevelNode][i] = int32(i)
		ix.of[LevelCluster][i] = 0
	}
	ix.count[LevelNode] = n
	ix.names[LevelNode] = make([]string, n)
	for i := range c.Nodes {
		ix.names[LevelNode][i] = c.Nodes[i].Name
	}
	// The merged levels, and those past the outermost, repeat their canonical level.
	for l := LevelNode; l <= LevelCluster; l++ {
		if cl := ix.canon[l]; cl != l {
			ix.of[l], ix.count[l], ix.names[l] = ix.of[cl], ix.count[cl], ix.names[cl]
		}
	}
	for l := LevelNode; l <= LevelCluster; l++ {
		ix.parent[l] = make([]int32, ix.count[l])
		ix.children[l] = make([][]int32, ix.count[l])
		if ix.canon[l] == l {
			ix.nodes[l] = make([][]int32, ix.count[l])
		}
	}
	for i := range n {
		for l := LevelNode; l <= LevelCluster; l++ {
			d := ix.of[l][i]
			if ix.canon[l] == l {
				ix.nodes[l][d] = append(ix.nodes[l][d], int32(i))
			}
			if l < LevelCluster {
				ix.parent[l][d] = ix.of[l+1][i]
			}
		}
	}
	for l := LevelNode; l <= LevelCluster; l++ {
		if cl := ix.canon[l]; cl != l {
			ix.nodes[l] = ix.nodes[cl]
		}
	}
	for l := LevelRack; l <= LevelCluster; l++ {
		for d := range ix.count[l-1] {
			p := ix.parent[l-1][d]
			ix.children[l][p] = append(ix.children[l][p], int32(d))
		}
	}
	c.idx = ix
	return ix
}

// parentOf is the domain holding domain d of level l at the first level above it that is not a
// repeat of l, and that level.
func (ix *index) parentOf(l Level, d int32) (Level, int32) {
	pl, pd := l+1, ix.parent[l][d]
	for pl < LevelCluster && ix.canon[pl] == ix.canon[l] {
		pd = ix.parent[pl][pd]
		pl++
	}
	return pl, pd
}

// Domain returns the name of node i's domain at level l (as messages spell it, e.g. "z1/b2/r3";
// LevelNVLink counts as LevelNode) and the indices in c.Nodes of the domain's nodes. The slice
// is the index's own: callers must not modify it.
func (c *Cluster) Domain(i int, l Level) (string, []int32) {
	l = min(max(l, LevelNode), LevelCluster)
	ix := c.index()
	d := ix.of[l][i]
	return ix.names[l][d], ix.nodes[l][d]
}

// normalize checks g and returns it with LevelNone as LevelCluster.
func (g Gang) normalize() (Gang, error) {
	if g.Level == LevelNone {
		g.Level = LevelCluster
	}
	if g.PodNeeds != nil {
		if len(g.PodNeeds) != g.Pods {
			return g, fmt.Errorf("gang %s: has %d pods but needs for %d", g.Key, g.Pods, len(g.PodNeeds))
		}
		same := true
		for _, n := range g.PodNeeds {
			if len(n) != len(g.PodNeeds[0]) {
				return g, fmt.Errorf("gang %s: pods' needs count %d and %d resources", g.Key, len(g.PodNeeds[0]), len(n))
			}
			same = same && slices.Equal(n, g.PodNeeds[0])
		}
		if same {
			g.PodNeeds = nil
		} else if g.PodGPUs == nil {
			// Pods that ask different CPU or memory are placed as pods of different GPU counts
			// are, part by part.
			g.PodGPUs = slices.Repeat([]int{g.GPUsPerPod}, g.Pods)
		}
	}
	if g.PodGPUs != nil {
		if len(g.PodGPUs) != g.Pods {
			return g, fmt.Errorf("gang %s: has %d pods but GPU counts for %d", g.Key, g.Pods, len(g.PodGPUs))
		}
		same := true
		g.GPUsPerPod = 0
		for _, n := range g.PodGPUs {
			if n < 1 || n > MaxGPUsPerNode {
				return g, fmt.Errorf("gang %s: needs 1 to %d GPUs per pod, got %v", g.Key, MaxGPUsPerNode, g.PodGPUs)
			}
			same = same && n == g.PodGPUs[0]
			g.GPUsPerPod = max(g.GPUsPerPod, n)
		}
		if same && g.PodNeeds == nil {
			g.PodGPUs = nil
		}
	}
	if g.Pods < 1 || g.GPUsPerPod < 1 || g.GPUsPerPod > MaxGPUsPerNode {
		return g, fmt.Errorf("gang %s: needs at least one pod and 1 to %d GPUs per pod, got %s", g.Key, MaxGPUsPerNode, g)
	}
	if g.Level < LevelNVLink || g.Level > LevelCluster {
		return g, fmt.Errorf("gang %s: unknown topology level %d", g.Key, g.Level)
	}
	return g, nil
}

// Place returns a placement of every pod of g on the cluster's free GPUs, or an *Unplaceable error
// that says what the gang needs and how close the cluster comes.
func (c *Cluster) Place(g Gang) (*Plan, error) {
	g, err := g.normalize()
	if err != nil {
		return nil, err
	}
	if cap(c.free) < len(c.Nodes) {
		c.free = make([]GPUSet, len(c.Nodes))
	}
	free := c.free[:len(c.Nodes)]
	for i := range c.Nodes {
		free[i] = 0
		if len(c.Nodes[i].Requires) == 0 {
			free[i] = c.Nodes[i].Free
		}
	}
	return c.place(g, free)
}

// nodeCap is how many pods of gpus GPUs node i admits on the GPUs of mask.
func (c *Cluster) nodeCap(i int, mask GPUSet, gpus int) int {
	return c.nodeCapAfter(i, mask, gpus, 0)
}

// nodeCapAfter is nodeCap on a node that already took placed pods of the gang.
func (c *Cluster) nodeCapAfter(i int, mask GPUSet, gpus, placed int) int {
	return c.nodeCapBy(i, mask, gpus, placed, c.evicted)
}

// nodeCapBy is nodeCapAfter once the victims for which evicted is true (nil: none) are gone.
func (c *Cluster) nodeCapBy(i int, mask GPUSet, gpus, placed int, evicted func(int) bool) int {
	nd := &c.Nodes[i]
	maxPods := c.maxPodsBy(i, evicted)
	if nd.Excluded || maxPods < 0 {
		return 0
	}
	k := mask.Len() / gpus
	if maxPods > 0 && k > maxPods-placed {
		k = max(maxPods-placed, 0)
	}
	return k
}

// spareOf is what node i has spare for a part of a gang with PodNeeds, as a copy the plan may
// take from: its Spare with what the evicted victims' pods hold there given back; nil when the
// node has no Spare for needs of that length (it is counted by MaxPods).
func (c *Cluster) spareOf(i int, needs []int64) []int64 {
	nd := &c.Nodes[i]
	if needs == nil || len(nd.Spare) != len(needs) {
		return nil
	}
	out, _ := c.spareBy(nil, i, c.evicted)
	return out
}

// spareBy appends to dst node i's Spare with what the pods of the victims for which evicted is
// true (nil: none) hold there given back, and reports whether any gave something back.
func (c *Cluster) spareBy(dst []int64, i int, evicted func(int) bool) ([]int64, bool) {
	nd := &c.Nodes[i]
	out := append(dst, nd.Spare...)
	gave := false
	if evicted == nil {
		return out, false
	}
	for _, h := range nd.Holders {
		if h.Victim >= 0 && len(h.Uses) == len(nd.Spare) && evicted(h.Victim) {
			for r, u := range h.Uses {
				out[len(dst)+r] += u
			}
			gave = true
		}
	}
	return out, gave
}

// partCap is how many pods of pt node i admits on the GPUs of mask, when it already took placed
// pods of the gang and has spare left beside the GPUs (spareOf, less what those pods took; nil:
// counted by MaxPods).
func (c *Cluster) partCap(i int, mask GPUSet, pt part, spare []int64, placed int) int {
	if spare == nil {
		return c.nodeCapAfter(i, mask, pt.gpus, placed)
	}
	nd := &c.Nodes[i]
	if nd.Excluded {
		return 0
	}
	k := mask.Len() / pt.gpus
	for r, need := range pt.needs {
		if need > 0 {
			k = min(k, int(max(spare[r], 0)/need))
		}
	}
	if nd.SpreadCap > 0 {
		k = min(k, max(nd.SpreadCap-placed, 0))
	}
	return k
}

// maxPodsBy is node i's MaxPods once the victims for which evicted is true (nil: none) are gone:
// with Spare, how many of the gang's pods its spare resources and the evicted holders' take.
func (c *Cluster) maxPodsBy(i int, evicted func(int) bool) int {
	nd := &c.Nodes[i]
	if evicted == nil || nd.Spare == nil || len(nd.Spare) != len(c.Needs) {
		return nd.MaxPods
	}
	var buf [8]int64
	free, gave := c.spareBy(buf[:0], i, evicted)
	if !gave {
		return nd.MaxPods
	}
	n := -1
	for r, need := range c.Needs {
		if need > 0 {
			k := int(max(free[r], 0) / need)
			if n < 0 || k < n {
				n = k
			}
		}
	}
	if n < 0 {
		// No resource bounds the pods.
		return nd.SpreadCap
	}
	if nd.SpreadCap > 0 {
		n = min(n, nd.SpreadCap)
	}
	if n == 0 {
		return -1
	}
	return n
}

// unit is a part of a node a pod may use: the whole node, or its GPUs of one NVLink domain.
type unit struct {
	node int
	mask GPUSet
}

// take is a number of pods to put on one unit.
type take struct {
	unit
	pods int
}

func (c *Cluster) place(g Gang, free []GPUSet) (*Plan, error) {
	if g.PodGPUs != nil {
		return c.placeMixed(g, free)
	}
	return c.placeIn(g, free, nil)
}

// placeIn places g on free, where room (nil: nodeCap) is how many of its pods node i admits on
// the GPUs of mask.
func (c *Cluster) placeIn(g Gang, free []GPUSet, room func(i int, mask GPUSet) int) (*Plan, error) {
	if g.Level == LevelNVLink {
		takes, key, msg := c.placeNVLink(g, free)
		if takes != nil {
			return c.plan(g, takes, free, LevelNVLink, key), nil
		}
		if g.Required {
			return nil, &Unplaceable{Message: msg}
		}
	}
	var p placement
	p.init(c, g, free, room)
	return p.place()
}

// placement is one placement of a gang of one GPU count on free GPUs, from its required level up:
// the room (caps) and free GPUs (frees) of every domain at every level, and the steps that choose
// among the domains. placeIn makes one per call; its steps are tested on their own.
type placement struct {
	c    *Cluster
	ix   *index
	g    Gang
	free []GPUSet
	// need is the number of pods to place.
	need int32
	// caps[l][d] is how many of the gang's pods domain d of level l admits; frees[l][d] its free
	// GPUs (of nodes not excluded).
	caps, frees [numLevels][]int32
	// odd is whether the gang's GPUs are not whole nodes of some node's size.
	odd bool
	// rackSize[r] is one more than the GPUs of rack r's largest node, once leftover has needed
	// it; 0 before.
	rackSize []int32
	// kidsOf[l] is distribute's list of children at level l, kept between calls: a call at level l
	// only calls the level below.
	kidsOf [numLevels][]int32
}

// init counts every domain's room and free GPUs for g on free.
func (p *placement) init(c *Cluster, g Gang, free []GPUSet, room func(i int, mask GPUSet) int) {
	ix := c.index()
	p.c, p.ix, p.g, p.free, p.need = c, ix, g, free, int32(g.Pods)
	n := 0
	for l := LevelNode; l <= LevelCluster; l++ {
		n += 2 * ix.count[l]
	}
	n += ix.count[LevelRack]
	// One placement at a time is made on a cluster (see Cluster.counts).
	if cap(c.counts) < n {
		c.counts = make([]int32, n)
	}
	counts := c.counts[:n]
	clear(counts)
	for l := LevelNode; l <= LevelCluster; l++ {
		k := ix.count[l]
		p.caps[l], p.frees[l], counts = counts[:k:k], counts[k:2*k:2*k], counts[2*k:]
	}
	p.rackSize = counts
	gpus, size := g.Pods*g.GPUsPerPod, 0
	for i := range c.Nodes {
		if n := c.Nodes[i].GPUs; n != size {
			size = n
			p.odd = p.odd || n > 0 && gpus%n != 0
		}
		if room != nil {
			p.caps[LevelNode][i] = int32(room(i, free[i]))
		} else {
			p.caps[LevelNode][i] = int32(c.nodeCap(i, free[i], g.GPUsPerPod))
		}
		if !c.Nodes[i].Excluded {
			p.frees[LevelNode][i] = int32(free[i].Len())
		}
	}
	for l := LevelRack; l <= LevelCluster; l++ {
		for d := range ix.count[l-1] {
			par := ix.parent[l-1][d]
			p.caps[l][par] += p.caps[l-1][d]
			p.frees[l][par] += p.frees[l-1][d]
		}
	}
}

// place chooses, at the smallest level with a domain that holds the gang (up to its required
// level), the domain whose plan spans the fewest racks, then the one that strands the fewest GPUs,
// then the best fit, and returns its plan; or why no domain holds the gang.
func (p *placement) place() (*Plan, error) {
	c, ix, need := p.c, p.ix, p.need
	top := LevelCluster
	if p.g.Required {
		top = max(p.g.Level, LevelNode)
	}
	for l := LevelNode; l <= top; l++ {
		var best []take
		bestD, bestRacks, bestStrands := int32(-1), 0, int32(0)
		for d := range int32(ix.count[l]) {
			if p.caps[l][d] < need {
				continue
			}
			if l == LevelNode {
				if bestD < 0 || p.betterNode(d, bestD) {
					bestD = d
				}
				continue
			}
			if l == LevelRack && bestD >= 0 {
				if least := p.leastStrands(d); least > bestStrands || least == bestStrands && !p.betterRack(d, bestD) {
					continue // no plan in d beats the best
				}
			}
			takes := p.distribute(nil, l, d, need)
			r, st := 1, p.strands(takes)
			if l > LevelRack {
				r = p.racksOf(takes)
			}
			if bestD < 0 || r < bestRacks || r == bestRacks && (st < bestStrands || st == bestStrands && p.betterAt(l, d, bestD)) {
				best, bestD, bestRacks, bestStrands = takes, d, r, st
			}
		}
		if bestD < 0 {
			continue
		}
		if best == nil {
			best = p.distribute(nil, l, bestD, need)
		}
		return c.plan(p.g, best, p.free, l, ix.names[l][bestD]), nil
	}
	return nil, &Unplaceable{Message: c.explain(p.g, p.caps, p.frees)}
}

// better orders domains of one level for best fit: least room, fewest free GPUs, fullest parent,
// then name.
func (p *placement) better(l Level, a, b int32) bool {
	caps, frees, ix := &p.caps, &p.frees, p.ix
	if caps[l][a] != caps[l][b] {
		return caps[l][a] < caps[l][b]
	}
	if frees[l][a] != frees[l][b] {
		return frees[l][a] < frees[l][b]
	}
	if l < LevelCluster {
		pl, pa := ix.parentOf(l, a)
		_, pb := ix.parentOf(l, b)
		if frees[pl][pa] != frees[pl][pb] {
			return frees[pl][pa] < frees[pl][pb]
		}
	}
	return ix.names[l][a] < ix.names[l][b]
}

// betterAt is betterRack for racks, better for the levels above.
func (p *placement) betterAt(l Level, a, b int32) bool {
	if l == LevelRack {
		return p.betterRack(a, b)
	}
	return p.better(l, a, b)
}

// betterRack orders racks whose plans strand alike. A gang of whole nodes leaves each rack as many
// free GPUs past whole nodes as it had, and best fit decides. For any other gang, the rack left
// with the fewest free GPUs past whole nodes comes first, then best fit: those GPUs are the ones no
// later placement in the rack keeps off partly used nodes, so a gang whose last node is partly
// used goes where it fills a rack's odd GPUs rather than where it adds to them. Measured against
// best fit alone: docs/design/placement-objective.md.
func (p *placement) betterRack(a, b int32) bool {
	if p.odd {
		if pa, pb := p.leftover(a), p.leftover(b); pa != pb {
			return pa < pb
		}
	}
	return p.better(LevelRack, a, b)
}

// leftover is how many free GPUs rack r keeps past whole nodes of its largest size once it holds
// the gang.
func (p *placement) leftover(r int32) int32 {
	if p.rackSize[r] == 0 {
		size := int32(0)
		for _, i := range p.ix.children[LevelRack][r] {
			size = max(size, int32(p.c.Nodes[i].GPUs))
		}
		p.rackSize[r] = size + 1
	}
	size := p.rackSize[r] - 1
	if size == 0 {
		return 0
	}
	return max(p.frees[LevelRack][r]-p.need*int32(p.g.GPUsPerPod), 0) % size
}

// betterNode orders the nodes that hold a whole gang: the fewest free GPUs (best fit in GPUs),
// then the smallest in CPU and memory (which keeps the largest for the pods that need them), then
// the least room for the gang's pods, the fullest rack, the node whose CPU and memory the gang
// would fill most, and the name. Room comes after free GPUs: the node whose CPU holds the fewest
// pods is not the best fit when the pod would leave its other GPUs without CPU. The rack comes
// before Fill: between nodes of one size, Fill mostly counts the pods already there, and ranked
// before the rack it spreads small gangs over racks.
func (p *placement) betterNode(a, b int32) bool {
	caps, frees, ix := &p.caps, &p.frees, p.ix
	na, nb := &p.c.Nodes[a], &p.c.Nodes[b]
	if frees[LevelNode][a] != frees[LevelNode][b] {
		return frees[LevelNode][a] < frees[LevelNode][b]
	}
	if s := compareSize(na, nb); s != 0 {
		return s < 0
	}
	if caps[LevelNode][a] != caps[LevelNode][b] {
		return caps[LevelNode][a] < caps[LevelNode][b]
	}
	if pa, pb := ix.parent[LevelNode][a], ix.parent[LevelNode][b]; frees[LevelRack][pa] != frees[LevelRack][pb] {
		return frees[LevelRack][pa] < frees[LevelRack][pb]
	}
	if na.Fill != nb.Fill {
		return na.Fill > nb.Fill
	}
	return ix.names[LevelNode][a] < ix.names[LevelNode][b]
}

// distribute appends the takes that put need pods in domain d of level l: its children of the
// most room first, until one can hold the rest, which the best fit among those does.
func (p *placement) distribute(takes []take, l Level, d int32, need int32) []take {
	if l == LevelNode {
		return append(takes, take{unit{int(d), p.free[d]}, int(need)})
	}
	caps := &p.caps
	kids := p.kidsOf[l][:0]
	for _, k := range p.ix.children[l][d] {
		if caps[l-1][k] > 0 {
			kids = append(kids, k)
		}
	}
	p.kidsOf[l] = kids
	slices.SortFunc(kids, func(a, b int32) int {
		if caps[l-1][a] != caps[l-1][b] {
			return cmp.Compare(caps[l-1][b], caps[l-1][a])
		}
		if p.better(l-1, a, b) {
			return -1
		}
		return 1
	})
	if l == LevelRack && p.c.PartlyUsedFirst {
		takes, need, kids = p.c.takePartlyUsed(takes, kids, p.free, caps[LevelNode], p.frees[LevelNode], need)
	}
	for need > 0 && len(kids) > 0 {
		fit := -1
		for j, k := range kids {
			if caps[l-1][k] >= need && (fit < 0 || p.better(l-1, k, kids[fit])) {
				fit = j
			}
		}
		if fit >= 0 {
			return p.distribute(takes, l-1, kids[fit], need)
		}
		j := 0
		if l == LevelRack {
			j = tightest(kids, caps[LevelNode], need)
		}
		takes = p.distribute(takes, l-1, kids[j], caps[l-1][kids[j]])
		need -= caps[l-1][kids[j]]
		kids = slices.Delete(kids, j, j+1)
	}
	return takes
}

// racksOf is the number of racks takes spans.
func (p *placement) racksOf(takes []take) int {
	racks := map[int32]bool{}
	for _, t := range takes {
		racks[p.ix.of[LevelRack][t.node]] = true
	}
	return len(racks)
}

// strands is how many GPUs takes would strand, less those it would fill: the free GPUs left on
// the nodes it takes that are partly used after it, less those free before on partly used ones.
func (p *placement) strands(takes []take) int32 {
	var n int32
	for _, t := range takes {
		before := p.frees[LevelNode][t.node]
		n += p.c.stranded(t.node, before-int32(t.pods*p.g.GPUsPerPod)) - p.c.stranded(t.node, before)
	}
	return n
}

// leastStrands is the fewest GPUs a plan in rack r can strand. A plan strands, less what it fills,
// the healthy GPUs of the free nodes it opens less the gang's GPUs: a pod on a partly used node
// fills as many stranded GPUs as it takes. The free nodes it opens hold at least the pods that the
// rack's partly used nodes have no room for.
func (p *placement) leastStrands(r int32) int32 {
	var partPods, openPods, openGPUs int32
	for _, i := range p.ix.children[LevelRack][r] {
		k := p.caps[LevelNode][i]
		if k == 0 {
			continue
		}
		if p.c.stranded(int(i), p.frees[LevelNode][i]) > 0 {
			partPods += k
			continue
		}
		openPods = max(openPods, k)
		if h := p.c.healthy(int(i)); openGPUs == 0 || h < openGPUs {
			openGPUs = h
		}
	}
	n := -p.need * int32(p.g.GPUsPerPod)
	if rest := p.need - partPods; rest > 0 && openPods > 0 {
		n += (rest + openPods - 1) / openPods * openGPUs
	}
	return n
}

// takePartlyUsed fills the partly used nodes among a rack's nodes, least room first, with up to
// need pods, and returns the takes, the pods left and the nodes left.
func (c *Cluster) takePartlyUsed(takes []take, nodes []int32, free []GPUSet, caps, frees []int32, need int32) ([]take, int32, []int32) {
	var partly []int32
	for _, n := range nodes {
		if c.stranded(int(n), frees[n]) > 0 {
			partly = append(partly, n)
		}
	}
	slices.SortStableFunc(partly, func(a, b int32) int { return cmp.Compare(caps[a], caps[b]) })
	taken := 0
	for _, n := range partly {
		if need == 0 {
			break
		}
		k := min(need, caps[n])
		takes = append(takes, take{unit{int(n), free[n]}, int(k)})
		need -= k
		taken++
	}
	nodes = slices.DeleteFunc(nodes, func(x int32) bool { return slices.Contains(partly[:taken], x) })
	return takes, need, nodes
}

// tightest picks, of nodes sorted by room (caps) from the most, none of which holds need alone,
// the one to fill next: the node of least room with which as few nodes as the roomiest still hold
// need (the first of those of equal room). Taking it fills the rack's partly used nodes before its
// free ones, on no more nodes.
func tightest(nodes []int32, caps []int32, need int32) int {
	// The roomiest s+1 nodes are the fewest that hold need; top is the room of the first s.
	s, top := 0, int32(0)
	for top+caps[nodes[s]] < need {
		top += caps[nodes[s]]
		s++
	}
	// nodes[s] itself fits with the first s; look for one of less room past it.
	pick := s
	for i := len(nodes) - 1; i > s; i-- {
		if caps[nodes[i]]+top >= need {
			pick = i
			break
		}
	}
	for pick > 0 && caps[nodes[pick-1]] == caps[nodes[pick]] {
		pick--
	}
	return pick
}

// placeNVLink places g inside one NVLink domain. It returns nil and a message when none can hold
// the gang.
func (c *Cluster) placeNVLink(g Gang, free []GPUSet) ([]take, string, string) {
	type domain struct {
		key        string
		cap, freeN int
		units      []take
	}
	domains := map[string]*domain{}
	for i := range c.Nodes {
		t := c.Nodes[i].Topology
		if t == nil || c.Nodes[i].Excluded {
			continue
		}
		var seen []string
		for _, key := range t.Domains {
			if key == "" || slices.Contains(seen, key) {
				continue
			}
			seen = append(seen, key)
			mask := free[i] & t.DomainMask(key)
			d := domains[key]
			if d == nil {
				d = &domain{key: key}
				domains[key] = d
			}
			k := c.nodeCap(i, mask, g.GPUsPerPod)
			d.cap += k
			d.freeN += mask.Len()
			if k > 0 {
				d.units = append(d.units, take{unit{i, mask}, k})
			}
		}
	}
	var best *domain
	var roomiest *domain
	for _, d := range domains {
		if d.cap >= g.Pods && (best == nil || d.cap < best.cap || d.cap == best.cap && (d.freeN < best.freeN || d.freeN == best.freeN && d.key < best.key)) {
			best = d
		}
		if roomiest == nil || d.cap > roomiest.cap || d.cap == roomiest.cap && (d.freeN > roomiest.freeN || d.freeN == roomiest.freeN && d.key < roomiest.key) {
			roomiest = d
		}
	}
	if best == nil {
		need := fmt.Sprintf("%s needs %s in one NVLink domain", g.Key, g)
		if roomiest == nil {
			return nil, "", need + "; no eligible node publishes NVLink domains (GPUNode status.gpus[].nvlinkDomain)"
		}
		return nil, "", fmt.Sprintf("%s; the best NVLink domain (%s) has room for %s (%s)", need, roomiest.key,
			plural(roomiest.cap, "pod"), plural(roomiest.freeN, "free GPU"))
	}
	// Fewest nodes: the roomiest units first, the last one by best fit.
	units := best.units
	slices.SortFunc(units, func(a, b take) int {
		return cmp.Or(cmp.Compare(b.pods, a.pods), cmp.Compare(a.mask.Len(), b.mask.Len()), cmp.Compare(c.Nodes[a.node].Name, c.Nodes[b.node].Name))
	})
	var takes []take
	need := g.Pods
	for need > 0 {
		fit := -1
		for j, u := range units {
			if u.pods >= need && (fit < 0 || u.pods < units[fit].pods) {
				fit = j
			}
		}
		if fit >= 0 {
			takes = append(takes, take{units[fit].unit, need})
			break
		}
		takes = append(takes, units[0])
		need -= units[0].pods
		units = units[1:]
	}
	return takes, best.key, ""
}

// plan turns the pods per unit into a Plan: it orders the nodes by rack and name and chooses the
// GPUs of each pod.
func (c *Cluster) plan(g Gang, takes []take, free []GPUSet, l Level, domain string) *Plan {
	ix := c.index()
	slices.SortFunc(takes, func(a, b take) int {
		ra, rb := ix.of[LevelRack][a.node], ix.of[LevelRack][b.node]
		return cmp.Or(strings.Compare(ix.names[LevelRack][ra], ix.names[LevelRack][rb]), strings.Compare(c.Nodes[a.node].Name, c.Nodes[b.node].Name))
	})
	if l >= LevelNode {
		l = ix.canon[l]
	}
	p := &Plan{Level: l, Domain: domain, Assignments: make([]Assignment, 0, g.Pods)}
	for _, t := range takes {
		nd := &c.Nodes[t.node]
		avail := free[t.node] & t.mask
		for range t.pods {
			set := chooseGPUs(avail, g.GPUsPerPod, nd.Topology)
			avail &^= set
			a := Assignment{Node: nd.Name, node: t.node, set: set}
			if nd.Indexed {
				a.GPUs = set.Indices()
			}
			p.Assignments = append(p.Assignments, a)
		}
	}
	p.Spread = c.spread(p.Assignments)
	return p
}

// explain says why g does not fit: what it needs, and the room of the best domain at its required
// level (or of the whole cluster).
func (c *Cluster) explain(g Gang, caps, frees [numLevels][]int32) string {
	ix := c.index()
	l := LevelCluster
	if g.Required {
		l = ix.canon[max(g.Level, LevelNode)]
	}
	var b strings.Builder
	if l == LevelCluster {
		fmt.Fprintf(&b, "%s needs %s; the cluster has room for %s (%s", g.Key, g, g.room(int(caps[l][0])), plural(int(frees[l][0]), "free GPU"))
		nodes := 0
		for i := range c.Nodes {
			if frees[LevelNode][i] != 0 {
				nodes++
			}
		}
		fmt.Fprintf(&b, " on %s)", plural(nodes, "node"))
	} else {
		best := int32(-1)
		for d := range int32(ix.count[l]) {
			// The roomiest, then the freest, then the first by name, so the message is stable.
			if best < 0 || caps[l][d] > caps[l][best] || caps[l][d] == caps[l][best] && (frees[l][d] > frees[l][best] ||
				frees[l][d] == frees[l][best] && ix.names[l][d] < ix.names[l][best]) {
				best = d
			}
		}
		fmt.Fprintf(&b, "%s needs %s in one %s", g.Key, g, c.LevelName(l))
		if best >= 0 {
			fmt.Fprintf(&b, "; the best %s (%s) has room for %s (%s)", c.LevelName(l), ix.names[l][best],
				g.room(int(caps[l][best])), plural(int(frees[l][best]), "free GPU"))
		}
	}
	unhealthy, excluded, crowded := 0, 0, 0
	for i := range c.Nodes {
		nd := &c.Nodes[i]
		unhealthy += nd.Unhealthy
		if nd.Excluded {
			excluded++
		} else if nd.MaxPods < 0 && nd.Free != 0 {
			crowded++
		}
	}
	if unhealthy > 0 {
		fmt.Fprintf(&b, "; %s excluded", plural(unhealthy, "unhealthy GPU"))
	}
	if excluded > 0 {
		fmt.Fprintf(&b, "; %s excluded by the pods' node selector, node or pod affinity, topology spread, host ports, tolerations or cordon", plural(excluded, "node"))
	}
	pod := "one more pod"
	if g.PodNeeds != nil {
		pod = "its largest pod"
	}
	if crowded == 1 {
		fmt.Fprintf(&b, "; 1 node has free GPUs but no room beside them for %s (CPU, memory, pod slots or the pods' spread)", pod)
	} else if crowded > 1 {
		fmt.Fprintf(&b, "; %d nodes have free GPUs but no room beside them for %s (CPU, memory, pod slots or the pods' spread)", crowded, pod)
	}
	return b.String()
}

// room names n pods of the gang's GPU count, or, when its pods differ, of its largest.
func (g Gang) room(n int) string {
	if g.PodNeeds != nil {
		// Its largest: of the most GPUs, of those the most CPU and memory.
		return fmt.Sprintf("%d of its largest %d-GPU pods", n, g.parts()[0].gpus)
	}
	if g.PodGPUs != nil {
		return fmt.Sprintf("%s of %d GPUs", plural(n, "pod"), g.GPUsPerPod)
	}
	return plural(n, "pod")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Apply takes the plan's GPUs from the free GPUs of their nodes and records them as held by
// victim (an index in Victims, or -1), as binding the gang would. Simulators use it.
func (c *Cluster) Apply(p *Plan, victim int) {
	for _, a := range p.Assignments {
		nd := &c.Nodes[a.node]
		nd.Free &^= a.set
		nd.Holders = append(nd.Holders, Holder{Victim: victim, GPUs: a.set})
	}
}

// healthy is node i's count of healthy GPUs.
func (c *Cluster) healthy(i int) int32 { return int32(c.Nodes[i].GPUs - c.Nodes[i].Unhealthy) }

// stranded is how many of free GPUs node i strands: free when the node is partly used, else 0.
func (c *Cluster) stranded(i int, free int32) int32 {
	if free > 0 && free < c.healthy(i) {
		return free
	}
	return 0
}

// Stranded is the number of free, healthy GPUs on nodes that are partly used: capacity that
// whole-node pods cannot use.
func (c *Cluster) Stranded() int {
	n := 0
	for i := range c.Nodes {
		n += int(c.stranded(i, int32(c.Nodes[i].Free.Len())))
	}
	return n
}
