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
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/cost"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// observation is everything a reconcile decides from.
type observation struct {
	job    *convoy.TrainingJob
	plugin mlframework.Plugin
	// pods are the pods the job controls, of every restart attempt.
	pods []*corev1.Pod
	// nodes maps the node of each bound pod to its labels; a node that no longer exists is in
	// goneNodes instead.
	nodes     map[string]map[string]string
	goneNodes map[string]bool
	// reclaimNotices maps the nodes of bound pods that carry a reclaim notice to its words.
	reclaimNotices map[string]string
	// unreadyNodes are the nodes, among those of pods whose grace period has passed, whose kubelet
	// is not Ready: nothing there will finish a pod's termination.
	unreadyNodes map[string]bool
	// podSecurity is the Pod Security level the job's pods meet.
	podSecurity convoy.PodSecurityLevel
	// queue is what the queue integration says of a job with a queue.
	queue QueueStatus
	// preemptAttempt is the attempt convoy-scheduler preempted (the PodGroup's
	// convoy.dev/preempt-attempt annotation); "" when none.
	preemptAttempt string
	now            time.Time
	backoff        Backoff
	// prices is the price list in force; cost is the job's cost brought up to shortly before now
	// (decide fills it in).
	prices cost.Prices
	cost   *convoy.CostStatus
	// spotNodeLabels are the node labels that mark spot capacity (convoy.DefaultSpotNodeLabels
	// when nil).
	spotNodeLabels []convoy.SpotNodeLabel
}

// plan is what a reconcile does: the new status and the writes to children.
type plan struct {
	status convoy.TrainingJobStatus
	// create are the replicas whose pods are missing from the current attempt.
	create []mlframework.Replica
	// delete are pods to delete.
	delete []*corev1.Pod
	// forceDelete are terminating pods whose grace period has passed on a node that is not Ready:
	// no kubelet will finish them, and a restarted gang needs their names.
	forceDelete []*corev1.Pod
	// ensureChildren keeps the PodGroup, Services and ConfigMap in place while the gang is wanted.
	ensureChildren bool
	// deleteJob deletes the TrainingJob itself: its TTL after finishing has passed.
	deleteJob    bool
	requeueAfter time.Duration
}

func (p *plan) requeue(d time.Duration) {
	if d > 0 && (p.requeueAfter == 0 || d < p.requeueAfter) {
		p.requeueAfter = d
	}
}

// decide is the TrainingJob state machine: a pure function of what the reconcile observed.
func decide(o observation) plan {
	o.cost = cost.Update(o.job.Status.Cost, o.pods, o.costNodes(), o.prices, o.now.Add(-costSettle))
	p := decideGang(o)
	settleCost(o, &p)
	return p
}

