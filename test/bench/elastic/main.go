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

// Command elastic replays the GPU tasks of the Alibaba GPU trace of 2023 (openb_pod_list_default.csv,
// arrivals divided by -compress) through one fleet twice with the same job specs, and prints GPU
// utilisation, mean job completion time, resizes and what they cost side by side (`make
// bench-elastic`; README.md holds the latest table):
//
//   - fixed: Kueue's partial admission (between minWorkers and numWorkers), then the size is kept; a
//     higher-priority job stops whole lower-priority ones;
//   - elastic: operator/pkg/elastic grows gangs into GPUs no waiting job fits and shrinks them for
//     waiting jobs, stopping one only when shrinking cannot make room.
//
// A task of G GPUs is a gang of 2G one-GPU workers with minWorkers G, its trace run time long at G
// workers; QoS BE is low priority, the rest high. Modelled, as the trace has none: Amdahl scaling
// with a serial share drawn from [0, 0.3), the pauses, cooldown, threshold and checkpoint interval
// below. "GPU-s paused" is what a shrink or stop costs: the gang checkpoints first, so no trained
// step is lost ("lost per shrink, asked" 0); "not" asked, a shrink would lose the training since
// the gang's latest periodic checkpoint (or its start or last resize), which it resumes from.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/convoy-dev/convoy/operator/pkg/elastic"
	"github.com/convoy-dev/convoy/test/bench/alibaba"
)

func main() {
	dir := flag.String("trace", "../shared/traces/alibaba-gpu-2023", "directory of the trace's CSV files")
	gpus := flag.String("gpus", "64,96,128", "fleet sizes in GPUs, comma-separated")
	seed := flag.Uint64("seed", 42, "seed of the jobs' scaling curves")
	compress := flag.Int64("compress", 4, "divide the trace's arrival times by this, to load the fleet")
	flag.Parse()
	jobs, err := readJobs(filepath.Join(*dir, "openb_pod_list_default.csv"), *seed, max(1, *compress))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var results []*Result
	for _, f := range strings.Split(*gpus, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 8 {
			fmt.Fprintf(os.Stderr, "-gpus: %q is not a fleet of at least 8 GPUs\n", f)
			os.Exit(2)
		}
		for _, mode := range []Mode{Fixed, Elastic} {
			results = append(results, Simulate(jobs, Config{GPUs: int32(n), Mode: mode}))
		}
	}
	fmt.Print(Table(results))
	fmt.Print(Targets(results))
}

// readJobs reads the trace's GPU tasks with times as jobs, arriving at creation_time/compress: a task of G GPUs asks for 2G workers of
// one GPU each with minWorkers G, and is G workers' run time long at G workers. Its priority is
// its QoS: best effort (BE) low, the others high. Its scaling curve, which the trace does not
// have, is Amdahl's with a serial share drawn from [0, 0.3).
func readJobs(path string, seed uint64, compress int64) ([]Spec, error) {
	rows, err := alibaba.ReadCSV(path)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	var out []Spec
	for _, row := range rows {
		g, err1 := strconv.Atoi(row["num_gpu"])
		created, err2 := strconv.ParseInt(row["creation_time"], 10, 64)
		scheduled, err3 := strconv.ParseInt(row["scheduled_time"], 10, 64)
		deleted, err4 := strconv.ParseInt(row["deletion_time"], 10, 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil || g == 0 {
			continue // no GPU, or no times to replay
		}
		s := Spec{Name: row["name"], Arrive: created / compress, Min: int32(g), Max: int32(2 * g), Serial: 0.3 * rng.Float64()}
		if row["qos"] != "BE" {
			s.Priority = 1
		}
		s.Work = s.Throughput(s.Min) * float64(max(1, deleted-scheduled))
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b Spec) int { return int(a.Arrive - b.Arrive) })
	return out, nil
}

// Spec is one job of the mix.
type Spec struct {
	Name     string
	Arrive   int64 // seconds
	Min, Max int32 // workers of one GPU
	Priority int32
	Serial   float64 // Amdahl's serial share
	Work     float64 // samples
}

