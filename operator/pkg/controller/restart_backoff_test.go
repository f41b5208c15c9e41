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

package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// TestRestartBackoff: a Restarting gang waits for its pods to go and for the backoff before the next attempt is created.
func TestRestartBackoff(t *testing.T) {
	job, _ := twoWorkers()
	testDecide(t, map[string]decideCase{
		"restarting: waits for the old gang's pods to go": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 1, FailureRestarts: 1, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonPodFailed, now.Add(-time.Minute))}}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).deleting().obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Delete: []string{"llm-worker-1"}, Started: true},
		},
		"restarting: the old pods are gone but the backoff has not passed": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 2, FailureRestarts: 2, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonPodFailed, now.Add(-5*time.Second))}}).Obj(),
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 2, FailureRestarts: 2, RequeueAfter: 15 * time.Second, Started: true},
		},
		"restarting: backoff passed, the next attempt's pods are created": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 1, FailureRestarts: 1, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonPodFailed, now.Add(-11*time.Second))}}).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				RestartCount: 1, FailureRestarts: 1, Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "the gang was recreated (restart 1)"},
		},
		"a second restart for lost pods waits the backoff": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 2, DisruptionRestarts: 2, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonNodeLost, now.Add(-5*time.Second))}}).Obj(),
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost),
				RestartCount: 2, DisruptionRestarts: 2, RequeueAfter: 5 * time.Second, Started: true},
		},
		"a lost pod's gang restarts at once": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 1, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonNodeLost, now)}}).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				RestartCount: 1, Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
		},

		"a restart after the scheduler preempted the gang does not wait the backoff": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 3, DisruptionRestarts: 2, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionPreempted, metav1.ConditionTrue, convoy.ReasonPreempted, now),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonNodeLost, now)}}).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated, convoy.ConditionPreempted, convoy.ReasonPreempted),
				RestartCount: 3, DisruptionRestarts: 2, Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
		},
		"the backoff doubles with each failure restart": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 3, FailureRestarts: 3, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonPodFailed, now.Add(-30*time.Second))}}).Obj(),
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 3, FailureRestarts: 3, RequeueAfter: 10 * time.Second, Started: true},
		},
	})
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 10 * time.Second, Max: time.Minute}
	for n, want := range map[int32]time.Duration{0: 0, 1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 4: time.Minute, 30: time.Minute} {
		if got := b.delay(n); got != want {
			t.Errorf("delay(%d) = %v, want %v", n, got, want)
		}
	}
}
