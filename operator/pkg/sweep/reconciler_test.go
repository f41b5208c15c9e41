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

package sweep

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func TestTrialState(t *testing.T) {
	cond := func(typ, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: reason}}
	}
	cases := map[string]struct {
		job  convoy.TrainingJob
		want convoy.TrialState
	}{
		"queued":        {job: convoy.TrainingJob{Status: convoy.TrainingJobStatus{State: convoy.StateQueued}}, want: convoy.TrialPending},
		"running":       {job: convoy.TrainingJob{Status: convoy.TrainingJobStatus{State: convoy.StateRunning}}, want: convoy.TrialRunning},
		"completed":     {job: convoy.TrainingJob{Status: convoy.TrainingJobStatus{Conditions: cond(convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded)}}, want: convoy.TrialSucceeded},
		"early-stopped": {job: convoy.TrainingJob{Status: convoy.TrainingJobStatus{Conditions: cond(convoy.ConditionCompleted, convoy.ReasonEarlyStopped)}}, want: convoy.TrialEarlyStopped},
		"failed":        {job: convoy.TrainingJob{Status: convoy.TrainingJobStatus{Conditions: cond(convoy.ConditionFailed, convoy.ReasonPodFailed)}}, want: convoy.TrialFailed},
		"paused": {job: convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationTrialPaused: "true"}},
			Status: convoy.TrainingJobStatus{State: convoy.StateRunning}}, want: convoy.TrialPaused},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := trialState(&tc.job); got != tc.want {
				t.Errorf("trialState = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestAddObservation(t *testing.T) {
	obs := func(epochs ...int32) []convoy.Observation {
		var out []convoy.Observation
		for _, e := range epochs {
			out = append(out, convoy.Observation{Epoch: e, Value: float64(e)})
		}
		return out
	}
	cases := map[string]struct {
		have []convoy.Observation
		add  int32
		want []convoy.Observation
	}{
		"the next epoch":              {have: obs(1, 2), add: 3, want: obs(1, 2, 3)},
		"the same epoch again":        {have: obs(1, 2), add: 2, want: obs(1, 2)},
		"epochs skipped between":      {have: obs(1), add: 4, want: obs(1, 4)},
		"resumed from an earlier one": {have: obs(1, 2, 3, 4), add: 3, want: obs(1, 2, 3)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := addObservation(tc.have, convoy.Observation{Epoch: tc.add, Value: float64(tc.add)})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDeletedTrialsCost(t *testing.T) {
	usd := func(hours, amount float64) *convoy.CostTotal {
		return &convoy.CostTotal{GPUHours: hours, Amount: &amount, Currency: "USD"}
	}
	trial := func(name string, c *convoy.CostTotal) convoy.TrialStatus {
		return convoy.TrialStatus{Name: name, Cost: c}
	}
	present := func(names ...string) []Trial {
		var out []Trial
		for _, n := range names {
			out = append(out, Trial{TrialStatus: convoy.TrialStatus{Name: n}})
		}
		return out
	}
	cases := map[string]struct {
		prev   convoy.TrainingSweepStatus
		trials []Trial
		want   *convoy.CostTotal
	}{
		"every trial still there": {
			prev:   convoy.TrainingSweepStatus{TrialStatuses: []convoy.TrialStatus{trial("a", usd(1, 4))}},
			trials: present("a"),
		},
		"a deleted trial's last cost is kept": {
			prev:   convoy.TrainingSweepStatus{TrialStatuses: []convoy.TrialStatus{trial("a", usd(1, 4)), trial("b", usd(2, 8))}},
			trials: present("a"),
			want:   &convoy.CostTotal{GPUHours: 2, Amount: ptr.To(8.0), Currency: "USD", Summary: "8.00 USD"},
		},
		"added to the trials deleted before": {
			prev: convoy.TrainingSweepStatus{DeletedTrialsCost: usd(0.5, 2),
				TrialStatuses: []convoy.TrialStatus{trial("a", usd(1, 4))}},
			want: &convoy.CostTotal{GPUHours: 1.5, Amount: ptr.To(6.0), Currency: "USD", Summary: "6.00 USD"},
		},
		"kept as it was while nothing more is deleted": {
			prev:   convoy.TrainingSweepStatus{DeletedTrialsCost: usd(0.5, 2), TrialStatuses: []convoy.TrialStatus{trial("a", usd(1, 4))}},
			trials: present("a"),
			want:   &convoy.CostTotal{GPUHours: 0.5, Amount: ptr.To(2.0), Currency: "USD", Summary: "2.00 USD"},
		},
		"an unpriced deleted trial leaves GPU-hours only": {
			prev: convoy.TrainingSweepStatus{DeletedTrialsCost: usd(0.5, 2),
				TrialStatuses: []convoy.TrialStatus{trial("a", &convoy.CostTotal{GPUHours: 3})}},
			want: &convoy.CostTotal{GPUHours: 3.5, Summary: "3.50 GPU-h"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, deletedTrialsCost(&tc.prev, tc.trials)); diff != "" {
				t.Errorf("deletedTrialsCost (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTrialConflict: a TrainingJob in the way of the next trial is named in ChildConflict until it
// is gone; a sweep that never had one carries no such condition.
func TestTrialConflict(t *testing.T) {
	now := metav1.Now()
	squatter := &convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tune-0"}}
	taken := metav1.Condition{Type: convoy.ConditionChildConflict, Status: metav1.ConditionTrue, Reason: convoy.ReasonNameTaken, LastTransitionTime: now,
		Message: "TrainingJob ns/tune-0 exists and is not controlled by this TrainingSweep, which will not use it as a trial: delete it or rename the sweep"}
	free := metav1.Condition{Type: convoy.ConditionChildConflict, Status: metav1.ConditionFalse, Reason: convoy.ReasonNameFree, LastTransitionTime: now,
		Message: "every trial of the sweep is its own"}
	cases := map[string]struct {
		had   []metav1.Condition
		taken *convoy.TrainingJob
		want  []metav1.Condition
	}{
		"no conflict, none before":      {},
		"a trial's name taken":          {taken: squatter, want: []metav1.Condition{taken}},
		"still taken":                   {had: []metav1.Condition{taken}, taken: squatter, want: []metav1.Condition{taken}},
		"the squatter gone":             {had: []metav1.Condition{taken}, want: []metav1.Condition{free}},
		"gone earlier: left as it was":  {had: []metav1.Condition{free}, want: []metav1.Condition{free}},
		"taken again after being freed": {had: []metav1.Condition{free}, taken: squatter, want: []metav1.Condition{taken}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := &convoy.TrainingSweepStatus{Conditions: tc.had}
			trialConflict(st, tc.taken, now)
			if diff := cmp.Diff(tc.want, st.Conditions); diff != "" {
				t.Errorf("conditions (-want,+got):\n%s", diff)
			}
		})
	}
}
