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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// gangStops is what checkpointFirst holds back when the whole gang stops.
const gangStops = "it is stopped"

// checkpointFirst holds back a stop (stops says what stops: gangStops, or some of the gang's
// workers) of a running gang, for why, until it has checkpointed: it asks for a checkpoint
// (ConditionCheckpointRequested, which the progress endpoint's replies carry) and returns how long
// to wait still. It returns 0 once the gang may stop: a checkpoint of the
// attempt reported in a later second than the request is recorded, or
// spec.checkpoint.preemptionGraceSeconds passed since the request, or there is nothing to wait
// for (checkpointing off, a grace of 0, no running pod), or the attempt's latest checkpoint is
// recent (recentCheckpoint).
func checkpointFirst(job *convoy.TrainingJob, st *convoy.TrainingJobStatus, pods []*corev1.Pod, now time.Time, why, stops string) time.Duration {
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
	if cp := st.Checkpoint; !asked && recentCheckpoint(job, st, c, now) {
		set(metav1.ConditionFalse, convoy.ReasonCheckpointRecent, fmt.Sprintf(
			"%s: the gang's checkpoint %s (epoch %d), reported at %s, is younger than a tenth of spec.checkpoint.intervalSeconds (%s), and %s at once: it resumes from it",
			why, cp.Latest, cp.Epoch, cp.Time.UTC().Format(time.RFC3339), job.CheckpointInterval(), stops))
		return 0
	}
	if !asked {
		set(metav1.ConditionTrue, convoy.ReasonStopRequested, fmt.Sprintf(
			"%s: the gang is asked to checkpoint, and %s once it reports one, or after spec.checkpoint.preemptionGraceSeconds (%s)", why, stops, grace))
		return grace
	}
	// Both times are stored to the second: a checkpoint reported within the request's second may
	// be older than it, and only a later one answers it.
	at := c.LastTransitionTime.Time
	if cp := st.Checkpoint; cp != nil && cp.Time != nil && cp.Attempt == st.RestartCount && cp.Time.Truncate(time.Second).After(at.Truncate(time.Second)) {
		set(metav1.ConditionFalse, convoy.ReasonCheckpointSaved, fmt.Sprintf(
			"the gang reported checkpoint %s (epoch %d) when asked, and %s: it resumes from it", cp.Latest, cp.Epoch, stops))
		return 0
	}
	if left := at.Add(grace).Sub(now); left > 0 {
		return left
	}
	set(metav1.ConditionFalse, convoy.ReasonGraceExpired, fmt.Sprintf(
		"the gang reported no checkpoint within spec.checkpoint.preemptionGraceSeconds (%s) of the request, and %s: it resumes from the latest checkpoint before", grace, stops))
	return 0
}

