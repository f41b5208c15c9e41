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
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/elastic"
)

// actionReconcile is the action of the events on a condition's change: the operator reconciled the job.
const actionReconcile = "Reconcile"

// warningConditions are the conditions whose arrival is a Warning event.
var warningConditions = map[string]bool{
	convoy.ConditionFailed:        true,
	convoy.ConditionRestarting:    true,
	convoy.ConditionPreempted:     true,
	convoy.ConditionChildConflict: true,
}

// warningReasons are the reasons whose arrival is a Warning event, whatever their condition.
var warningReasons = map[string]bool{
	convoy.ReasonUnschedulable:         true,
	convoy.ReasonPodCreationFailed:     true,
	convoy.ReasonContainersNotStarting: true,
}

// normalReasons are the reasons whose arrival is a Normal event although their condition's is a
// Warning: a restart the operator chose for the job's good, not a fault.
var normalReasons = map[string]bool{
	convoy.ReasonElasticMove: true,
}

// ReasonResized is the event of an elastic job whose size changed while it ran.
const ReasonResized = "Resized"

// emitEvents records one event per transition between old and the job's status: a condition that
// became true (or changed its reason while true), a suspension that ended, and an elastic resize.
func (r *Reconciler) emitEvents(job *convoy.TrainingJob, old *convoy.TrainingJobStatus) {
	if e, o := job.Status.Elastic, old.Elastic; e != nil && o != nil && o.TargetWorkers != 0 && e.TargetWorkers != o.TargetWorkers {
		// The action tells a grow from a shrink: events of the same reason and action within minutes
		// are one series, which keeps the first message.
		action, what := "Grow", fmt.Sprintf("grew from %d to %d workers: the added workers start once Kueue admits the larger size", o.TargetWorkers, e.TargetWorkers)
		count := fmt.Sprintf(" (resize %d)", e.ResizeCount)
		switch {
		case e.TargetWorkers < o.TargetWorkers && e.ResizeCount < o.ResizeCount:
			backoff := (&elastic.Job{Cooldown: job.ResizeCooldown(), Withdrawn: e.WithdrawnGrows}).GrowBackoff()
			action, what = "Withdraw", fmt.Sprintf("withdrew the grow from %d to %d workers: Kueue did not admit the larger size within %s (no quota, or no place for the added workers beside the gang), or admitted fewer; the added workers never started; the next grow waits %s (spec.elastic.resizeCooldownSeconds doubled for each of the %d grows withdrawn in a row)",
				e.TargetWorkers, o.TargetWorkers, elastic.GrowAdmitTimeout, backoff, e.WithdrawnGrows)
			count = ""
		case e.TargetWorkers < o.TargetWorkers:
			action, what = "Shrink", fmt.Sprintf("shrank from %d to %d workers%s: Kueue now accounts for %d", o.TargetWorkers, e.TargetWorkers, shrunkAt(job, old), e.TargetWorkers)
		}
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, ReasonResized, action, "%s%s", what, count)
	}
	for _, c := range job.Status.Conditions {
		prev := meta.FindStatusCondition(old.Conditions, c.Type)
		switch {
		case c.Status == metav1.ConditionTrue && (prev == nil || prev.Status != c.Status || prev.Reason != c.Reason):
			eventType := corev1.EventTypeNormal
			if (warningConditions[c.Type] || warningReasons[c.Reason]) && !normalReasons[c.Reason] {
				eventType = corev1.EventTypeWarning
			}
			r.Recorder.Eventf(job, nil, eventType, c.Reason, actionReconcile, "%s", c.Message)
		case c.Type == convoy.ConditionSuspended && c.Status == metav1.ConditionFalse && prev != nil && prev.Status == metav1.ConditionTrue:
			r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, c.Reason, actionReconcile, "%s", c.Message)
		}
	}
}

// shrunkAt says which checkpoint an elastic gang shrank at, from the checkpoint request that the
// shrink ended in this status write (elasticShrink): " at checkpoint ... (epoch n)", or why at none.
func shrunkAt(job *convoy.TrainingJob, old *convoy.TrainingJobStatus) string {
	c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionCheckpointRequested)
	prev := meta.FindStatusCondition(old.Conditions, convoy.ConditionCheckpointRequested)
	cp := job.Status.Checkpoint
	switch {
	case job.PreemptionGrace() <= 0:
		return " without a checkpoint (spec.checkpoint.enabled is false, or its preemptionGraceSeconds 0)"
	case c == nil || c.Status != metav1.ConditionFalse || (prev != nil && *prev == *c):
		return ""
	case c.Reason == convoy.ReasonGraceExpired:
		return fmt.Sprintf(" without a new checkpoint: none came within spec.checkpoint.preemptionGraceSeconds (%s) of the request", job.PreemptionGrace())
	case (c.Reason == convoy.ReasonCheckpointSaved || c.Reason == convoy.ReasonCheckpointRecent) && cp != nil:
		return fmt.Sprintf(" at checkpoint %s (epoch %d)", cp.Latest, cp.Epoch)
	}
	return ""
}

// setCondition sets a true condition on st.
func setCondition(st *convoy.TrainingJobStatus, job *convoy.TrainingJob, condType, reason, message string, now time.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: condType, Status: metav1.ConditionTrue, Reason: reason, Message: truncate(message),
		ObservedGeneration: job.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}

// maxMessage is the API's limit of a condition message (metav1.Condition's maxLength).
const maxMessage = 32768

// truncate cuts a message (an API server's or scheduler's words can be long) to maxMessage bytes.
func truncate(message string) string {
	return Truncate(message, maxMessage)
}

// Truncate cuts message to at most limit bytes, at a rune boundary, saying that it was cut.
func Truncate(message string, limit int) string {
	if len(message) <= limit {
		return message
	}
	const cut = "… (truncated)"
	end := limit - len(cut)
	for end > 0 && !utf8.RuneStart(message[end]) {
		end--
	}
	return message[:end] + cut
}
