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
*/package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// newPlacement is the placement placeIn makes for g on the cluster's free GPUs.
func newPlacement(c *Cluster, g Gang, room func(i int, mask GPUSet) int) *placement {
	free := make([]GPUSet, len(c.Nodes))
	for i := range c.Nodes {
		free[i] = c.Nodes[i].Free
	}
	p := &placement{}
	p.init(c, g, free, room)
	return p
}

// domain is the index of the domain of level l named name ("z/b/r" for a rack, as messages say).
func (p *placement) domain(t *testing.T, l Level, name string) int32 {
	t.Helper()
	for d, n := range p.ix.names[l] {
		if n == name {
			return int32(d)
		}
	}
	t.Fatalf("no %s %q in %v", l, name, p.ix.names[l])
	return -1
}

// pods maps the node names of takes to their pods.
func (p *placement) pods(takes []take) map[string]int {
	out := map[string]int{}
	for _, t := range takes {
		out[p.c.Nodes[t.node].Name] += t.pods
	}
	return out
}

// TestPlacementCounts: every domain's room for the gang's pods and free GPUs are its nodes' sums;
// an excluded node counts neither, and room, when given, says each node's room.
func TestPlacementCounts(t *testing.T) {
	c := makeCluster().Rack("z", "b", "r1", 2, 8).Rack("z", "b", "r2", 2, 8).
		Used("r1-0", 0, 1, 2).Unhealthy("r1-1", 7).Exclude("r2-1").Obj()
	g := Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 2}
	type counts struct{ Caps, Frees map[string]int32 }
	get := func(p *placement) counts {
		out := counts{Caps: map[string]int32{}, Frees: map[string]int32{}}
		for _, l := range []Level{LevelNode, LevelRack, LevelCluster} {
			for d, name := range p.ix.names[l] {
				out.Caps[name], out.Frees[name] = p.caps[l][d], p.frees[l][d]
			}
		}
		return out
	}
	want := counts{
		Caps:  map[string]int32{"r1-0": 2, "r1-1": 3, "r2-0": 4, "r2-1": 0, "z/b/r1": 5, "z/b/r2": 4, "cluster": 9},
		Frees: map[string]int32{"r1-0": 5, "r1-1": 7, "r2-0": 8, "r2-1": 0, "z/b/r1": 12, "z/b/r2": 8, "cluster": 20},
	}
	if diff := cmp.Diff(want, get(newPlacement(c, g, nil))); diff != "" {
		t.Errorf("counts (-want,+got):\n%s", diff)
	}
	one := newPlacement(c, g, func(int, GPUSet) int { return 1 })
	if got := one.caps[LevelCluster][0]; got != 4 || one.caps[LevelNode][one.domain(t, LevelNode, "r2-1")] != 1 {
		t.Errorf("with a room of 1 pod a node: the cluster holds %d pods, want 4 (room decides, even on an excluded node)", got)
	}
}

// TestPlacementBetter: of two domains of a level the better fit has the least room, then the
// fewest free GPUs, then the fullest parent, then the first name.
func TestPlacementBetter(t *testing.T) {
	cases := map[string]struct {
		cluster *Cluster
		better  string // of racks r1 and r2
	}{
		"less room": {
			cluster: makeCluster().Rack("z", "b", "r1", 2, 8).Rack("z", "b", "r2", 2, 8).Used("r2-0", 0, 1, 2, 3, 4, 5).Obj(),
			better:  "z/b/r2",
		},
		"same room, fewer free GPUs": {
			cluster: makeCluster().Rack("z", "b", "r1", 2, 8).Rack("z", "b", "r2", 2, 8).Used("r1-0", 0).Used("r1-1", 0).Obj(),
			better:  "z/b/r1",
		},
		"same room and free GPUs, the fuller block": {
			cluster: makeCluster().Rack("z", "b1", "r1", 2, 8).Rack("z", "b2", "r2", 2, 8).Rack("z", "b2", "r3", 1, 8).
				Used("r3-0", 0, 1, 2, 3, 4, 5, 6, 7).Rack("z", "b1", "r4", 1, 8).Obj(),
			better: "z/b2/r2",
		},
		"alike: the first name": {
			cluster: makeCluster().Rack("z", "b", "r2", 2, 8).Rack("z", "b", "r1", 2, 8).Obj(),
			better:  "z/b/r1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPlacement(tc.cluster, Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 4}, nil)
			var racks []int32
			for d, n := range p.ix.names[LevelRack] {
				if n == "z/b/r1" || n == "z/b/r2" || n == "z/b1/r1" || n == "z/b2/r2" {
					racks = append(racks, int32(d))
				}
			}
			a, b := racks[0], racks[1]
			got := p.ix.names[LevelRack][b]
			if p.better(LevelRack, a, b) {
				got = p.ix.names[LevelRack][a]
			}
			if got != tc.better || p.better(LevelRack, a, b) == p.better(LevelRack, b, a) {
				t.Errorf("better picks %s (a before b %v, b before a %v), want %s", got, p.better(LevelRack, a, b), p.better(LevelRack, b, a), tc.better)
			}
		})
	}
}