// decideGang decides everything but the cost's bookkeeping.
func decideGang(o observation) plan {
	job := o.job
	p := plan{status: *job.Status.DeepCopy()}
	st := &p.status
	st.ObservedGeneration = job.Generation
	st.PodSecurity = o.podSecurity
	// A terminating pod is looked at again when its grace period ends: its node's readiness is read
	// only then (unreadyNodes), and a pod still there on a node that is not Ready goes at once.
	for _, pod := range o.pods {
		if pod.DeletionTimestamp == nil {
			continue
		}
		if left := pod.DeletionTimestamp.Sub(o.now); left > 0 {
			p.requeue(left)
		} else if o.unreadyNodes[pod.Spec.NodeName] {
			p.forceDelete = append(p.forceDelete, pod)
		}
	}
	set := func(condType string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: condType, Status: status, Reason: reason, Message: truncate(message),
			ObservedGeneration: job.Generation, LastTransitionTime: metav1.NewTime(o.now),
		})
	}
	isTrue := func(condType string) bool { return meta.IsStatusConditionTrue(st.Conditions, condType) }
	// clear sets condType False when it is present; absent conditions stay absent.
	clear := func(condType, reason, message string) {
		if meta.FindStatusCondition(st.Conditions, condType) != nil {
			set(condType, metav1.ConditionFalse, reason, message)
		}
	}
	stopGang := func() {
		clear(convoy.ConditionInitializing, convoy.ReasonPodsCreated, "the gang is stopped")
		clear(convoy.ConditionRunning, convoy.ReasonPodsRunning, "the gang is stopped")
		clear(convoy.ConditionRestarting, convoy.ReasonPodsCreated, "the gang is stopped")
		st.PodsRefusedSince = nil
	}
	// deleteWhere deletes the pods that keep is false for and that are not already going, each once.
	deleteWhere := func(keep func(*corev1.Pod) bool) {
		for _, pod := range o.pods {
			if pod.DeletionTimestamp == nil && !keep(pod) && !slices.Contains(p.delete, pod) {
				p.delete = append(p.delete, pod)
			}
		}
	}
	deleteAll := func() { deleteWhere(func(*corev1.Pod) bool { return false }) }
	finish := func(condType, reason, message string) {
		set(condType, metav1.ConditionTrue, reason, message)
		stopGang()
		now := metav1.NewTime(o.now)
		st.CompletionTime = &now
		if condType == convoy.ConditionFailed {
			st.FailureReason = reason
		}
		// Finished pods stay for their logs; the others are stopped.
		deleteWhere(isFinished)
		if ttl := job.Spec.TTLSecondsAfterFinished; ttl != nil {
			p.requeue(time.Duration(*ttl) * time.Second)
		}
	}

	if st.IsFinished() {
		deleteWhere(isFinished)
		if ttl := job.Spec.TTLSecondsAfterFinished; ttl != nil {
			end := o.now
			if st.CompletionTime != nil {
				end = st.CompletionTime.Time
			}
			if left := end.Add(time.Duration(*ttl) * time.Second).Sub(o.now); left > 0 {
				p.requeue(left)
			} else {
				p.deleteJob = true
			}
		}
		return p
	}

	queue := job.QueueName()
	if job.IsSuspended() {
		// A gang stopped while it has pods (by the user, or by Kueue evicting or preempting it) is
		// restarted when it resumes: counted once, as it stops, and not against the backoff limit.
		// Its next pods are the next attempt's.
		if !isTrue(convoy.ConditionSuspended) && !isTrue(convoy.ConditionQueued) && len(o.pods) > 0 {
			why := "spec.suspend is true"
			if queue != "" {
				why = cmp.Or(o.queue.Preempted, "Kueue evicted the job from LocalQueue "+queue)
			}
			if wait := checkpointFirst(job, st, o.pods, o.now, why); wait > 0 {
				p.requeue(wait)
				return p
			}
			st.RestartCount++
		}
		if queue != "" {
			msg := o.queue.WaitingMessage
			if msg == "" {
				msg = fmt.Sprintf("waiting for Kueue to admit the job to LocalQueue %q; `kubectl get workloads -n %s` shows why it waits", queue, job.Namespace)
			}
			set(convoy.ConditionQueued, metav1.ConditionTrue, convoy.ReasonWaitingForAdmission, msg)
			set(convoy.ConditionAdmitted, metav1.ConditionFalse, convoy.ReasonWaitingForAdmission, msg)
			st.Admission = nil
			if o.queue.Preempted != "" {
				set(convoy.ConditionPreempted, metav1.ConditionTrue, convoy.ReasonPreempted, o.queue.Preempted)
			}
		} else {
			set(convoy.ConditionSuspended, metav1.ConditionTrue, convoy.ReasonUserSuspended,
				"spec.suspend is true: the gang's pods are deleted; set it to false to resume from the latest checkpoint")
		}
		stopGang()
		// activeDeadlineSeconds counts running time only, as batch/v1 Job's does.
		st.StartTime = nil
		// Kueue keeps an evicted job's quota until no pod of it is active: count them until gone.
		st.Workers = countWorkers(o.pods)
		deleteAll()
		return p
	}

	if queue != "" {
		set(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonAdmitted,
			fmt.Sprintf("admitted to LocalQueue %q: spec.suspend is false", queue))
		st.Admission = o.queue.Admission
	} else {
		set(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, "no queue is named: the job runs at once")
	}
	// The pods of a suspended gang must be gone before the same names are used again.
	if isTrue(convoy.ConditionSuspended) || isTrue(convoy.ConditionQueued) {
		if len(o.pods) > 0 {
			deleteAll()
			return p
		}
		clear(convoy.ConditionSuspended, convoy.ReasonResumed, "spec.suspend is false: the gang starts again from the latest checkpoint")
		clear(convoy.ConditionQueued, convoy.ReasonAdmitted, "admitted")
	}

	if fp := job.Spec.FailurePolicy; fp != nil && fp.ActiveDeadlineSeconds != nil && st.StartTime != nil {
		deadline := time.Duration(*fp.ActiveDeadlineSeconds) * time.Second
		if left := st.StartTime.Add(deadline).Sub(o.now); left <= 0 {
			finish(convoy.ConditionFailed, convoy.ReasonDeadlineExceeded, fmt.Sprintf(
				"the job ran longer than spec.failurePolicy.activeDeadlineSeconds (%ds): raise it, or resume from the latest checkpoint in a new job", *fp.ActiveDeadlineSeconds))
			return p
		} else {
			p.requeue(left)
		}
	}

	if c := meta.FindStatusCondition(st.Conditions, convoy.ConditionRestarting); c != nil && c.Status == metav1.ConditionTrue {
		if len(o.pods) > 0 {
			deleteAll()
			return p
		}
		// A failure restart waits the backoff; so does a restart for lost pods after the first.
		var delay time.Duration
		switch c.Reason {
		case convoy.ReasonPodFailed:
			delay = o.backoff.delay(st.FailureRestarts)
		case convoy.ReasonNodeLost:
			if !isTrue(convoy.ConditionPreempted) {
				delay = o.backoff.delay(st.DisruptionRestarts - 1)
			}
		}
		if left := c.LastTransitionTime.Add(delay).Sub(o.now); left > 0 {
			p.requeue(left)
			return p
		}
		set(convoy.ConditionRestarting, metav1.ConditionFalse, convoy.ReasonPodsCreated,
			fmt.Sprintf("the gang was recreated (restart %d)", st.RestartCount))
	}

	attempt := strconv.Itoa(int(st.RestartCount))
	current := map[string]*corev1.Pod{}
	for _, pod := range o.pods {
		if pod.Labels[convoy.LabelRestartAttempt] == attempt {
			current[pod.Name] = pod
		}
	}
	replicas := o.plugin.Replicas(job)
	want := map[string]bool{}
	var failed, lost, missing []mlframework.Replica
	var lostMsg, preemptMsg string
	workers := convoy.WorkerCounts{}
	running, succeeded := 0, 0
	allSucceeded := true
	for _, r := range replicas {
		name := mlframework.PodName(job, r)
		want[name] = true
		pod := current[name]
		if pod == nil {
			missing = append(missing, r)
			allSucceeded = allSucceeded && !o.plugin.MustSucceed(r)
			continue
		}
		if reason, msg, ok := lostCause(pod, o.goneNodes); ok {
			lost = append(lost, r)
			workers.Failed++
			if lostMsg == "" {
				lostMsg = msg
			}
			if reason == corev1.PodReasonPreemptionByScheduler && preemptMsg == "" {
				preemptMsg = msg
			}
			allSucceeded = allSucceeded && !o.plugin.MustSucceed(r)
			continue
		}
		switch pod.Status.Phase {
		case corev1.PodFailed:
			failed = append(failed, r)
			workers.Failed++
		case corev1.PodSucceeded:
			workers.Succeeded++
			succeeded++
		case corev1.PodRunning:
			workers.Active++
			running++
		default:
			workers.Pending++
		}
		if pod.Status.Phase != corev1.PodSucceeded && o.plugin.MustSucceed(r) {
			allSucceeded = false
		}
	}
	st.Workers = workers
	st.Resources = resources(job, o.pods, o.nodes)
	// Pods of earlier attempts, and pods the gang no longer has, go.
	deleteWhere(func(pod *corev1.Pod) bool { return current[pod.Name] != nil && want[pod.Name] })

	restart := func(reason, message string, counted bool) {
		st.RestartCount++
		if counted {
			st.FailureRestarts++
		}
		set(convoy.ConditionRestarting, metav1.ConditionTrue, reason, message)
		clear(convoy.ConditionInitializing, convoy.ReasonPodsCreated, "the gang is restarting")
		clear(convoy.ConditionRunning, convoy.ReasonPodsRunning, "the gang is restarting")
		st.PodsRefusedSince = nil
		deleteAll()
		if counted {
			p.requeue(o.backoff.delay(st.FailureRestarts))
		}
	}

	// restartLost restarts the gang for lost pods (what says which), or fails the job when its pods
	// were lost more often than disruptionLimit allows.
	restartLost := func(what string) {
		limit := disruptionLimit(job)
		if st.DisruptionRestarts >= limit {
			finish(convoy.ConditionFailed, convoy.ReasonDisruptionLimitExceeded, fmt.Sprintf(
				"%s after %d restarts for lost pods; spec.failurePolicy.disruptionLimit is %d: find why the pods are lost (kubectl get events: an eviction for ephemeral storage or memory, a node that keeps failing), or raise disruptionLimit",
				what, st.DisruptionRestarts, limit))
			return
		}
		st.DisruptionRestarts++
		restart(convoy.ReasonNodeLost, fmt.Sprintf("%s; restarting the whole gang from the latest checkpoint without spending backoffLimit (disruption restart %d of %d)",
			what, st.DisruptionRestarts, limit), false)
	}

	if len(failed) > 0 {
		pods := make([]*corev1.Pod, 0, len(failed))
		for _, r := range failed {
			pods = append(pods, current[mlframework.PodName(job, r)])
		}
		pod := firstFailed(pods)
		what := describeFailure(pod)
		code, known := exitCode(pod)
		limit := backoffLimit(job)
		switch {
		case restartPolicy(job) == convoy.RestartNever:
			finish(convoy.ConditionFailed, convoy.ReasonPodFailed, what+
				"; spec.failurePolicy.restartPolicy is Never: fix the error, or set it to OnFailure to restart the gang from the latest checkpoint")
		case restartPolicy(job) == convoy.RestartExitCode && !RetryableExitCode(code, known):
			finish(convoy.ConditionFailed, convoy.ReasonNonRetryableExitCode, what+
				"; under restartPolicy ExitCode only deaths by signal (exit codes above 128, except crashes such as 139) are retried: fix the error in the logs")
		case st.FailureRestarts >= limit:
			finish(convoy.ConditionFailed, convoy.ReasonBackoffLimitExceeded, fmt.Sprintf(
				"%s after %d restarts; spec.failurePolicy.backoffLimit is %d: fix the error in the logs, or raise backoffLimit", what, st.FailureRestarts, limit))
		default:
			restart(convoy.ReasonPodFailed, fmt.Sprintf("%s; restarting the whole gang from the latest checkpoint (failure restart %d of %d, after %s)",
				what, st.FailureRestarts+1, limit, o.backoff.delay(st.FailureRestarts+1)), true)
		}
		return p
	}
	if allSucceeded {
		finish(convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded, "every worker exited 0")
		return p
	}
	if reason, message, ok := earlySuccess(job, st); ok {
		finish(convoy.ConditionCompleted, reason, message)
		return p
	}
	if len(lost) > 0 {
		if preemptMsg != "" {
			set(convoy.ConditionPreempted, metav1.ConditionTrue, convoy.ReasonPreempted, preemptMsg+"; the gang restarts when it fits again")
			restart(convoy.ReasonNodeLost, lostMsg+"; restarting the whole gang from the latest checkpoint without spending backoffLimit", false)
			return p
		}
		restartLost(lostMsg)
		return p
	}
	if why, over := overBudget(job, o.cost); over {
		if wait := checkpointFirst(job, st, o.pods, o.now, why); wait > 0 {
			p.requeue(wait)
			p.ensureChildren = true
			return p
		}
		finish(convoy.ConditionFailed, convoy.ReasonBudgetExceeded, why+
			"; the gang was stopped after its checkpoint (or spec.checkpoint.preemptionGraceSeconds): resume from status.checkpoint.latest in a new job with a larger spec.budget")
		return p
	}
	if notice := reclaimedPod(o.pods, attempt, o.reclaimNotices); notice != "" {
		if wait := checkpointFirst(job, st, o.pods, o.now, notice); wait > 0 {
			p.requeue(wait)
			p.ensureChildren = true
			return p
		}
		restart(convoy.ReasonNodeReclaimed, notice+"; restarting the whole gang on other nodes from the latest checkpoint without spending backoffLimit or disruptionLimit", false)
		return p
	}
	if o.preemptAttempt == attempt {
		const why = "convoy-scheduler preempted the gang to make room for a gang of higher priority"
		if wait := checkpointFirst(job, st, o.pods, o.now, why); wait > 0 {
			p.requeue(wait)
			p.ensureChildren = true
			return p
		}
		set(convoy.ConditionPreempted, metav1.ConditionTrue, convoy.ReasonPreempted, why+"; the gang restarts when it fits again")
		restart(convoy.ReasonNodeLost, why+"; restarting the whole gang from the latest checkpoint without spending backoffLimit", false)
		return p
	}
	// Every pod of a Running gang was seen: one that vanished since was deleted or evicted so fast
	// (a force delete, or kwok) that it was never seen terminating. Its gang restarts whole.
	if isTrue(convoy.ConditionRunning) {
		for _, r := range missing {
			name := mlframework.PodName(job, r)
			if !slices.ContainsFunc(o.pods, func(pod *corev1.Pod) bool { return pod.Name == name }) {
				restartLost(fmt.Sprintf("pod %s of the running gang was deleted or evicted", name))
				return p
			}
		}
	}

	p.ensureChildren = true
	for _, r := range missing {
		// A pod of an earlier attempt with the same name must be gone first.
		if !slices.ContainsFunc(o.pods, func(pod *corev1.Pod) bool { return pod.Name == mlframework.PodName(job, r) }) {
			p.create = append(p.create, r)
		}
	}
	// Pods the API server refuses (the reconciler records since when) count against the startup
	// timeout as a placed gang that does not start does: they must not hold the job's quota forever.
	if len(missing) == 0 {
		st.PodsRefusedSince = nil
	} else if since := st.PodsRefusedSince; since != nil && len(p.create) > 0 {
		timeout := startupTimeout(job)
		if left := since.Add(timeout).Sub(o.now); left > 0 {
			p.requeue(left)
		} else {
			why := "the API server refused them"
			if c := meta.FindStatusCondition(st.Conditions, convoy.ConditionInitializing); c != nil && c.Reason == convoy.ReasonPodCreationFailed {
				why = c.Message
			}
			p.create = nil
			finish(convoy.ConditionFailed, convoy.ReasonStartupTimeout, fmt.Sprintf(
				"%d of %d pods of the gang could not be created for %s (spec.failurePolicy.startupTimeoutSeconds); %s: fix the quota, Pod Security level or webhook that refuses them and apply the job again, or raise startupTimeoutSeconds",
				len(missing), len(replicas), timeout, why))
			return p
		}
	}
	if st.StartTime == nil {
		now := metav1.NewTime(o.now)
		st.StartTime = &now
	}
	total := len(replicas)
	if running+succeeded == total {
		set(convoy.ConditionRunning, metav1.ConditionTrue, convoy.ReasonPodsRunning, fmt.Sprintf("all %d pods are running", total))
		clear(convoy.ConditionInitializing, convoy.ReasonPodsRunning, "all pods are running")
		clear(convoy.ConditionPreempted, convoy.ReasonPodsRunning, "the gang runs again")
	} else {
		reason, msg := convoy.ReasonPodsCreated,
			fmt.Sprintf("%d of %d pods are running; the gang starts once scheduler %q has placed all of them", running+succeeded, total, job.SchedulerName())
		stuck := notStarting(o.pods)
		switch why := unschedulable(o.pods); {
		case why != "":
			reason, msg = convoy.ReasonUnschedulable,
				fmt.Sprintf("%d of %d pods are running; scheduler %q cannot place the gang: %s", running+succeeded, total, job.SchedulerName(), why)
		case stuck != "":
			reason, msg = convoy.ReasonContainersNotStarting, fmt.Sprintf("%d of %d pods are running; %s", running+succeeded, total, stuck)
		}
		// A pod the API server refused keeps its words (the reconciler wrote them) until it is created.
		if c := meta.FindStatusCondition(st.Conditions, convoy.ConditionInitializing); c != nil && c.Status == metav1.ConditionTrue &&
			c.Reason == convoy.ReasonPodCreationFailed && len(p.create) > 0 {
			reason, msg = c.Reason, c.Message
		}
		// Only the gang's pods count: one it no longer has is deleted by this reconcile.
		gangPods := slices.DeleteFunc(slices.Collect(maps.Values(current)), func(pod *corev1.Pod) bool { return !want[pod.Name] })
		if placed, all := lastPlaced(gangPods); all && len(gangPods) == total {
			timeout := startupTimeout(job)
			if left := placed.Add(timeout).Sub(o.now); left <= 0 {
				detail := "; " + cmp.Or(stuck, "no container reported why")
				finish(convoy.ConditionFailed, convoy.ReasonStartupTimeout, fmt.Sprintf(
					"%d of %d pods were still not running %s after the gang was placed (spec.failurePolicy.startupTimeoutSeconds)%s: fix the image or configuration and apply the job again, or raise startupTimeoutSeconds",
					running+succeeded, total, timeout, detail))
				return p
			} else {
				p.requeue(left)
			}
		}
		set(convoy.ConditionInitializing, metav1.ConditionTrue, reason, msg)
		clear(convoy.ConditionRunning, convoy.ReasonPodsCreated, "not every pod is running")
	}
	return p
}

