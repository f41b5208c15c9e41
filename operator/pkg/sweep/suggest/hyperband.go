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

package suggest

import (
	"math"
	"slices"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Rungs are the epochs at which asynchronous successive halving (ASHA, the asynchronous form of
// hyperband's brackets; Li et al., 2020) compares trials: minResource, minResource*eta, ...,
// below maxResource. A trial pauses at each rung until it is among the best 1/eta of the trials
// that reached that rung; past the last rung it runs to maxResource.
func Rungs(minResource, maxResource int32, eta float64) []int32 {
	var out []int32
	for r := float64(max(1, minResource)); r < float64(maxResource); r *= eta {
		e := int32(math.Round(r))
		if len(out) > 0 && e <= out[len(out)-1] {
			e = out[len(out)-1] + 1
		}
		if e >= maxResource {
			break
		}
		out = append(out, e)
	}
	return out
}

// RungLoss is the loss a trial reported at a rung's epoch, or, where the operator did not see that
// report (the trial reported the next epoch before the sweep looked), at the first epoch it
// reported after; false when it reported none from the rung's epoch on. sign is 1 to minimize and -1
// to maximize. A trial that passed the rung is compared there however its reports were sampled.
func RungLoss(obs []convoy.Observation, epoch int32, sign float64) (float64, bool) {
	i, _ := slices.BinarySearchFunc(obs, epoch, func(o convoy.Observation, e int32) int { return int(o.Epoch - e) })
	if i == len(obs) {
		return 0, false
	}
	return sign * obs[i].Value, true
}

// RungResult is one trial's loss at a rung and whether it has moved past it.
type RungResult struct {
	Trial    string
	Loss     float64
	Promoted bool
}

// Promotable returns the trials of one rung that may move on, best first: those among the best
// floor(n/eta) of the n trials that reached the rung which have not been promoted yet.
func Promotable(results []RungResult, eta float64) []string {
	sorted := slices.Clone(results)
	slices.SortStableFunc(sorted, func(a, b RungResult) int { return compareFloat(a.Loss, b.Loss) })
	top := int(math.Floor(float64(len(sorted)) / eta))
	var out []string
	for _, r := range sorted[:top] {
		if !r.Promoted {
			out = append(out, r.Trial)
		}
	}
	return out
}