// TestPlacementBetterRack: of two racks whose plans strand alike, a gang that is not whole nodes
// takes the one left with the fewest free GPUs past whole nodes; a gang of whole nodes goes by best
// fit.
func TestPlacementBetterRack(t *testing.T) {
	// r1: 3 free nodes (24 GPUs); r2: 4 free nodes and two with 2 free GPUs (36).
	c := makeCluster().Rack("z", "b", "r1", 3, 8).Rack("z", "b", "r2", 6, 8).
		Used("r2-4", 0, 1, 2, 3, 4, 5).Used("r2-5", 0, 1, 2, 3, 4, 5).Obj()
	cases := map[string]struct {
		gang         Gang
		past1, past2 int32
		better       string
	}{
		"3 × 4 GPUs: r2 is left on whole nodes (24), r1 with 4 past them (12)": {
			gang: Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 4}, past1: 4, past2: 0, better: "z/b/r2",
		},
		"2 × 8 GPUs, whole nodes: the fuller r1, though r2 keeps its 4 past whole nodes": {
			gang: Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8}, past1: 0, past2: 4, better: "z/b/r1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPlacement(c, tc.gang, nil)
			r1, r2 := p.domain(t, LevelRack, "z/b/r1"), p.domain(t, LevelRack, "z/b/r2")
			if got := p.leftover(r1); got != tc.past1 {
				t.Errorf("leftover(r1) = %d GPUs past whole nodes, want %d", got, tc.past1)
			}
			if got := p.leftover(r2); got != tc.past2 {
				t.Errorf("leftover(r2) = %d GPUs past whole nodes, want %d", got, tc.past2)
			}
			got := "z/b/r2"
			if p.betterRack(r1, r2) {
				got = "z/b/r1"
			}
			if got != tc.better || p.betterRack(r1, r2) == p.betterRack(r2, r1) {
				t.Errorf("betterRack picks %s (r1 before r2 %v, r2 before r1 %v), want %s", got, p.betterRack(r1, r2), p.betterRack(r2, r1), tc.better)
			}
		})
	}
}

// TestPlacementBetterNode: of two nodes that hold the gang the better has the fewest free GPUs,
// then is the smallest in CPU and memory, then has the least room, is in the fuller rack, would
// be the fuller in CPU and memory (Fill), then comes first by name.
func TestPlacementBetterNode(t *testing.T) {
	cases := map[string]struct {
		cluster *clusterWrapper
		better  string // of nodes a-0 and b-0
	}{
		"fewer free GPUs": {
			cluster: makeCluster().Rack("z", "b", "a", 1, 8).Rack("z", "b", "b", 1, 8).Used("b-0", 0, 1),
			better:  "b-0",
		},
		"same free GPUs, the smaller in CPU": {
			cluster: makeCluster().Rack("z", "b", "a", 1, 8).Rack("z", "b", "b", 1, 8).Size("a-0", 64, 512).Size("b-0", 32, 512),
			better:  "b-0",
		},
		"same size, less room": {
			cluster: makeCluster().Rack("z", "b", "a", 1, 8).Rack("z", "b", "b", 1, 8).MaxPods("a-0", 2),
			better:  "a-0",
		},
		"same room, the fuller rack": {
			cluster: makeCluster().Rack("z", "b", "a", 2, 8).Rack("z", "b", "b", 2, 8).Used("b-1", 0, 1, 2, 3, 4, 5, 6, 7),
			better:  "b-0",
		},
		"alike: the first name": {
			cluster: makeCluster().Rack("z", "b", "b", 1, 8).Rack("z", "b", "a", 1, 8),
			better:  "a-0",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPlacement(tc.cluster.Obj(), Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 2}, nil)
			a, b := p.domain(t, LevelNode, "a-0"), p.domain(t, LevelNode, "b-0")
			got := "b-0"
			if p.betterNode(a, b) {
				got = "a-0"
			}
			if got != tc.better || p.betterNode(a, b) == p.betterNode(b, a) {
				t.Errorf("betterNode picks %s, want %s", got, tc.better)
			}
		})
	}
	fill := makeCluster().Rack("z", "b", "a", 1, 8).Rack("z", "b", "b", 1, 8).Fill("b-0", 50).Obj()
	p := newPlacement(fill, Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 2}, nil)
	if !p.betterNode(1, 0) || p.betterNode(0, 1) {
		t.Errorf("alike but b-0 would be fuller in CPU and memory: betterNode(b-0, a-0) = %v, want true", p.betterNode(1, 0))
	}
}

