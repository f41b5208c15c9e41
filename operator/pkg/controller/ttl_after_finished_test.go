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
)

// TestTTLAfterFinished: a finished job is deleted spec.ttlSecondsAfterFinished after it finished.
func TestTTLAfterFinished(t *testing.T) {
	job, runningJob := twoWorkers()
	testDecide(t, map[string]decideCase{
		"finished with a TTL not yet passed: wake up then": {
			job: job.Clone().TTL(7200).Status(convoy.TrainingJobStatus{StartTime: start, CompletionTime: start, Conditions: []metav1.Condition{
				cond(convoy.ConditionCompleted, metav1.ConditionTrue, convoy.ReasonAllWorkersSucceeded, t0)}}).Obj(),
			want: outcome{State: convoy.StateCompleted, Reasons: map[string]string{convoy.ConditionCompleted: convoy.ReasonAllWorkersSucceeded},
				RequeueAfter: time.Hour, Started: true, Finished: true},
		},
		"finished and the TTL passed: the job is deleted": {
			job: job.Clone().TTL(60).Status(convoy.TrainingJobStatus{StartTime: start, CompletionTime: start, Conditions: []metav1.Condition{
				cond(convoy.ConditionFailed, metav1.ConditionTrue, convoy.ReasonPodFailed, t0)}}).Obj(),
			want: outcome{State: convoy.StateFailed, Reasons: map[string]string{convoy.ConditionFailed: convoy.ReasonPodFailed},
				DeleteJob: true, Started: true, Finished: true},
		},
		"its model still publishing with the TTL passed: the job kept, the publish pod with it": {
			job: job.Clone().TTL(60).Output(convoy.ModelOutput{Image: "registry.example.com/team/llm:v1"}).Status(convoy.TrainingJobStatus{
				StartTime: start, CompletionTime: start, Conditions: []metav1.Condition{
					cond(convoy.ConditionCompleted, metav1.ConditionTrue, convoy.ReasonAllWorkersSucceeded, t0),
					cond(convoy.ConditionModelPublished, metav1.ConditionFalse, convoy.ReasonPublishing, t0)}}).Obj(),
			want: outcome{State: convoy.StateCompleted, Reasons: map[string]string{convoy.ConditionCompleted: convoy.ReasonAllWorkersSucceeded},
				Started: true, Finished: true},
		},
		"its model not yet publishing with the TTL passed: the job kept": {
			job: job.Clone().TTL(0).Output(convoy.ModelOutput{Image: "registry.example.com/team/llm:v1"}).Status(convoy.TrainingJobStatus{
				StartTime: start, CompletionTime: start, Conditions: []metav1.Condition{
					cond(convoy.ConditionCompleted, metav1.ConditionTrue, convoy.ReasonAllWorkersSucceeded, t0)}}).Obj(),
			want: outcome{State: convoy.StateCompleted, Reasons: map[string]string{convoy.ConditionCompleted: convoy.ReasonAllWorkersSucceeded},
				Started: true, Finished: true},
		},
		"its model published, or failed to, with the TTL passed: the job is deleted": {
			job: job.Clone().TTL(60).Output(convoy.ModelOutput{Image: "registry.example.com/team/llm:v1"}).Status(convoy.TrainingJobStatus{
				StartTime: start, CompletionTime: start, Conditions: []metav1.Condition{
					cond(convoy.ConditionCompleted, metav1.ConditionTrue, convoy.ReasonAllWorkersSucceeded, t0),
					cond(convoy.ConditionModelPublished, metav1.ConditionFalse, convoy.ReasonPublishFailed, t0)}}).Obj(),
			want: outcome{State: convoy.StateCompleted, Reasons: map[string]string{convoy.ConditionCompleted: convoy.ReasonAllWorkersSucceeded},
				DeleteJob: true, Started: true, Finished: true},
		},

		"finished without a TTL: its finished pods kept, the others stopped, the job kept": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, CompletionTime: start, Conditions: []metav1.Condition{
				cond(convoy.ConditionCompleted, metav1.ConditionTrue, convoy.ReasonAllWorkersSucceeded, t0)}}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(0).obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateCompleted, Reasons: map[string]string{convoy.ConditionCompleted: convoy.ReasonAllWorkersSucceeded},
				Delete: []string{"llm-worker-1"}, Started: true, Finished: true},
		},
		"finishing with a TTL: looked at again when it passes": {
			job:  runningJob.Clone().TTL(60).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(0).obj(), makePod(job.Obj(), "worker", 1).exit(0).obj()},
			want: outcome{State: convoy.StateCompleted, Reasons: with(admitted, convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded),
				Workers: convoy.WorkerCounts{Succeeded: 2}, RequeueAfter: time.Minute, Started: true, Finished: true},
		},
	})
}