// recentCheckpoint reports whether the attempt's latest checkpoint makes asking for another
// needless before a stop: with spec.checkpoint.intervalSeconds, one younger than a tenth of the
// interval loses less work than the interval already accepts, and the stop need not wait for a
// checkpoint that would add little. A stop decided so (c, ReasonCheckpointRecent, not older than
// the checkpoint) stays decided while the gang goes.
func recentCheckpoint(job *convoy.TrainingJob, st *convoy.TrainingJobStatus, c *metav1.Condition, now time.Time) bool {
	cp, interval := st.Checkpoint, job.CheckpointInterval()
	if interval <= 0 || cp == nil || cp.Time == nil || cp.Attempt != st.RestartCount {
		return false
	}
	if c != nil && c.Reason == convoy.ReasonCheckpointRecent && !c.LastTransitionTime.Before(cp.Time) {
		return true
	}
	return now.Sub(cp.Time.Time) < interval/10
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

// lostPods is the phase of a gang that lost pods to something other than their own code
// (lostCause): it restarts whole from the latest checkpoint without spending backoffLimit. A pod
// lost from a node with a reclaim notice (a drain's eviction, before or while the gang
// checkpointed) moves the gang as the notice does, spending no budget; a gang the scheduler
// preempted is Preempted and restarts when it fits again; the others spend disruptionLimit.
func (d *decision) lostPods() bool {
	if len(d.t.lost) == 0 {
		return false
	}
	if d.t.noticedMsg != "" {
		d.moveOffNotice(d.t.noticedMsg)
		return true
	}
	if d.t.preemptMsg != "" {
		d.set(convoy.ConditionPreempted, metav1.ConditionTrue, convoy.ReasonPreempted, d.t.preemptMsg+"; the gang restarts when it fits again")
		d.restart(convoy.ReasonNodeLost, d.t.lostMsg+"; restarting the whole gang from the latest checkpoint without spending backoffLimit", false)
		return true
	}
	d.restartLost(d.t.lostMsg)
	return true
}

// schedulerPreemption is the phase of a gang whose attempt convoy-scheduler preempted (the
// PodGroup's convoy.dev/preempt-attempt annotation): after a checkpoint it is Preempted and
// restarts when it fits again, spending neither backoffLimit nor disruptionLimit.
func (d *decision) schedulerPreemption() bool {
	if d.o.preemptAttempt != d.t.attempt {
		return false
	}
	const why = "convoy-scheduler preempted the gang to make room for a gang of higher priority"
	if d.waitForCheckpoint(why) {
		return true
	}
	d.set(convoy.ConditionPreempted, metav1.ConditionTrue, convoy.ReasonPreempted, why+"; the gang restarts when it fits again")
	d.restart(convoy.ReasonNodeLost, why+"; restarting the whole gang from the latest checkpoint without spending backoffLimit", false)
	return true
}

// vanishedPods is the phase of a Running gang that misses a pod: every pod of a Running gang was
// seen, so one that vanished since was deleted or evicted so fast (a force delete, or kwok) that
// it was never seen terminating. The gang restarts whole, as for a lost pod.
func (d *decision) vanishedPods() bool {
	missing := d.t.missing
	if e := d.job.Status.Elastic; d.job.IsElastic() && e != nil && e.TargetWorkers > 0 {
		// Workers an elastic gang grows by are created, not lost, also once status.elastic counts
		// them and before the cache shows their pods: only the ranks that were running are lost.
		missing = slices.DeleteFunc(slices.Clone(missing), func(r mlframework.Replica) bool {
			return r.Rank >= min(e.TargetWorkers, e.CurrentWorkers)
		})
	}
	if !d.isTrue(convoy.ConditionRunning) || len(missing) == 0 {
		return false
	}
	name := mlframework.PodName(d.job, missing[0], d.st.RestartCount)
	d.restartLost(fmt.Sprintf("pod %s of the running gang was deleted or evicted", name))
	return true
}

// restartLost restarts the gang for lost pods (what says which), or fails the job when its pods
// were lost more often than disruptionLimit allows.
func (d *decision) restartLost(what string) {
	limit := disruptionLimit(d.job)
	if d.st.DisruptionRestarts >= limit {
		d.finish(convoy.ConditionFailed, convoy.ReasonDisruptionLimitExceeded, fmt.Sprintf(
			"%s after %d restarts for lost pods; spec.failurePolicy.disruptionLimit is %d: find why the pods are lost (kubectl get events: an eviction for ephemeral storage or memory, a node that keeps failing), or raise disruptionLimit",
			what, d.st.DisruptionRestarts, limit))
		return
	}
	d.st.DisruptionRestarts++
	d.restart(convoy.ReasonNodeLost, fmt.Sprintf("%s; restarting the whole gang from the latest checkpoint without spending backoffLimit (disruption restart %d of %d)",
		what, d.st.DisruptionRestarts, limit), false)
}

// lostCause says why a pod was lost to something other than its own code: a disruption (preemption,
// eviction, node drain), a deletion the operator did not make, its node's disappearance, or its
// node's loss to the node lifecycle controller (notReady: a NoExecute taint not-ready or
// unreachable) while it runs, unless it tolerates that taint for ever. The gang then restarts
// without spending backoffLimit.
func lostCause(pod *corev1.Pod, goneNodes map[string]bool, notReady map[string]*corev1.Taint) (reason, message string, lost bool) {
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
	case notReady[pod.Spec.NodeName] != nil && !isFinished(pod) && !toleratesForever(pod, notReady[pod.Spec.NodeName]):
		return "NodeNotReady", fmt.Sprintf("node %s of pod %s is not Ready (taint %s)", pod.Spec.NodeName, pod.Name, notReady[pod.Spec.NodeName].ToString()), true
	case pod.DeletionTimestamp != nil:
		return "Deleted", fmt.Sprintf("pod %s was deleted", pod.Name), true
	}
	return "", "", false
}

// notReadyTaint returns the node lifecycle controller's NoExecute taint of a node whose kubelet is
// not Ready (it reports NotReady, or has stopped reporting for node-monitor-grace-period); nil when none.
func notReadyTaint(node *corev1.Node) *corev1.Taint {
	for i, t := range node.Spec.Taints {
		if (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) && t.Effect == corev1.TaintEffectNoExecute {
			return &node.Spec.Taints[i]
		}
	}
	return nil
}

// toleratesForever says whether the pod stays on a node with taint as long as it lasts: a toleration
// without tolerationSeconds. The 300 s that the API server gives every pod for the node lifecycle
// controller's taints do not keep a gang on a lost node: its ranks cannot make progress without it.
func toleratesForever(pod *corev1.Pod, taint *corev1.Taint) bool {
	for _, t := range pod.Spec.Tolerations {
		if t.TolerationSeconds == nil && t.ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

func disruptionLimit(job *convoy.TrainingJob) int32 {
	if fp := job.Spec.FailurePolicy; fp != nil && fp.DisruptionLimit != nil {
		return *fp.DisruptionLimit
	}
	return 10
}