// unschedulable returns what the scheduler says on the first unbound pod it cannot place, or "".
func unschedulable(pods []*corev1.Pod) string {
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return c.Message
			}
		}
	}
	return ""
}

// earlySuccess applies spec.successPolicy to the reported metrics.
func earlySuccess(job *convoy.TrainingJob, st *convoy.TrainingJobStatus) (reason, message string, ok bool) {
	sp := job.Spec.SuccessPolicy
	if sp == nil {
		return "", "", false
	}
	if m := st.Metrics; sp.TargetAccuracy != nil && m != nil && m.Accuracy != nil && *m.Accuracy >= *sp.TargetAccuracy {
		return convoy.ReasonTargetAccuracy, fmt.Sprintf("reported accuracy %g reached spec.successPolicy.targetAccuracy %g at epoch %d",
			*m.Accuracy, *sp.TargetAccuracy, st.CurrentEpoch), true
	}
	if b := st.Best; sp.EarlyStoppingPatience != nil && b != nil && st.CurrentEpoch-b.Epoch >= *sp.EarlyStoppingPatience {
		return convoy.ReasonEarlyStopping, fmt.Sprintf("%s has not improved on %g (epoch %d) for %d epochs (spec.successPolicy.earlyStoppingPatience)",
			b.Name, b.Value, b.Epoch, st.CurrentEpoch-b.Epoch), true
	}
	return "", "", false
}

