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

// Shrink chooses which running elastic jobs of lower priority than priority give up workers so
// that needGPUs GPUs come free, instead of a job being stopped: one worker at a time from the
// lowest-priority job, and among equals the one whose last worker brings the least, never below
// a job's Min. Cooldowns do not hold a shrink back: the alternative is stopping a whole job. It
// returns nil when shrinking every candidate to its Min frees fewer than needGPUs.
func Shrink(jobs []Job, needGPUs, priority int32) []Resize {
	size := map[int]int32{}
	var cands []int
	for i := range jobs {
		if j := &jobs[i]; j.Priority < priority && j.Current > j.Min {
			size[i] = j.Current
			cands = append(cands, i)
		}
	}
	freed := int32(0)
	for freed < needGPUs {
		cands = slices.DeleteFunc(cands, func(i int) bool { return size[i] <= jobs[i].Min })
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
				Reason: fmt.Sprintf("a job of priority %d needs %d GPUs", priority, needGPUs)})
		}
	}
	return out
}
