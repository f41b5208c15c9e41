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

package planner_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner/synth"
)

// half fills about half of a fleet with the mixed gang mix, the state a busy cluster is in.
func half(nodes int) *planner.Cluster {
	f := synth.DefaultFleet(nodes)
	c := f.Cluster()
	target := nodes * f.GPUsPerNode / 2
	used := 0
	for _, g := range synth.Gangs(1, 100000, synth.MixedWorkers) {
		if used+g.GPUs() > target {
			break
		}
		p, err := c.Place(planner.Gang{Key: g.Name, Pods: g.Workers, GPUsPerPod: g.GPUsPerWorker})
		if err != nil {
			continue
		}
		c.Apply(p, -1)
		used += g.GPUs()
	}
	return c
}

// BenchmarkPlace measures one whole-gang plan on a half-full fleet: the work PreFilter does for
// the first pod of a gang.
func BenchmarkPlace(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		c := half(nodes)
		for _, g := range []planner.Gang{
			{Key: "1x1", Pods: 1, GPUsPerPod: 1},
			{Key: "8x4", Pods: 8, GPUsPerPod: 4},
			{Key: "32x8-rack", Pods: 32, GPUsPerPod: 8, Level: planner.LevelRack},
			{Key: "64x8", Pods: 64, GPUsPerPod: 8},
			// A launcher of 1 GPU beside 32 workers of 8: pods of different counts.
			{Key: "1x1+32x8-rack", Pods: 33, PodGPUs: append([]int{1}, slices.Repeat([]int{8}, 32)...), Level: planner.LevelRack},
			{Key: "1x1+8x4", Pods: 9, PodGPUs: append([]int{1}, slices.Repeat([]int{4}, 8)...)},
		} {
			b.Run(fmt.Sprintf("nodes=%d/gang=%s", nodes, g.Key), func(b *testing.B) {
				for b.Loop() {
					if _, err := c.Place(g); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPlanScale plans 1,000 gangs of the fits mix (rack preferred, as the operator asks), each
// on the same half-full fleet, at 1,000 to 50,000 nodes, and reports the CPU time of one gang's
// plan (its thread's, which other processes on a loaded machine do not inflate as they do the wall
// time), p50 and p99 over every plan of every iteration: how planning grows with the fleet.
func BenchmarkPlanScale(b *testing.B) {
	cpu := func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ts.Nano())
	}
	for _, nodes := range []int{1000, 5000, 10000, 20000, 50000} {
		c := half(nodes)
		gangs := synth.Gangs(42, 1000, synth.FittingWorkers)
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			// The thread's CPU clock holds only while the goroutine stays on it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var took []time.Duration
			for b.Loop() {
				for _, g := range gangs {
					began := cpu()
					if _, err := c.Place(planner.Gang{Key: g.Name, Pods: g.Workers, GPUsPerPod: g.GPUsPerWorker, Level: planner.LevelRack}); err != nil {
						b.Fatal(err)
					}
					took = append(took, cpu()-began)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-cpu-ms/gang")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-cpu-ms/gang")
		})
	}
}

// BenchmarkPlaceMix places a seed-fixed mix of 1,000 gangs of 1–64 workers one after another on
// an empty fleet and reports the quality of the result: gangs left unplaced, racks per placed gang
// and free GPUs stranded on partly used nodes, at the end and on average after each placement (the
// end is one moment of a count that moves with each gang), and split gangs: those one innermost
// domain (rack, or clique) would hold, placed over several. The clique mix runs again without its
// clique level: gangs that fit one NVL72 clique split over two.
func BenchmarkPlaceMix(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		for _, mix := range synth.Mixes {
			gangs := synth.Gangs(42, 1000, mix)
			list := make([]planner.Gang, len(gangs))
			for i, g := range gangs {
				list[i] = planner.Gang{Key: g.Name, Pods: g.Workers, GPUsPerPod: g.GPUsPerWorker}
			}
			f := mix.FleetOf(nodes)
			variants := []string{""}
			if f.CliqueNodes > 0 {
				// The same fleet placed by zone, block and rack alone, for the clique level's worth.
				variants = append(variants, "-without-clique-level")
			}
			for _, v := range variants {
				cluster := func() *planner.Cluster {
					c := f.Cluster()
					if v != "" {
						c.Levels = nil
						for i := range c.Nodes {
							c.Nodes[i].Domains = nil
						}
					}
					return c
				}
				b.Run(fmt.Sprintf("nodes=%d/mix=%s%s", nodes, mix.Name, v), func(b *testing.B) {
					// The mean, from a run of its own: counting after each gang would weigh on the time.
					c := cluster()
					// split counts the gangs that one innermost domain of the fleet (a rack, a
					// clique) would hold, placed over several.
					sum, placements, split := 0, 0, 0
					placeInTurn(c, list, func(i int, p *planner.Plan) {
						sum += c.Stranded()
						placements++
						in := map[string]bool{}
						for _, a := range p.Assignments {
							in[f.Node(a.NodeIndex()).Innermost()] = true
						}
						if g := gangs[i]; g.Workers <= f.InnermostNodes()*(f.GPUsPerNode/g.GPUsPerWorker) && len(in) > 1 {
							split++
						}
					})
					var unplaced, racks, stranded int
					for b.Loop() {
						c := cluster()
						unplaced, racks = placeInTurn(c, list, nil)
						stranded = c.Stranded()
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(gangs)), "ns/gang")
					b.ReportMetric(float64(unplaced), "unplaced")
					b.ReportMetric(float64(racks)/float64(max(len(gangs)-unplaced, 1)), "racks/gang")
					b.ReportMetric(float64(stranded), "stranded-GPUs")
					b.ReportMetric(float64(sum)/float64(max(placements, 1)), "mean-stranded-GPUs")
					b.ReportMetric(float64(split), "split-gangs")
				})
			}
		}
	}
}

