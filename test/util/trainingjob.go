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
package util

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// WorkerPod is the name of the pod of job's worker of rank in restart attempt attempt
// (mlframework.PodName): <job>-worker-<rank> in the first attempt, <job>-worker-<rank>-r<attempt> after.
func WorkerPod(job string, rank, attempt int32) string {
	return mlframework.PodName(&convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: job}},
		mlframework.Replica{Role: mlframework.RoleWorker, Rank: rank}, attempt)
}

// ConditionSummary is conditions on one line, Type=Status(Reason: Message) each, for a failure
// message.
func ConditionSummary(conditions []metav1.Condition) string {
	parts := make([]string, 0, len(conditions))
	for _, c := range conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// JobSummary is what a failure message says of a TrainingJob: its state, whether it is suspended,
// its admission and its conditions; "not found" for nil.
func JobSummary(job *convoy.TrainingJob) string {
	if job == nil {
		return "not found"
	}
	return fmt.Sprintf("state %q, suspend %v, admission %+v, conditions %s", job.Status.State,
		job.IsSuspended(), job.Status.Admission, ConditionSummary(job.Status.Conditions))
}

// WaitJob reads the TrainingJob key every interval until cond holds for it, and returns it. After
// timeout it fails the test with what and the job's summary.
func WaitJob(t testing.TB, c client.Reader, interval, timeout time.Duration, key client.ObjectKey, what string, cond func(*convoy.TrainingJob) bool) *convoy.TrainingJob {
	t.Helper()
	var job *convoy.TrainingJob
	Eventually(t, interval, timeout, fmt.Sprintf("TrainingJob %s %s", key, what), func() (bool, string) {
		j := &convoy.TrainingJob{}
		if err := c.Get(t.Context(), key, j); err != nil {
			return false, err.Error()
		}
		job = j
		return cond(j), JobSummary(j)
	})
	return job
}

// WaitEvent reads the Events of the TrainingJob key every interval until one has the reason and a
// message that contains want. After timeout it fails the test with the Events it saw.
func WaitEvent(t testing.TB, c client.Reader, interval, timeout time.Duration, key client.ObjectKey, reason, want string) {
	t.Helper()
	Eventually(t, interval, timeout, fmt.Sprintf("a %s Event of TrainingJob %s saying %q", reason, key, want), func() (bool, string) {
		events := &corev1.EventList{}
		if err := c.List(t.Context(), events, client.InNamespace(key.Namespace)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == key.Name && ev.Reason == reason && strings.Contains(ev.Message, want) {
				return true, ""
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return false, strings.Join(seen, "; ")
	})
}

// WaitState waits until the TrainingJob key's state is want, and returns the job.
func WaitState(t testing.TB, c client.Reader, interval, timeout time.Duration, key client.ObjectKey, want convoy.TrainingJobState) *convoy.TrainingJob {
	t.Helper()
	return WaitJob(t, c, interval, timeout, key, "to be "+string(want), func(j *convoy.TrainingJob) bool { return j.Status.State == want })
}

// EnvOf is the value of the environment variable name in the pod's first container, "" when unset.
func EnvOf(pod *corev1.Pod, name string) string {
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}

// EndPod ends the training container of the pod key with exitCode, as its kubelet would report
// it: Succeeded with 0, Failed otherwise.
func EndPod(ctx context.Context, c client.Client, key client.ObjectKey, exitCode int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := c.Get(ctx, key, pod); err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodSucceeded
		reason := "Completed"
		if exitCode != 0 {
			pod.Status.Phase, reason = corev1.PodFailed, "Error"
		}
		now := metav1.Now()
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "trainer", Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason, FinishedAt: now, StartedAt: now}},
		}}
		return c.Status().Update(ctx, pod)
	})
}
