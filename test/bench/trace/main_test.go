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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TestPoliciesPlaceAsTheirSchedulersWould: on a CPU node, a 2-GPU node and an 8-GPU node with
// more CPU, a 1-GPU task goes to the 2-GPU node with Convoy's planner (best fit), to the 8-GPU
// node with upstream's default scoring (least allocated CPU and memory), to the 2-GPU node with
// upstream's bin packing (most allocated, GPUs weighing 3), and to the first GPU node in order
// with first fit; a task without GPUs stays off the GPU nodes when they are tainted, and
// goes by upstream's scoring to the roomiest node when they are not.
func TestPoliciesPlaceAsTheirSchedulersWould(t *testing.T) {
	machines := []machine{
		{name: "cpu", cpuMilli: 32000, memMiB: 131072},
		{name: "small", cpuMilli: 16000, memMiB: 65536, gpus: 2, model: "T4", rackID: "r0"},
		{name: "big", cpuMilli: 96000, memMiB: 393216, gpus: 8, model: "G2", rackID: "r0"},
	}
	oneGPU := task{name: "one-gpu", cpuMilli: 4000, memMiB: 16384, gpus: 1}
	noGPU := task{name: "no-gpu", cpuMilli: 4000, memMiB: 16384}
	for _, tc := range []struct {
		policy string
		taint  bool
		task   task
		want   string
	}{
		{"convoy", true, oneGPU, "small"},
		{"kube-scheduler", true, oneGPU, "big"},
		{"first-fit", true, oneGPU, "small"},
		{"kube-scheduler-binpack", true, oneGPU, "small"},
		{"convoy", true, noGPU, "cpu"},
		{"kube-scheduler", true, noGPU, "cpu"},
		{"first-fit", true, noGPU, "cpu"},
		{"convoy", false, noGPU, "big"},
		{"kube-scheduler", false, noGPU, "big"},
	} {
		c, err := newCluster(machines, tc.taint)
		if err != nil {
			t.Fatal(err)
		}
		i, gpus, _ := c.choose(tc.policy, tc.task, tc.task.pod(1))
		if i < 0 || c.machines[i].name != tc.want || gpus.Len() != tc.task.gpus {
			got := "nothing"
			if i >= 0 {
				got = c.machines[i].name
			}
			t.Errorf("%s (GPU nodes tainted: %v) put %s on %s with %d GPUs, want %s with %d", tc.policy, tc.taint, tc.task.name, got, gpus.Len(), tc.want, tc.task.gpus)
		}
	}
}

// TestReplayCountsWhatIsTurnedAway: two 8-GPU tasks arrive for one 8-GPU node: the second is
// turned away when all 8 GPUs are allocated, and the node is full, so nothing is stranded.
func TestReplayCountsWhatIsTurnedAway(t *testing.T) {
	machines := []machine{{name: "big", cpuMilli: 96000, memMiB: 393216, gpus: 8, rackID: "r0"}}
	tasks := []task{{name: "whole", cpuMilli: 8000, memMiB: 65536, gpus: 8}}
	for _, policy := range []string{"convoy", "kube-scheduler", "kube-scheduler-binpack", "first-fit"} {
		res, err := run(policy, machines, tasks, []int{0, 0}, 0, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		if res.GPUTasks != 2 || res.GPUTasksPlaced != 1 || res.GPUsTurnedAway != 8 || res.AllocatedAtFirstTurnAway != 8 || res.Allocated != 8 || res.Stranded != 0 {
			t.Errorf("%s: %+v, want 1 of 2 GPU tasks placed, 8 GPUs turned away at 8 allocated, none stranded", policy, res)
		}
	}
}

// TestTargets: Convoy's target on each pod list is met when it turns away no more GPUs than the
// best other policy, and missed otherwise.
func TestTargets(t *testing.T) {
	results := []*Result{
		{Pods: "default", Policy: "convoy", GPUsTurnedAway: 25},
		{Pods: "default", Policy: "first-fit", GPUsTurnedAway: 25},
		{Pods: "default", Policy: "kube-scheduler", GPUsTurnedAway: 264},
		{Pods: "multigpu50", Policy: "convoy", GPUsTurnedAway: 45},
		{Pods: "multigpu50", Policy: "kube-scheduler-binpack", GPUsTurnedAway: 44},
	}
	want := "\n| pods | Convoy's target | Convoy | |\n|---|---|---|---|\n" +
		"| default | GPUs turned away ≤ the best other policy's | 25 against first-fit's 25 | met |\n" +
		"| multigpu50 | GPUs turned away ≤ the best other policy's | 45 against kube-scheduler-binpack's 44 | **missed** |\n"
	if got := targets(results); got != want {
		t.Errorf("targets() = %q, want %q", got, want)
	}
}

// TestForecastReplayComparesPredictedToActualStarts: on 8 GPUs, c runs 20 s, a waits for it and
// runs 100 s in epochs of 10 s, and b arrives at 50 s: by then a's reports give its rate, so
// Convoy's forecast puts b's start at a's end, 120 s, exactly; the baseline says b's place (1)
// times the mean run of the finished tasks (c's 20 s), 70 s. a's own wait is not compared: when
// it arrived nothing had finished and c had reported no epoch.
func TestForecastReplayComparesPredictedToActualStarts(t *testing.T) {
	epochs := func(run time.Duration) []time.Duration {
		var ends []time.Duration
		for k := 1; k <= 10; k++ {
			ends = append(ends, run*time.Duration(k)/10)
		}
		return ends
	}
	task := func(name string, arrive, run time.Duration) timedTask {
		return timedTask{name: name, gpus: 8, arrive: arrive, run: run, epochEnds: epochs(run),
			requests: map[corev1.ResourceName]int64{convoy.ResourceGPU: 8000}}
	}
	got := forecastReplay("test", []timedTask{task("c", 0, 20*time.Second), task("a", 0, 100*time.Second), task("b", 50*time.Second, 100*time.Second)}, 8)
	want := &ForecastResult{Pods: "test", QuotaGPUs: 8, Jobs: 3, Waited: 2, Compared: 1, ConvoyMedian: 0, ConvoyP90: 0, BaselineMedian: 50, BaselineP90: 50, MedianWait: 70}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("forecastReplay (-want,+got):\n%s", diff)
	}
}
