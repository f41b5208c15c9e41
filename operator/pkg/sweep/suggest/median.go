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
	"slices"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// MedianOptions are the settings of the median stopping rule, named as Katib names them.
type MedianOptions struct {
	// MinTrialsRequired is how many succeeded trials there must be before any trial is stopped.
	MinTrialsRequired int
	// StartStep is the first epoch at which a trial may be stopped.
	StartStep int32
}

// DefaultMedian are the settings when the sweep names none.
var DefaultMedian = MedianOptions{MinTrialsRequired: 3, StartStep: 1}

// LossAt is the loss a trial reported at the latest epoch at or before epoch, and false when it
// reported none by then. sign is 1 to minimize and -1 to maximize.
func LossAt(obs []convoy.Observation, epoch int32, sign float64) (float64, bool) {
	i, found := slices.BinarySearchFunc(obs, epoch, func(o convoy.Observation, e int32) int { return int(o.Epoch - e) })
	if !found {
		i--
	}
	if i < 0 {
		return 0, false
	}
	return sign * obs[i].Value, true
}

// MedianStop reports whether a running trial whose loss at epoch is loss should stop: the
// median stopping rule (Golovin et al., 2017, as Katib's medianstop) stops it when it is worse
// than the median of the succeeded trials' losses at the same epoch.
func MedianStop(loss float64, epoch int32, succeeded [][]convoy.Observation, sign float64, o MedianOptions) (median float64, stop bool) {
	if epoch < o.StartStep || len(succeeded) < o.MinTrialsRequired {
		return 0, false
	}
	var at []float64
	for _, obs := range succeeded {
		if v, ok := LossAt(obs, epoch, sign); ok {
			at = append(at, v)
		}
	}
	if len(at) < o.MinTrialsRequired {
		return 0, false
	}
	slices.Sort(at)
	median = at[len(at)/2]
	if len(at)%2 == 0 {
		median = (at[len(at)/2-1] + at[len(at)/2]) / 2
	}
	return median, loss > median
}
