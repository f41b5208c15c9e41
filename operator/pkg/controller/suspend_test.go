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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TestSuspend: spec.suspend stops the gang: Suspended, or Queued with a queue.
func TestSuspend(t *testing.T) {
	job, runningJob := twoWorkers()
	testDecide(t, map[string]decideCase{
		"suspended by the user: pods deleted, deadline clock reset": {
			job:  runningJob.Clone().Suspend(true).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateSuspended, Reasons: with(admitted, convoy.ConditionSuspended, convoy.ReasonUserSuspended),
				Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-0", "llm-worker-1"}, RestartCount: 1},
			says: map[string]string{convoy.ConditionSuspended: "spec.suspend is true: the gang's pods are deleted; set it to false to resume from the latest checkpoint"},
		},
		"suspended with a queue: queued for admission": {
			job:  job.Clone().Queue("team-a").Suspend(true).Obj(),
			want: outcome{State: convoy.StateQueued, Reasons: map[string]string{convoy.ConditionQueued: convoy.ReasonWaitingForAdmission}},
			says: map[string]string{convoy.ConditionQueued: `waiting for Kueue to admit the job to LocalQueue "team-a"; ` + "`kubectl get workloads -n ns` shows why it waits"},
		},
		"preempted by the queue: queued again, the whole gang deleted and counted until gone": {
			job:   runningJob.Clone().Queue("team-a").Suspend(true).Obj(),
			pods:  gang(job.Obj(), corev1.PodRunning),
			queue: QueueStatus{WaitingMessage: "waiting", Preempted: "preempted by TrainingJob ns/urgent"},
			want: outcome{State: convoy.StateQueued, Reasons: map[string]string{convoy.ConditionQueued: convoy.ReasonWaitingForAdmission,
				convoy.ConditionPreempted: convoy.ReasonPreempted}, Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-0", "llm-worker-1"},
				RestartCount: 1},
			says: map[string]string{convoy.ConditionQueued: "waiting", convoy.ConditionPreempted: "preempted by TrainingJob ns/urgent"},
		},

		"suspended again while the stopped gang still terminates: not counted twice": {
			job: runningJob.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Conditions: append(running(t0),
				cond(convoy.ConditionSuspended, metav1.ConditionTrue, convoy.ReasonUserSuspended, t0))}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).deleting().obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateSuspended, Reasons: with(admitted, convoy.ConditionSuspended, convoy.ReasonUserSuspended),
				Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-1"}},
		},
		"suspended before it ran: nothing to stop, nothing counted": {
			job:  job.Clone().Suspend(true).Obj(),
			want: outcome{State: convoy.StateSuspended, Reasons: map[string]string{convoy.ConditionSuspended: convoy.ReasonUserSuspended}},
		},
	})
}
