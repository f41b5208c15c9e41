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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner/synth"
)

// TestMeanStranded: the mean counts the free GPUs of partly used nodes after each gang placed
// whole, in the order their first pods bound, and leaves out gangs not placed whole.
func TestMeanStranded(t *testing.T) {
	spec := runSpec{
		fleet: synth.Fleet{Nodes: 3, GPUsPerNode: 8, Zones: 1, BlocksPerZone: 1, NodesPerRack: 3},
		gangs: []synth.Gang{
			{Name: "a", Workers: 2, GPUsPerWorker: 2},
			{Name: "b", Workers: 1, GPUsPerWorker: 4},
			{Name: "c", Workers: 2, GPUsPerWorker: 4},
			{Name: "d", Workers: 1, GPUsPerWorker: 2},
		},
	}
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	node := func(i int) string { return spec.fleet.Node(i).Name }
	bound := map[string]binding{
		// b is placed last though it is listed second: a leaves 4 of node 0's GPUs stranded, then b
		// fills them.
		"b-worker-0": {node: node(0), at: at(4), gpus: 4},
		// a is placed first, though its last pod binds after d and b: d comes second.
		"a-worker-1": {node: node(0), at: at(5), gpus: 2},
		"a-worker-0": {node: node(0), at: at(1), gpus: 2},
		"d-worker-0": {node: node(1), at: at(2), gpus: 2},
		// c is never placed whole: its pod is never counted.
		"c-worker-1": {node: node(2), at: at(0), gpus: 4},
	}
	// After a: 4 free on node 0. After d: 4 on node 0 and 6 on node 1. After b: 6 on node 1. (In the
	// order of the last binds, d, b, a, it would be 6, 10 and 6.)
	if got, want := meanStranded(spec, bound), (4.0+10+6)/3; got != want {
		t.Errorf("meanStranded() = %v, want %v", got, want)
	}
}

// TestAPIServerPace: the gauge is the API server's CPU to the last bind per write request, and is
// left out when either is missing.
func TestAPIServerPace(t *testing.T) {
	r := &Result{CPUToLastBind: map[string]float64{"kube-apiserver": 2.5}, APIWrites: 2000}
	if got, want := r.apiServerPace(), "; the API server spent 1250 µs of CPU per write request to the last bind"; got != want {
		t.Errorf("apiServerPace() = %q, want %q", got, want)
	}
	if got := (&Result{APIWrites: 2000}).apiServerPace(); got != "" {
		t.Errorf("apiServerPace() without the API server's CPU = %q, want none", got)
	}
}

// TestTargets: each of Convoy's targets is stated with its figure, met or missed, against the peers
// of the same fleet and mix; stranded GPUs and racks only on fits.
func TestTargets(t *testing.T) {
	results := []*Result{
		{Scheduler: Convoy, Nodes: 1000, Mix: "fits", PodsPerSec: 190, GangP99: 2.2, BoundPods: 1000, CPUToLastBind: map[string]float64{"scheduler": 1.5},
			Stranded: 14, RacksPerGang: 1.06, MinRacksPerGang: 1.06},
		{Scheduler: BinderEventsWatch, Nodes: 1000, Mix: "fits", PodsPerSec: 200, GangP99: 2},
		{Scheduler: Binder, Nodes: 1000, Mix: "fits", Stranded: 14},
		{Scheduler: CoschedulingBinpack, Nodes: 1000, Mix: "fits", Stranded: 13},
		{Scheduler: Convoy, Nodes: 1000, Mix: "mixed", PodsPerSec: 100, GangP99: 1, Stranded: 50},
		{Scheduler: BinderEventsWatch, Nodes: 1000, Mix: "mixed", PodsPerSec: 200, GangP99: 1},
	}
	want := `| 1000 | fits | pods/s ≥ 0.95× binder+events+watch's | 0.95× (190 of 200) | met |
| 1000 | fits | gang p99 ≤ 1.1× binder+events+watch's | 1.10× (2.2 s against 2.0 s) | met |
| 1000 | fits | scheduler CPU ≤ 1.0 ms per pod | 1.50 ms | **missed** |
| 1000 | fits | stranded GPUs ≤ binder's | 14 against 14 | met |
| 1000 | fits | stranded GPUs ≤ coscheduling+binpack's | 14 against 13 | **missed** |
| 1000 | fits | racks per gang at the fewest | 1.06 (fewest 1.06) | met |
`
	if diff := cmp.Diff(want, targets(results, 1000, "fits")); diff != "" {
		t.Errorf("targets(fits) (-want,+got):\n%s", diff)
	}
	if got := targets(results, 1000, "mixed"); !strings.Contains(got, "0.50× (100 of 200) | **missed** |") || strings.Contains(got, "stranded") {
		t.Errorf("targets(mixed) = %q, want pods/s missed and no stranded GPUs", got)
	}
	// Without the plain binder, first fit is binder+events+watch's.
	results[1].Stranded = 5
	if got := targets(slices.Delete(results, 2, 3), 1000, "fits"); !strings.Contains(got, "| stranded GPUs ≤ binder+events+watch's | 14 against 5 | **missed** |") {
		t.Errorf("targets(fits) without the binder = %q, want stranded GPUs against binder+events+watch's", got)
	}
}

