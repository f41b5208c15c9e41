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
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPreemptAgainstEverySubset compares Preempt, on small random clusters, with a search of every
// subset of the lower-priority victims: Preempt must find a set whenever one exists, its set must
// make room, and no set may be cheaper by the order the issue asks for (fewest victims, then the
// lowest priority, the least work lost, the fewest GPUs).
func TestPreemptAgainstEverySubset(t *testing.T) {
	t.Run("weighing every set", func(t *testing.T) { preemptAgainstEverySubset(t, true) })
	// Past exactSubsets, the greedy choice must still find a set that makes room whenever one
	// exists, though not always the cheapest.
	t.Run("greedy", func(t *testing.T) {
		defer func(n int) { exactSubsets = n }(exactSubsets)
		exactSubsets = 0
		preemptAgainstEverySubset(t, false)
	})
}

func preemptAgainstEverySubset(t *testing.T, cheapest bool) {
	rng := rand.New(rand.NewPCG(7, 11))
	sizes := []int{1, 2, 4, 8}
	for run := range 3000 {
		w := makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 1+rng.IntN(2), 8)
		if rng.IntN(3) == 0 {
			w.MaxPods(w.Nodes[rng.IntN(len(w.Nodes))].Name, 1)
		}
		// Victims take GPUs in pods of random sizes on random nodes until the cluster is mostly full.
		randomVictims(w, rng, 2+rng.IntN(5))
		// Now and then a node that only evicting one or two of its victims opens (their pods stand
		// in the gang's way), as the scheduler builds it for inter-pod terms and host ports.
		if rng.IntN(3) == 0 {
			nd := &w.Nodes[rng.IntN(len(w.Nodes))]
			for _, h := range nd.Holders {
				if !slices.Contains(nd.Requires, h.Victim) && len(nd.Requires) < 2 && rng.IntN(2) == 0 {
					nd.Requires = append(nd.Requires, h.Victim)
				}
			}
		}
		// Now and then the gang's pods ask CPUs (10 to 60 of 96) that victims' pods hold, 12 a GPU,
		// and each node has a few spare.
		if rng.IntN(3) == 0 {
			need := int64(10 + rng.IntN(51))
			w.Cluster.Needs = []int64{need}
			// And now and then a pod of no GPUs holds 30 CPUs of a node.
			if rng.IntN(2) == 0 {
				w.Victim("ns/cpu-job", int32(rng.IntN(4)), time.Duration(rng.IntN(4))*time.Hour,
					map[string][][]int{w.Nodes[rng.IntN(len(w.Nodes))].Name: {{}}})
			}
			for i := range w.Nodes {
				nd := &w.Nodes[i]
				spare := int64(rng.IntN(21))
				nd.Spare = []int64{spare}
				for j := range nd.Holders {
					nd.Holders[j].Uses = []int64{12 * int64(nd.Holders[j].GPUs.Len())}
					if nd.Holders[j].GPUs == 0 {
						nd.Holders[j].Uses[0] = 30
					}
				}
				// A MaxPods of 1 drawn above stands for the pods' spread.
				nd.SpreadCap = nd.MaxPods
				nd.MaxPods = maxPodsOf(spare, need, nd.SpreadCap)
			}
		}
		c := w.Obj()
		g := Gang{Key: "ns/job", Pods: 1 + rng.IntN(3), GPUsPerPod: sizes[rng.IntN(len(sizes))], Priority: 3}
		if rng.IntN(2) == 0 {
			g.Level, g.Required = LevelRack, true
		}
		name := fmt.Sprintf("run %d: %s", run, describeCluster(c, g))

		best, bestCost, found := bruteForce(c, g, nil)
		got, err := c.Preempt(g)
		var u *Unplaceable
		switch {
		case err != nil && !errors.As(err, &u):
			t.Fatalf("%s: Preempt() error %v", name, err)
		case err != nil && found:
			t.Fatalf("%s: Preempt() found nothing; evicting %v makes room", name, best)
		case err != nil:
			continue
		case !found:
			t.Fatalf("%s: Preempt() evicts %v where no set makes room", name, got.Victims)
		}
		if _, err := placeAfter(c, g, got.Victims); err != nil {
			t.Fatalf("%s: Preempt()'s victims %v make no room: %v", name, got.Victims, err)
		}
		if cost := c.costOf(got.Victims, LevelNone); cheapest && cost.compare(bestCost) > 0 {
			t.Errorf("%s: Preempt() evicts %v (cost %+v), but %v costs %+v", name, got.Victims, cost, best, bestCost)
		}
	}
}