// Throughput is the job's samples per second at n workers: Amdahl's n / (1 + s(n-1)).
func (s *Spec) Throughput(n int32) float64 {
	return float64(n) / (1 + s.Serial*float64(n-1))
}

// Mode is how the fleet sizes gangs.
type Mode string

const (
	// Fixed admits a gang with as many workers as fit, at least minWorkers (Kueue's partial
	// admission), and keeps that size; a higher-priority job stops whole lower-priority ones.
	Fixed Mode = "fixed"
	// Elastic also grows running gangs into free GPUs and shrinks them for waiting jobs, by
	// operator/pkg/elastic, stopping a job only when shrinking cannot make room.
	Elastic Mode = "elastic"
)

// Costs of the simulation, in seconds: a resize pauses the gang for a checkpoint and a new
// rendezvous; a stop for a checkpoint, then the restart; the step is the operator's resync.
const (
	step          = 30
	resizePause   = 60
	restartPause  = 120
	cooldown      = 300
	resync        = 300
	minEfficiency = 0.7
	// checkpointEvery is the gangs' periodic checkpoint interval (spec.checkpoint.intervalSeconds).
	checkpointEvery = 1800
)

// Config is one run.
type Config struct {
	GPUs int32
	Mode Mode
}

// Result is what one run measured.
type Result struct {
	GPUs int32
	Mode Mode
	Jobs int
	// Utilisation is the GPU-seconds held by running gangs over the fleet's GPU-seconds, from the
	// first arrival to the last completion; Goodput counts only those not paused by a resize or
	// restart.
	Utilisation, Goodput float64
	// WithWork is Utilisation over the time some job waited only: GPUs idle then are wasted.
	WithWork float64
	// MeanJCT is the mean of completion minus arrival, in seconds.
	MeanJCT float64
	// Makespan is the first arrival to the last completion, in seconds.
	Makespan       int64
	Grows, Shrinks int
	Stops          int
	FreeToGrown    float64 // mean seconds from GPUs free to the grown gang training
	LostPerShrink  float64 // mean GPU-seconds paused per shrink
	LostPerStop    float64 // mean GPU-seconds paused per stop
	// UnaskedPerShrink is the mean GPU-seconds of training a shrink would lose had the gang not
	// been asked for a checkpoint first: its workers' time since its latest checkpoint.
	UnaskedPerShrink  float64
	JCTHigh, JCTLow   float64
	highJobs, lowJobs int
}

type running struct {
	spec        *Spec
	workers     int32
	admitted    int32
	done        float64
	pausedUntil int64
	lastResize  int64
	measured    map[int32]float64
	started     bool
	// checkpointed is when the gang last checkpointed: periodically, and before each resize.
	checkpointed int64
}

