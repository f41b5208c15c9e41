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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// startup is the last phase: the gang is wanted. It creates the replicas that have no pod, and
// follows the gang to Running: Initializing, with the scheduler's or the kubelet's words while it
// waits, until every pod runs. Pods the API server refuses, and a placed gang whose pods do not
// start, fail the job with StartupTimeout after spec.failurePolicy.startupTimeoutSeconds.
func (d *decision) startup() bool {
	t := &d.t
	d.p.ensureChildren = true
	for _, r := range t.missing {
		// Each attempt names its pods apart (mlframework.PodName); a pod of another attempt that
		// has the name all the same must be gone first.
		name := mlframework.PodName(d.job, r, d.st.RestartCount)
		if !slices.ContainsFunc(d.o.pods, func(pod *corev1.Pod) bool { return pod.Name == name }) {
			d.p.create = append(d.p.create, r)
		}
	}
	if d.refusedTooLong() {
		return true
	}
	if d.st.PodsRefusedSince == nil && !d.o.uncounted {
		// The pods this reconcile creates are pending already, as the Job controller counts the pods
		// it creates: their arrival in the cache then needs no second status write. The next
		// reconcile takes back those not created (observation.uncounted).
		d.p.counted = int32(len(d.p.create))
		d.st.Workers.Pending += d.p.counted
	}
	if d.st.StartTime == nil {
		now := metav1.NewTime(d.o.now)
		d.st.StartTime = &now
	}
	total, up := len(t.replicas), t.running+t.succeeded
	if up < total && d.job.IsElastic() && d.isTrue(convoy.ConditionRunning) {
		// Lost pods restarted the gang in an earlier phase: those waiting are the workers an
		// elastic gang grew by, which join the running ones once placed.
		msg := fmt.Sprintf("%d of %d pods are running; the %d the gang grew by join it once placed", up, total, total-up)
		if w := d.o.queue.GrowWaiting; w != "" {
			msg = fmt.Sprintf("%d of %d pods are running; the %d the gang grew by wait for the queue to admit the larger size: %s", up, total, total-up, w)
		}
		d.set(convoy.ConditionRunning, metav1.ConditionTrue, convoy.ReasonPodsRunning, msg)
		return true
	}
	if up == total {
		d.set(convoy.ConditionRunning, metav1.ConditionTrue, convoy.ReasonPodsRunning, fmt.Sprintf("all %d pods are running", total))
		d.clear(convoy.ConditionInitializing, convoy.ReasonPodsRunning, "all pods are running")
		d.clear(convoy.ConditionPreempted, convoy.ReasonPodsRunning, "the gang runs again")
		return true
	}
	reason, msg := convoy.ReasonPodsCreated,
		fmt.Sprintf("%d of %d pods are running; the gang starts once scheduler %q has placed all of them", up, total, d.job.SchedulerName())
	stuck := notStarting(d.o.pods)
	switch why := unschedulable(d.o.pods); {
	case why != "":
		reason, msg = convoy.ReasonUnschedulable,
			fmt.Sprintf("%d of %d pods are running; scheduler %q cannot place the gang: %s", up, total, d.job.SchedulerName(), why)
	case stuck != "":
		reason, msg = convoy.ReasonContainersNotStarting, fmt.Sprintf("%d of %d pods are running; %s", up, total, stuck)
	}
	// A pod the API server refused keeps its words (the reconciler wrote them) until it is created.
	if c := meta.FindStatusCondition(d.st.Conditions, convoy.ConditionInitializing); c != nil && c.Status == metav1.ConditionTrue &&
		c.Reason == convoy.ReasonPodCreationFailed && len(d.p.create) > 0 {
		reason, msg = c.Reason, c.Message
	}
	// Only the gang's pods count: one it no longer has is deleted by this reconcile.
	gangPods := slices.Collect(maps.Values(t.current))
	if placed, all := lastPlaced(gangPods); all && len(gangPods) == total {
		timeout := startupTimeout(d.job)
		if left := placed.Add(timeout).Sub(d.o.now); left > 0 {
			d.p.requeue(left)
		} else {
			detail := "; " + cmp.Or(stuck, "no container reported why")
			d.finish(convoy.ConditionFailed, convoy.ReasonStartupTimeout, fmt.Sprintf(
				"%d of %d pods were still not running %s after the gang was placed (spec.failurePolicy.startupTimeoutSeconds)%s: fix the image or configuration and apply the job again, or raise startupTimeoutSeconds",
				up, total, timeout, detail))
			return true
		}
	}
	d.set(convoy.ConditionInitializing, metav1.ConditionTrue, reason, msg)
	d.clear(convoy.ConditionRunning, convoy.ReasonPodsCreated, "not every pod is running")
	return true
}

// refusedTooLong fails the job when the API server has refused pods of the gang (the reconciler
// records since when) for the startup timeout, as a placed gang that does not start does: they
// must not hold the job's quota forever. Before, the job is looked at again when it will have.
func (d *decision) refusedTooLong() bool {
	t := &d.t
	if len(t.missing) == 0 {
		d.st.PodsRefusedSince = nil
		return false
	}
	since := d.st.PodsRefusedSince
	if since == nil || len(d.p.create) == 0 {
		return false
	}
	timeout := startupTimeout(d.job)
	if left := since.Add(timeout).Sub(d.o.now); left > 0 {
		d.p.requeue(left)
		return false
	}
	why := "the API server refused them"
	if c := meta.FindStatusCondition(d.st.Conditions, convoy.ConditionInitializing); c != nil && c.Reason == convoy.ReasonPodCreationFailed {
		why = c.Message
	}
	d.p.create = nil
	d.finish(convoy.ConditionFailed, convoy.ReasonStartupTimeout, fmt.Sprintf(
		"%d of %d pods of the gang could not be created for %s (spec.failurePolicy.startupTimeoutSeconds); %s: fix the quota, Pod Security level or webhook that refuses them and apply the job again, or raise startupTimeoutSeconds",
		len(t.missing), len(t.replicas), timeout, why))
	return true
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
