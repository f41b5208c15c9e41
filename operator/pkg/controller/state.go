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
	// notReadyNodes are the nodes of bound pods that the node lifecycle controller tainted NoExecute
	// as not Ready or unreachable, with that taint.
	notReadyNodes map[string]*corev1.Taint
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
	// spotNodeLabels are the node labels that mark spot capacity (convoy.DefaultSpotNodeLabel
	// when empty).
	spotNodeLabels []convoy.SpotNodeLabel
	// uncounted: the last reconcile did not create pods it counted; count none before they exist.
	uncounted bool
}

// plan is what a reconcile does: the new status and the writes to children.
type plan struct {
	status convoy.TrainingJobStatus
	// create are the replicas whose pods are missing from the current attempt.
	create []mlframework.Replica
	// counted are the pods of create that status.workers counts as pending.
	counted int32
	// delete are pods to delete.
	delete []*corev1.Pod
	// forceDelete are terminating pods whose grace period has passed on a node that is not Ready,
	// or whose node is gone: no kubelet will finish them, and a restarted gang needs their names.
	forceDelete []*corev1.Pod
	// ensureChildren keeps the PodGroup, Services and ConfigMap in place while the gang is wanted.
	ensureChildren bool
	// shrinkTo, when not 0, is the elastic gang's size the reconciler writes to
	// convoy.AnnotationElasticWorkers, removing convoy.AnnotationElasticShrinkTo, before anything
	// else: the size it shrinks to, or its size for a request it drops.
	shrinkTo int32
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

// phases are the steps of decideGang, in order. Each is a method of the decision in the making,
// pure (it reads the observation and writes only the plan), in a file of its own with a table
// test of its own; it either decides the reconcile (true: the phases after it do not run) or
// passes it on.
var phases = []func(*decision) bool{
	(*decision).ttlAfterFinished,    // ttl_after_finished.go: a finished job keeps its finished pods until its TTL
	(*decision).suspend,             // suspend.go: spec.suspend stops the gang (Suspended, or Queued with a queue)
	(*decision).admission,           // admission.go: Admitted; a resumed gang waits for its stopped pods to go
	(*decision).activeDeadline,      // active_deadline.go: failurePolicy.activeDeadlineSeconds
	(*decision).restartBackoff,      // restart_backoff.go: a restarting gang waits for its pods to go and the backoff
	(*decision).elasticShrink,       // elastic.go: an elastic gang asked to shrink checkpoints first (never decides)
	(*decision).tally,               // tally.go: the current attempt's pods by replica and phase (never decides)
	(*decision).failurePolicy,       // failure_policy.go: a failed pod restarts the gang or fails the job
	(*decision).successPolicy,       // success_policy.go: every pod that must succeed did, or successPolicy is met
	(*decision).lostPods,            // disruption.go: a lost pod restarts the gang without spending backoffLimit
	(*decision).budget,              // cost.go: spec.budget reached stops the gang after a checkpoint
	(*decision).reclaimNotice,       // reclaim.go: a reclaim notice on a node moves the gang after a checkpoint
	(*decision).schedulerPreemption, // disruption.go: convoy-scheduler preempted the attempt
	(*decision).elasticMove,         // elastic.go: an elastic grow admitted by moving the gang restarts it there after a checkpoint
	(*decision).vanishedPods,        // disruption.go: a pod gone from a Running gang without being seen going
	(*decision).startup,             // startup.go: creates the missing pods and follows the gang to Running (always decides)
}

// decideGang decides everything but the cost's bookkeeping.
func decideGang(o observation) plan {
	d := newDecision(o)
	d.forceDeleteStuckPods()
	for _, phase := range phases {
		if phase(d) {
			break
		}
	}
	return d.p
}

// decision is one reconcile's decision in the making: what it observed, the plan so far, and
// what the tally phase counted. Its methods are the verbs the phases share.
type decision struct {
	o   observation
	job *convoy.TrainingJob
	p   plan
	// st is p's status.
	st *convoy.TrainingJobStatus
	t  tally
}

func newDecision(o observation) *decision {
	d := &decision{o: o, job: o.job, p: plan{status: *o.job.Status.DeepCopy()}}
	d.st = &d.p.status
	d.st.ObservedGeneration = o.job.Generation
	d.st.PodSecurity = o.podSecurity
	return d
}

// forceDeleteStuckPods looks at a terminating pod again when its grace period ends: its node's
// readiness is read only then (unreadyNodes), and a pod still there on a node that is not Ready
// goes at once. A terminating pod of a deleted node goes without waiting for its grace period: no
// kubelet will act on it, and the pod garbage collector would take it only after its 40 s quarantine.
func (d *decision) forceDeleteStuckPods() {
	for _, pod := range d.o.pods {
		if pod.DeletionTimestamp == nil {
			continue
		}
		left := pod.DeletionTimestamp.Sub(d.o.now)
		switch {
		case d.o.goneNodes[pod.Spec.NodeName] || left <= 0 && d.o.unreadyNodes[pod.Spec.NodeName]:
			d.p.forceDelete = append(d.p.forceDelete, pod)
		case left > 0:
			d.p.requeue(left)
		}
	}
}

func (d *decision) set(condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&d.st.Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: truncate(message),
		ObservedGeneration: d.job.Generation, LastTransitionTime: metav1.NewTime(d.o.now),
	})
}