// bruteForce tries every subset of the victims of lower priority than g and returns the cheapest
// one that lets g be placed, by place (nil: placeAfter, written out here).
func bruteForce(c *Cluster, g Gang, place func(victims []int) error) ([]int, preemptionCost, bool) {
	if place == nil {
		place = func(victims []int) error {
			_, err := placeAfter(c, g, victims)
			return err
		}
	}
	var lower []int
	for v := range c.Victims {
		if c.Victims[v].Priority < g.Priority {
			lower = append(lower, v)
		}
	}
	var best []int
	var bestCost preemptionCost
	found := false
	for mask := range 1 << len(lower) {
		var set []int
		for i, v := range lower {
			if mask&(1<<i) != 0 {
				set = append(set, v)
			}
		}
		if place(set) != nil {
			continue
		}
		if cost := c.costOf(set, LevelNone); !found || cost.compare(bestCost) < 0 {
			best, bestCost, found = set, cost, true
		}
	}
	return best, bestCost, found
}

// randomVictims adds n victims of random priority and work lost that take GPUs in pods of 1, 2, 4
// or 8 on random nodes of w, as far as the nodes' GPUs go.
func randomVictims(w *clusterWrapper, rng *rand.Rand, n int) {
	sizes := []int{1, 2, 4, 8}
	free := make(map[string][]int, len(w.Nodes))
	for _, n := range w.Nodes {
		free[n.Name] = slices.Clone(all8)
	}
	for v := range n {
		holds := map[string][][]int{}
		for range 1 + rng.IntN(3) {
			n := w.Nodes[rng.IntN(len(w.Nodes))].Name
			k := min(sizes[rng.IntN(len(sizes))], len(free[n]))
			if k == 0 {
				continue
			}
			holds[n] = append(holds[n], free[n][:k])
			free[n] = free[n][k:]
		}
		if len(holds) > 0 {
			w.Victim(fmt.Sprintf("ns/v%d", v), int32(rng.IntN(4)), time.Duration(rng.IntN(4))*time.Hour, holds)
		}
	}
}

// placeAfter places g on c once victims are gone, written out here rather than through
// Cluster.placeAfter: a copy of c whose nodes with Spare get the MaxPods their spare CPUs and the
// victims' give.
func placeAfter(c *Cluster, g Gang, victims []int) (*Plan, error) {
	cp := &Cluster{Nodes: slices.Clone(c.Nodes), Victims: c.Victims}
	for i := range cp.Nodes {
		nd := &cp.Nodes[i]
		if nd.Spare == nil {
			continue
		}
		cpus := nd.Spare[0]
		for _, h := range nd.Holders {
			if slices.Contains(victims, h.Victim) {
				cpus += h.Uses[0]
			}
		}
		nd.MaxPods, nd.Spare = maxPodsOf(cpus, c.Needs[0], nd.SpreadCap), nil
	}
	return cp.place(g, freedBy(cp, victims))
}

// maxPodsOf is how many pods asking need CPUs fit in cpus, within limit (0: none), as MaxPods
// says it: -1 for none.
func maxPodsOf(cpus, need int64, limit int) int {
	n := int(cpus / need)
	if limit > 0 {
		n = min(n, limit)
	}
	if n == 0 || limit < 0 {
		return -1
	}
	return n
}

// freedBy is every node's GPUs for the gang once victims are gone, written out here rather than
// through Cluster.freedBy: a node that Requires a victim not among them has none.
func freedBy(c *Cluster, victims []int) []GPUSet {
	free := make([]GPUSet, len(c.Nodes))
	for i := range c.Nodes {
		if slices.ContainsFunc(c.Nodes[i].Requires, func(v int) bool { return !slices.Contains(victims, v) }) {
			continue
		}
		free[i] = c.Nodes[i].Free
		for _, h := range c.Nodes[i].Holders {
			if slices.Contains(victims, h.Victim) {
				free[i] |= h.GPUs
			}
		}
	}
	return free
}

