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

package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/cost"
)

// Name is the controller's name in logs and metrics, and the events' source.
const Name = "trainingsweep"

// Event reasons.
const (
	EventTrialCreated  = "TrialCreated"
	EventTrialStopped  = "TrialEarlyStopped"
	EventTrialPaused   = "TrialPaused"
	EventTrialPromoted = "TrialPromoted"
	EventSucceeded     = "SweepSucceeded"
	EventFailed        = "SweepFailed"
)

// WorkloadActivator pauses and resumes a queued trial through its Kueue Workload (the queue
// integration in queue/ is one).
type WorkloadActivator interface {
	SetActive(ctx context.Context, job *convoy.TrainingJob, active bool) error
}

// Reconciler runs TrainingSweeps: it creates their trials, reads each trial's objective from
// its TrainingJob's status, and stops, pauses and promotes trials as Decide says.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Metrics  *Metrics
	// Workloads pauses trials that name a queue; without it they are paused through spec.suspend.
	Workloads WorkloadActivator
	Clock     clock.PassiveClock
}

// SetupWithManager registers the controller: it watches sweeps and the trials they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Metrics == nil {
		r.Metrics = NewMetrics()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&convoy.TrainingSweep{}).
		Owns(&convoy.TrainingJob{}).
		Complete(r)
}

// +kubebuilder:rbac:groups=convoy.dev,resources=trainingsweeps,verbs=get;list;watch
// +kubebuilder:rbac:groups=convoy.dev,resources=trainingsweeps/status,verbs=get;update
// +kubebuilder:rbac:groups=convoy.dev,resources=trainingsweeps/finalizers,verbs=update
// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs/status,verbs=get;update

