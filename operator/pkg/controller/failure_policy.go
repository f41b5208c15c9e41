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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
)

// failurePolicy is the phase of a gang with a failed pod, by spec.failurePolicy: restartPolicy
// Never fails the job; ExitCode fails it when the first pod to fail exited with a code that is
// not retried (RetryableExitCode); OnFailure (the default) and a retried code restart the whole
// gang after the backoff, until failureRestarts reaches backoffLimit and the job fails.
func (d *decision) failurePolicy() bool {
	if len(d.t.failed) == 0 {
		return false
	}
	pods := make([]*corev1.Pod, 0, len(d.t.failed))
	for _, r := range d.t.failed {
		pods = append(pods, d.t.current[r])
	}
	pod := firstFailed(pods)
	what := describeFailure(pod)
	code, known := exitCode(pod)
	limit := backoffLimit(d.job)
	switch {
	case restartPolicy(d.job) == convoy.RestartNever:
		d.finish(convoy.ConditionFailed, convoy.ReasonPodFailed, what+
			"; spec.failurePolicy.restartPolicy is Never: fix the error, or set it to OnFailure to restart the gang from the latest checkpoint")
	case restartPolicy(d.job) == convoy.RestartExitCode && !RetryableExitCode(code, known):
		d.finish(convoy.ConditionFailed, convoy.ReasonNonRetryableExitCode, what+
			"; under restartPolicy ExitCode only deaths by signal (exit codes above 128, except crashes such as 139) are retried: fix the error in the logs")
	case d.st.FailureRestarts >= limit:
		d.finish(convoy.ConditionFailed, convoy.ReasonBackoffLimitExceeded, fmt.Sprintf(
			"%s after %d restarts; spec.failurePolicy.backoffLimit is %d: fix the error in the logs, or raise backoffLimit", what, d.st.FailureRestarts, limit))
	default:
		d.restart(convoy.ReasonPodFailed, fmt.Sprintf("%s; restarting the whole gang from the latest checkpoint (failure restart %d of %d, after %s)",
			what, d.st.FailureRestarts+1, limit, d.o.backoff.delay(d.st.FailureRestarts+1)), true)
	}
	return true
}

func restartPolicy(job *convoy.TrainingJob) convoy.RestartPolicy {
	if fp := job.Spec.FailurePolicy; fp != nil && fp.RestartPolicy != "" {
		return fp.RestartPolicy
	}
	return convoy.RestartOnFailure
}

func backoffLimit(job *convoy.TrainingJob) int32 {
	if fp := job.Spec.FailurePolicy; fp != nil && fp.BackoffLimit != nil {
		return *fp.BackoffLimit
	}
	return 3
}

// RetryableExitCode reports whether a worker's exit code restarts the gang under restartPolicy
// ExitCode. Codes 1-127 are the program's own verdict and fail the job. Codes above 128 are deaths
// by signal 128+N and are retried (SIGINT 130, SIGKILL 137 as after an OOM kill, SIGTERM 143, ...)
// except the signals of a program bug: SIGILL 132, SIGTRAP 133, SIGABRT 134, SIGBUS 135,
// SIGFPE 136, SIGSEGV 139 and SIGSYS 159. A pod that failed without an exit code (rejected by its
// node) is retried.
func RetryableExitCode(code int32, known bool) bool {
	if !known {
		return true
	}
	if code <= 128 || code > 128+64 {
		return false
	}
	switch code - 128 {
	case 4, 5, 6, 7, 8, 11, 31:
		return false
	}
	return true
}

// exitCode is the training container's exit code, when it terminated.
func exitCode(pod *corev1.Pod) (int32, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != builder.ContainerName {
			continue
		}
		if t := cs.State.Terminated; t != nil {
			return t.ExitCode, true
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			return t.ExitCode, true
		}
	}
	return 0, false
}

// firstFailed returns the pod of failed whose container terminated first: the cause of the gang's
// failure, when the others died of it (a collective broken by a killed rank). Pods without a
// termination time come after those with one; ties keep failed's order (by rank).
func firstFailed(failed []*corev1.Pod) *corev1.Pod {
	var first *corev1.Pod
	var firstAt time.Time
	for _, pod := range failed {
		at, ok := terminatedAt(pod)
		if first == nil || ok && (firstAt.IsZero() || at.Before(firstAt)) {
			first = pod
			if ok {
				firstAt = at
			}
		}
	}
	return first
}

// terminatedAt is when the pod's training container last terminated.
func terminatedAt(pod *corev1.Pod) (time.Time, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != builder.ContainerName {
			continue
		}
		if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
			return t.FinishedAt.Time, true
		}
		if t := cs.LastTerminationState.Terminated; t != nil && !t.FinishedAt.IsZero() {
			return t.FinishedAt.Time, true
		}
	}
	return time.Time{}, false
}

// describeFailure says which pod failed and how, and where to look.
func describeFailure(pod *corev1.Pod) string {
	msg := "pod " + pod.Name + " failed"
	if code, ok := exitCode(pod); ok {
		msg += fmt.Sprintf(" with exit code %d", code)
		for _, cs := range pod.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == builder.ContainerName && t != nil && t.Reason != "" && t.Reason != "Error" {
				msg += " (" + t.Reason + ")"
			}
		}
	} else if pod.Status.Reason != "" {
		msg += " (" + pod.Status.Reason + ": " + pod.Status.Message + ")"
	}
	return msg + "; see `kubectl logs -n " + pod.Namespace + " " + pod.Name + "`"
}