// Simulate replays jobs through a fleet of cfg.GPUs GPUs.
func Simulate(jobs []Spec, cfg Config) *Result {
	res := &Result{GPUs: cfg.GPUs, Mode: cfg.Mode, Jobs: len(jobs)}
	var queue, stopped []*running
	var run []*running
	next, finished, queued := 0, 0, 0
	var busy, good, waiting, waitingBusy float64
	var jctSum float64
	first := jobs[0].Arrive
	now := first
	used := func() int32 {
		n := int32(0)
		for _, r := range run {
			n += r.workers
		}
		return n
	}
	stop := func(r *running) {
		res.Stops++
		res.LostPerStop += float64(r.workers) * restartPause
		run = slices.DeleteFunc(run, func(x *running) bool { return x == r })
		r.workers = 0
		stopped = append(stopped, r)
	}
	freedAt := now
	resize := func(r *running, to int32) {
		if to > r.workers {
			res.Grows++
			res.FreeToGrown += float64(now-freedAt) + resizePause
		} else {
			res.Shrinks++
			res.LostPerShrink += float64(to) * resizePause
			res.UnaskedPerShrink += float64(r.workers) * float64(now-r.checkpointed)
		}
		r.workers, r.lastResize, r.pausedUntil, r.checkpointed = to, now, now+resizePause, now
	}
	for finished < len(jobs) {
		changed := freedAt > now-step || len(queue) != queued
		for next < len(jobs) && jobs[next].Arrive <= now {
			queue = append(queue, &running{spec: &jobs[next], measured: map[int32]float64{}})
			next, changed = next+1, true
		}
		if changed {
			slices.SortStableFunc(queue, func(a, b *running) int {
				if a.spec.Priority != b.spec.Priority {
					return int(b.spec.Priority - a.spec.Priority)
				}
				return int(a.spec.Arrive - b.spec.Arrive)
			})
			queue = append(admit(queue, &run, cfg, now, used, stop, resize), stopped...)
			stopped = nil
		}
		queued = len(queue)
		// GPUs left free after admission fit no waiting job: the operator lends them to running
		// gangs, looking again when GPUs come free and at every resync.
		if cfg.Mode == Elastic && (freedAt > now-step || (now-first)%resync == 0) {
			free := cfg.GPUs - used()
			for _, rz := range elastic.Grow(views(run, now), free, time.Unix(now, 0)) {
				resize(find(run, rz.Key), rz.To)
			}
		}
		if len(queue) > 0 {
			waiting += step
			waitingBusy += float64(used()) * step
		}
		// Train for one step.
		for _, r := range slices.Clone(run) {
			busy += float64(r.workers) * step
			active := float64(step)
			if r.pausedUntil > now {
				active = math.Max(0, float64(now+step-r.pausedUntil))
			}
			good += float64(r.workers) * active
			if now-r.checkpointed >= checkpointEvery {
				r.checkpointed = now
			}
			tp := r.spec.Throughput(r.workers)
			if active == step {
				r.measured[r.workers] = tp
			}
			r.done += tp * active
			if r.done >= r.spec.Work {
				end := float64(now+step) - (r.done-r.spec.Work)/tp
				jct := end - float64(r.spec.Arrive)
				jctSum += jct
				if r.spec.Priority > 0 {
					res.JCTHigh += jct
					res.highJobs++
				} else {
					res.JCTLow += jct
					res.lowJobs++
				}
				finished++
				freedAt = int64(end)
				run = slices.DeleteFunc(run, func(x *running) bool { return x == r })
			}
		}
		now += step
		if len(run) == 0 && len(queue) == 0 && next < len(jobs) {
			now = max(now, jobs[next].Arrive-jobs[next].Arrive%step+first%step)
		}
	}
	res.Makespan = now - first
	res.Utilisation = busy / (float64(cfg.GPUs) * float64(res.Makespan))
	res.Goodput = good / (float64(cfg.GPUs) * float64(res.Makespan))
	res.WithWork = waitingBusy / (float64(cfg.GPUs) * max(1, waiting))
	res.MeanJCT = jctSum / float64(len(jobs))
	res.JCTHigh /= float64(max(1, res.highJobs))
	res.JCTLow /= float64(max(1, res.lowJobs))
	if res.Grows > 0 {
		res.FreeToGrown /= float64(res.Grows)
	}
	if res.Shrinks > 0 {
		res.LostPerShrink /= float64(res.Shrinks)
		res.UnaskedPerShrink /= float64(res.Shrinks)
	}
	if res.Stops > 0 {
		res.LostPerStop /= float64(res.Stops)
	}
	return res
}

