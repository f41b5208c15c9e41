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
	"time"
)

// Preemption is a set of whole victims whose eviction lets the gang be placed, and the placement
// it then gets.
type Preemption struct {
	// Victims are indices in Cluster.Victims.
	Victims []int
	// Plan places the gang once the victims are gone.
	Plan *Plan
}

// preemptionCost orders victim sets: fewest victims, then the lowest highest priority among them,
// then the least work lost, then the fewest GPUs, then the tightest domain.
type preemptionCost struct {
	victims     int
	maxPriority int32
	workLost    time.Duration
	gpus        int
	level       Level
}

func (a preemptionCost) compare(b preemptionCost) int {
	return cmp.Or(cmp.Compare(a.victims, b.victims), cmp.Compare(a.maxPriority, b.maxPriority),
		cmp.Compare(a.workLost, b.workLost), cmp.Compare(a.gpus, b.gpus), cmp.Compare(a.level, b.level))
}

// costOf is what evicting victims costs, placing the gang in a domain of level l.
func (c *Cluster) costOf(victims []int, l Level) preemptionCost {
	cost := preemptionCost{victims: len(victims), maxPriority: -1 << 31, level: l}
	for _, v := range victims {
		cost.maxPriority = max(cost.maxPriority, c.Victims[v].Priority)
		cost.workLost += c.Victims[v].WorkLost
		cost.gpus += c.Victims[v].GPUs
	}
	return cost
}

// compareVictims orders single victims, cheapest first.
func (c *Cluster) compareVictims(a, b int) int {
	va, vb := &c.Victims[a], &c.Victims[b]
	return cmp.Or(cmp.Compare(va.Priority, vb.Priority), cmp.Compare(va.WorkLost, vb.WorkLost),
		cmp.Compare(va.GPUs, vb.GPUs), cmp.Compare(va.Key, vb.Key))
}

// Preempt finds the cheapest set of whole victims of strictly lower priority than g whose eviction
// lets g be placed (respecting its required level), and the plan g then gets. It evicts victims
// whole: every GPU any of their pods holds anywhere is freed. When g fits without preemption, the
// set is empty. It returns an *Unplaceable error when even evicting every lower-priority victim
// would not do.
func (c *Cluster) Preempt(g Gang) (*Preemption, error) {
	g, err := g.normalize()
	if err != nil {
		return nil, err
	}
	if p, err := c.Place(g); err == nil {
		return &Preemption{Plan: p}, nil
	}
	evictable := func(v int) bool { return v >= 0 && v < len(c.Victims) && c.Victims[v].Priority < g.Priority }
	if g.PodGPUs == nil {
		best := c.cheapestVictims(g, evictable)
		if best == nil {
			return nil, c.cannotMakeRoom(g)
		}
		p, err := c.placeAfter(g, best)
		if err != nil {
			return nil, fmt.Errorf("gang %s: evicting %d victims should make room, but: %w", g.Key, len(best), err)
		}
		slices.SortFunc(best, c.compareVictims)
		return &Preemption{Victims: best, Plan: p}, nil
	}
	// Room is weighed in pods of one count. A gang whose pods ask different counts is weighed
	// first as its largest pods alone: the cheapest set that makes room for them is the cheapest
	// of all when the rest fit too (a launcher in a hole beside its workers' nodes). Else as the
	// fewest pods of its largest count that hold all its GPUs, less the victims its own pods then
	// do not need, the most expensive first (dropUnneeded).
	parts := g.parts()
	largest := Gang{Key: g.Key, Pods: len(parts[0].pods), GPUsPerPod: parts[0].gpus, Level: g.Level, Required: g.Required, Priority: g.Priority}
	slots := Gang{Key: g.Key, Pods: (g.gpus() + g.GPUsPerPod - 1) / g.GPUsPerPod, GPUsPerPod: g.GPUsPerPod, Level: g.Level, Required: g.Required, Priority: g.Priority}
	if best := c.cheapestVictims(largest, evictable); best != nil {
		if p, err := c.placeAfter(g, best); err == nil {
			slices.SortFunc(best, c.compareVictims)
			return &Preemption{Victims: best, Plan: p}, nil
		}
	}
	// Weighed at its largest pods' CPU and memory (Cluster.Needs), the room may be too little for
	// a gang whose pods ask different CPU or memory (a master of 60 CPUs beside workers of 30):
	// then the victims are found by placing the gang itself.
	best := c.cheapestVictims(slots, evictable)
	if best != nil {
		best = c.dropUnneeded(g, best)
		if _, err := c.placeAfter(g, best); err != nil {
			best = nil
		}
	}
	if best == nil {
		if best = c.enoughVictims(g, evictable); best == nil {
			return nil, c.cannotMakeRoom(g)
		}
		best = c.dropUnneeded(g, best)
	}
	p, err := c.placeAfter(g, best)
	if err != nil {
		return nil, fmt.Errorf("gang %s: evicting %d victims should make room, but: %w", g.Key, len(best), err)
	}
	slices.SortFunc(best, c.compareVictims)
	return &Preemption{Victims: best, Plan: p}, nil
}

