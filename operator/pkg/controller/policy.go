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
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
)

// Backoff spaces the gang restarts caused by worker failures: Base after the first, doubling up to
// Max. The first restart after lost pods is not delayed; the next ones are, in the same way.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// DefaultBackoff is batch/v1 Job's pod-failure backoff.
var DefaultBackoff = Backoff{Base: 10 * time.Second, Max: 6 * time.Minute}

// delay is the wait before the gang starts again after its n-th failure restart.
func (b Backoff) delay(n int32) time.Duration {
	if n <= 0 {
		return 0
	}
	d := b.Base
	for i := int32(1); i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

func restartPolicy(job *convoy.TrainingJob) convoy.RestartPolicy {
	if fp := job.Spec.FailurePolicy; fp != nil && fp.RestartPolicy != "" {
		return fp.RestartPolicy
	}
	return convoy.RestartOnFailure
}

func startupTimeout(job *convoy.TrainingJob) time.Duration {
	if fp := job.Spec.FailurePolicy; fp != nil && fp.StartupTimeoutSeconds != nil {
		return time.Duration(*fp.StartupTimeoutSeconds) * time.Second
	}
	return 600 * time.Second
}

// notStarting returns the kubelet's words on the first placed pod whose container waits for a
// reason that does not pass by itself (an image that cannot be pulled, a container that cannot be
// created or configured), or "".
func notStarting(pods []*corev1.Pod) string {
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && stuckReasons[w.Reason] {
				return fmt.Sprintf("pod %s, container %s: %s: %s", p.Name, cs.Name, w.Reason, w.Message)
			}
		}
	}
	return ""
}

// stuckReasons are the kubelet's waiting reasons of a container that will not start by itself.
var stuckReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// lastPlaced is when the last of the pods was bound to a node (its PodScheduled condition, which
// the API server sets on binding), and whether every pod is bound with that condition.
func lastPlaced(pods []*corev1.Pod) (time.Time, bool) {
	var last time.Time
	for _, p := range pods {
		i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero()
		})
		if p.Spec.NodeName == "" || i < 0 {
			return time.Time{}, false
		}
		if t := p.Status.Conditions[i].LastTransitionTime.Time; t.After(last) {
			last = t
		}
	}
	return last, len(pods) > 0
}

func disruptionLimit(job *convoy.TrainingJob) int32 {
	if fp := job.Spec.FailurePolicy; fp != nil && fp.DisruptionLimit != nil {
		return *fp.DisruptionLimit
	}
	return 10
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

// lostCause says why a pod was lost to something other than its own code: a disruption (preemption,
// eviction, node drain), a deletion the operator did not make, or its node's disappearance. The
// gang then restarts without spending backoffLimit.
func lostCause(pod *corev1.Pod, goneNodes map[string]bool) (reason, message string, lost bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c.Reason, fmt.Sprintf("pod %s was disrupted (%s: %s)", pod.Name, c.Reason, c.Message), true
		}
	}
	switch {
	case pod.Status.Reason == "Evicted":
		return "Evicted", fmt.Sprintf("pod %s was evicted: %s", pod.Name, pod.Status.Message), true
	case pod.Spec.NodeName != "" && goneNodes[pod.Spec.NodeName]:
		return "NodeGone", fmt.Sprintf("node %s of pod %s no longer exists", pod.Spec.NodeName, pod.Name), true
	case pod.DeletionTimestamp != nil:
		return "Deleted", fmt.Sprintf("pod %s was deleted", pod.Name), true
	}
	return "", "", false
}

func isFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