// admit starts the waiting jobs that fit, in queue order, as Kueue's BestEffortFIFO does: with
// as many workers as are free, at least Min. A job that does not fit gets room, in elastic mode,
// from the jobs elastic.Shrink chooses; failing that a high-priority job stops whole jobs of
// lower priority, the latest started first, as Kueue preempts.
func admit(queue []*running, run *[]*running, cfg Config, now int64, used func() int32, stop func(*running), resize func(*running, int32)) []*running {
	var left []*running
	for _, r := range queue {
		if free := cfg.GPUs - used(); free < r.spec.Min && cfg.Mode == Elastic && free+lendable(*run, r.spec.Priority) >= r.spec.Min {
			for _, rz := range elastic.Shrink(views(*run, now), r.spec.Min-free, r.spec.Priority) {
				resize(find(*run, rz.Key), rz.To)
			}
		}
		if free := cfg.GPUs - used(); free < r.spec.Min && r.spec.Priority > 0 {
			var victims []*running
			room := free
			for _, v := range slices.Backward(*run) {
				if v.spec.Priority < r.spec.Priority && room < r.spec.Min {
					victims = append(victims, v)
					room += v.workers
				}
			}
			if room >= r.spec.Min {
				for _, v := range victims {
					stop(v)
				}
			}
		}
		free := cfg.GPUs - used()
		if free < r.spec.Min {
			left = append(left, r)
			continue
		}
		r.workers = min(r.spec.Max, free)
		r.admitted, r.lastResize, r.checkpointed = r.workers, now, now
		r.pausedUntil = now
		if r.started {
			r.pausedUntil = now + restartPause
		}
		r.started = true
		*run = append(*run, r)
	}
	return left
}

// lendable is the workers the running jobs could give a waiting job of priority p: above Min for
// a lower priority, above the admitted size for the same.
func lendable(run []*running, p int32) int32 {
	n := int32(0)
	for _, r := range run {
		switch {
		case r.spec.Priority < p:
			n += r.workers - r.spec.Min
		case r.spec.Priority == p:
			n += max(0, r.workers-r.admitted)
		}
	}
	return n
}

// views is what the operator would know of the running jobs.
func views(run []*running, now int64) []elastic.Job {
	out := make([]elastic.Job, 0, len(run))
	for _, r := range run {
		out = append(out, elastic.Job{Key: r.spec.Name, Priority: r.spec.Priority, Min: r.spec.Min, Max: r.spec.Max,
			Current: r.workers, Admitted: r.admitted, GPUsPerWorker: 1, LastResize: time.Unix(r.lastResize, 0),
			Cooldown: cooldown * time.Second, MinEfficiency: minEfficiency, Throughput: r.measured})
	}
	return out
}

func find(run []*running, key string) *running {
	for _, r := range run {
		if r.spec.Name == key {
			return r
		}
	}
	panic("no running job " + key)
}

// Table is the results as a Markdown table, fixed and elastic side by side per fleet.
func Table(results []*Result) string {
	var b strings.Builder
	b.WriteString("| GPUs | sizes | GPU util. | while a job waits | mean JCT | high / low prio. | grows | shrinks | stops | free GPUs to grown gang | GPU-s paused per shrink / stop | lost per shrink, asked / not |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %d | %s | %.1f%% | %.1f%% | %s | %s / %s | %d | %d | %d | %.0f s | %.0f / %.0f | 0 / %.0f |\n",
			r.GPUs, r.Mode, 100*r.Utilisation, 100*r.WithWork, hours(r.MeanJCT), hours(r.JCTHigh), hours(r.JCTLow),
			r.Grows, r.Shrinks, r.Stops, r.FreeToGrown, r.LostPerShrink, r.LostPerStop, r.UnaskedPerShrink)
	}
	return b.String()
}

func hours(s float64) string { return fmt.Sprintf("%.2f h", s/3600) }

// Targets says, per fleet, whether resizing kept no more GPUs idle while a job waited than fixed
// sizes did, and beat them on mean JCT. Utilisation over the whole replay is no target: the
// trace's last arrival sets the makespan and every job completes, so it counts the GPU-seconds the
// same work took, which shrinking a gang to its more efficient size lowers.
func Targets(results []*Result) string {
	var b strings.Builder
	for i := 0; i+1 < len(results); i += 2 {
		f, e := results[i], results[i+1]
		fmt.Fprintf(&b, "%d GPUs: GPUs busy while a job waits %.2f%% vs %.2f%% fixed: %s; mean JCT %s vs %s fixed: %s; makespan %s vs %s\n", f.GPUs,
			100*e.WithWork, 100*f.WithWork, met(e.WithWork >= f.WithWork), hours(e.MeanJCT), hours(f.MeanJCT), met(e.MeanJCT < f.MeanJCT),
			hours(float64(e.Makespan)), hours(float64(f.Makespan)))
	}
	return b.String()
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
