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

package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner/synth"
)

// recorder notes when each pod is first seen bound, and where.
type recorder struct {
	mu    sync.Mutex
	bound map[string]binding
	last  time.Time
	// gpus is each gang's GPUs per worker, by name: a DRA worker asks for none of nvidia.com/gpu.
	gpus map[string]int
}

type binding struct {
	node string
	at   time.Time
	gpus int
}

func newRecorder(spec runSpec) *recorder {
	r := &recorder{bound: map[string]binding{}, gpus: map[string]int{}}
	for _, g := range spec.gangs {
		r.gpus[g.Name] = g.GPUsPerWorker
	}
	return r
}

func (r *recorder) observe(p *corev1.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.bound[p.Name]; ok {
		return
	}
	r.bound[p.Name] = binding{node: p.Spec.NodeName, at: now, gpus: r.gpus[p.Labels[convoy.LabelJobName]]}
	r.last = now
}

func (r *recorder) progress() (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bound), r.last
}

// Result is one contender's run.
type Result struct {
	Scheduler Scheduler `json:"scheduler"`
	Nodes     int       `json:"nodes"`
	Mix       string    `json:"mix"`
	Gangs     int       `json:"gangs"`
	// Namespaces is how many namespaces the gangs were spread over.
	Namespaces int `json:"namespaces"`
	// Stream is whether the gangs were created while the contender ran (-arrival stream).
	Stream bool `json:"stream,omitempty"`
	// ArrivalRate is the gangs arriving per second when streaming (-rate); 0 for as fast as the
	// API server took them.
	ArrivalRate float64 `json:"arrivalGangsPerSecond,omitempty"`
	Pods        int     `json:"pods"`
	// DemandGPUs is what all gangs ask; CapacityGPUs what the fleet has.
	DemandGPUs   int `json:"demandGPUs"`
	CapacityGPUs int `json:"capacityGPUs"`

	BoundPods  int     `json:"boundPods"`
	PodsPerSec float64 `json:"podsPerSecond"`
	// GangP50 and GangP99 are seconds from a gang's last pod created to its last pod bound, over
	// the gangs placed whole.
	GangP50 float64 `json:"gangP50Seconds"`
	GangP99 float64 `json:"gangP99Seconds"`
	// Placed gangs have every pod bound; Partial some but not all; Unplaced none. UnplacedFit are
	// the gangs not placed whole that still fit in what is left free, one after another.
	Placed      int `json:"placedGangs"`
	Partial     int `json:"partialGangs"`
	Unplaced    int `json:"unplacedGangs"`
	UnplacedFit int `json:"unplacedThatFit"`
	// RacksPerGang is the mean number of racks (on a fleet of cliques, cliques) of a placed gang;
	// MinRacksPerGang the mean of the fewest each could have used.
	RacksPerGang    float64 `json:"racksPerGang"`
	MinRacksPerGang float64 `json:"minRacksPerGang"`
	// NodesPerGang and MinNodesPerGang are the same for nodes.
	NodesPerGang    float64 `json:"nodesPerGang"`
	MinNodesPerGang float64 `json:"minNodesPerGang"`
	// Stranded is the free GPUs on partly used nodes at the end.
	Stranded int `json:"strandedGPUs"`
	// MeanStranded is the mean of the same count for the gangs placed whole, after each in the
	// order they were placed (of their first binds): the end is one moment of a count that moves
	// with every gang.
	MeanStranded float64 `json:"meanStrandedGPUs"`
	// UsedGPUs is the GPUs of the bound pods at the end.
	UsedGPUs int `json:"usedGPUs"`
	// FirstBind is seconds from the contender's start to its first pod bound.
	FirstBind float64 `json:"firstBindSeconds"`
	// APIWrites is the API server's write requests while the contender ran, but for the pods and
	// PodGroups the benchmark creates; Writes the same by verb and resource; WritesPerPod is
	// APIWrites per pod bound.
	APIWrites    int            `json:"apiWrites"`
	WritesPerPod float64        `json:"apiWritesPerBoundPod"`
	Writes       map[string]int `json:"writes"`
	// Reads is the API server's read requests (GET, LIST, WATCH) while the contender ran, by verb
	// and resource.
	Reads map[string]int `json:"reads"`
	// BindingMillis is the API server's mean time serving a binding.
	BindingMillis float64 `json:"bindingMilliseconds"`
	// CPU is the CPU seconds each process used while the contender ran: the control plane's by
	// their names in test/framework, "scheduler" for Convoy's and Coscheduling's, "benchmark" for
	// this process (its informers, and the binder contenders).
	CPU map[string]float64 `json:"cpuSeconds"`
	// CPUToLastBind is the same from the contender's start to the first reading (once a second)
	// after its last bind: the binding, without the stall that ends the run, in which the API
	// server may still serve the contender's status writes for the pods it could not place.
	CPUToLastBind map[string]float64 `json:"cpuSecondsToLastBind"`
	// PeakRSSMiB is the scheduler's peak resident set size (VmHWM); 0 for the binders.
	PeakRSSMiB float64 `json:"schedulerPeakRSSMiB,omitempty"`
	// Plans is what Convoy's scheduler reports of its plans in its metrics; nil for the others.
	Plans *Plans `json:"plans,omitempty"`
	// MachineMillis is machineSpeed just before the contender started: how fast this machine was.
	MachineMillis float64 `json:"machineMilliseconds"`
	// Seconds is how long the run lasted, from the first gang created.
	Seconds float64 `json:"seconds"`
	// Runs holds every run of the contender, when it ran more than once (-repeat); the fields
	// above are then those of the run of median pods/s.
	Runs []*Result `json:"runs,omitempty"`
}

