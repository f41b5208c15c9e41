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

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TestFailurePolicy: a failed pod restarts the whole gang or fails the job, by spec.failurePolicy.
func TestFailurePolicy(t *testing.T) {
	job, runningJob := twoWorkers()
	testDecide(t, map[string]decideCase{
		"a failed worker under OnFailure restarts the whole gang after a backoff": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).exit(1).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0", "llm-worker-1"}, RequeueAfter: 10 * time.Second, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "pod llm-worker-1 failed with exit code 1; see `kubectl logs -n ns llm-worker-1`; restarting the whole gang from the latest checkpoint (failure restart 1 of 3, after 10s)"},
		},
		"backoff limit exhausted: failed": {
			job:  runningJob.Clone().FailurePolicy(convoy.RestartOnFailure, 2).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start, RestartCount: 2, FailureRestarts: 2}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).attempt(2).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).attempt(2).exit(1).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonBackoffLimitExceeded),
				RestartCount: 2, FailureRestarts: 2, FailureReason: convoy.ReasonBackoffLimitExceeded, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0-r2"}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionFailed: "pod llm-worker-1-r2 failed with exit code 1; see `kubectl logs -n ns llm-worker-1-r2` after 2 restarts; spec.failurePolicy.backoffLimit is 2"},
		},
		"restartPolicy Never: the first failure fails the job": {
			job:  runningJob.Clone().FailurePolicy(convoy.RestartNever, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).exit(137).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonPodFailed),
				FailureReason: convoy.ReasonPodFailed, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0"}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionFailed: "spec.failurePolicy.restartPolicy is Never"},
		},
		"restartPolicy ExitCode: a program error fails the job": {
			job:  runningJob.Clone().FailurePolicy(convoy.RestartExitCode, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).exit(2).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonNonRetryableExitCode),
				FailureReason: convoy.ReasonNonRetryableExitCode, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0"}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionFailed: "pod llm-worker-1 failed with exit code 2; see `kubectl logs -n ns llm-worker-1`; under restartPolicy ExitCode only deaths by signal"},
		},
		"restartPolicy ExitCode: a kill restarts the gang": {
			job:  runningJob.Clone().FailurePolicy(convoy.RestartExitCode, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).exit(137).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0", "llm-worker-1"}, RequeueAfter: 10 * time.Second, Started: true},
		},
		"restartPolicy ExitCode: a kill that broke the other rank's collective restarts the gang": {
			job: runningJob.Clone().FailurePolicy(convoy.RestartExitCode, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(1).finishedAt(time.Unix(1002, 0)).obj(),
				makePod(job.Obj(), "worker", 1).exit(137).finishedAt(time.Unix(1000, 0)).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Workers: convoy.WorkerCounts{Failed: 2},
				Delete: []string{"llm-worker-0", "llm-worker-1"}, RequeueAfter: 10 * time.Second, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "pod llm-worker-1 failed with exit code 137"},
		},
		"restartPolicy ExitCode: the program error that came first fails the job": {
			job: runningJob.Clone().FailurePolicy(convoy.RestartExitCode, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(137).finishedAt(time.Unix(1002, 0)).obj(),
				makePod(job.Obj(), "worker", 1).exit(1).finishedAt(time.Unix(1000, 0)).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonNonRetryableExitCode),
				FailureReason: convoy.ReasonNonRetryableExitCode, Workers: convoy.WorkerCounts{Failed: 2},
				Delete: []string{}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionFailed: "pod llm-worker-1 failed with exit code 1"},
		},

		"an OOM-killed worker: the status names the kill": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).oomKilled().obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0", "llm-worker-1"}, RequeueAfter: 10 * time.Second, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "pod llm-worker-1 failed with exit code 137 (OOMKilled)"},
		},
		"restartPolicy ExitCode: a pod its node rejected, without an exit code, restarts the gang": {
			job:  runningJob.Clone().FailurePolicy(convoy.RestartExitCode, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).rejected("OutOfnvidia.com/gpu", "no GPU left").obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0", "llm-worker-1"}, RequeueAfter: 10 * time.Second, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "pod llm-worker-1 failed (OutOfnvidia.com/gpu: no GPU left)"},
		},
		"a failure and a lost pod at once: the failure decides": {
			job:       runningJob.Clone().FailurePolicy(convoy.RestartNever, 3).Obj(),
			pods:      []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).node("gone").obj(), makePod(job.Obj(), "worker", 1).exit(1).obj()},
			goneNodes: map[string]bool{"gone": true},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonPodFailed), FailureReason: convoy.ReasonPodFailed,
				Workers: convoy.WorkerCounts{Failed: 2}, Delete: []string{"llm-worker-0"}, Started: true, Finished: true},
		},
	})
}

func TestRetryableExitCode(t *testing.T) {
	cases := map[string]struct {
		code  int32
		known bool
		want  bool
	}{
		"no exit code (rejected by the node)": {known: false, want: true},
		"exit 1: the program's error":         {code: 1, known: true},
		"exit 127: command not found":         {code: 127, known: true},
		"exit 128":                            {code: 128, known: true},
		"SIGINT":                              {code: 130, known: true, want: true},
		"SIGKILL, as after an OOM kill":       {code: 137, known: true, want: true},
		"SIGTERM":                             {code: 143, known: true, want: true},
		"SIGSEGV is a bug":                    {code: 139, known: true},
		"SIGABRT is a bug":                    {code: 134, known: true},
		"SIGBUS is a bug":                     {code: 135, known: true},
		"255 is not a signal":                 {code: 255, known: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := RetryableExitCode(tc.code, tc.known); got != tc.want {
				t.Errorf("RetryableExitCode(%d, %v) = %v, want %v", tc.code, tc.known, got, tc.want)
			}
		})
	}
}
