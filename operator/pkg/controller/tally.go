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
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// tally is the gang's current attempt as the pods show it, replica by replica.
type tally struct {
	// attempt is the current restart attempt, as pods label it.
	attempt string
	// current are the pods of the current attempt by the replica their labels name (pod names
	// change with the attempt); only replicas of the gang are in it.
	current  map[mlframework.Replica]*corev1.Pod
	replicas []mlframework.Replica
	// failed are the replicas whose pod failed; lost those whose pod was lost (lostCause); missing
	// those without a pod of the current attempt.
	failed, lost, missing []mlframework.Replica
	// lostMsg says why the first lost pod was lost; preemptMsg the same of the first the scheduler
	// preempted; noticedMsg of the first lost from a node with a reclaim notice, with the notice
	// ("" when none).
	lostMsg, preemptMsg, noticedMsg string
	workers                         convoy.WorkerCounts
	running, succeeded              int
	// allSucceeded: every replica that must succeed (mlframework.Plugin.MustSucceed) did.
	allSucceeded bool
}

// countAttempt tallies the pods of the job's current attempt.
func countAttempt(o observation, restartCount int32) tally {
	job := o.job
	t := tally{attempt: strconv.Itoa(int(restartCount)), current: map[mlframework.Replica]*corev1.Pod{},
		replicas: o.plugin.Replicas(job), allSucceeded: true}
	for _, pod := range o.pods {
		r, ok := builder.PodReplica(pod)
		if ok && pod.Labels[convoy.LabelRestartAttempt] == t.attempt && slices.Contains(t.replicas, r) && t.current[r] == nil {
			t.current[r] = pod
		}
	}
	for _, r := range t.replicas {
		pod := t.current[r]
		if pod == nil {
			t.missing = append(t.missing, r)
			t.allSucceeded = t.allSucceeded && !o.plugin.MustSucceed(r)
			continue
		}
		if reason, msg, ok := lostCause(pod, o.goneNodes, o.notReadyNodes); ok {
			t.lost = append(t.lost, r)
			t.workers.Failed++
			if t.lostMsg == "" {
				t.lostMsg = msg
			}
			if notice := o.reclaimNotices[pod.Spec.NodeName]; notice != "" && t.noticedMsg == "" {
				t.noticedMsg = msg + ": " + notice
			}
			if reason == corev1.PodReasonPreemptionByScheduler && t.preemptMsg == "" {
				t.preemptMsg = msg
			}
			t.allSucceeded = t.allSucceeded && !o.plugin.MustSucceed(r)
			continue
		}
		switch pod.Status.Phase {
		case corev1.PodFailed:
			t.failed = append(t.failed, r)
			t.workers.Failed++
		case corev1.PodSucceeded:
			t.workers.Succeeded++
			t.succeeded++
		case corev1.PodRunning:
			t.workers.Active++
			t.running++
		default:
			t.workers.Pending++
		}
		if pod.Status.Phase != corev1.PodSucceeded && o.plugin.MustSucceed(r) {
			t.allSucceeded = false
		}
	}
	return t
}

// holds reports whether pod is the current attempt's pod of one of the gang's replicas.
func (t *tally) holds(pod *corev1.Pod) bool {
	r, ok := builder.PodReplica(pod)
	return ok && t.current[r] == pod
}

// tally is the phase that counts the current attempt's pods into status.workers and
// status.resources, and deletes the pods of earlier attempts and those the gang no longer has.
// It never decides the reconcile.
func (d *decision) tally() bool {
	d.t = countAttempt(d.o, d.st.RestartCount)
	d.st.Workers = d.t.workers
	d.st.Resources = resources(d.job, d.o.pods)
	d.deleteWhere(d.t.holds)
	d.elasticSize()
	return false
}

// elasticSize records an elastic job's size in status.elastic: the workers running and the size
// Kueue accounts for (job.WorkerCount). A change of that size after the gang first started is a
// resize: it is counted and timed, and emitEvents announces it. A size lowered other than by
// elasticShrink is a grow the resizer withdrew, Kueue not having admitted it: its count is taken
// back, the cooldown counts from the withdrawal, and withdrawnGrows counts it until a worker the
// gang grew by starts.
func (d *decision) elasticSize() {
	if !d.job.IsElastic() {
		return
	}
	e := d.st.Elastic
	if e == nil {
		e = &convoy.ElasticStatus{}
		d.st.Elastic = e
	}
	target, running := d.job.WorkerCount(), int32(d.t.running)
	switch {
	case e.TargetWorkers == 0 || e.TargetWorkers == target:
	case target < e.TargetWorkers && d.p.shrinkTo != target:
		e.ResizeCount = max(e.ResizeCount-1, 0)
		e.LastResizeTime = &metav1.Time{Time: d.o.now}
		if e.CurrentWorkers > 0 {
			// A withdrawal leaves the gang running; a job admitted again after a
			// preemption, smaller, had none.
			e.WithdrawnGrows++
		}
	default:
		e.ResizeCount++
		e.LastResizeTime = &metav1.Time{Time: d.o.now}
	}
	if e.CurrentWorkers > 0 && running > e.CurrentWorkers {
		// A worker the gang grew by started: Kueue admitted the grow.
		e.WithdrawnGrows = 0
	}
	e.TargetWorkers, e.CurrentWorkers = target, running
}