// BenchmarkPlaceSeeds places the fits and mixed mixes as BenchmarkPlaceMix does, on 20 draws
// (seeds 1–20) instead of one, beside first fit on the same gangs (each pod on the first node with
// room, a gang over any racks, whole or not at all) and beside rackBound: GPUs stranded on partly
// used nodes at the end and on average after each gang placed, racks per gang and gangs placed,
// each the mean over the draws. One draw's end is one moment of a count that moves with each gang;
// the draws show the trend a rule change makes.
func BenchmarkPlaceSeeds(b *testing.B) {
	const draws = 20
	for _, nodes := range []int{1000, 5000} {
		for _, mix := range []synth.Mix{synth.FittingWorkers, synth.MixedWorkers} {
			b.Run(fmt.Sprintf("nodes=%d/mix=%s", nodes, mix.Name), func(b *testing.B) {
				var end, mean, racks, placed, ffEnd, ffMean, rbEnd, rbMean float64
				for b.Loop() {
					end, mean, racks, placed, ffEnd, ffMean, rbEnd, rbMean = 0, 0, 0, 0, 0, 0, 0, 0
					for seed := uint64(1); seed <= draws; seed++ {
						gangs := synth.Gangs(seed, 1000, mix)
						f := mix.FleetOf(nodes)
						c := f.Cluster()
						list := make([]planner.Gang, len(gangs))
						for i, g := range gangs {
							list[i] = planner.Gang{Key: g.Name, Pods: g.Workers, GPUsPerPod: g.GPUsPerWorker}
						}
						sum, n := 0, 0
						unplaced, r := placeInTurn(c, list, func(int, *planner.Plan) {
							sum += c.Stranded()
							n++
						})
						end += float64(c.Stranded())
						mean += float64(sum) / float64(max(n, 1))
						racks += float64(r) / float64(max(n, 1))
						placed += float64(len(list) - unplaced)
						e, m := firstFit(nodes, f.GPUsPerNode, gangs)
						ffEnd += float64(e)
						ffMean += m
						e, m = rackBound(f, gangs)
						rbEnd += float64(e)
						rbMean += m
					}
				}
				b.ReportMetric(end/draws, "stranded-GPUs")
				b.ReportMetric(mean/draws, "mean-stranded-GPUs")
				b.ReportMetric(racks/draws, "racks/gang")
				b.ReportMetric(placed/draws, "placed")
				b.ReportMetric(ffEnd/draws, "first-fit-stranded-GPUs")
				b.ReportMetric(ffMean/draws, "first-fit-mean-stranded-GPUs")
				b.ReportMetric(rbEnd/draws, "rack-bound-stranded-GPUs")
				b.ReportMetric(rbMean/draws, "rack-bound-mean-stranded-GPUs")
			})
		}
	}
}

