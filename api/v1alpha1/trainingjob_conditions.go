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

package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a TrainingJob. State is derived from them by StateFromConditions.
const (
	// ConditionQueued is true while the job waits for Kueue admission.
	ConditionQueued = "Queued"
	// ConditionAdmitted is true once Kueue admitted the job (or at once for a job without a queue).
	ConditionAdmitted = "Admitted"
	// ConditionInitializing is true while the gang's pods exist but are not all running.
	ConditionInitializing = "Initializing"
	// ConditionRunning is true while every pod of the gang runs.
	ConditionRunning = "Running"
	// ConditionRestarting is true while the gang is being deleted to be recreated.
	ConditionRestarting = "Restarting"
	// ConditionSuspended is true while spec.suspend is set by the user.
	ConditionSuspended = "Suspended"
	// ConditionPreempted is true after Kueue or the scheduler preempted the gang; it says by whom.
	ConditionPreempted = "Preempted"
	// ConditionCompleted is true once the job succeeded.
	ConditionCompleted = "Completed"
	// ConditionFailed is true once the job failed for good.
	ConditionFailed = "Failed"
	// ConditionChildConflict is true while an object has the name of one of the job's children
	// (a pod, its Services, ConfigMap, PodGroup, PodDisruptionBudget, NetworkPolicy, SSH Secret or
	// checkpoint claim) and the job does not control it, labelled or not: the job never uses such an
	// object and creates no pods until it is deleted or the job renamed. A TrainingSweep has it while
	// a TrainingJob it does not control has the name of its next trial.
	ConditionChildConflict = "ChildConflict"
	// ConditionCheckpointRequested is true while the operator asks the running gang for a checkpoint
	// before it stops it (spec.checkpoint.preemptionGraceSeconds); its lastTransitionTime is when it
	// asked. It turns false with reason CheckpointSaved or GraceExpired as the gang is stopped.
	ConditionCheckpointRequested = "CheckpointRequested"
)

// Condition reasons. They are part of the API: tools match on them.
const (
	ReasonCreated             = "Created"
	ReasonWaitingForAdmission = "WaitingForAdmission"
	ReasonAdmitted            = "Admitted"
	ReasonNoQueue             = "NoQueue"
	ReasonPodsCreated         = "PodsCreated"
	// ReasonPodCreationFailed: the API server did not create a pod of the gang (a ResourceQuota,
	// Pod Security admission or a webhook refused it, or a webhook could not be called); the
	// message carries its words.
	ReasonPodCreationFailed = "PodCreationFailed"
	// ReasonContainersNotStarting: a placed pod's container cannot start (an image that cannot be
	// pulled, a missing Secret or ConfigMap); the message carries the kubelet's words.
	ReasonContainersNotStarting = "ContainersNotStarting"
	// ReasonStartupTimeout: the placed gang did not start within failurePolicy.startupTimeoutSeconds.
	ReasonStartupTimeout = "StartupTimeout"
	// ReasonUnschedulable: the scheduler cannot place the gang; the message carries its words.
	ReasonUnschedulable = "Unschedulable"
	ReasonPodsRunning   = "PodsRunning"
	ReasonPodFailed     = "PodFailed"
	ReasonNodeLost      = "NodeLost"
	// ReasonNodeReclaimed: a node of the gang carries a reclaim notice (a spot interruption, a
	// provisioner's disruption taint, a cordon before a drain); the gang checkpoints and moves before
	// the node goes, without spending backoffLimit or disruptionLimit.
	ReasonNodeReclaimed = "NodeReclaimed"
	// ReasonElasticMove: an elastic gang grows where its running workers leave no room for the
	// workers it adds, and moves whole to the place convoy-scheduler booked for it (ElasticMoveMessage)
	// after a checkpoint, without spending backoffLimit or disruptionLimit.
	ReasonElasticMove          = "ElasticMove"
	ReasonBackoff              = "Backoff"
	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
	// ReasonDisruptionLimitExceeded: pods were lost more often than failurePolicy.disruptionLimit.
	ReasonDisruptionLimitExceeded = "DisruptionLimitExceeded"
	ReasonNonRetryableExitCode    = "NonRetryableExitCode"
	ReasonDeadlineExceeded        = "DeadlineExceeded"
	ReasonUserSuspended           = "UserSuspended"
	ReasonResumed                 = "Resumed"
	ReasonPreempted               = "Preempted"
	ReasonAllWorkersSucceeded     = "AllWorkersSucceeded"
	ReasonTargetAccuracy          = "TargetAccuracyReached"
	ReasonEarlyStopping           = "EarlyStopping"
	ReasonInvalidSpec             = "InvalidSpec"
	// ReasonNameTaken: ConditionChildConflict's reason while true; ReasonNameFree once resolved.
	ReasonNameTaken = "NameTaken"
	ReasonNameFree  = "NameFree"
	// Reasons of ConditionCheckpointRequested: the stop that asks (Kueue's eviction or preemption,
	// spec.suspend, the scheduler's gang preemption), then how the request ended.
	ReasonStopRequested   = "StopRequested"
	ReasonCheckpointSaved = "CheckpointSaved"
	ReasonGraceExpired    = "GraceExpired"
	// ReasonCheckpointRecent: the gang was stopped without being asked, its latest checkpoint
	// younger than a tenth of spec.checkpoint.intervalSeconds.
	ReasonCheckpointRecent = "CheckpointRecent"
	// ReasonStoppedBeforeCheckpoint: the gang stopped before it answered (a drain evicted it, its
	// node was lost, a pod failed) and restarts from the checkpoint it had.
	ReasonStoppedBeforeCheckpoint = "StoppedBeforeCheckpoint"
	// ReasonBudgetExceeded: status.cost.amount reached spec.budget; the job checkpointed (within
	// spec.checkpoint.preemptionGraceSeconds) and failed.
	ReasonBudgetExceeded = "BudgetExceeded"
)

