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

package forecast

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// ObserveReport updates st.Forecast after a report of an epoch, folded into st at now, that was
// prev before it: the first report of an attempt is where the epoch rate is measured from; each
// later one of another epoch measures epochDuration and estimates completion as the epochs left
// at that rate. An epoch that goes back (a restart from an older checkpoint) starts the measure
// again; a report of the same epoch changes nothing.
func ObserveReport(st *convoy.TrainingJobStatus, prev int32, now time.Time) {
	if st.Forecast == nil {
		st.Forecast = &convoy.ForecastStatus{}
	}
	f := st.Forecast
	since := f.RateSince
	if since == nil || since.Attempt != st.RestartCount || st.CurrentEpoch < since.Epoch {
		f.RateSince = &convoy.EpochSample{Epoch: st.CurrentEpoch, Time: metav1.NewMicroTime(now), Attempt: st.RestartCount}
		f.EpochDuration, f.EstimatedCompletionTime = nil, nil
		return
	}
	if st.CurrentEpoch == prev || st.CurrentEpoch == since.Epoch {
		return
	}
	per := now.Sub(since.Time.Time) / time.Duration(st.CurrentEpoch-since.Epoch)
	f.EpochDuration = &metav1.Duration{Duration: per.Round(time.Millisecond)}
	f.EstimatedCompletionTime = nil
	if st.TotalEpochs > 0 {
		left := time.Duration(max(0, st.TotalEpochs-st.CurrentEpoch))
		f.EstimatedCompletionTime = &metav1.Time{Time: now.Add(left * per).Truncate(time.Second)}
	}
}

// Remaining is how long the job has left to run at its measured epoch rate, from its latest
// progress; false while no rate is measured or the epochs are unknown. A queued job that ran
// before (preempted, then queued again) keeps the rate of its last attempt.
func Remaining(st *convoy.TrainingJobStatus) (time.Duration, bool) {
	f := st.Forecast
	if f == nil || f.EpochDuration == nil || st.TotalEpochs == 0 {
		return 0, false
	}
	return time.Duration(max(0, st.TotalEpochs-st.CurrentEpoch)) * f.EpochDuration.Duration, true
}

// End is when an admitted job is expected to finish: its estimated completion, else (no epoch
// rate measured yet) its start plus typical, the mean run of the queue's finished jobs; zero
// when neither is known.
func End(st *convoy.TrainingJobStatus, typical time.Duration, now time.Time) time.Time {
	switch {
	case st.Forecast != nil && st.Forecast.EstimatedCompletionTime != nil:
		return st.Forecast.EstimatedCompletionTime.Time
	case typical > 0 && st.StartTime != nil:
		return st.StartTime.Add(typical)
	case typical > 0:
		return now.Add(typical)
	}
	return time.Time{}
}

// Runtime is how long a pending job is expected to run once admitted: what it has left at the
// rate of its last attempt, else typical; zero when neither is known.
func Runtime(st *convoy.TrainingJobStatus, typical time.Duration) time.Duration {
	if left, ok := Remaining(st); ok {
		return left
	}
	return typical
}
