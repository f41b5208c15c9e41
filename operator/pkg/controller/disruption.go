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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// checkpointFirst holds back the stop of a running gang (for why) until it has checkpointed: it
// asks for a checkpoint (ConditionCheckpointRequested, which the progress endpoint's replies carry)
// and returns how long to wait still. It returns 0 once the gang may stop: a checkpoint of the
// attempt reported in a later second than the request is recorded, or
// spec.checkpoint.preemptionGraceSeconds passed since the request, or there is nothing to wait
// for (checkpointing off, a grace of 0, no running pod).
func checkpointFirst(job *convoy.TrainingJob, st *convoy.TrainingJobStatus, pods []*corev1.Pod, now time.Time, why string) time.Duration {
	grace := job.PreemptionGrace()
	c := meta.FindStatusCondition(st.Conditions, convoy.ConditionCheckpointRequested)
	asked := c != nil && c.Status == metav1.ConditionTrue
	if grace <= 0 || (!asked && !runningPod(pods, st.RestartCount)) {
		return 0
	}
	set := func(status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: convoy.ConditionCheckpointRequested, Status: status, Reason: reason, Message: truncate(message),
			ObservedGeneration: job.Generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	if !asked {
		set(metav1.ConditionTrue, convoy.ReasonStopRequested, fmt.Sprintf(
			"%s: the gang is asked to checkpoint and is stopped once it reports one, or after spec.checkpoint.preemptionGraceSeconds (%s)", why, grace))
		return grace
	}
	// Both times are stored to the second: a checkpoint reported within the request's second may
	// be older than it, and only a later one answers it.
	at := c.LastTransitionTime.Time
	if cp := st.Checkpoint; cp != nil && cp.Time != nil && cp.Attempt == st.RestartCount && cp.Time.Truncate(time.Second).After(at.Truncate(time.Second)) {
		set(metav1.ConditionFalse, convoy.ReasonCheckpointSaved, fmt.Sprintf(
			"the gang reported checkpoint %s (epoch %d) when asked, and is stopped: it resumes from it", cp.Latest, cp.Epoch))
		return 0
	}
	if left := at.Add(grace).Sub(now); left > 0 {
		return left
	}
	set(metav1.ConditionFalse, convoy.ReasonGraceExpired, fmt.Sprintf(
		"the gang reported no checkpoint within spec.checkpoint.preemptionGraceSeconds (%s) of the request, and is stopped: it resumes from the latest checkpoint before", grace))
	return 0
}

// runningPod reports whether a pod of the attempt runs and is not being stopped.
func runningPod(pods []*corev1.Pod, attempt int32) bool {
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil &&
			pod.Labels[convoy.LabelRestartAttempt] == fmt.Sprint(attempt) {
			return true
		}
	}
	return false
}

// preemptAttempt is the attempt of the job's gang that convoy-scheduler preempted, from the job's
// own PodGroup; "" when none.
func preemptAttempt(job *convoy.TrainingJob, pg *schedv1alpha1.PodGroup) string {
	if !metav1.IsControlledBy(pg, job) {
		return ""
	}
	return pg.Annotations[convoy.AnnotationPreemptAttempt]
}