// median returns the run of median pods/s (the lower of the middle two for an even count), with
// all runs in Runs. Whole runs, not field by field medians: a row of the table is one real run.
func median(runs []*Result) *Result {
	if len(runs) == 1 {
		return runs[0]
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b *Result) int { return cmp.Compare(a.PodsPerSec, b.PodsPerSec) })
	m := *sorted[(len(sorted)-1)/2]
	m.Runs = runs
	return &m
}

func measure(spec runSpec, sc Scheduler, rec *recorder, created []time.Time, start time.Time) *Result {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	f := spec.fleet
	r := &Result{Scheduler: sc, Nodes: f.Nodes, Mix: spec.mix.Name, Gangs: len(spec.gangs), Namespaces: max(spec.namespaces, 1), CapacityGPUs: f.Nodes * f.GPUsPerNode}
	used := map[string]int{}
	for _, b := range rec.bound {
		used[b.node] += b.gpus
	}
	rackOf := map[string]string{}
	for i := range f.Nodes {
		w := f.Node(i)
		rackOf[w.Name] = w.Innermost()
	}
	var latencies []float64
	var racks, minRacks, nodes, minNodes int
	var lastBind, firstBind time.Time
	for _, b := range rec.bound {
		if firstBind.IsZero() || b.at.Before(firstBind) {
			firstBind = b.at
		}
	}
	if !firstBind.IsZero() {
		r.FirstBind = firstBind.Sub(start).Seconds()
	}
	var unplaced []planner.Gang
	for i, g := range spec.gangs {
		r.Pods += g.Workers
		r.DemandGPUs += g.GPUs()
		var last time.Time
		bound := 0
		gangRacks, gangNodes := map[string]bool{}, map[string]bool{}
		for w := range g.Workers {
			b, ok := rec.bound[fmt.Sprintf("%s-worker-%d", g.Name, w)]
			if !ok {
				continue
			}
			bound++
			gangRacks[rackOf[b.node]] = true
			gangNodes[b.node] = true
			if b.at.After(last) {
				last = b.at
			}
		}
		r.BoundPods += bound
		if last.After(lastBind) {
			lastBind = last
		}
		switch {
		case bound == g.Workers:
			r.Placed++
			latencies = append(latencies, max(last.Sub(created[i]).Seconds(), 0))
			racks += len(gangRacks)
			perRack := f.InnermostNodes() * (f.GPUsPerNode / g.GPUsPerWorker)
			minRacks += (g.Workers + perRack - 1) / perRack
			nodes += len(gangNodes)
			perNode := f.GPUsPerNode / g.GPUsPerWorker
			minNodes += (g.Workers + perNode - 1) / perNode
		case bound > 0:
			r.Partial++
		default:
			r.Unplaced++
		}
		if bound < g.Workers {
			unplaced = append(unplaced, planner.Gang{Key: g.Name, Pods: g.Workers - bound, GPUsPerPod: g.GPUsPerWorker})
		}
	}
	if r.Placed > 0 {
		r.RacksPerGang = float64(racks) / float64(r.Placed)
		r.MinRacksPerGang = float64(minRacks) / float64(r.Placed)
		r.NodesPerGang = float64(nodes) / float64(r.Placed)
		r.MinNodesPerGang = float64(minNodes) / float64(r.Placed)
	}
	slices.Sort(latencies)
	r.GangP50, r.GangP99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	if !lastBind.IsZero() {
		r.PodsPerSec = float64(r.BoundPods) / lastBind.Sub(start).Seconds()
	}
	r.Seconds = time.Since(start).Seconds()

	// What is left: stranded GPUs, and the unplaced gangs that would still fit.
	cl := f.Cluster()
	for i := range cl.Nodes {
		u := used[cl.Nodes[i].Name]
		cl.Nodes[i].Free = freeAfter(f, u)
	}
	r.Stranded = cl.Stranded()
	r.MeanStranded = meanStranded(spec, rec.bound)
	for _, u := range used {
		r.UsedGPUs += u
	}
	for _, g := range unplaced {
		if p, err := cl.Place(g); err == nil {
			cl.Apply(p, -1)
			r.UnplacedFit++
		}
	}
	return r
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// meanStranded replays the gangs placed whole in the order their first pods bound, each gang's pods
// at once, and averages the free GPUs on partly used nodes after each. That is the order they were
// placed in: a scheduler binds a gang's pods once it has placed them all, and the last bind of a
// large gang trails those of the small gangs placed after it. Gangs never placed whole are left
// out: the count is of the placements, not of the binds in flight.
func meanStranded(spec runSpec, bound map[string]binding) float64 {
	type gang struct {
		first time.Time
		pods  []binding
	}
	var whole []gang
	for _, g := range spec.gangs {
		var w gang
		for i := range g.Workers {
			b, ok := bound[fmt.Sprintf("%s-worker-%d", g.Name, i)]
			if !ok {
				break
			}
			w.pods = append(w.pods, b)
			if w.first.IsZero() || b.at.Before(w.first) {
				w.first = b.at
			}
		}
		if len(w.pods) == g.Workers {
			whole = append(whole, w)
		}
	}
	if len(whole) == 0 {
		return 0
	}
	slices.SortStableFunc(whole, func(a, b gang) int { return a.first.Compare(b.first) })
	// The planner's count, as for the end.
	cl := spec.fleet.Cluster()
	index := make(map[string]int, len(cl.Nodes))
	for i := range cl.Nodes {
		index[cl.Nodes[i].Name] = i
	}
	used := make([]int, len(cl.Nodes))
	sum := 0
	for _, g := range whole {
		for _, b := range g.pods {
			i, ok := index[b.node]
			if !ok {
				continue // not a node of the fleet
			}
			used[i] += b.gpus
			cl.Nodes[i].Free = freeAfter(spec.fleet, used[i])
		}
		sum += cl.Stranded()
	}
	return float64(sum) / float64(len(whole))
}

// freeAfter is the free GPUs of a node of the fleet whose pods hold used of them.
func freeAfter(f synth.Fleet, used int) planner.GPUSet {
	return planner.FirstGPUs(f.GPUsPerNode) &^ planner.FirstGPUs(used)
}

// apiServerPace says what the API server's CPU cost per write request over the run: a gauge of the
// machine's speed through the whole run, where the hash before the start sees one moment. Between
// runs of one contender, which write the same requests, it rises in the machine's slow spells.
func (r *Result) apiServerPace() string {
	s, ok := r.CPUToLastBind["kube-apiserver"]
	if !ok || r.APIWrites == 0 {
		return ""
	}
	return fmt.Sprintf("; the API server spent %.0f µs of CPU per write request to the last bind", 1e6*s/float64(r.APIWrites))
}

func (r *Result) line() string {
	keys := slices.Sorted(maps.Keys(r.Writes))
	writes := make([]string, 0, len(keys))
	for _, k := range keys {
		writes = append(writes, fmt.Sprintf("%s %d", k, r.Writes[k]))
	}
	keys = slices.Sorted(maps.Keys(r.Reads))
	reads := make([]string, 0, len(keys))
	for _, k := range keys {
		reads = append(reads, fmt.Sprintf("%s %d", k, r.Reads[k]))
	}
	names := slices.Sorted(maps.Keys(r.CPU))
	cpu := make([]string, 0, len(names))
	for _, n := range names {
		cpu = append(cpu, fmt.Sprintf("%s %.1f (%.1f)", n, r.CPU[n], r.CPUToLastBind[n]))
	}
	rss := ""
	if r.PeakRSSMiB > 0 {
		rss = fmt.Sprintf("; the scheduler's peak RSS %.0f MiB", r.PeakRSSMiB)
	}
	plans := ""
	if r.Plans != nil {
		plans = "\n   gang plans: " + r.Plans.String()
	}
	return fmt.Sprintf("   %s: %d/%d pods bound, %.0f pods/s, first bind %.1fs, gang p50 %.1fs p99 %.1fs, %d placed %d partial %d unplaced (%d would fit), %.2f racks/gang (min %.2f), %.2f nodes/gang (min %.2f), %d GPUs stranded (%.1f on average after each gang placed whole), %d of %d GPUs in use, %.0fs\n   API writes: %.2f per pod bound (%s); the API server served a binding in %.0f ms on average\n   API reads: %s\n   CPU seconds, in all (to the last bind): %s%s\n   machine: 64 MiB hashed in %.0f ms of CPU just before the start%s%s",
		r.Scheduler, r.BoundPods, r.Pods, r.PodsPerSec, r.FirstBind, r.GangP50, r.GangP99, r.Placed, r.Partial, r.Unplaced, r.UnplacedFit,
		r.RacksPerGang, r.MinRacksPerGang, r.NodesPerGang, r.MinNodesPerGang, r.Stranded, r.MeanStranded, r.UsedGPUs, r.CapacityGPUs, r.Seconds, r.WritesPerPod, strings.Join(writes, ", "), r.BindingMillis, strings.Join(reads, ", "), strings.Join(cpu, ", "), rss, r.MachineMillis, r.apiServerPace(), plans)
}

func table(results []*Result) string {
	var b strings.Builder
	repeated := slices.ContainsFunc(results, func(r *Result) bool { return len(r.Runs) > 0 })
	b.WriteString("| nodes | mix | scheduler | pods/s | first bind (s) | gang p50 (s) | gang p99 (s) | gangs placed / partial / unplaced (fit) | racks per gang (min) | stranded GPUs (mean) | API writes per pod | scheduler CPU ms per pod |")
	if repeated {
		b.WriteString(" every run: pods/s, gang p99 (s) |")
	}
	b.WriteString("\n|---|---|---|---|---|---|---|---|---|---|---|---|")
	if repeated {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range results {
		perPod := "–"
		if s, ok := r.CPUToLastBind["scheduler"]; ok && r.BoundPods > 0 {
			perPod = fmt.Sprintf("%.2f", 1000*s/float64(r.BoundPods))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %.0f | %.1f | %.1f | %.1f | %d / %d / %d (%d) | %.2f (%.2f) | %d (%.1f) | %.2f | %s |", r.Nodes, r.Mix, r.Scheduler,
			r.PodsPerSec, r.FirstBind, r.GangP50, r.GangP99, r.Placed, r.Partial, r.Unplaced, r.UnplacedFit, r.RacksPerGang, r.MinRacksPerGang, r.Stranded, r.MeanStranded, r.WritesPerPod, perPod)
		if repeated {
			var each []string
			for _, run := range r.Runs {
				each = append(each, fmt.Sprintf("%.0f, %.1f", run.PodsPerSec, run.GangP99))
			}
			fmt.Fprintf(&b, " %s |", strings.Join(each, "; "))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	seen := map[string]bool{}
	var met strings.Builder
	for _, r := range results {
		if k := fmt.Sprint(r.Nodes, r.Mix); !seen[k] {
			seen[k] = true
			fmt.Fprintf(&b, "%d nodes, %s: %d gangs in %d namespace(s) ask %d GPUs in %d pods; the fleet has %d GPUs.\n", r.Nodes, r.Mix, r.Gangs, r.Namespaces, r.DemandGPUs, r.Pods, r.CapacityGPUs)
			met.WriteString(targets(results, r.Nodes, r.Mix))
		}
	}
	if met.Len() > 0 {
		b.WriteString("\n| nodes | mix | Convoy's target | Convoy | |\n|---|---|---|---|---|\n")
		b.WriteString(met.String())
	}
	return b.String()
}

// Convoy's targets, against binder+events+watch (the ceiling of a kube-scheduler) in the same run.
const (
	targetPodsPerSec   = 0.95
	targetGangP99      = 1.1
	targetCPUPerPodMs  = 1.0
	targetStreamP99Sec = 1.0
	// targetDRA is convoy+dra's pods/s, and the inverse of its gang p99, against Convoy's on
	// nvidia.com/gpu in the same run.
	targetDRA = 0.9
)

// targets states, for one fleet size and mix, each of Convoy's targets with its figure and whether
// it was met: pods/s, gang p99 and CPU per pod against binder+events+watch; on fits, stranded GPUs
// against first fit (the binder, else binder+events or binder+events+watch) and
// coscheduling+binpack, and racks per gang against the fewest; streaming, gang p99 alone; with
// convoy+dra, its pods/s and gang p99 against Convoy's and its racks per gang against the fewest.
func targets(results []*Result, nodes int, mix string) string {
	of := func(sc Scheduler) *Result {
		for _, r := range results {
			if r.Nodes == nodes && r.Mix == mix && r.Scheduler == sc {
				return r
			}
		}
		return nil
	}
	c := of(Convoy)
	if c == nil {
		return ""
	}
	var b strings.Builder
	row := func(target, got string, met bool) {
		verdict := "**missed**"
		if met {
			verdict = "met"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", nodes, mix, target, got, verdict)
	}
	// Streaming, the gangs' arrival sets the pace, and CPU per pod counts the time between them:
	// those targets are the backlog's.
	if w := of(BinderEventsWatch); !c.Stream && w != nil && w.PodsPerSec > 0 && w.GangP99 > 0 {
		row(fmt.Sprintf("pods/s ≥ %.2f× %s's", targetPodsPerSec, BinderEventsWatch), fmt.Sprintf("%.2f× (%.0f of %.0f)", c.PodsPerSec/w.PodsPerSec, c.PodsPerSec, w.PodsPerSec), c.PodsPerSec >= targetPodsPerSec*w.PodsPerSec)
		row(fmt.Sprintf("gang p99 ≤ %.1f× %s's", targetGangP99, BinderEventsWatch), fmt.Sprintf("%.2f× (%.1f s against %.1f s)", c.GangP99/w.GangP99, c.GangP99, w.GangP99), c.GangP99 <= targetGangP99*w.GangP99)
	}
	if s, ok := c.CPUToLastBind["scheduler"]; ok && c.BoundPods > 0 && !c.Stream {
		perPod := 1000 * s / float64(c.BoundPods)
		row(fmt.Sprintf("scheduler CPU ≤ %.1f ms per pod", targetCPUPerPodMs), fmt.Sprintf("%.2f ms", perPod), perPod <= targetCPUPerPodMs)
	}
	if c.Stream {
		pace := "as fast as created"
		if c.ArrivalRate > 0 {
			pace = fmt.Sprintf("%g gangs/s", c.ArrivalRate)
		}
		row(fmt.Sprintf("gang p99 ≤ %.0f s, streaming %s", targetStreamP99Sec, pace), fmt.Sprintf("%.2f s", c.GangP99), c.GangP99 <= targetStreamP99Sec)
	}
	if mix == "fits" {
		// First fit is the binder's, with or without events and watch: the first of them that ran.
		var peers []Scheduler
		for _, b := range []Scheduler{Binder, BinderEvents, BinderEventsWatch} {
			if of(b) != nil {
				peers = append(peers, b)
				break
			}
		}
		for _, peer := range append(peers, CoschedulingBinpack) {
			if p := of(peer); p != nil {
				row(fmt.Sprintf("stranded GPUs ≤ %s's", peer), fmt.Sprintf("%d against %d", c.Stranded, p.Stranded), c.Stranded <= p.Stranded)
			}
		}
		row("racks per gang at the fewest", fmt.Sprintf("%.2f (fewest %.2f)", c.RacksPerGang, c.MinRacksPerGang), c.RacksPerGang <= c.MinRacksPerGang+0.005)
	}
	if d := of(ConvoyDRA); d != nil && c.PodsPerSec > 0 && d.GangP99 > 0 {
		row(fmt.Sprintf("%s pods/s ≥ %.1f× %s's", ConvoyDRA, targetDRA, Convoy), fmt.Sprintf("%.2f× (%.0f of %.0f)", d.PodsPerSec/c.PodsPerSec, d.PodsPerSec, c.PodsPerSec), d.PodsPerSec >= targetDRA*c.PodsPerSec)
		row(fmt.Sprintf("%s's gang p99 ÷ %s's ≥ %.1f×", Convoy, ConvoyDRA, targetDRA), fmt.Sprintf("%.2f× (%.1f s against %.1f s)", c.GangP99/d.GangP99, d.GangP99, c.GangP99), c.GangP99 >= targetDRA*d.GangP99)
		row(fmt.Sprintf("%s racks per gang at the fewest", ConvoyDRA), fmt.Sprintf("%.2f (fewest %.2f)", d.RacksPerGang, d.MinRacksPerGang), d.RacksPerGang <= d.MinRacksPerGang+0.005)
	}
	return b.String()
}