// Reconcile moves one sweep a step: observe the trials, decide, write the status once, then act.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	sw := &convoy.TrainingSweep{}
	if err := r.Client.Get(ctx, req.NamespacedName, sw); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.Forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	jobs := &convoy.TrainingJobList{}
	if err := r.Client.List(ctx, jobs, client.InNamespace(sw.Namespace), client.MatchingLabels{convoy.LabelSweepName: sw.Name}); err != nil {
		return ctrl.Result{}, err
	}
	trials := observe(sw, jobs.Items)
	status := sw.Status.DeepCopy()
	now := metav1.NewTime(r.Clock.Now())
	if status.StartTime == nil {
		status.StartTime = &now
	}
	status.ObservedGeneration = sw.Generation

	var plan Plan
	finished := meta.IsStatusConditionTrue(status.Conditions, convoy.SweepConditionSucceeded) ||
		meta.IsStatusConditionTrue(status.Conditions, convoy.SweepConditionFailed)
	if !finished {
		var err error
		if plan, err = Decide(&sw.Spec, trials); err != nil {
			plan = Plan{Finish: &Finish{Reason: convoy.SweepReasonInvalidTemplate, Message: err.Error()}}
		}
		// A template the API server refuses fails the sweep before any trial is created.
		if len(plan.Create) > 0 && plan.Finish == nil {
			if _, err := TrialJob(sw, plan.Create[0]); err != nil {
				plan = Plan{Finish: &Finish{Reason: convoy.SweepReasonInvalidTemplate, Message: err.Error()}}
			}
		}
	} else {
		plan.Best = best(trials, Sign(&sw.Spec))
		for _, t := range trials {
			if unfinished(t.State) {
				plan.Stop = append(plan.Stop, Change{Name: t.Name, Message: "the sweep has ended"})
			}
		}
	}
	byName := map[string]*convoy.TrainingJob{}
	for i := range jobs.Items {
		byName[jobs.Items[i].Name] = &jobs.Items[i]
	}
	create, taken, err := r.untaken(ctx, sw, plan.Create)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan.Create = create
	applyToTrials(trials, plan, func(name string) int32 {
		if j := byName[name]; j != nil && j.Status.Checkpoint != nil {
			return j.Status.Checkpoint.Epoch
		}
		return 0
	})
	summarize(status, trials, plan, now)
	trialConflict(status, taken, now)
	status.DeletedTrialsCost = deletedTrialsCost(&sw.Status, trials)
	costs := []*convoy.CostStatus{cost.Of(status.DeletedTrialsCost)}
	for i := range jobs.Items {
		costs = append(costs, jobs.Items[i].Status.Cost)
	}
	status.Cost = cost.Sum(costs)

	// Trials are stopped before the status that counts them stopped (or the sweep finished) is
	// written: a reader of a finished sweep finds each of its trials finished.
	for _, c := range plan.Stop {
		if err := r.stop(ctx, byName[c.Name], c.Message); err != nil {
			return ctrl.Result{}, fmt.Errorf("stopping trial %s: %w", c.Name, err)
		}
		r.Recorder.Eventf(sw, nil, corev1.EventTypeNormal, EventTrialStopped, "StopTrial", "%s: %s", c.Name, c.Message)
	}
	var res ctrl.Result
	if taken != nil {
		res.RequeueAfter = trialConflictRetry
	}
	if !equality.Semantic.DeepEqual(&sw.Status, status) {
		conflictSaid := ""
		if c := meta.FindStatusCondition(sw.Status.Conditions, convoy.ConditionChildConflict); c != nil && c.Status == metav1.ConditionTrue {
			conflictSaid = c.Message
		}
		sw.Status = *status
		if err := r.Client.Status().Update(ctx, sw); err != nil {
			return ctrl.Result{}, err
		}
		if c := meta.FindStatusCondition(status.Conditions, convoy.ConditionChildConflict); taken != nil && c.Message != conflictSaid {
			r.Recorder.Eventf(sw, taken, corev1.EventTypeWarning, convoy.ReasonNameTaken, "CreateTrial", "%s", c.Message)
		}
		if plan.Finish != nil {
			reason, typ := EventSucceeded, corev1.EventTypeNormal
			if !plan.Finish.Succeeded {
				reason, typ = EventFailed, corev1.EventTypeWarning
			}
			r.Recorder.Eventf(sw, nil, typ, reason, "Finish", "%s: %s", plan.Finish.Reason, plan.Finish.Message)
		}
	}
	r.Metrics.Observe(sw)

	var errs []error
	for _, c := range plan.Pause {
		if err := r.pause(ctx, byName[c.Name], c.Rung, true); err != nil {
			errs = append(errs, err)
			continue
		}
		r.Recorder.Eventf(sw, nil, corev1.EventTypeNormal, EventTrialPaused, "PauseTrial", "%s: %s", c.Name, c.Message)
	}
	for _, c := range plan.Resume {
		if err := r.pause(ctx, byName[c.Name], c.Rung, false); err != nil {
			errs = append(errs, err)
			continue
		}
		r.Recorder.Eventf(sw, nil, corev1.EventTypeNormal, EventTrialPromoted, "ResumeTrial", "%s: %s", c.Name, c.Message)
	}
	if plan.Finish == nil {
		for _, t := range plan.Create {
			job, err := TrialJob(sw, t)
			if err == nil {
				err = r.Client.Create(ctx, job)
			}
			if apierrors.IsAlreadyExists(err) {
				// Created by an earlier reconcile the cache has not caught up with, or just now by
				// someone else: the next reconcile tells which (untaken).
				res.RequeueAfter = trialConflictRetry
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("creating trial %d: %w", t.Index, err))
				continue
			}
			log.V(2).Info("Created a trial", "trainingJob", klog.KObj(job))
			r.Recorder.Eventf(sw, job, corev1.EventTypeNormal, EventTrialCreated, "CreateTrial", "%s: %s", job.Name, formatAssignments(t.Assignments))
		}
	}
	return res, errors.Join(errs...)
}

// trialConflictRetry is how often a sweep whose next trial's name is taken looks again: the
// TrainingJob in the way is not the sweep's, so no event of it reaches the sweep.
const trialConflictRetry = 10 * time.Second

