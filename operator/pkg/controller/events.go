package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// warningConditions are the conditions whose arrival is a Warning event.
var warningConditions = map[string]bool{
	convoy.ConditionFailed:     true,
	convoy.ConditionRestarting: true,
	convoy.ConditionPreempted:  true,
}

// emitEvents records one event per transition between old and the job's status: a condition that
// became true (or changed its reason while true), and a suspension that ended.
func (r *Reconciler) emitEvents(job *convoy.TrainingJob, old *convoy.TrainingJobStatus) {
	for _, c := range job.Status.Conditions {
		prev := meta.FindStatusCondition(old.Conditions, c.Type)
		switch {
		case c.Status == metav1.ConditionTrue && (prev == nil || prev.Status != c.Status || prev.Reason != c.Reason):
			eventType := corev1.EventTypeNormal
			if warningConditions[c.Type] {
				eventType = corev1.EventTypeWarning
			}
			r.Recorder.Event(job, eventType, c.Reason, c.Message)
		case c.Type == convoy.ConditionSuspended && c.Status == metav1.ConditionFalse && prev != nil && prev.Status == metav1.ConditionTrue:
			r.Recorder.Event(job, corev1.EventTypeNormal, c.Reason, c.Message)
		}
	}
}

// setCondition sets a true condition on st.
func setCondition(st *convoy.TrainingJobStatus, job *convoy.TrainingJob, condType, reason, message string, now time.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: condType, Status: metav1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: job.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}
