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
