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
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// TestAdmission: the job is Admitted, by its queue or at once, and a resumed gang starts once its stopped pods are gone.
func TestAdmission(t *testing.T) {
	job, _ := twoWorkers()
	testDecide(t, map[string]decideCase{
		"a new job without a queue is admitted at once and its gang created": {
			job: job.Clone().Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
			says: map[string]string{convoy.ConditionAdmitted: "no queue is named: the job runs at once", convoy.ConditionInitializing: `0 of 2 pods are running; the gang starts once scheduler "convoy-scheduler" has placed all of them`},
		},
		"resumed while the suspended gang still terminates: wait": {
			job: job.Clone().Status(convoy.TrainingJobStatus{Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionSuspended, metav1.ConditionTrue, convoy.ReasonUserSuspended, t0)}}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).deleting().obj()},
			want: outcome{State: convoy.StateSuspended, Reasons: with(admitted, convoy.ConditionSuspended, convoy.ReasonUserSuspended)},
		},
		"resumed once the pods are gone: the gang starts again": {
			job: job.Clone().Status(convoy.TrainingJobStatus{Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionSuspended, metav1.ConditionTrue, convoy.ReasonUserSuspended, t0)}}).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
		},
		"admitted by the queue: runs": {
			job:  job.Clone().Queue("team-a").Suspend(false).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: map[string]string{convoy.ConditionAdmitted: convoy.ReasonAdmitted, convoy.ConditionInitializing: convoy.ReasonPodsCreated}, Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
			says: map[string]string{convoy.ConditionAdmitted: `admitted to LocalQueue "team-a": spec.suspend is false`},
		},
		"spec.suspend set to false while Kueue has not admitted the Workload: no pod, Queued says why": {
			job:   job.Clone().Queue("team-a").Suspend(false).Obj(),
			queue: QueueStatus{Managed: true, WaitingMessage: `waiting in ClusterQueue "team-a" (LocalQueue "team-a")`},
			want:  outcome{State: convoy.StateQueued, Reasons: map[string]string{convoy.ConditionQueued: convoy.ReasonWaitingForAdmission}},
			says:  map[string]string{convoy.ConditionQueued: `spec.suspend is false, but Kueue has not admitted the job's Workload: no pod is created until it does; waiting in ClusterQueue "team-a"`},
		},
		"a job without a queue that Kueue manages waits for its Workload's admission": {
			job:   job.Clone().Obj(),
			queue: QueueStatus{Managed: true},
			want:  outcome{State: convoy.StateQueued, Reasons: map[string]string{convoy.ConditionQueued: convoy.ReasonWaitingForAdmission}},
		},
		"a job without a queue runs once Kueue admits its Workload": {
			job:   job.Clone().Obj(),
			queue: QueueStatus{Managed: true, Admitted: true, Admission: &convoy.AdmissionStatus{ClusterQueue: "team-a"}},
			want:  outcome{State: convoy.StateInitializing, Reasons: map[string]string{convoy.ConditionAdmitted: convoy.ReasonAdmitted, convoy.ConditionInitializing: convoy.ReasonPodsCreated}, Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
		},

		"resumed from the queue once the pods are gone: Queued turns false and the gang starts": {
			job: job.Clone().Queue("team-a").Suspend(false).Status(convoy.TrainingJobStatus{RestartCount: 1, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionFalse, convoy.ReasonWaitingForAdmission, t0),
				cond(convoy.ConditionQueued, metav1.ConditionTrue, convoy.ReasonWaitingForAdmission, t0)}}).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: map[string]string{convoy.ConditionAdmitted: convoy.ReasonAdmitted, convoy.ConditionInitializing: convoy.ReasonPodsCreated},
				RestartCount: 1, Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
			says: map[string]string{convoy.ConditionQueued: "admitted"},
		},
		"resumed from the queue while the evicted gang still runs: its pods are deleted first": {
			job: job.Clone().Queue("team-a").Suspend(false).Status(convoy.TrainingJobStatus{Conditions: []metav1.Condition{
				cond(convoy.ConditionQueued, metav1.ConditionTrue, convoy.ReasonWaitingForAdmission, t0)}}).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateQueued, Reasons: map[string]string{convoy.ConditionAdmitted: convoy.ReasonAdmitted, convoy.ConditionQueued: convoy.ReasonWaitingForAdmission},
				Delete: []string{"llm-worker-0", "llm-worker-1"}},
		},
	})
}
