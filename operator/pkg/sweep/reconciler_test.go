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