// StateFromConditions is the one place the State summary is derived. Terminal conditions win, then
// what the user asked for (suspend), then the gang's progress, from the most advanced down.
func StateFromConditions(conds []metav1.Condition) TrainingJobState {
	state, _ := StateAndReason(conds)
	return state
}

// StateAndReason returns StateFromConditions and the reason of the condition that decided it
// (status.reason, kubectl get's REASON column); "" for Pending.
func StateAndReason(conds []metav1.Condition) (TrainingJobState, string) {
	for _, c := range []struct {
		condition string
		state     TrainingJobState
	}{
		{ConditionFailed, StateFailed},
		{ConditionCompleted, StateCompleted},
		{ConditionSuspended, StateSuspended},
		{ConditionRestarting, StateRestarting},
		{ConditionQueued, StateQueued},
		{ConditionRunning, StateRunning},
		{ConditionInitializing, StateInitializing},
	} {
		if cond := meta.FindStatusCondition(conds, c.condition); cond != nil && cond.Status == metav1.ConditionTrue {
			return c.state, cond.Reason
		}
	}
	return StatePending, ""
}

// IsFinished reports whether the job completed or failed.
func (s *TrainingJobStatus) IsFinished() bool {
	return meta.IsStatusConditionTrue(s.Conditions, ConditionCompleted) ||
		meta.IsStatusConditionTrue(s.Conditions, ConditionFailed)
}

// The ModelPublished condition: whether spec.output.model was pushed once the job completed. It
// does not change the job's state: a job whose model could not be published still Completed.
const (
	// ConditionModelPublished is true once the model is pushed (status.model), false while the
	// publish step runs or after it failed, its reason saying which.
	ConditionModelPublished = "ModelPublished"
	// ReasonPublishing: the publish pod runs.
	ReasonPublishing = "Publishing"
	// ReasonModelPublished: the model was pushed; the message names the reference and digest.
	ReasonModelPublished = "ModelPublished"
	// ReasonPublishFailed: the publish step failed; the message says why.
	ReasonPublishFailed = "PublishFailed"
)

// CheckpointDeadline returns, while the operator asks the running gang for a checkpoint before
// stopping it (ConditionCheckpointRequested), the time after which it stops the gang without one.
func (j *TrainingJob) CheckpointDeadline() (time.Time, bool) {
	c := meta.FindStatusCondition(j.Status.Conditions, ConditionCheckpointRequested)
	if c == nil || c.Status != metav1.ConditionTrue {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Add(j.PreemptionGrace()), true
}
