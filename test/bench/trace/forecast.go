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
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/forecast"
	"github.com/convoy-dev/convoy/test/bench/alibaba"
)

// timedTask is a GPU task of a pod list with times: it arrives at arrive and runs for run.
type timedTask struct {
	name   string
	gpus   int
	arrive time.Duration
	run    time.Duration
	// epochEnds are the ends of its epochs after its start, the last one run.
	epochEnds []time.Duration
	requests  map[corev1.ResourceName]int64
}

// ForecastResult compares, over the jobs that had to wait, the start each method predicted when
// the job arrived with the start it got.
type ForecastResult struct {
	Pods      string `json:"pods"`
	QuotaGPUs int    `json:"quotaGPUs"`
	Jobs      int    `json:"jobs"`
	Waited    int    `json:"waited"`
	// Compared are the waiting jobs both methods estimated (Convoy: no unknown in the way; the
	// baseline: a finished job to take the mean of).
	Compared int `json:"compared"`
	// ConvoyMedian... are absolute errors, predicted start minus actual start, in seconds.
	ConvoyMedian, ConvoyP90, BaselineMedian, BaselineP90 float64
	// MedianWait is the compared jobs' median wait, arrival to start, in seconds.
	MedianWait float64
}

// readTimedTasks reads the GPU tasks of a pod list with creation, scheduled and deletion times,
// each run split into epochs of lengths drawn around run/epochs (±jitter) from rng.
func readTimedTasks(path string, epochs int, jitter float64, rng *rand.Rand) ([]timedTask, error) {
	rows, err := alibaba.ReadCSV(path)
	if err != nil {
		return nil, err
	}
	var out []timedTask
	for i, row := range rows {
		gpus, err := strconv.Atoi(row["num_gpu"])
		if err != nil {
			return nil, fmt.Errorf("%s row %d: %w", path, i+2, err)
		}
		created, err1 := strconv.ParseInt(row["creation_time"], 10, 64)
		scheduled, err2 := strconv.ParseInt(row["scheduled_time"], 10, 64)
		deleted, err3 := strconv.ParseInt(row["deletion_time"], 10, 64)
		if gpus == 0 || err1 != nil || err2 != nil || err3 != nil {
			continue // no GPU, or no times to replay
		}
		t := timedTask{name: row["name"], gpus: gpus, arrive: time.Duration(created) * time.Second,
			run: time.Duration(max(1, deleted-scheduled)) * time.Second, requests: map[corev1.ResourceName]int64{convoy.ResourceGPU: int64(gpus) * 1000}}
		weights := make([]float64, epochs)
		sum := 0.0
		for k := range weights {
			weights[k] = 1 + jitter*(2*rng.Float64()-1)
			sum += weights[k]
		}
		acc := 0.0
		for _, w := range weights {
			acc += w
			t.epochEnds = append(t.epochEnds, time.Duration(float64(t.run)*acc/sum))
		}
		out = append(out, t)
	}
	slices.SortStableFunc(out, func(a, b timedTask) int { return int(a.arrive - b.arrive) })
	return out, nil
}