// firstFit places gangs on nodes of gpus GPUs each, each pod on the first node with room, a gang
// whole or not at all, and returns the GPUs stranded on partly used nodes at the end and on
// average after each gang placed.
func firstFit(nodes, gpus int, gangs []synth.Gang) (end int, mean float64) {
	free := make([]int, nodes)
	for i := range free {
		free[i] = gpus
	}
	saved := make([]int, nodes)
	sum, placed := 0, 0
	for _, g := range gangs {
		copy(saved, free)
		ok := true
		for range g.Workers {
			i := slices.IndexFunc(free, func(f int) bool { return f >= g.GPUsPerWorker })
			if i < 0 {
				ok = false
				break
			}
			free[i] -= g.GPUsPerWorker
		}
		if !ok {
			copy(free, saved)
			continue
		}
		sum += strandedOn(free, gpus)
		placed++
	}
	return strandedOn(free, gpus), float64(sum) / float64(max(placed, 1))
}

// rackBound places gangs as the planner would without its node locality, to show what keeping each
// gang in the fewest racks alone costs in stranded GPUs. A gang takes the fewest racks (several: those of
// most room for its pods, whole or not at all); inside a rack each pod goes to the node of least
// room that holds it, whatever node its gang's other pods are on; a gang one rack holds goes to the
// rack it leaves with the fewest GPUs stranded on partly used nodes, then to the fullest. It returns
// the GPUs stranded at the end and on average after each gang placed.
func rackBound(f synth.Fleet, gangs []synth.Gang) (end int, mean float64) {
	free := make([]int, f.Nodes)
	for i := range free {
		free[i] = f.GPUsPerNode
	}
	rack := func(r int) []int { return free[r*f.NodesPerRack : min((r+1)*f.NodesPerRack, f.Nodes)] }
	// put places pods of gpus GPUs on nodes, each on the node of least room, and returns the pods
	// left.
	put := func(nodes []int, gpus, pods int) int {
		for ; pods > 0; pods-- {
			best := -1
			for i, x := range nodes {
				if x >= gpus && (best < 0 || x < nodes[best]) {
					best = i
				}
			}
			if best < 0 {
				return pods
			}
			nodes[best] -= gpus
		}
		return 0
	}
	racks := (f.Nodes + f.NodesPerRack - 1) / f.NodesPerRack
	order, rooms := make([]int, racks), make([]int, racks)
	saved := make([]int, f.NodesPerRack)
	sum, placed := 0, 0
	for _, g := range gangs {
		for r := range racks {
			order[r], rooms[r] = r, 0
			for _, x := range rack(r) {
				rooms[r] += x / g.GPUsPerWorker
			}
		}
		slices.SortStableFunc(order, func(a, b int) int { return rooms[b] - rooms[a] })
		k, fits := 0, 0
		for ; fits < g.Workers && k < racks; k++ {
			fits += rooms[order[k]]
		}
		if fits < g.Workers {
			continue
		}
		chosen := order[:k]
		if k == 1 {
			best, bestStrands, bestFree := -1, 0, 0
			for r := range racks {
				if rooms[r] < g.Workers {
					continue
				}
				nodes := rack(r)
				copy(saved, nodes)
				before, total := strandedOn(nodes, f.GPUsPerNode), 0
				for _, x := range nodes {
					total += x
				}
				put(nodes, g.GPUsPerWorker, g.Workers)
				after := strandedOn(nodes, f.GPUsPerNode)
				copy(nodes, saved)
				if s := after - before; best < 0 || s < bestStrands || s == bestStrands && total < bestFree {
					best, bestStrands, bestFree = r, s, total
				}
			}
			chosen = []int{best}
		}
		left := g.Workers
		for _, r := range chosen {
			left = put(rack(r), g.GPUsPerWorker, left)
		}
		sum += strandedOn(free, f.GPUsPerNode)
		placed++
	}
	return strandedOn(free, f.GPUsPerNode), float64(sum) / float64(max(placed, 1))
}

// strandedOn counts the free GPUs of partly used nodes: free holds each node's free GPUs, of gpus
// a node.
func strandedOn(free []int, gpus int) int {
	n := 0
	for _, f := range free {
		if f != 0 && f != gpus {
			n += f
		}
	}
	return n
}

// placeInTurn places gangs one after another on c, as the scheduler would, and counts the gangs
// left unplaced and the racks of the placed ones; placed, when set, is called with the index and
// plan of each gang placed.
func placeInTurn(c *planner.Cluster, gangs []planner.Gang, placed func(int, *planner.Plan)) (unplaced, racks int) {
	for i, g := range gangs {
		p, err := c.Place(g)
		if err != nil {
			unplaced++
			continue
		}
		c.Apply(p, -1)
		racks += p.Racks()
		if placed != nil {
			placed(i, p)
		}
	}
	return unplaced, racks
}

