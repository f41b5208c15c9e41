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
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomLevels is a cluster of n topology levels (l0 outermost), each domain holding 1–3 of the
// next, the innermost 1–3 nodes of 4 GPUs, each GPU used at even odds, one node in ten excluded.
func randomLevels(rng *rand.Rand, n int) *Cluster {
	c := &Cluster{}
	for i := range n {
		c.Levels = append(c.Levels, fmt.Sprintf("l%d", i))
	}
	var grow func(path []string)
	grow = func(path []string) {
		if len(path) == n {
			for k := range 1 + rng.IntN(3) {
				nd := Node{Name: fmt.Sprintf("%s-n%d", strings.Join(path, "."), k), Domains: path, GPUs: 4, Free: FirstGPUs(4), Indexed: true}
				for gpu := range 4 {
					if rng.IntN(2) == 0 {
						nd.Free &^= NewGPUSet(gpu)
					}
				}
				nd.Excluded = rng.IntN(10) == 0
				c.Nodes = append(c.Nodes, nd)
			}
			return
		}
		for k := range 1 + rng.IntN(3) {
			grow(append(path[:len(path):len(path)], fmt.Sprintf("d%d", k)))
		}
	}
	grow(nil)
	return c
}

// TestPlaceOverLevels places gangs on random clusters of one to MaxLevels topology levels: Place
// must place the gang whenever its free GPUs hold it (inside one domain of its required level,
// when it has one), in one domain of the smallest level that can hold it, and, when that is the
// level just outside the innermost, on the fewest innermost domains.
func TestPlaceOverLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for run := range 3000 {
		n := 1 + rng.IntN(MaxLevels)
		c := randomLevels(rng, n)
		// One run in four leaves a level without values: it merges into the one outside it.
		absent := -1
		if n > 1 && rng.IntN(4) == 0 {
			absent = rng.IntN(n)
			for i := range c.Nodes {
				d := slices.Clone(c.Nodes[i].Domains)
				d[absent] = ""
				c.Nodes[i].Domains = d
			}
		}
		canon := func(l Level) Level {
			for l < LevelCluster && l >= LevelRack && n-1-int(l-LevelRack) == absent {
				l++
			}
			if l == TopologyLevel(-1, n) {
				return LevelCluster
			}
			return l
		}
		// pathOf names a node's domain of level k as the planner does, the absent level left out.
		pathOf := func(d []string, k int) string {
			var parts []string
			for j, v := range d[:k+1] {
				if j != absent {
					parts = append(parts, v)
				}
			}
			return strings.Join(parts, "/")
		}
		g := Gang{Key: "ns/job", Pods: 1 + rng.IntN(8), GPUsPerPod: []int{1, 2, 4}[rng.IntN(3)]}
		if rng.IntN(3) == 0 {
			g.Level, g.Required = TopologyLevel(rng.IntN(n), n), true
		}
		name := fmt.Sprintf("run %d: %d levels (level %d absent), gang %s level %v required %v", run, n, absent, g, g.Level, g.Required)

		// room[k][path] is the room of the domain of level k (outer first) named by its path.
		room := make([]map[string]int, n)
		for k := range room {
			room[k] = map[string]int{}
		}
		inner := map[string][]string{} // the innermost domains of each domain of level n-2
		nodeFits, total := false, 0
		for i, nd := range c.Nodes {
			cap := c.nodeCap(i, nd.Free, g.GPUsPerPod)
			total += cap
			nodeFits = nodeFits || cap >= g.Pods
			for k := range n {
				room[k][pathOf(nd.Domains, k)] += cap
			}
			if n > 1 {
				p := pathOf(nd.Domains, n-2)
				inner[p] = appendNew(inner[p], pathOf(nd.Domains, n-1))
			}
		}
		want := LevelCluster
		if nodeFits {
			want = LevelNode
		} else {
			for k := n - 1; k >= 0; k-- {
				if k != absent && anyRoom(room[k], g.Pods) {
					want = TopologyLevel(k, n)
					break
				}
			}
		}
		fits := total >= g.Pods && (!g.Required || want <= canon(g.Level))
		p, err := c.Place(g)
		switch {
		case err != nil && fits:
			t.Fatalf("%s: Place() failed (%v), but the gang fits at level %v", name, err, want)
		case err != nil:
			if l := canon(g.Level); g.Required && l < LevelCluster && !strings.Contains(err.Error(), "in one "+c.LevelName(l)) {
				t.Errorf("%s: Place() error %q does not name the level %s", name, err, c.LevelName(l))
			}
			continue
		case !fits:
			t.Fatalf("%s: Place() placed a gang that does not fit: %v", name, placed(p))
		}
		if len(p.Assignments) != g.Pods {
			t.Fatalf("%s: Place() placed %d pods: %v", name, len(p.Assignments), placed(p))
		}
		if p.Level != want {
			t.Fatalf("%s: Place() holds the gang in one domain of level %v, want %v: %v", name, p.Level, want, placed(p))
		}
		perNode := map[string]int{}
		domains := map[string]bool{}
		for _, a := range p.Assignments {
			perNode[a.Node]++
			nd := &c.Nodes[a.NodeIndex()]
			if want > LevelNode && want < LevelCluster {
				k := n - 1 - int(want-LevelRack)
				domains[pathOf(nd.Domains, k)] = true
			}
		}
		for i, nd := range c.Nodes {
			if perNode[nd.Name] > c.nodeCap(i, nd.Free, g.GPUsPerPod) {
				t.Fatalf("%s: Place() puts %d pods on %s: %v", name, perNode[nd.Name], nd.Name, placed(p))
			}
		}
		if len(domains) > 1 {
			t.Fatalf("%s: Place() spans %d domains of level %v: %v", name, len(domains), want, placed(p))
		}
		if n > 1 && want == TopologyLevel(n-2, n) && absent != n-1 {
			if fewest := fewestRacks(inner[p.Domain], room[n-1], g.Pods); p.Racks() != fewest {
				t.Errorf("%s: Place() uses %d innermost domains (%v), where %d hold the gang", name, p.Racks(), placed(p), fewest)
			}
		}
	}
}

