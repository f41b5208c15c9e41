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
	"math"
	"slices"
)

// measured returns the measured sizes in increasing order.
func (j *Job) measured() []int32 {
	var sizes []int32
	for n, t := range j.Throughput {
		if n > 0 && t > 0 {
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	return sizes
}

// Efficiency is the per-worker throughput at n workers as a share of that at the smallest
// measured size; ok is false when n or no smaller size is measured.
func (j *Job) Efficiency(n int32) (eff float64, ok bool) {
	sizes := j.measured()
	t, measuredN := j.Throughput[n]
	if len(sizes) == 0 || !measuredN || t <= 0 {
		return 0, false
	}
	base := j.Throughput[sizes[0]] / float64(sizes[0])
	return (t / float64(n)) / base, true
}

// GrowthCap is the most workers the job may grow to by its measurements: numWorkers, or one less
// than the smallest measured size whose efficiency fell below MinEfficiency. With no such size
// the job may grow, and measure, as far as numWorkers.
func (j *Job) GrowthCap() int32 {
	sizes := j.measured()
	for _, n := range sizes {
		base := j.Throughput[sizes[0]] / float64(sizes[0])
		if j.Throughput[n]/float64(n) < j.MinEfficiency*base {
			return max(n-1, j.Min)
		}
	}
	return j.Max
}

// Estimate is the expected throughput at n workers: measured where it was, else interpolated
// between measured sizes (through 0 at 0 workers) and extended past the largest with the slope
// of the last segment. Without measurements it is n: linear scaling in units of one worker.
func (j *Job) Estimate(n int32) float64 {
	if t, ok := j.Throughput[n]; ok && t > 0 {
		return t
	}
	xs := []float64{0}
	ys := []float64{0}
	for _, m := range j.measured() {
		xs = append(xs, float64(m))
		ys = append(ys, j.Throughput[m])
	}
	if len(xs) == 1 {
		return float64(n)
	}
	x := float64(n)
	i := 1
	for i < len(xs)-1 && xs[i] < x {
		i++
	}
	slope := (ys[i] - ys[i-1]) / (xs[i] - xs[i-1])
	return math.Max(0, ys[i]+slope*(x-xs[i]))
}

// MarginalGain is what adding workers from n to n+k brings, relative to the job's current
// per-worker throughput: 1 per added worker when the job scales linearly, less as it scales
// worse. It is unitless, so jobs whose samples differ compare.
func (j *Job) MarginalGain(n, k int32) float64 {
	cur := j.Estimate(n)
	if n <= 0 || cur <= 0 || k <= 0 {
		return 0
	}
	return (j.Estimate(n+k) - cur) / (cur / float64(n)) / float64(k)
}