func (d *decision) isTrue(condType string) bool {
	return meta.IsStatusConditionTrue(d.st.Conditions, condType)
}

// clear sets condType False when it is present; absent conditions stay absent.
func (d *decision) clear(condType, reason, message string) {
	if meta.FindStatusCondition(d.st.Conditions, condType) != nil {
		d.set(condType, metav1.ConditionFalse, reason, message)
	}
}

func (d *decision) stopGang() {
	d.clear(convoy.ConditionInitializing, convoy.ReasonPodsCreated, "the gang is stopped")
	d.clear(convoy.ConditionRunning, convoy.ReasonPodsRunning, "the gang is stopped")
	d.clear(convoy.ConditionRestarting, convoy.ReasonPodsCreated, "the gang is stopped")
	d.st.PodsRefusedSince = nil
}

// deleteWhere deletes the pods that keep is false for and that are not already going, each once.
func (d *decision) deleteWhere(keep func(*corev1.Pod) bool) {
	for _, pod := range d.o.pods {
		if pod.DeletionTimestamp == nil && !keep(pod) && !slices.Contains(d.p.delete, pod) {
			d.p.delete = append(d.p.delete, pod)
		}
	}
}

func (d *decision) deleteAll() { d.deleteWhere(func(*corev1.Pod) bool { return false }) }

// finish sets condType (Completed or Failed) and stops the gang; finished pods stay for their logs.
func (d *decision) finish(condType, reason, message string) {
	d.set(condType, metav1.ConditionTrue, reason, message)
	d.stopGang()
	now := metav1.NewTime(d.o.now)
	d.st.CompletionTime = &now
	if f := d.st.Forecast; f != nil {
		f.EstimatedCompletionTime = nil // completionTime says when
	}
	if condType == convoy.ConditionFailed {
		d.st.FailureReason = reason
	}
	d.deleteWhere(isFinished)
	if ttl := d.job.Spec.TTLSecondsAfterFinished; ttl != nil {
		d.p.requeue(time.Duration(*ttl) * time.Second)
	}
}

// restart deletes the whole gang to start it again as the next attempt; counted restarts spend
// backoffLimit and wait the backoff.
func (d *decision) restart(reason, message string, counted bool) {
	d.st.RestartCount++
	if counted {
		d.st.FailureRestarts++
	}
	d.set(convoy.ConditionRestarting, metav1.ConditionTrue, reason, message)
	if meta.IsStatusConditionTrue(d.st.Conditions, convoy.ConditionCheckpointRequested) {
		d.set(convoy.ConditionCheckpointRequested, metav1.ConditionFalse, convoy.ReasonStoppedBeforeCheckpoint,
			"the gang stopped before it reported a checkpoint ("+reason+"): it resumes from the latest checkpoint before")
	}
	d.clear(convoy.ConditionInitializing, convoy.ReasonPodsCreated, "the gang is restarting")
	d.clear(convoy.ConditionRunning, convoy.ReasonPodsRunning, "the gang is restarting")
	d.st.PodsRefusedSince = nil
	d.deleteAll()
	if counted {
		d.p.requeue(d.o.backoff.delay(d.st.FailureRestarts))
	}
}

// waitForCheckpoint asks a running gang that checkpoints for one before it is stopped for why
// (checkpointFirst), and reports whether the stop must wait for it; the gang is kept meanwhile.
func (d *decision) waitForCheckpoint(why string) bool {
	wait := checkpointFirst(d.job, d.st, d.o.pods, d.o.now, why, gangStops)
	if wait > 0 {
		d.p.requeue(wait)
		d.p.ensureChildren = true
	}
	return wait > 0
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

// resources summarises the gang's GPUs and where its pods are bound: the nodes, then the domains
// at each topology level that the scheduler recorded on the pods (convoy.AnnotationTopologyDomains),
// outer to inner, for example "4 nodes; block: b1; rack: r1, r2".
func resources(job *convoy.TrainingJob, pods []*corev1.Pod) *convoy.ResourcesStatus {
	const maxPlacement = 1024 // status.resources.placement's MaxLength
	used := map[string]bool{}
	var levels []string
	domains := map[string]map[string]bool{}
	for _, pod := range pods {
		n := pod.Spec.NodeName
		if n == "" || pod.DeletionTimestamp != nil || isFinished(pod) {
			continue
		}
		used[n] = true
		for _, d := range strings.Split(pod.Annotations[convoy.AnnotationTopologyDomains], ",") {
			level, domain, ok := strings.Cut(d, "=")
			if !ok || level == "" || domain == "" {
				continue
			}
			if domains[level] == nil {
				domains[level] = map[string]bool{}
				levels = append(levels, level)
			}
			domains[level][domain] = true
		}
	}
	r := &convoy.ResourcesStatus{GPUs: job.TotalGPUs(), Nodes: int32(len(used))}
	if len(used) > 0 {
		r.Placement = plural(len(used), "node")
		for _, level := range levels {
			names := slices.Sorted(maps.Keys(domains[level]))
			list := strings.Join(names, ", ")
			if len(names) > 3 {
				list = fmt.Sprintf("%d (%s, ...)", len(names), strings.Join(names[:3], ", "))
			}
			r.Placement += "; " + level + ": " + list
		}
		if len(r.Placement) > maxPlacement {
			r.Placement = r.Placement[:maxPlacement-3] + "..."
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

func isFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
