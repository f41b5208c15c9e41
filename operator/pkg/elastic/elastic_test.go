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

package elastic

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func job(key string, min, max, cur int32) Job {
	return Job{Key: key, Min: min, Max: max, Current: cur, GPUsPerWorker: 8, Cooldown: 5 * time.Minute,
		MinEfficiency: 0.7, LastResize: now.Add(-time.Hour)}
}

func with(j Job, f func(*Job)) Job { f(&j); return j }

// sizes returns the From→To of each resize by key, the part of a decision the tests pin.
func sizes(rs []Resize) map[string][2]int32 {
	out := map[string][2]int32{}
	for _, r := range rs {
		out[r.Key] = [2]int32{r.From, r.To}
	}
	return out
}

func TestGrow(t *testing.T) {
	linear := map[int32]float64{2: 200, 4: 400}
	poor := map[int32]float64{2: 200, 4: 240} // 60% per worker at 4
	cases := map[string]struct {
		jobs []Job
		free int32
		want map[string][2]int32
	}{
		"grows to numWorkers when the GPUs are there": {
			jobs: []Job{job("a", 2, 4, 2)}, free: 32,
			want: map[string][2]int32{"a": {2, 4}},
		},
		"grows as far as the free GPUs go": {
			jobs: []Job{job("a", 2, 8, 2)}, free: 24,
			want: map[string][2]int32{"a": {2, 5}},
		},
		"no GPUs for a whole worker": {
			jobs: []Job{job("a", 2, 4, 2)}, free: 7,
			want: map[string][2]int32{},
		},
		"cooling down": {
			jobs: []Job{with(job("a", 2, 4, 2), func(j *Job) { j.LastResize = now.Add(-time.Minute) })}, free: 32,
			want: map[string][2]int32{},
		},
		"past its cooldown, a grow withdrawn in a row doubles it": {
			jobs: []Job{with(job("a", 2, 4, 2), func(j *Job) { j.LastResize = now.Add(-9 * time.Minute); j.Withdrawn = 1 })}, free: 32,
			want: map[string][2]int32{},
		},
		"two grows withdrawn in a row wait four cooldowns": {
			jobs: []Job{
				with(job("a", 2, 4, 2), func(j *Job) { j.LastResize = now.Add(-19 * time.Minute); j.Withdrawn = 2 }),
				with(job("b", 2, 4, 2), func(j *Job) { j.LastResize = now.Add(-21 * time.Minute); j.Withdrawn = 2 }),
			}, free: 64,
			want: map[string][2]int32{"b": {2, 4}},
		},
		"the doubling stops at 16 cooldowns": {
			jobs: []Job{with(job("a", 2, 4, 2), func(j *Job) { j.LastResize = now.Add(-81 * time.Minute); j.Withdrawn = 30 })}, free: 32,
			want: map[string][2]int32{"a": {2, 4}},
		},
		"measured efficiency below the threshold stops growth": {
			jobs: []Job{with(job("a", 2, 8, 4), func(j *Job) { j.Throughput = poor })}, free: 64,
			want: map[string][2]int32{},
		},
		"a size below the threshold caps growth under it": {
			jobs: []Job{with(job("a", 2, 8, 2), func(j *Job) { j.Throughput = poor })}, free: 64,
			want: map[string][2]int32{"a": {2, 3}},
		},
		"a lower threshold lets it grow": {
			jobs: []Job{with(job("a", 2, 8, 4), func(j *Job) { j.Throughput = poor; j.MinEfficiency = 0.5 })}, free: 8,
			want: map[string][2]int32{"a": {4, 5}},
		},
		"free GPUs go to the job that gains most": {
			jobs: []Job{
				with(job("flat", 2, 8, 4), func(j *Job) { j.Throughput = map[int32]float64{2: 200, 4: 320}; j.MinEfficiency = 0.1 }),
				with(job("steep", 2, 8, 4), func(j *Job) { j.Throughput = linear }),
			}, free: 16,
			want: map[string][2]int32{"steep": {4, 6}},
		},
		"a tie goes to the higher priority": {
			jobs: []Job{job("low", 1, 4, 1), with(job("high", 1, 4, 1), func(j *Job) { j.Priority = 10 })}, free: 8,
			want: map[string][2]int32{"high": {1, 2}},
		},
		"at numWorkers": {
			jobs: []Job{job("a", 2, 4, 4)}, free: 64,
			want: map[string][2]int32{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, sizes(Grow(tc.jobs, tc.free, now)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Grow (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestShrink(t *testing.T) {
	cases := map[string]struct {
		jobs     []Job
		need     int32
		priority int32
		want     map[string][2]int32
		none     bool
	}{
		"shrinks toward minWorkers instead of stopping": {
			jobs: []Job{job("a", 2, 8, 8)}, need: 16, priority: 5,
			want: map[string][2]int32{"a": {8, 6}},
		},
		"never below minWorkers": {
			jobs: []Job{job("a", 2, 8, 4)}, need: 24, priority: 5, none: true,
		},
		"only for a higher priority": {
			jobs: []Job{with(job("a", 2, 8, 8), func(j *Job) { j.Priority = 5 })}, need: 8, priority: 5, none: true,
		},
		"the lowest priority gives first": {
			jobs: []Job{with(job("mid", 1, 4, 4), func(j *Job) { j.Priority = 3 }), job("low", 1, 4, 4)}, need: 32, priority: 5,
			want: map[string][2]int32{"low": {4, 1}, "mid": {4, 3}},
		},
		"among equals the one that loses least": {
			jobs: []Job{
				with(job("flat", 1, 4, 4), func(j *Job) { j.Throughput = map[int32]float64{1: 100, 4: 150} }),
				with(job("steep", 1, 4, 4), func(j *Job) { j.Throughput = map[int32]float64{1: 100, 4: 400} }),
			}, need: 8, priority: 5,
			want: map[string][2]int32{"flat": {4, 3}},
		},
		"the same priority takes back only what was lent": {
			jobs: []Job{with(job("a", 2, 8, 7), func(j *Job) { j.Admitted = 4 })}, need: 16, priority: 0,
			want: map[string][2]int32{"a": {7, 5}},
		},
		"the same priority does not take more than was lent": {
			jobs: []Job{with(job("a", 2, 8, 5), func(j *Job) { j.Admitted = 4 })}, need: 16, priority: 0, none: true,
		},
		"cooldown does not hold a shrink back": {
			jobs: []Job{with(job("a", 2, 8, 8), func(j *Job) { j.LastResize = now })}, need: 8, priority: 5,
			want: map[string][2]int32{"a": {8, 7}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Shrink(tc.jobs, tc.need, tc.priority)
			if tc.none {
				if got != nil {
					t.Errorf("Shrink = %v, want nil: the GPUs cannot come free without stopping a job", got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, sizes(got)); diff != "" {
				t.Errorf("Shrink (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestEstimateAndGain(t *testing.T) {
	j := job("a", 1, 8, 2)
	if got := j.MarginalGain(2, 1); got != 1 {
		t.Errorf("unmeasured job: MarginalGain = %v, want 1 (linear scaling)", got)
	}
	j.Throughput = map[int32]float64{2: 200, 4: 300}
	for n, want := range map[int32]float64{1: 100, 3: 250, 4: 300, 6: 400} {
		if got := j.Estimate(n); got != want {
			t.Errorf("Estimate(%d) = %v, want %v", n, got, want)
		}
	}
	if got := j.MarginalGain(4, 2); got != 50.0/75 {
		t.Errorf("MarginalGain(4, 2) = %v, want %v", got, 50.0/75)
	}
	if eff, ok := j.Efficiency(4); !ok || eff != 0.75 {
		t.Errorf("Efficiency(4) = %v, %v, want 0.75, true", eff, ok)
	}
	if got := j.GrowthCap(); got != 8 {
		t.Errorf("GrowthCap at 75%% efficiency, threshold 70%% = %d, want 8", got)
	}
}
