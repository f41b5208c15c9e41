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
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPlaceAgainstEveryChoice compares Place, on small random clusters, with a count of every
// node's room: Place must place the gang whenever the free GPUs can hold it (inside one domain of
// its level when that level is required), give no node more pods than its free GPUs and MaxPods
// allow, hold it in one domain of the smallest level that can, and, inside one rack or block, span
// the fewest racks.
func TestPlaceAgainstEveryChoice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	sizes := []int{1, 2, 4, 8}
	for run := range 5000 {
		c := randomCluster(rng, func() int {
			if rng.IntN(8) == 0 {
				return 1
			}
			return 0
		})
		g := Gang{Key: "ns/job", Pods: 1 + rng.IntN(6), GPUsPerPod: sizes[rng.IntN(len(sizes))]}
		if rng.IntN(3) == 0 {
			g.Level, g.Required = []Level{LevelNode, LevelRack, LevelBlock}[rng.IntN(3)], true
		}
		name := fmt.Sprintf("run %d: %s", run, describeCluster(c, g))

		// The smallest level with one domain that holds the gang, and the fewest racks such a
		// domain's plan can span: racks of the most room first.
		room := map[string]int{}
		racksOf := map[string][]string{}
		nodeFits := false
		total := 0
		for i, n := range c.Nodes {
			k := c.nodeCap(i, n.Free, g.GPUsPerPod)
			racksOf[n.Block] = appendNew(racksOf[n.Block], n.Rack)
			room[n.Rack] += k
			total += k
			nodeFits = nodeFits || k >= g.Pods
		}
		level, fewest := LevelZone, 0 // every node is in zone z1
		switch {
		case nodeFits:
			level, fewest = LevelNode, 1
		case slices.ContainsFunc(slices.Collect(maps.Keys(room)), func(r string) bool { return room[r] >= g.Pods }):
			level, fewest = LevelRack, 1
		default:
			for _, racks := range racksOf {
				if n := fewestRacks(racks, room, g.Pods); n > 0 && (fewest == 0 || n < fewest) {
					level, fewest = LevelBlock, n
				}
			}
		}
		fits := level <= LevelBlock || total >= g.Pods
		if g.Required && level > g.Level {
			fits = false
		}
		p, err := c.Place(g)
		switch {
		case err != nil && fits:
			t.Fatalf("%s: Place() failed (%v), but the gang fits at level %v", name, err, level)
		case err != nil:
			continue
		case !fits:
			t.Fatalf("%s: Place() placed a gang that does not fit: %v", name, placed(p))
		}
		perNode := map[string]int{}
		for _, a := range p.Assignments {
			perNode[a.Node]++
		}
		for i, n := range c.Nodes {
			if perNode[n.Name] > c.nodeCap(i, n.Free, g.GPUsPerPod) {
				t.Fatalf("%s: Place() puts %d pods on %s: %v", name, perNode[n.Name], n.Name, placed(p))
			}
		}
		if len(p.Assignments) != g.Pods {
			t.Fatalf("%s: Place() placed %d pods: %v", name, len(p.Assignments), placed(p))
		}
		if p.Level != level {
			t.Errorf("%s: Place() holds the gang in one domain of level %v, want %v: %v", name, p.Level, level, placed(p))
		}
		// Across blocks the plan fills the blocks of the most room first, which may span more
		// racks than the fewest: only plans inside one block are held to the fewest racks.
		if level <= LevelBlock && p.Racks() != fewest {
			t.Errorf("%s: Place() uses %d racks (%v), where %d hold the gang", name, p.Racks(), placed(p), fewest)
		}
	}
}

// randomCluster is one zone of two blocks of 1–3 racks of 1–3 nodes of 8 GPUs, each GPU used at
// even odds, one node in ten excluded, and each node's MaxPods from maxPods.
func randomCluster(rng *rand.Rand, maxPods func() int) *Cluster {
	w := makeCluster()
	for b := range 2 {
		for r := range 1 + rng.IntN(3) {
			w.Rack("z1", fmt.Sprintf("b%d", b), fmt.Sprintf("b%d-r%d", b, r), 1+rng.IntN(3), 8)
		}
	}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		for gpu := range 8 {
			if rng.IntN(2) == 0 {
				n.Free &^= NewGPUSet(gpu)
			}
		}
		n.MaxPods = maxPods()
		if rng.IntN(10) == 0 {
			n.Excluded = true
		}
	}
	return w.Obj()
}

