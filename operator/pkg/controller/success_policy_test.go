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
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TestSuccessPolicy: the job completes when every pod that must succeed did, or spec.successPolicy is met, and its running pods are stopped.
func TestSuccessPolicy(t *testing.T) {
	job, runningJob := twoWorkers()
	testDecide(t, map[string]decideCase{
		"every worker succeeded: completed, parameter servers stopped": {
			job: job.Clone().Framework(convoy.FrameworkTensorFlow).ParameterServers(1).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start}).Obj(),
			pods: []*corev1.Pod{
				makePod(job.Clone().Framework(convoy.FrameworkTensorFlow).Obj(), "worker", 0).exit(0).obj(),
				makePod(job.Clone().Framework(convoy.FrameworkTensorFlow).Obj(), "worker", 1).exit(0).obj(),
				makePod(job.Clone().Framework(convoy.FrameworkTensorFlow).Obj(), "ps", 0).phase(corev1.PodRunning).obj(),
			},
			want: outcome{State: convoy.StateCompleted, Reasons: with(admitted, convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded),
				Workers: convoy.WorkerCounts{Succeeded: 2, Active: 1}, Delete: []string{"llm-ps-0"}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionCompleted: "every worker exited 0"},
		},
		"mpi: the launcher's success completes the job and stops the ssh workers": {
			job:  job.Clone().Framework(convoy.FrameworkMPI).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(0).obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateCompleted, Reasons: with(admitted, convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded),
				Workers: convoy.WorkerCounts{Succeeded: 1, Active: 1}, Delete: []string{"llm-worker-1"}, Started: true, Finished: true},
		},
		"target accuracy reached: completed early, the gang stopped": {
			job: runningJob.Clone().TargetAccuracy(0.9).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start,
				CurrentEpoch: 4, Metrics: &convoy.TrainingMetrics{Accuracy: ptr.To(0.91)}}).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateCompleted, Reasons: with(admitted, convoy.ConditionCompleted, convoy.ReasonTargetAccuracy),
				Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionCompleted: "reported accuracy 0.91 reached spec.successPolicy.targetAccuracy 0.9 at epoch 4"},
		},
		"no improvement for the patience: completed by early stopping": {
			job: runningJob.Clone().Patience(3).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start,
				CurrentEpoch: 8, Best: &convoy.BestMetric{Name: "loss", Value: 0.2, Epoch: 5}}).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateCompleted, Reasons: with(admitted, convoy.ConditionCompleted, convoy.ReasonEarlyStopping),
				Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionCompleted: "loss has not improved on 0.2 (epoch 5) for 3 epochs (spec.successPolicy.earlyStoppingPatience)"},
		},

		"accuracy below the target: runs on": {
			job: runningJob.Clone().TargetAccuracy(0.9).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start,
				CurrentEpoch: 4, Metrics: &convoy.TrainingMetrics{Accuracy: ptr.To(0.85)}}).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning),
				Workers: convoy.WorkerCounts{Active: 2}, Children: true, Started: true},
		},
		"one worker succeeded, the other runs: runs on": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(0).obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning),
				Workers: convoy.WorkerCounts{Active: 1, Succeeded: 1}, Children: true, Started: true},
		},
	})
}
