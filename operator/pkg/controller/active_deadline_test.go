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

// TestActiveDeadline: a gang that ran spec.failurePolicy.activeDeadlineSeconds fails.
func TestActiveDeadline(t *testing.T) {
	job, runningJob := twoWorkers()
	testDecide(t, map[string]decideCase{
		"activeDeadlineSeconds passed: failed with DeadlineExceeded": {
			job:  runningJob.Clone().Deadline(3600).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonDeadlineExceeded),
				FailureReason: convoy.ReasonDeadlineExceeded, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionFailed: "the job ran longer than spec.failurePolicy.activeDeadlineSeconds (3600s)"},
		},
		"activeDeadlineSeconds not yet passed: wake up at the deadline": {
			job:  runningJob.Clone().Deadline(3700).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning),
				Workers: convoy.WorkerCounts{Active: 2}, Children: true, RequeueAfter: 100 * time.Second, Started: true},
		},

		"activeDeadlineSeconds before the gang started: the clock has not started": {
			job: job.Clone().Deadline(10).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
		},
		"activeDeadlineSeconds passed while the gang restarts: failed, the old pods stopped": {
			job: job.Clone().Deadline(60).Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 1, FailureRestarts: 1, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonPodFailed, now.Add(-time.Second))}}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonDeadlineExceeded), FailureReason: convoy.ReasonDeadlineExceeded,
				RestartCount: 1, FailureRestarts: 1, Delete: []string{"llm-worker-0"}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionFailed: "(60s): raise it, or resume from the latest checkpoint in a new job"},
		},
	})
}