// untaken returns the trials of create up to the first whose TrainingJob name is held by a
// TrainingJob the sweep does not control, and that TrainingJob. The sweep never uses such a job as
// a trial; trials are numbered in order, so none after it is created until it is gone.
func (r *Reconciler) untaken(ctx context.Context, sw *convoy.TrainingSweep, create []NewTrial) ([]NewTrial, *convoy.TrainingJob, error) {
	for i, t := range create {
		job := &convoy.TrainingJob{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: sw.Namespace, Name: TrialName(sw.Name, t.Index)}, job)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if !metav1.IsControlledBy(job, sw) {
			return create[:i], job, nil
		}
	}
	return create, nil, nil
}

// trialConflict sets the ChildConflict condition: true naming taken, the TrainingJob that holds the
// name of the sweep's next trial; false once a sweep that had one no longer has.
func trialConflict(st *convoy.TrainingSweepStatus, taken *convoy.TrainingJob, now metav1.Time) {
	if taken != nil {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: convoy.ConditionChildConflict, Status: metav1.ConditionTrue,
			Reason: convoy.ReasonNameTaken, LastTransitionTime: now,
			Message: fmt.Sprintf("TrainingJob %s/%s exists and is not controlled by this TrainingSweep, which will not use it as a trial: delete it or rename the sweep", taken.Namespace, taken.Name)})
		return
	}
	if meta.IsStatusConditionTrue(st.Conditions, convoy.ConditionChildConflict) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: convoy.ConditionChildConflict, Status: metav1.ConditionFalse,
			Reason: convoy.ReasonNameFree, Message: "every trial of the sweep is its own", LastTransitionTime: now})
	}
}

// observe reads each trial's state and objective from its TrainingJob, adding the epoch it
// reports now to the observations the sweep's status kept.
func observe(sw *convoy.TrainingSweep, jobs []convoy.TrainingJob) []Trial {
	prev := map[string]convoy.TrialStatus{}
	for _, t := range sw.Status.TrialStatuses {
		prev[t.Name] = t
	}
	var out []Trial
	for i := range jobs {
		job := &jobs[i]
		if !metav1.IsControlledBy(job, sw) {
			continue
		}
		index, err := strconv.Atoi(job.Labels[LabelTrialIndex])
		if err != nil {
			continue
		}
		p := prev[job.Name]
		t := Trial{Index: index, TrialStatus: *p.DeepCopy()}
		t.Name = job.Name
		if t.ParameterAssignments == nil {
			_ = json.Unmarshal([]byte(job.Annotations[convoy.AnnotationTrialParameters]), &t.ParameterAssignments)
		}
		if rung, err := strconv.Atoi(job.Annotations[AnnotationTrialRung]); err == nil {
			t.Rung = int32(rung)
		}
		t.State = trialState(job)
		t.Cost = cost.Sum([]*convoy.CostStatus{job.Status.Cost})
		if t.State == convoy.TrialFailed || t.State == convoy.TrialEarlyStopped {
			t.Message = conditionMessage(job)
		}
		if v, ok := metric(job, sw.Spec.Objective.ObjectiveMetricName); ok && job.Status.CurrentEpoch > 0 {
			t.Observations = addObservation(t.Observations, convoy.Observation{Epoch: job.Status.CurrentEpoch, Value: v})
			last := t.Observations[len(t.Observations)-1]
			t.Value, t.Epoch = ptr.To(last.Value), last.Epoch
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Trial) int { return a.Index - b.Index })
	return out
}

// deletedTrialsCost adds to the cost the sweep kept of deleted trials the last cost it showed of
// each trial whose TrainingJob is gone.
func deletedTrialsCost(prev *convoy.TrainingSweepStatus, trials []Trial) *convoy.CostTotal {
	present := make(map[string]bool, len(trials))
	for _, t := range trials {
		present[t.Name] = true
	}
	costs := []*convoy.CostStatus{cost.Of(prev.DeletedTrialsCost)}
	for _, t := range prev.TrialStatuses {
		if !present[t.Name] {
			costs = append(costs, cost.Of(t.Cost))
		}
	}
	return cost.Sum(costs)
}

// addObservation adds an observation: a trial resumed from an earlier checkpoint reports its epochs again.
func addObservation(obs []convoy.Observation, o convoy.Observation) []convoy.Observation {
	obs = slices.DeleteFunc(obs, func(x convoy.Observation) bool { return x.Epoch >= o.Epoch })
	obs = append(obs, o)
	if len(obs) > observationsPerTrialCap {
		obs = obs[len(obs)-observationsPerTrialCap:]
	}
	return obs
}