// enoughVictims is the fewest of the evictable victims, taken cheapest first, whose eviction lets
// g be placed as its pods are, or nil when evicting all of them would not. Preempt drops from it
// the victims the others make unnecessary.
func (c *Cluster) enoughVictims(g Gang, evictable func(int) bool) []int {
	var all []int
	for v := range c.Victims {
		if evictable(v) {
			all = append(all, v)
		}
	}
	slices.SortFunc(all, c.compareVictims)
	fits := func(n int) bool {
		_, err := c.placeAfter(g, all[:n])
		return err == nil
	}
	if !fits(len(all)) {
		return nil
	}
	// The fewest cheapest: the gang fits after all of them and, Place having failed, before none.
	lo, hi := 0, len(all)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return slices.Clone(all[:hi])
}

// dropUnneeded removes from victims, whose eviction lets g be placed, every victim the others
// make unnecessary, the most expensive first. It tries halves, quarters and so on of the set
// before single victims, so that a long set of which few are needed costs few placements.
func (c *Cluster) dropUnneeded(g Gang, victims []int) []int {
	set := slices.Clone(victims)
	slices.SortFunc(set, func(a, b int) int { return c.compareVictims(b, a) })
	for size := max(len(set)/2, 1); ; size /= 2 {
		for j := 0; j < len(set); {
			n := min(size, len(set)-j)
			rest := slices.Delete(slices.Clone(set), j, j+n)
			if _, err := c.placeAfter(g, rest); err == nil {
				set = rest
				continue
			}
			j += n
		}
		if size == 1 {
			return set
		}
	}
}

// cannotMakeRoom is the error for a gang that even every lower-priority victim evicted would not
// make room for.
func (c *Cluster) cannotMakeRoom(g Gang) error {
	_, err := c.Place(g)
	return &Unplaceable{Message: fmt.Sprintf("%s, and preempting every lower-priority gang would not make room", err)}
}

// placeAfter places g as if victims were evicted: their GPUs are free, and so are their CPU,
// memory and pod slots (Node.Spare).
func (c *Cluster) placeAfter(g Gang, victims []int) (*Plan, error) {
	gone := make([]bool, len(c.Victims))
	for _, v := range victims {
		gone[v] = true
	}
	c.evicted = func(v int) bool { return v >= 0 && v < len(gone) && gone[v] }
	defer func() { c.evicted = nil }()
	free := make([]GPUSet, len(c.Nodes))
	for i := range c.Nodes {
		free[i] = c.freedBy(i, c.evicted)
	}
	return c.place(g, free)
}

// cheapestVictims is the cheapest set of evictable victims whose eviction makes room for g, a gang
// of one count, in one domain of a level g allows (see preemptionCost), or nil when none does.
func (c *Cluster) cheapestVictims(g Gang, evictable func(int) bool) []int {
	allFree := make([]GPUSet, len(c.Nodes))
	for i := range c.Nodes {
		allFree[i] = c.freedBy(i, evictable)
	}
	var best []int
	var bestCost preemptionCost
	try := func(l Level, units []unit) {
		room := 0
		for _, u := range units {
			room += c.nodeCapBy(u.node, allFree[u.node]&u.mask, g.GPUsPerPod, 0, evictable)
		}
		if room < g.Pods {
			return
		}
		victims := c.chooseVictims(g, units, evictable)
		if victims == nil {
			return
		}
		if cost := c.costOf(victims, l); best == nil || cost.compare(bestCost) < 0 {
			best, bestCost = victims, cost
		}
	}
	if g.Level == LevelNVLink {
		for _, key := range c.nvlinkDomains() {
			var units []unit
			for i := range c.Nodes {
				if t := c.Nodes[i].Topology; t != nil {
					if m := t.DomainMask(key); m != 0 {
						units = append(units, unit{i, m})
					}
				}
			}
			try(LevelNVLink, units)
		}
	}
	if g.Level != LevelNVLink || !g.Required {
		ix := c.index()
		top := LevelCluster
		if g.Required {
			top = g.Level
		}
		for l := LevelNode; l <= top; l++ {
			for d := range ix.count[l] {
				nodes := ix.nodes[l][d]
				units := make([]unit, len(nodes))
				for j, i := range nodes {
					units[j] = unit{int(i), ^GPUSet(0)}
				}
				try(l, units)
			}
		}
	}
	return best
}