func describeCluster(c *Cluster, g Gang) string {
	s := fmt.Sprintf("gang %d×%d prio %d level %v required %v needs %v;", g.Pods, g.GPUsPerPod, g.Priority, g.Level, g.Required, c.Needs)
	for _, n := range c.Nodes {
		s += fmt.Sprintf(" %s(rack %s, free %v, max %d, spare %v, excluded %v, requires %v):", n.Name, n.Rack, n.Free.Indices(), n.MaxPods, n.Spare, n.Excluded, n.Requires)
		for _, h := range n.Holders {
			s += fmt.Sprintf(" v%d%v uses %v", h.Victim, h.GPUs.Indices(), h.Uses)
		}
	}
	for i, v := range c.Victims {
		s += fmt.Sprintf("; v%d=%s p%d %v %dgpu", i, v.Key, v.Priority, v.WorkLost, v.GPUs)
	}
	return s
}

// TestPreemptForPodsOfDifferentCPUAgainstEverySubset checks Preempt for gangs whose pods ask
// different CPUs (Gang.PodNeeds: a master beside its workers) on small random clusters whose
// victims hold CPUs with their GPUs: whenever evicting some subset of the lower-priority victims
// lets the planner place the gang, Preempt must find a set, and its set must make room.
func TestPreemptForPodsOfDifferentCPUAgainstEverySubset(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	sizes := []int{1, 2, 4, 8}
	found, notCheapest := 0, 0
	for run := range 2000 {
		w := makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 1+rng.IntN(2), 8)
		g := Gang{Key: "ns/job", Pods: 2 + rng.IntN(3), GPUsPerPod: sizes[rng.IntN(3)], Priority: 3}
		most := int64(0)
		for range g.Pods {
			need := int64(10 + rng.IntN(51))
			g.PodNeeds = append(g.PodNeeds, []int64{need})
			most = max(most, need)
		}
		if rng.IntN(2) == 0 {
			g.Level, g.Required = LevelRack, true
		}
		w.Cluster.Needs = []int64{most}
		// Victims take GPUs, and 12 CPUs with each, in pods of random sizes on random nodes.
		randomVictims(w, rng, 2+rng.IntN(4))
		// 96 CPUs a node: what its victims' pods do not hold, less what other pods hold.
		for i := range w.Nodes {
			nd := &w.Nodes[i]
			spare := int64(96 - rng.IntN(21))
			for j := range nd.Holders {
				nd.Holders[j].Uses = []int64{12 * int64(nd.Holders[j].GPUs.Len())}
				spare -= nd.Holders[j].Uses[0]
			}
			nd.Spare = []int64{max(spare, 0)}
			nd.MaxPods = maxPodsOf(max(spare, 0), most, 0)
		}
		c := w.Obj()
		name := fmt.Sprintf("run %d: %s pod needs %v", run, describeCluster(c, g), g.PodNeeds)
		norm, err := g.normalize()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}

		// The planner's own placement of the gang's pods, so that only the search is checked.
		best, bestCost, exists := bruteForce(c, norm, func(victims []int) error {
			_, err := c.placeAfter(norm, victims)
			return err
		})
		got, err := c.Preempt(g)
		var u *Unplaceable
		switch {
		case err != nil && !errors.As(err, &u):
			t.Fatalf("%s: Preempt() error %v", name, err)
		case err != nil && exists:
			t.Fatalf("%s: Preempt() found nothing; evicting %v makes room", name, best)
		case err != nil:
			continue
		case !exists:
			t.Fatalf("%s: Preempt() evicts %v where no set makes room", name, got.Victims)
		}
		found++
		if _, err := c.placeAfter(norm, got.Victims); err != nil {
			t.Fatalf("%s: Preempt()'s victims %v make no room: %v", name, got.Victims, err)
		}
		if c.costOf(got.Victims, LevelNone).compare(bestCost) > 0 {
			notCheapest++
		}
	}
	if found < 200 {
		t.Errorf("only %d of the random gangs needed and found a preemption: the test weighs too few", found)
	}
	t.Logf("%d preemptions found, %d of them dearer than the cheapest set", found, notCheapest)
}