// trialState is the trial's state as its TrainingJob shows it.
func trialState(job *convoy.TrainingJob) convoy.TrialState {
	switch c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionCompleted); {
	case meta.IsStatusConditionTrue(job.Status.Conditions, convoy.ConditionFailed):
		return convoy.TrialFailed
	case c != nil && c.Status == metav1.ConditionTrue && c.Reason == convoy.ReasonEarlyStopped:
		return convoy.TrialEarlyStopped
	case c != nil && c.Status == metav1.ConditionTrue:
		return convoy.TrialSucceeded
	case job.Annotations[AnnotationTrialPaused] != "":
		return convoy.TrialPaused
	case job.Status.State == convoy.StateRunning:
		return convoy.TrialRunning
	}
	return convoy.TrialPending
}

func conditionMessage(job *convoy.TrainingJob) string {
	for _, typ := range []string{convoy.ConditionFailed, convoy.ConditionCompleted} {
		if c := meta.FindStatusCondition(job.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
			return truncate(c.Message, 1024)
		}
	}
	return ""
}

// metric reads the objective from the trial's latest reported metrics.
func metric(job *convoy.TrainingJob, name string) (float64, bool) {
	m := job.Status.Metrics
	if m == nil {
		return 0, false
	}
	switch {
	case name == "loss" && m.Loss != nil:
		return *m.Loss, true
	case name == "accuracy" && m.Accuracy != nil:
		return *m.Accuracy, true
	}
	if s, ok := m.Additional[name]; ok {
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	return 0, false
}

// applyToTrials shows the plan's stops, pauses and promotions in the trials it reports.
func applyToTrials(trials []Trial, p Plan, checkpointEpoch func(name string) int32) {
	for i := range trials {
		t := &trials[i]
		for _, c := range p.Stop {
			if c.Name == t.Name {
				t.State, t.Message = convoy.TrialEarlyStopped, c.Message
			}
		}
		for _, c := range p.Pause {
			if c.Name == t.Name {
				t.State, t.Rung = convoy.TrialPaused, c.Rung
			}
		}
		for _, c := range p.Resume {
			if c.Name == t.Name {
				if t.State == convoy.TrialPaused {
					t.State = convoy.TrialPending
					t.ResumedFromEpoch = checkpointEpoch(t.Name)
				}
				t.Rung = c.Rung
			}
		}
	}
}

// summarize writes the sweep's status from its trials and the plan.
func summarize(st *convoy.TrainingSweepStatus, trials []Trial, p Plan, now metav1.Time) {
	st.TrialStatuses = st.TrialStatuses[:0]
	st.PendingTrials, st.RunningTrials, st.PausedTrials, st.SucceededTrials, st.EarlyStoppedTrials, st.FailedTrials = 0, 0, 0, 0, 0, 0
	for _, t := range trials {
		st.TrialStatuses = append(st.TrialStatuses, t.TrialStatus)
		switch t.State {
		case convoy.TrialPending:
			st.PendingTrials++
		case convoy.TrialRunning:
			st.RunningTrials++
		case convoy.TrialPaused:
			st.PausedTrials++
		case convoy.TrialSucceeded:
			st.SucceededTrials++
		case convoy.TrialEarlyStopped:
			st.EarlyStoppedTrials++
		case convoy.TrialFailed:
			st.FailedTrials++
		}
	}
	st.Trials = int32(len(trials) + len(p.Create))
	if p.Finish == nil {
		st.PendingTrials += int32(len(p.Create))
	}
	st.TrialsSummary = fmt.Sprintf("%d/%d/%d/%d", st.RunningTrials, st.SucceededTrials, st.EarlyStoppedTrials, st.FailedTrials)
	if p.Best != nil {
		st.BestTrial = p.Best
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now})
	}
	if f := p.Finish; f != nil {
		typ := convoy.SweepConditionFailed
		if f.Succeeded {
			typ = convoy.SweepConditionSucceeded
		}
		set(typ, metav1.ConditionTrue, f.Reason, f.Message)
		set(convoy.SweepConditionRunning, metav1.ConditionFalse, f.Reason, "the sweep has ended")
		st.CompletionTime = &now
	} else if !meta.IsStatusConditionTrue(st.Conditions, convoy.SweepConditionSucceeded) && !meta.IsStatusConditionTrue(st.Conditions, convoy.SweepConditionFailed) {
		set(convoy.SweepConditionRunning, metav1.ConditionTrue, convoy.SweepReasonTrialsRunning,
			fmt.Sprintf("%d trials created, %d pending, %d running, %d paused", st.Trials, st.PendingTrials, st.RunningTrials, st.PausedTrials))
	}
	st.State = StateFromConditions(st.Conditions)
}