// resources summarises the gang's GPUs and where its pods are bound.
func resources(job *convoy.TrainingJob, pods []*corev1.Pod, nodes map[string]map[string]string) *convoy.ResourcesStatus {
	used := map[string]bool{}
	racks := map[string]bool{}
	for _, pod := range pods {
		if n := pod.Spec.NodeName; n != "" && pod.DeletionTimestamp == nil && !isFinished(pod) {
			used[n] = true
			if rack := nodes[n][convoy.LabelTopologyRack]; rack != "" {
				racks[rack] = true
			}
		}
	}
	r := &convoy.ResourcesStatus{GPUs: job.TotalGPUs(), Nodes: int32(len(used))}
	if len(used) > 0 {
		r.Placement = plural(len(used), "node")
		if len(racks) > 0 {
			names := slices.Sorted(maps.Keys(racks))
			if len(names) > 3 {
				names = append(names[:3], "...")
			}
			r.Placement += " in " + plural(len(racks), "rack") + " (" + strings.Join(names, ", ") + ")"
		}
	}
	return r
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// countWorkers counts pods by phase.
func countWorkers(pods []*corev1.Pod) convoy.WorkerCounts {
	var w convoy.WorkerCounts
	for _, pod := range pods {
		switch pod.Status.Phase {
		case corev1.PodRunning:
			w.Active++
		case corev1.PodSucceeded:
			w.Succeeded++
		case corev1.PodFailed:
			w.Failed++
		default:
			w.Pending++
		}
	}
	return w
}