// forecastReplay replays tasks through one ClusterQueue of quotaGPUs GPUs, admitted as Kueue's
// BestEffortFIFO admits them with their real run times. When a task arrives and does not fit, it
// records the start operator/pkg/forecast plans for it from what the operator would know (the
// running tasks' epoch reports, the mean run of the tasks finished so far) and the baseline's
// (its place in the queue times that mean run), then the start it gets.
func forecastReplay(pods string, tasks []timedTask, quotaGPUs int) *ForecastResult {
	epoch := time.Unix(0, 0).UTC()
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	type run struct {
		i     int
		start time.Duration
	}
	var running []run
	var queue []int // indices of waiting tasks, in arrival order
	free := quotaGPUs
	var finishedSum time.Duration
	finished := 0
	predicted := map[int][2]time.Duration{} // task -> convoy's and the baseline's predicted start
	known := map[int][2]bool{}
	actual := map[int]time.Duration{}
	admit := func(now time.Duration) {
		rest := queue[:0]
		for _, i := range queue {
			if tasks[i].gpus <= free {
				free -= tasks[i].gpus
				running = append(running, run{i: i, start: now})
				actual[i] = now
				continue
			}
			rest = append(rest, i)
		}
		queue = rest
	}
	finishUntil := func(now time.Duration) {
		for {
			next := -1
			for k, r := range running {
				if end := r.start + tasks[r.i].run; end <= now && (next < 0 || end < running[next].start+tasks[running[next].i].run) {
					next = k
				}
			}
			if next < 0 {
				return
			}
			r := running[next]
			end := r.start + tasks[r.i].run
			running = slices.Delete(running, next, next+1)
			free += tasks[r.i].gpus
			finishedSum += tasks[r.i].run
			finished++
			admit(end)
		}
	}
	res := &ForecastResult{Pods: pods, QuotaGPUs: quotaGPUs}
	for i, t := range tasks {
		if t.gpus > quotaGPUs {
			continue
		}
		res.Jobs++
		finishUntil(t.arrive)
		queue = append(queue, i)
		admit(t.arrive)
		if _, ok := actual[i]; ok {
			continue
		}
		res.Waited++
		var typical time.Duration
		if finished > 0 {
			typical = finishedSum / time.Duration(finished)
		}
		q := forecast.Queue{Name: "trace", Now: at(t.arrive), Quota: map[corev1.ResourceName]int64{convoy.ResourceGPU: int64(quotaGPUs) * 1000}}
		for _, r := range running {
			st := observed(tasks[r.i], r.start, t.arrive, at)
			q.Admitted = append(q.Admitted, forecast.Job{Name: tasks[r.i].name, Requests: tasks[r.i].requests, End: forecast.End(st, typical, at(t.arrive))})
		}
		for _, j := range queue {
			q.Pending = append(q.Pending, forecast.Job{Name: tasks[j].name, Requests: tasks[j].requests, Runtime: typical})
		}
		ests := forecast.Plan(q)
		est := ests[len(ests)-1]
		predicted[i] = [2]time.Duration{est.Start.Sub(epoch), t.arrive + time.Duration(len(queue))*typical}
		known[i] = [2]bool{!est.Start.IsZero(), typical > 0}
	}
	finishUntil(time.Duration(1<<62 - 1))
	var convoyErr, baseErr, waits []float64
	for i, p := range predicted {
		start, ok := actual[i]
		if !ok || !known[i][0] || !known[i][1] {
			continue
		}
		convoyErr = append(convoyErr, (p[0] - start).Abs().Seconds())
		baseErr = append(baseErr, (p[1] - start).Abs().Seconds())
		waits = append(waits, (start - tasks[i].arrive).Seconds())
	}
	res.Compared = len(convoyErr)
	res.ConvoyMedian, res.ConvoyP90 = quantile(convoyErr, 0.5), quantile(convoyErr, 0.9)
	res.BaselineMedian, res.BaselineP90 = quantile(baseErr, 0.5), quantile(baseErr, 0.9)
	res.MedianWait = quantile(waits, 0.5)
	return res
}

// observed is the status of task t started at start, at now: its epochs reported so far folded
// in by the operator's own code.
func observed(t timedTask, start, now time.Duration, at func(time.Duration) time.Time) *convoy.TrainingJobStatus {
	st := &convoy.TrainingJobStatus{TotalEpochs: int32(len(t.epochEnds)), StartTime: &metav1.Time{Time: at(start)}}
	done := 0
	for done < len(t.epochEnds) && start+t.epochEnds[done] <= now {
		done++
	}
	// Only the first report of the attempt and the latest count (forecast.ObserveReport).
	for _, k := range []int{1, done} {
		if k >= 1 && k <= done && int32(k) != st.CurrentEpoch {
			prev := st.CurrentEpoch
			st.CurrentEpoch = int32(k)
			forecast.ObserveReport(st, prev, at(start+t.epochEnds[k-1]))
		}
	}
	return st
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// runForecast replays the pod list for each quota and prints the table.
func runForecast(dir, pods string, quotas []int, epochs int, jitter float64, seed uint64) ([]*ForecastResult, error) {
	tasks, err := readTimedTasks(filepath.Join(dir, "openb_pod_list_"+pods+".csv"), epochs, jitter, rand.New(rand.NewPCG(seed, seed)))
	if err != nil {
		return nil, err
	}
	var out []*ForecastResult
	for _, q := range quotas {
		out = append(out, forecastReplay(pods, tasks, q))
	}
	return out, nil
}

func forecastTable(results []*ForecastResult) string {
	var b strings.Builder
	b.WriteString("| GPU quota | GPU tasks | waited | compared | median wait | Convoy median | Convoy p90 | baseline median | baseline p90 | target: Convoy's median < baseline's |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		met := "met"
		if r.Compared == 0 || r.ConvoyMedian >= r.BaselineMedian {
			met = "missed"
		}
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %s | %s | %s | %s | %s | %s |\n", r.QuotaGPUs, r.Jobs, r.Waited, r.Compared, human(r.MedianWait),
			human(r.ConvoyMedian), human(r.ConvoyP90), human(r.BaselineMedian), human(r.BaselineP90), met)
	}
	return b.String()
}

func human(seconds float64) string {
	return (time.Duration(seconds) * time.Second).Round(time.Second).String()
}