// StateFromConditions is the one place a sweep's State is derived.
func StateFromConditions(conds []metav1.Condition) convoy.TrainingSweepState {
	switch {
	case meta.IsStatusConditionTrue(conds, convoy.SweepConditionFailed):
		return convoy.SweepFailed
	case meta.IsStatusConditionTrue(conds, convoy.SweepConditionSucceeded):
		return convoy.SweepSucceeded
	case meta.IsStatusConditionTrue(conds, convoy.SweepConditionRunning):
		return convoy.SweepRunning
	}
	return convoy.SweepCreated
}

// stop finishes a trial as Completed with reason EarlyStopped. The TrainingJob controller stops
// the pods of a finished job at once, and Kueue releases the quota of a finished job's
// Workload: the whole gang goes together and frees its GPUs.
func (r *Reconciler) stop(ctx context.Context, job *convoy.TrainingJob, message string) error {
	if job == nil || job.Status.IsFinished() {
		return nil
	}
	job = job.DeepCopy()
	now := metav1.NewTime(r.Clock.Now())
	msg := "stopped by TrainingSweep " + job.Labels[convoy.LabelSweepName] + ": " + message
	meta.SetStatusCondition(&job.Status.Conditions, metav1.Condition{Type: convoy.ConditionCompleted, Status: metav1.ConditionTrue,
		Reason: convoy.ReasonEarlyStopped, Message: truncate(msg, 32*1024), ObservedGeneration: job.Generation, LastTransitionTime: now})
	for _, typ := range []string{convoy.ConditionRunning, convoy.ConditionInitializing, convoy.ConditionQueued, convoy.ConditionRestarting, convoy.ConditionSuspended} {
		if c := meta.FindStatusCondition(job.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
			meta.SetStatusCondition(&job.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionFalse,
				Reason: convoy.ReasonEarlyStopped, Message: "the gang is stopped", ObservedGeneration: job.Generation, LastTransitionTime: now})
		}
	}
	job.Status.State, job.Status.Reason = convoy.StateAndReason(job.Status.Conditions)
	job.Status.CompletionTime = &now
	return r.Client.Status().Update(ctx, job)
}

// pause pauses a trial at its rung, or promotes it to rung and lets it run again: through its
// Kueue Workload when it names a queue (Kueue would undo spec.suspend), else through spec.suspend.
func (r *Reconciler) pause(ctx context.Context, job *convoy.TrainingJob, rung int32, paused bool) error {
	if job == nil || job.Status.IsFinished() {
		return nil
	}
	if job.QueueName() != "" && r.Workloads != nil {
		if err := r.Workloads.SetActive(ctx, job, !paused); err != nil {
			return err
		}
	}
	patch := client.MergeFrom(job.DeepCopy())
	job.Annotations[AnnotationTrialRung] = strconv.Itoa(int(rung))
	if paused {
		job.Annotations[AnnotationTrialPaused] = "true"
	} else {
		delete(job.Annotations, AnnotationTrialPaused)
	}
	if job.QueueName() == "" || r.Workloads == nil {
		job.Spec.Suspend = ptr.To(paused)
	}
	return r.Client.Patch(ctx, job, patch)
}

func formatAssignments(as []convoy.ParameterAssignment) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Name + "=" + a.Value
	}
	return strings.Join(parts, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