func anyRoom(room map[string]int, need int) bool {
	for _, r := range room {
		if r >= need {
			return true
		}
	}
	return false
}

// TestPlaceDefaultLevelsAsDomains checks that Zone, Block and Rack are the default levels: a
// cluster that gives them as Domains of levels zone, block and rack gets the same plans, and so
// does one with a fourth level, clique, that no node has a value of.
func TestPlaceDefaultLevelsAsDomains(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 2))
	for run := range 500 {
		a := randomCluster(rng, func() int { return 0 })
		b := &Cluster{Levels: DefaultLevels}
		// A clique level no node has a value of is merged into the rack.
		withClique := &Cluster{Levels: append(slices.Clone(DefaultLevels), "clique")}
		for _, nd := range a.Nodes {
			nd.Domains = []string{nd.Zone, nd.Block, nd.Rack}
			nd.Zone, nd.Block, nd.Rack = "", "", ""
			b.Nodes = append(b.Nodes, nd)
			nd.Domains = append(nd.Domains, "")
			withClique.Nodes = append(withClique.Nodes, nd)
		}
		g := Gang{Key: "ns/job", Pods: 1 + rng.IntN(6), GPUsPerPod: []int{1, 2, 4, 8}[rng.IntN(4)]}
		if rng.IntN(3) == 0 {
			g.Level, g.Required = []Level{LevelNode, LevelRack, LevelBlock}[rng.IntN(3)], true
		}
		pa, errA := a.Place(g)
		for what, c := range map[string]*Cluster{"Domains": b, "an empty clique": withClique} {
			g := g
			if c == withClique && g.Level >= LevelRack {
				g.Level++
			}
			pb, errB := c.Place(g)
			if (errA == nil) != (errB == nil) || errA != nil && errA.Error() != errB.Error() {
				t.Fatalf("run %d: Place() = %v with Zone, Block and Rack, %v with %s", run, errA, errB, what)
			}
			if errA == nil && (fmt.Sprint(placed(pa)) != fmt.Sprint(placed(pb)) || a.LevelName(pa.Level) != c.LevelName(pb.Level) || pa.Domain != pb.Domain) {
				t.Fatalf("run %d: Place() = %v in %s %s, %v in %s %s with %s", run, placed(pa), pa.Level, pa.Domain, placed(pb), c.LevelName(pb.Level), pb.Domain, what)
			}
		}
	}
}

// TestPlaceInsideClique checks the multi-node NVLink clique as the innermost level: a gang that
// fits in one clique lands inside it, even where a fuller rack of nodes without a clique would
// hold it on as few nodes, and in the fullest clique that holds it; one that asks for the clique
// level and fits in none is told the best clique's room.
func TestPlaceInsideClique(t *testing.T) {
	levels := []string{"zone", "block", "rack", "clique"}
	c := &Cluster{Levels: levels}
	add := func(rack, clique string, nodes, used int) {
		for i := range nodes {
			nd := Node{Name: fmt.Sprintf("%s-%s-%d", rack, clique, i), Domains: []string{"z1", "b1", rack, clique},
				GPUs: 4, Free: FirstGPUs(4), Indexed: true}
			nd.Free &^= FirstGPUs(used)
			c.Nodes = append(c.Nodes, nd)
		}
	}
	add("r1", "", 4, 0)      // four free nodes without a clique label
	add("r2", "nvl-a", 4, 0) // one NVL domain of 16 GPUs
	add("r2", "nvl-b", 4, 2) // one of 8 free GPUs
	clique := TopologyLevel(3, 4)

	p, err := c.Place(Gang{Key: "ns/a", Pods: 4, GPUsPerPod: 4})
	if err != nil {
		t.Fatalf("Place() error = %v", err)
	}
	if p.Level != clique || p.Domain != "z1/b1/r2/nvl-a" {
		t.Errorf("Place() holds the gang in %s %q (%v), want clique z1/b1/r2/nvl-a", c.LevelName(p.Level), p.Domain, placed(p))
	}

	// Without the clique level, the rack of the fewest free GPUs takes it.
	racks := &Cluster{Levels: levels[:3]}
	for _, nd := range c.Nodes {
		nd.Domains = nd.Domains[:3]
		racks.Nodes = append(racks.Nodes, nd)
	}
	if p, err := racks.Place(Gang{Key: "ns/a", Pods: 4, GPUsPerPod: 4}); err != nil || p.Domain != "z1/b1/r1" {
		t.Errorf("Place() without cliques = %v, %v, want rack z1/b1/r1", p, err)
	}

	p, err = c.Place(Gang{Key: "ns/b", Pods: 4, GPUsPerPod: 2})
	if err != nil {
		t.Fatalf("Place() error = %v", err)
	}
	if p.Level != clique || p.Domain != "z1/b1/r2/nvl-b" {
		t.Errorf("Place() holds the gang in %s %q (%v), want the fuller clique z1/b1/r2/nvl-b", c.LevelName(p.Level), p.Domain, placed(p))
	}

	_, err = c.Place(Gang{Key: "ns/d", Pods: 5, GPUsPerPod: 4, Level: clique, Required: true})
	want := "ns/d needs 5 pod(s) × 4 GPU(s) in one clique; the best clique (z1/b1/r2/nvl-a) has room for 4 pods (16 free GPUs)"
	if err == nil || err.Error() != want {
		t.Errorf("Place() error = %v, want %s", err, want)
	}
}