// TestPlacementDistribute: in a rack, of the fewest nodes that hold the pods those of the least
// room (partly used nodes fill before free ones); with PartlyUsedFirst every partly used node
// first; above a rack, the child of the most room first, until one holds the rest.
func TestPlacementDistribute(t *testing.T) {
	cases := map[string]struct {
		cluster *Cluster
		level   Level
		domain  string
		pods    int
		want    map[string]int
	}{
		"a rack: two nodes hold 5 pods, the two of least room": {
			cluster: makeCluster().Rack("z", "b", "r", 3, 8).Used("r-1", 0, 1).Used("r-2", 0, 1, 2, 3).Obj(),
			level:   LevelRack, domain: "z/b/r", pods: 5,
			want: map[string]int{"r-1": 3, "r-2": 2},
		},
		"a rack with partly used nodes first: every partly used node, least room first, then a free one": {
			cluster: makeCluster().Rack("z", "b", "r", 3, 8).Used("r-1", 0, 1).Used("r-2", 0, 1, 2, 3).PartlyUsedFirst().Obj(),
			level:   LevelRack, domain: "z/b/r", pods: 6,
			want: map[string]int{"r-1": 3, "r-2": 2, "r-0": 1},
		},
		"a rack: the one node that holds the pods, of least room": {
			cluster: makeCluster().Rack("z", "b", "r", 3, 8).Used("r-2", 0, 1, 2, 3).Obj(),
			level:   LevelRack, domain: "z/b/r", pods: 2,
			want: map[string]int{"r-2": 2},
		},
		"a block: the roomiest rack first, then the best fit for the rest": {
			cluster: makeCluster().Rack("z", "b", "r1", 2, 8).Rack("z", "b", "r2", 1, 8).Rack("z", "b", "r3", 1, 8).Used("r3-0", 0, 1, 2, 3).Obj(),
			level:   LevelBlock, domain: "z/b", pods: 10,
			want: map[string]int{"r1-0": 4, "r1-1": 4, "r3-0": 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPlacement(tc.cluster, Gang{Key: "ns/job", Pods: tc.pods, GPUsPerPod: 2}, nil)
			takes := p.distribute(nil, tc.level, p.domain(t, tc.level, tc.domain), int32(tc.pods))
			if diff := cmp.Diff(tc.want, p.pods(takes)); diff != "" {
				t.Errorf("distribute (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPlacementStrands: a plan's stranded GPUs (free GPUs left on partly used nodes, less those it
// fills) and the fewest any plan in a rack can strand, which the rack's best plan reaches.
func TestPlacementStrands(t *testing.T) {
	c := makeCluster().Rack("z", "b", "r1", 2, 8).Used("r1-0", 0, 1, 2, 3).Rack("z", "b", "r2", 2, 8).Obj()
	p := newPlacement(c, Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 2}, nil)
	r1, r2 := p.domain(t, LevelRack, "z/b/r1"), p.domain(t, LevelRack, "z/b/r2")
	// r1: two pods fill r1-0's 4 stranded GPUs, the third opens r1-1 and leaves 6 there: 2.
	// r2: the three pods open a free node and leave 2: 2 more than r2 fills, 2.
	cases := map[string]struct {
		rack          int32
		least, strand int32
		racks         int
	}{
		"the rack with a partly used node": {rack: r1, least: 2, strand: 2, racks: 1},
		"the free rack":                    {rack: r2, least: 2, strand: 2, racks: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			takes := p.distribute(nil, LevelRack, tc.rack, 3)
			if got := p.leastStrands(tc.rack); got != tc.least {
				t.Errorf("leastStrands = %d, want %d", got, tc.least)
			}
			if got := p.strands(takes); got != tc.strand {
				t.Errorf("strands(%v) = %d, want %d", p.pods(takes), got, tc.strand)
			}
			if got := p.racksOf(takes); got != tc.racks {
				t.Errorf("racksOf(%v) = %d, want %d", p.pods(takes), got, tc.racks)
			}
		})
	}
	across := []take{{unit{int(p.domain(t, LevelNode, "r1-0")), 0}, 1}, {unit{int(p.domain(t, LevelNode, "r2-1")), 0}, 1}}
	if got := p.racksOf(across); got != 2 {
		t.Errorf("racksOf a plan on r1-0 and r2-1 = %d, want 2", got)
	}
}