// BenchmarkPreempt measures victim selection for a high-priority gang on a fleet that
// lower-priority gangs fill: an 8×8 gang, and a 60-CPU master beside 19 workers of 30 CPUs and 4
// GPUs that requires one rack, on the same fleet with 96 CPUs a node and 12 held with each GPU.
// Counted at its master's CPUs no rack holds the second gang (16 pods a rack), so its victims are
// found by placing its own pods.
func BenchmarkPreempt(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		c := synth.DefaultFleet(nodes).Cluster()
		for i, g := range synth.Gangs(7, 100000, synth.MixedWorkers) {
			p, err := c.Place(planner.Gang{Key: g.Name, Pods: g.Workers, GPUsPerPod: g.GPUsPerWorker})
			if err != nil {
				if c.Stranded() == 0 || i > 5000 {
					break
				}
				continue
			}
			c.Victims = append(c.Victims, planner.Victim{Key: g.Name, Priority: int32(i % 3), GPUs: g.GPUs()})
			c.Apply(p, len(c.Victims)-1)
		}
		gang := planner.Gang{Key: "urgent", Pods: 8, GPUsPerPod: 8, Level: planner.LevelRack, Required: true, Priority: 10}
		b.Run(fmt.Sprintf("nodes=%d/victims=%d", nodes, len(c.Victims)), func(b *testing.B) {
			for b.Loop() {
				if _, err := c.Preempt(gang); err != nil {
					b.Fatal(err)
				}
			}
		})

		cpu := &planner.Cluster{Nodes: slices.Clone(c.Nodes), Victims: c.Victims, Needs: []int64{60}}
		for i := range cpu.Nodes {
			nd := &cpu.Nodes[i]
			nd.Holders = slices.Clone(nd.Holders)
			spare := int64(96)
			for j := range nd.Holders {
				nd.Holders[j].Uses = []int64{12 * int64(nd.Holders[j].GPUs.Len())}
				spare -= nd.Holders[j].Uses[0]
			}
			nd.Spare = []int64{spare}
			if nd.MaxPods = int(spare / 60); nd.MaxPods == 0 {
				nd.MaxPods = -1
			}
		}
		master := planner.Gang{Key: "urgent-master", Pods: 20, GPUsPerPod: 4, Level: planner.LevelRack, Required: true, Priority: 10,
			PodNeeds: append([][]int64{{60}}, slices.Repeat([][]int64{{30}}, 19)...)}
		b.Run(fmt.Sprintf("nodes=%d/victims=%d/gang=master-more-CPU", nodes, len(c.Victims)), func(b *testing.B) {
			var victims int
			for b.Loop() {
				p, err := cpu.Preempt(master)
				if err != nil {
					b.Fatal(err)
				}
				victims = len(p.Victims)
			}
			b.ReportMetric(float64(victims), "victims")
		})
	}
}

// BenchmarkPlaceLaunchers places the fits mix with a 1-GPU launcher added to every gang (an MPI or
// DeepSpeed launcher beside its workers), one gang after another on an empty fleet, in two ways
// in the same run: each pod at its own GPU count (own-counts), and every pod at the largest, as
// the planner did before it took PodGPUs (at-largest). It reports the gangs left unplaced, racks
// per placed gang, GPUs stranded on partly used nodes and GPUs a plan holds that its pods do not
// ask.
func BenchmarkPlaceLaunchers(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		gangs := synth.Gangs(42, nodes/5, synth.FittingWorkers)
		for _, way := range []string{"own-counts", "at-largest"} {
			list := make([]planner.Gang, len(gangs))
			for i, g := range gangs {
				list[i] = planner.Gang{Key: g.Name, Pods: g.Workers + 1,
					PodGPUs: append([]int{1}, slices.Repeat([]int{g.GPUsPerWorker}, g.Workers)...)}
				if way == "at-largest" {
					list[i].PodGPUs, list[i].GPUsPerPod = nil, g.GPUsPerWorker
				}
			}
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, way), func(b *testing.B) {
				var unplaced, racks, stranded, idle int
				for b.Loop() {
					c := synth.DefaultFleet(nodes).Cluster()
					idle = 0
					unplaced, racks = placeInTurn(c, list, func(i int, _ *planner.Plan) {
						if way == "at-largest" {
							// The launcher's plan holds a worker's GPUs.
							idle += gangs[i].GPUsPerWorker - 1
						}
					})
					stranded = c.Stranded()
				}
				b.ReportMetric(float64(unplaced), "unplaced")
				b.ReportMetric(float64(racks)/float64(max(len(gangs)-unplaced, 1)), "racks/gang")
				b.ReportMetric(float64(stranded), "stranded-GPUs")
				b.ReportMetric(float64(idle), "idle-GPUs")
			})
		}
	}
}
