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
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Grow shares free GPUs among the jobs that may grow now, one worker at a time to the job whose
// next worker brings the most (MarginalGain), the higher priority first on a tie. A job may grow
// when it is not cooling down from its last resize, and only up to its GrowthCap and to the size
// where its estimated efficiency stays at least MinEfficiency. Each job that grows gets one
// Resize to its final size: every resize costs the gang a checkpoint and a new rendezvous.
func Grow(jobs []Job, freeGPUs int32, now time.Time) []Resize {
	size := map[int]int32{}
	limit := map[int]int32{}
	var open []int
	for i := range jobs {
		if j := &jobs[i]; !j.CoolingDown(now) && j.GPUsPerWorker <= freeGPUs {
			if limit[i] = j.worthGrowingTo(); j.Current < limit[i] {
				size[i] = j.Current
				open = append(open, i)
			}
		}
	}
	for len(open) > 0 {
		best, bestGain := -1, 0.0
		for _, i := range open {
			j := &jobs[i]
			if j.GPUsPerWorker > freeGPUs || size[i] >= limit[i] {
				continue
			}
			if g := j.MarginalGain(size[i], 1); best < 0 || better(g, j, bestGain, &jobs[best]) {
				best, bestGain = i, g
			}
		}
		if best < 0 || bestGain <= 0 {
			break
		}
		size[best]++
		freeGPUs -= jobs[best].GPUsPerWorker
		if size[best] >= limit[best] {
			open = slices.DeleteFunc(open, func(i int) bool { return i == best })
		}
	}
	var out []Resize
	for i := range jobs {
		if j := &jobs[i]; size[i] > j.Current {
			out = append(out, Resize{Key: j.Key, From: j.Current, To: size[i],
				Reason: fmt.Sprintf("GPUs came free and each added worker is expected to bring %.0f%% of a worker's throughput",
					100*j.MarginalGain(j.Current, size[i]-j.Current))})
		}
	}
	return out
}

// worthGrowingTo is the most workers the job is worth growing to: its GrowthCap, and with two
// sizes or more measured, no further than its estimated efficiency stays at least MinEfficiency.
func (j *Job) worthGrowingTo() int32 {
	limit := j.GrowthCap()
	sizes := j.measured()
	if len(sizes) < 2 {
		return limit
	}
	base := j.Throughput[sizes[0]] / float64(sizes[0])
	for n := j.Current + 1; n <= limit; n++ {
		if j.Estimate(n)/float64(n) < j.MinEfficiency*base {
			return n - 1
		}
	}
	return limit
}

// better orders candidates: the larger gain, then the higher priority, then the key.
func better(g float64, j *Job, bestGain float64, best *Job) bool {
	if g != bestGain {
		return g > bestGain
	}
	return cmp.Or(cmp.Compare(j.Priority, best.Priority), cmp.Compare(best.Key, j.Key)) > 0
}
