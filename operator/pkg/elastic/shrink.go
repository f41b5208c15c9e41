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
)

// Shrink chooses which running elastic jobs give up workers so that needGPUs GPUs come free for
// a waiting job of priority priority, instead of a job being stopped: a job of lower priority
// down to its Min, one of the same priority only the workers it grew beyond its Admitted size.
// One worker at a time goes from the lowest-priority job, among equals from the one whose last
// worker brings the least. Cooldowns do not hold a shrink back: the alternative is stopping a
// whole job, or lent GPUs kept from the job they were lent by. It returns nil when every
// candidate shrunk as far as it may frees fewer than needGPUs.
func Shrink(jobs []Job, needGPUs, priority int32) []Resize {
	size := map[int]int32{}
	var cands []int
	for i := range jobs {
		if j := &jobs[i]; j.Current > j.floor(priority) {
			size[i] = j.Current
			cands = append(cands, i)
		}
	}
	freed := int32(0)
	for freed < needGPUs {
		cands = slices.DeleteFunc(cands, func(i int) bool { return size[i] <= jobs[i].floor(priority) })
		if len(cands) == 0 {
			return nil
		}
		victim := slices.MinFunc(cands, func(a, b int) int {
			ja, jb := &jobs[a], &jobs[b]
			return cmp.Or(cmp.Compare(ja.Priority, jb.Priority),
				cmp.Compare(ja.MarginalGain(size[a]-1, 1), jb.MarginalGain(size[b]-1, 1)),
				cmp.Compare(ja.Key, jb.Key))
		})
		size[victim]--
		freed += jobs[victim].GPUsPerWorker
	}
	var out []Resize
	for i := range jobs {
		if j := &jobs[i]; size[i] < j.Current && size[i] > 0 {
			out = append(out, Resize{Key: j.Key, From: j.Current, To: size[i],
				Reason: fmt.Sprintf("a waiting job of priority %d needs %d GPUs", priority, needGPUs)})
		}
	}
	return out
}

// floor is the fewest workers the job shrinks to for a waiting job of priority priority; Current
// when it does not shrink for it.
func (j *Job) floor(priority int32) int32 {
	switch {
	case j.Priority < priority:
		return j.Min
	case j.Priority == priority && j.Admitted > 0:
		return max(j.Admitted, j.Min)
	}
	return j.Current
}