// freedBy is what node i has for the gang once the victims for which evicted is true are gone:
// its free GPUs and theirs, or nothing while a victim it Requires stays.
func (c *Cluster) freedBy(i int, evicted func(int) bool) GPUSet {
	nd := &c.Nodes[i]
	if !c.usable(i, evicted) {
		return 0
	}
	free := nd.Free
	for _, h := range nd.Holders {
		if h.Victim >= 0 && evicted(h.Victim) {
			free |= h.GPUs
		}
	}
	return free
}

// usable reports whether node i may take pods of the gang once the victims for which evicted is
// true are gone: every victim it Requires is among them.
func (c *Cluster) usable(i int, evicted func(int) bool) bool {
	for _, v := range c.Nodes[i].Requires {
		if !evicted(v) {
			return false
		}
	}
	return true
}

func (c *Cluster) nvlinkDomains() []string {
	var keys []string
	seen := map[string]bool{}
	for i := range c.Nodes {
		if t := c.Nodes[i].Topology; t != nil {
			for _, k := range t.Domains {
				if k != "" && !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// exactSubsets bounds how many victim sets chooseVictims weighs one by one in a domain before it
// falls back to choosing greedily: with 8 candidates every set is weighed (255 of them); with 64,
// every set of one or two victims (2,080). A variable for tests of the greedy choice.
var exactSubsets = 4096

// chooseVictims picks the victims with pods on units whose eviction makes the units hold g. It
// weighs every set of one victim, then of two, and so on, while the sets of the next size fit in
// exactSubsets, and returns the cheapest set of the smallest size that makes room (cheapest by
// preemptionCost: the lowest highest priority, then the least work lost, then the fewest GPUs).
// Past that bound it chooses greedily: at each step the victim that adds the most room (the
// cheapest among equals; while none adds room, the one that frees the most GPUs), then it drops
// every victim the rest do not need, the most expensive first. It returns nil when the evictable
// victims cannot make room.
func (c *Cluster) chooseVictims(g Gang, units []unit, evictable func(int) bool) []int {
	type hold struct {
		unit int
		gpus GPUSet
	}
	holds := map[int][]hold{}
	// cur are the GPUs each unit has for the gang, the chosen victims' included; a unit whose
	// node Requires a victim not taken has room for no pod whatever its GPUs (roomAt).
	cur := make([]GPUSet, len(units))
	none := func(int) bool { return false }
	roomAt := func(j int, gpus GPUSet, taken func(int) bool) int {
		if !c.usable(units[j].node, taken) {
			return 0
		}
		return c.nodeCapBy(units[j].node, gpus, g.GPUsPerPod, 0, taken)
	}
	room := 0
	for j, u := range units {
		nd := &c.Nodes[u.node]
		cur[j] = nd.Free & u.mask
		room += roomAt(j, cur[j], none)
		add := func(v int, gpus GPUSet) {
			// One hold per victim and unit: the room a unit gains is not the sum of what each of
			// the victim's pods there would free alone (one-GPU pods free no room for an 8-GPU pod
			// one at a time, and a node that takes one pod of the gang gains none from either of
			// two pods).
			hs := holds[v]
			if n := len(hs); n > 0 && hs[n-1].unit == j {
				hs[n-1].gpus |= gpus
				return
			}
			holds[v] = append(hs, hold{j, gpus})
		}
		for _, h := range nd.Holders {
			// A holder of no GPUs holds CPU or memory the unit's pods need (Uses).
			if evictable(h.Victim) && (h.GPUs&u.mask != 0 || h.GPUs == 0 && h.Uses != nil) {
				add(h.Victim, h.GPUs&u.mask)
			}
		}
		// A victim the node Requires changes the unit's room by its eviction, GPUs or none.
		for _, v := range nd.Requires {
			if evictable(v) {
				add(v, 0)
			}
		}
	}
	candidates := make([]int, 0, len(holds))
	for v := range holds {
		candidates = append(candidates, v)
	}
	slices.SortFunc(candidates, c.compareVictims)

	if set, ok := c.smallestVictimSet(g, candidates, room, func(set []int) int {
		freed := map[int]GPUSet{}
		for _, v := range set {
			for _, h := range holds[v] {
				freed[h.unit] |= h.gpus
			}
		}
		inSet := func(v int) bool { return slices.Contains(set, v) }
		gained := 0
		for j, f := range freed {
			gained += roomAt(j, cur[j]|f, inSet) - roomAt(j, cur[j], none)
		}
		return gained
	}); ok {
		return set
	}

	taken := map[int]bool{}
	isTaken := func(v int) bool { return taken[v] }
	gain := func(v int, sign int) (int, int) {
		// The taken set after adding (sign > 0) or removing v.
		after := func(x int) bool { return x == v && sign > 0 || x != v && taken[x] }
		dRoom, dFree := 0, 0
		for _, h := range holds[v] {
			var gpus GPUSet
			if sign > 0 {
				gpus = cur[h.unit] | h.gpus
			} else {
				gpus = cur[h.unit] &^ h.gpus
			}
			dRoom += roomAt(h.unit, gpus, after) - roomAt(h.unit, cur[h.unit], isTaken)
			dFree += (h.gpus &^ cur[h.unit]).Len()
		}
		return dRoom, dFree
	}
	apply := func(v int, sign int) {
		for _, h := range holds[v] {
			if sign > 0 {
				cur[h.unit] |= h.gpus
			} else {
				cur[h.unit] &^= h.gpus
			}
		}
		taken[v] = sign > 0
	}

	// A victim's gain depends only on the nodes it holds on (their GPUs, the victims taken there):
	// it is kept from one pick to the next, and weighed again only when a pick took a victim on
	// one of its nodes.
	onNode := map[int][]int{}
	for i, v := range candidates {
		for _, h := range holds[v] {
			n := units[h.unit].node
			if l := onNode[n]; len(l) == 0 || l[len(l)-1] != i {
				onNode[n] = append(l, i)
			}
		}
	}
	type weighed struct{ room, free int }
	gains := make([]weighed, len(candidates))
	stale := make([]bool, len(candidates))
	for i := range stale {
		stale[i] = true
	}
	var chosen []int
	for room < g.Pods {
		// Candidates are cheapest first: a later one is taken only for more room or, while none
		// adds room, for more GPUs freed.
		pick, pickRoom, pickFree := -1, 0, 0
		for i, v := range candidates {
			if taken[v] {
				continue
			}
			if stale[i] {
				gains[i].room, gains[i].free = gain(v, 1)
				stale[i] = false
			}
			dRoom, dFree := gains[i].room, gains[i].free
			if dRoom > pickRoom || pickRoom == 0 && dRoom == 0 && dFree > pickFree {
				pick, pickRoom, pickFree = v, dRoom, dFree
			}
		}
		if pick < 0 {
			return nil
		}
		chosen = append(chosen, pick)
		apply(pick, 1)
		room += pickRoom
		for _, h := range holds[pick] {
			for _, i := range onNode[units[h.unit].node] {
				stale[i] = true
			}
		}
	}
	// Drop what the others make unnecessary, the most expensive first. A victim's GPUs are its own,
	// so removing one victim's GPUs never takes another's.
	slices.SortFunc(chosen, func(a, b int) int { return c.compareVictims(b, a) })
	kept := chosen[:0]
	for _, v := range chosen {
		dRoom, _ := gain(v, -1)
		if room+dRoom >= g.Pods {
			apply(v, -1)
			room += dRoom
			continue
		}
		kept = append(kept, v)
	}
	return kept
}

// smallestVictimSet weighs the sets of candidates by size, smallest first, while the sets of a
// size fit in exactSubsets in all, and returns the cheapest set of the first size at which one
// makes room: gained(set) more room added to room reaches g's pods. ok is false when the bound
// stopped it before any set made room.
func (c *Cluster) smallestVictimSet(g Gang, candidates []int, room int, gained func([]int) int) ([]int, bool) {
	weighed := 0
	set := make([]int, 0, len(candidates))
	for k := 1; k <= len(candidates); k++ {
		// binomial stops counting past maxEnumeration, which is no smaller than exactSubsets.
		n := binomial(len(candidates), k)
		if weighed+n > exactSubsets {
			return nil, false
		}
		weighed += n
		var best []int
		var bestCost preemptionCost
		var walk func(from int)
		walk = func(from int) {
			if len(set) == k {
				if room+gained(set) < g.Pods {
					return
				}
				if cost := c.costOf(set, LevelNone); best == nil || cost.compare(bestCost) < 0 {
					best, bestCost = slices.Clone(set), cost
				}
				return
			}
			for i := from; i <= len(candidates)-(k-len(set)); i++ {
				set = append(set, candidates[i])
				walk(i + 1)
				set = set[:len(set)-1]
			}
		}
		walk(0)
		if best != nil {
			return best, true
		}
	}
	return nil, true
}