// fewestRacks is the fewest of racks whose room together reaches need, 0 when all of them do not.
func fewestRacks(racks []string, room map[string]int, need int) int {
	rooms := make([]int, 0, len(racks))
	for _, r := range racks {
		rooms = append(rooms, room[r])
	}
	// The largest first: no fewer racks can reach need.
	for n, sum := 0, 0; n < len(rooms); n++ {
		best := n
		for j := n + 1; j < len(rooms); j++ {
			if rooms[j] > rooms[best] {
				best = j
			}
		}
		rooms[n], rooms[best] = rooms[best], rooms[n]
		if sum += rooms[n]; sum >= need {
			return n + 1
		}
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func appendNew(list []string, s string) []string {
	if contains(list, s) {
		return list
	}
	return append(list, s)
}

// TestPlaceMixedAgainstEveryChoice places gangs whose pods ask different GPU counts (of 1, 2, 4
// and 8, each dividing the next) on small random clusters. Every plan must give each pod its own
// count of the node's free GPUs, no GPU twice, no excluded node, and no node more pods than its
// MaxPods; with a required level, keep the gang in one domain of it. Where no node limits its pods,
// Place must place the gang whenever one domain of its required level holds it, in one domain of
// the smallest level that does: with counts that divide one another, nodes hold the pods exactly
// when, for every count, their room in blocks of that count holds all the pods of that count or
// more.
func TestPlaceMixedAgainstEveryChoice(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	sizes := []int{1, 2, 4, 8}
	for run := range 5000 {
		limited := rng.IntN(3) == 0
		c := randomCluster(rng, func() int {
			if limited && rng.IntN(3) == 0 {
				return 1 + rng.IntN(2)
			}
			return 0
		})
		g := Gang{Key: "ns/job", Pods: 2 + rng.IntN(5)}
		for range g.Pods {
			g.PodGPUs = append(g.PodGPUs, sizes[rng.IntN(len(sizes))])
		}
		if rng.IntN(3) == 0 {
			g.Level, g.Required = []Level{LevelNode, LevelRack, LevelBlock}[rng.IntN(3)], true
		}
		name := fmt.Sprintf("run %d: pods of %v GPUs%s", run, g.PodGPUs, describeCluster(c, g))

		domainOf := func(n Node, l Level) string {
			switch l {
			case LevelNode:
				return n.Name
			case LevelRack:
				return n.Block + "/" + n.Rack
			case LevelBlock:
				return n.Block
			}
			return n.Zone
		}
		holds := func(nodes []Node) bool {
			for _, s := range sizes {
				blocks, need := 0, 0
				for _, n := range nodes {
					if !n.Excluded {
						blocks += n.Free.Len() / s
					}
				}
				for _, k := range g.PodGPUs {
					if k >= s {
						need += k / s
					}
				}
				if blocks < need {
					return false
				}
			}
			return true
		}
		level := LevelNone
		for _, l := range []Level{LevelNode, LevelRack, LevelBlock, LevelZone} {
			domains := map[string][]Node{}
			for _, n := range c.Nodes {
				domains[domainOf(n, l)] = append(domains[domainOf(n, l)], n)
			}
			if slices.ContainsFunc(slices.Collect(maps.Values(domains)), holds) {
				level = l
				break
			}
		}
		fits := level != LevelNone && (!g.Required || level <= g.Level)

		p, err := c.Place(g)
		switch {
		case err != nil && fits && !limited:
			t.Fatalf("%s: Place() failed (%v), but the gang fits at level %v", name, err, level)
		case err != nil:
			continue
		case !fits:
			t.Fatalf("%s: Place() placed a gang that does not fit: %v", name, placed(p))
		}
		if len(p.Assignments) != g.Pods {
			t.Fatalf("%s: Place() placed %d pods: %v", name, len(p.Assignments), placed(p))
		}
		used := map[string]GPUSet{}
		perNode := map[string]int{}
		domains := map[string]bool{}
		for i, a := range p.Assignments {
			n := c.Nodes[slices.IndexFunc(c.Nodes, func(n Node) bool { return n.Name == a.Node })]
			set := NewGPUSet(a.GPUs...)
			switch {
			case len(a.GPUs) != g.PodGPUs[i]:
				t.Fatalf("%s: pod %d asks %d GPUs and gets %v: %v", name, i, g.PodGPUs[i], a.GPUs, placed(p))
			case n.Excluded:
				t.Fatalf("%s: pod %d is on excluded node %s: %v", name, i, n.Name, placed(p))
			case set&^n.Free != 0 || set&used[n.Name] != 0:
				t.Fatalf("%s: pod %d takes GPUs %v of %s that are not free: %v", name, i, a.GPUs, n.Name, placed(p))
			}
			used[n.Name] |= set
			perNode[n.Name]++
			if n.MaxPods > 0 && perNode[n.Name] > n.MaxPods {
				t.Fatalf("%s: Place() puts %d pods on %s, which takes %d: %v", name, perNode[n.Name], n.Name, n.MaxPods, placed(p))
			}
			if g.Required {
				domains[domainOf(n, g.Level)] = true
			}
		}
		if len(domains) > 1 {
			t.Fatalf("%s: Place() spans %d domains of the required level %v: %v", name, len(domains), g.Level, placed(p))
		}
		if !limited && p.Level != level {
			t.Errorf("%s: Place() holds the gang in one domain of level %v, want %v: %v", name, p.Level, level, placed(p))
		}
	}
}

// TestPlaceHonoursEachPodsNeeds places, on small random clusters, gangs whose pods ask different
// CPU (Gang.PodNeeds), and GPUs, and checks the plan against every way to put the pods on the
// nodes: no node gives more GPUs, CPU or pod slots than it has spare, and Place finds a plan
// whenever one counting every pod at the most any asks (MaxPods, the count before PodNeeds) would.
// Place is a heuristic, pod shapes in turn, the largest first: it may miss a packing only a
// search over every assignment finds, and the test logs how often it did.
func TestPlaceHonoursEachPodsNeeds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	fits, missed, missedAtMost := 0, 0, 0
	for run := range 3000 {
		c := randomCluster(rng, func() int { return 0 })
		c.Nodes = c.Nodes[:min(len(c.Nodes), 5)]
		c.idx = nil
		for i := range c.Nodes {
			// CPU in units of 10, then pod slots.
			c.Nodes[i].Spare = []int64{int64(rng.IntN(10)), int64(1 + rng.IntN(4))}
		}
		g := Gang{Key: "ns/job", Pods: 1 + rng.IntN(4), GPUsPerPod: []int{1, 2, 4}[rng.IntN(3)]}
		for range g.Pods {
			g.PodNeeds = append(g.PodNeeds, []int64{int64(rng.IntN(6)), 1})
		}
		if rng.IntN(2) == 0 {
			for range g.Pods {
				g.PodGPUs = append(g.PodGPUs, []int{1, 2, 4}[rng.IntN(3)])
			}
		}
		// MaxPods counts the most any pod asks, as GangPlacement's view does.
		most := slices.Clone(g.PodNeeds[0])
		for _, n := range g.PodNeeds {
			for r := range most {
				most[r] = max(most[r], n[r])
			}
		}
		for i := range c.Nodes {
			nd := &c.Nodes[i]
			nd.MaxPods = -1
			for r, need := range most {
				if k := int(nd.Spare[r]); need > 0 && (nd.MaxPods < 0 || k/int(need) < nd.MaxPods) {
					nd.MaxPods = k / int(need)
				}
			}
			if nd.MaxPods == 0 {
				nd.MaxPods = -1
			}
		}
		gpusOf := func(i int) int {
			if g.PodGPUs != nil {
				return g.PodGPUs[i]
			}
			return g.GPUsPerPod
		}
		name := fmt.Sprintf("run %d: %s, needs %v, spare %v", run, describeCluster(c, g), g.PodNeeds, spares(c))

		// Every way to put pod i on node on[i]: does one respect every node's GPUs and spare?
		on := make([]int, g.Pods)
		var exists func(pod int) bool
		exists = func(pod int) bool {
			if pod == g.Pods {
				return true
			}
			for i := range c.Nodes {
				on[pod] = i
				if fitsOn(c, g, on[:pod+1], gpusOf, i) && exists(pod+1) {
					return true
				}
			}
			return false
		}
		want := exists(0)
		atMost := g
		atMost.PodNeeds = nil
		_, atMostErr := c.Place(atMost)
		p, err := c.Place(g)
		switch {
		case err != nil && want && atMostErr == nil:
			t.Fatalf("%s: Place() failed (%v), but counted at the most any pod asks the gang fits", name, err)
		case err != nil && want:
			fits++
			missed++
			missedAtMost++
			continue
		case err != nil:
			continue
		case !want:
			t.Fatalf("%s: Place() placed a gang that does not fit: %v", name, placed(p))
		}
		fits++
		if atMostErr != nil {
			missedAtMost++
		}
		for i := range on {
			on[i] = p.Assignments[i].node
		}
		for i := range c.Nodes {
			if !fitsOn(c, g, on, gpusOf, i) {
				t.Fatalf("%s: Place() overfills %s: %v", name, c.Nodes[i].Name, placed(p))
			}
		}
		for i, a := range p.Assignments {
			if len(a.GPUs) != gpusOf(i) || a.set&^c.Nodes[a.node].Free != 0 {
				t.Fatalf("%s: pod %d gets GPUs %v: %v", name, i, a.GPUs, placed(p))
			}
		}
	}
	t.Logf("of %d gangs that fit, Place missed %d; counted at the most any pod asks, %d", fits, missed, missedAtMost)
}

// fitsOn reports whether node i holds the pods that on puts there: their GPUs, CPU and pod slots.
func fitsOn(c *Cluster, g Gang, on []int, gpusOf func(int) int, i int) bool {
	nd := &c.Nodes[i]
	gpus, need := 0, make([]int64, len(nd.Spare))
	for pod, n := range on {
		if n != i {
			continue
		}
		if nd.Excluded {
			return false
		}
		gpus += gpusOf(pod)
		for r := range need {
			need[r] += g.PodNeeds[pod][r]
		}
	}
	for r := range need {
		if need[r] > nd.Spare[r] {
			return false
		}
	}
	return gpus <= nd.Free.Len()
}

func spares(c *Cluster) [][]int64 {
	var out [][]int64
	for _, n := range c.Nodes {
		out = append(out, n.Spare)
	}
	return out
}