// TestStreamTargets: streaming, the gangs' arrival sets the pace, so there is no pods/s, relative
// p99 or CPU target, and gang p99 is held to 1 s with the arrival rate named.
func TestStreamTargets(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		p99  float64
		want string
	}{
		{rate: 10, p99: 0.8, want: "| 1000 | fits | gang p99 ≤ 1 s, streaming 10 gangs/s | 0.80 s | met |"},
		{p99: 3.5, want: "| 1000 | fits | gang p99 ≤ 1 s, streaming as fast as created | 3.50 s | **missed** |"},
	} {
		results := []*Result{
			{Scheduler: Convoy, Nodes: 1000, Mix: "fits", Stream: true, ArrivalRate: tc.rate, PodsPerSec: 100, GangP99: tc.p99,
				BoundPods: 1000, CPUToLastBind: map[string]float64{"scheduler": 1.5}},
			{Scheduler: BinderEventsWatch, Nodes: 1000, Mix: "fits", Stream: true, ArrivalRate: tc.rate, PodsPerSec: 100, GangP99: 1},
		}
		got := targets(results, 1000, "fits")
		if !strings.Contains(got, tc.want) || strings.Contains(got, "pods/s ≥") || strings.Contains(got, "×") || strings.Contains(got, "CPU") {
			t.Errorf("targets(fits) at %v gangs/s = %q, want %q and no pods/s, relative p99 or CPU target", tc.rate, got, tc.want)
		}
	}
}

// TestDRATargets: convoy+dra's pods/s and gang p99 are held to 0.9× Convoy's on nvidia.com/gpu in
// the same run, and its racks per gang to the fewest.
func TestDRATargets(t *testing.T) {
	results := []*Result{
		{Scheduler: Convoy, Nodes: 1000, Mix: "fits", PodsPerSec: 400, GangP99: 9, BoundPods: 1000},
		{Scheduler: ConvoyDRA, Nodes: 1000, Mix: "fits", PodsPerSec: 300, GangP99: 10, RacksPerGang: 1.06, MinRacksPerGang: 1.06},
		{Scheduler: KubeScheduler137DRA, Nodes: 1000, Mix: "fits", PodsPerSec: 30, GangP99: 90},
	}
	want := `| 1000 | fits | convoy+dra pods/s ≥ 0.9× convoy's | 0.75× (300 of 400) | **missed** |
| 1000 | fits | convoy's gang p99 ÷ convoy+dra's ≥ 0.9× | 0.90× (10.0 s against 9.0 s) | met |
| 1000 | fits | convoy+dra racks per gang at the fewest | 1.06 (fewest 1.06) | met |
`
	got := targets(results, 1000, "fits")
	if i := strings.Index(got, "| 1000 | fits | convoy+dra"); i < 0 || got[i:] != want {
		t.Errorf("targets(fits) = %q, want it to end with %q", got, want)
	}
}
