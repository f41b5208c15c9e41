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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestStartup: the missing pods are created and the gang followed to Running; pods refused or not starting fail the job after the startup timeout.
func TestStartup(t *testing.T) {
	job, _ := twoWorkers()
	testDecide(t, map[string]decideCase{
		"pods placed but not all running: initializing": {
			job:  job.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).obj()},
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Workers: convoy.WorkerCounts{Active: 1, Pending: 1}, Children: true, Started: true},
		},
		"a pod the scheduler cannot place: initializing, unschedulable": {
			job: job.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).unschedulable("ns/llm needs 2 pod(s) × 1 GPU(s)").obj(),
				makePod(job.Obj(), "worker", 1).obj()},
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonUnschedulable),
				Workers: convoy.WorkerCounts{Pending: 2}, Children: true, Started: true},
			says: map[string]string{convoy.ConditionInitializing: `0 of 2 pods are running; scheduler "convoy-scheduler" cannot place the gang: ns/llm needs 2 pod(s) × 1 GPU(s)`},
		},
		"a pod still to create counts as pending: its arrival changes no status": {
			job:  job.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).obj()},
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Workers: convoy.WorkerCounts{Pending: 2}, Create: []mlframework.Replica{w1}, Children: true, Started: true},
		},
		"the last reconcile did not create a pod it counted: only the pods there are count": {
			job:       job.Clone().Obj(),
			pods:      []*corev1.Pod{makePod(job.Obj(), "worker", 0).obj()},
			uncounted: true,
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Workers: convoy.WorkerCounts{Pending: 1}, Create: []mlframework.Replica{w1}, Children: true, Started: true},
		},
		"every pod running: running": {
			job:  job.Clone().Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning),
				Workers: convoy.WorkerCounts{Active: 2}, Children: true, Started: true},
			says: map[string]string{convoy.ConditionRunning: "all 2 pods are running"},
		},
		"pods the API server refused within the startup timeout: created again, looked at when it ends": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, PodsRefusedSince: &metav1.Time{Time: now.Add(-time.Minute)}, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionInitializing, metav1.ConditionTrue, convoy.ReasonPodCreationFailed, now.Add(-time.Minute))}}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).obj()},
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodCreationFailed),
				Workers: convoy.WorkerCounts{Pending: 1}, Create: []mlframework.Replica{w1}, Children: true, Started: true, RequeueAfter: 9 * time.Minute},
		},
		"pods the API server refused for the startup timeout: failed, none created, the rest deleted": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, PodsRefusedSince: &metav1.Time{Time: now.Add(-10 * time.Minute)}, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionInitializing, metav1.ConditionTrue, convoy.ReasonPodCreationFailed, now.Add(-10*time.Minute))}}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonStartupTimeout), FailureReason: convoy.ReasonStartupTimeout,
				Workers: convoy.WorkerCounts{Pending: 1}, Delete: []string{"llm-worker-0"}, Children: true, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionFailed: "1 of 2 pods of the gang could not be created for 10m0s (spec.failurePolicy.startupTimeoutSeconds)"},
		},

		"a placed container that cannot pull its image: initializing, with the kubelet's words": {
			job: job.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).node("node-a").waiting("ErrImagePull", "pull access denied").obj(),
				makePod(job.Obj(), "worker", 1).node("node-a").obj()},
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonContainersNotStarting),
				Workers: convoy.WorkerCounts{Pending: 2}, Children: true, Started: true},
			says: map[string]string{convoy.ConditionInitializing: "0 of 2 pods are running; pod llm-worker-0, container trainer: ErrImagePull: pull access denied"},
		},
		// Placed pods hold GPUs: the cost wakes the job within seconds too, so the timeout ends sooner.
		"a gang placed within the startup timeout: looked at again when it ends": {
			job: job.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).placed("node-a", now.Add(-11*time.Minute)).obj(),
				makePod(job.Obj(), "worker", 1).placed("node-a", now.Add(-10*time.Minute+500*time.Millisecond)).obj()},
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Workers: convoy.WorkerCounts{Pending: 2}, Children: true, Started: true, RequeueAfter: 500 * time.Millisecond},
		},
		// The pods' cost is brought up to date as they go (cost.go's wake-up within seconds).
		"a gang placed and still not running after the startup timeout: failed, the pods deleted": {
			job: job.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).placed("node-a", now.Add(-11*time.Minute)).waiting("ImagePullBackOff", "back-off").obj(),
				makePod(job.Obj(), "worker", 1).placed("node-a", now.Add(-10*time.Minute)).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonStartupTimeout), FailureReason: convoy.ReasonStartupTimeout,
				Workers: convoy.WorkerCounts{Active: 1, Pending: 1}, Delete: []string{"llm-worker-0", "llm-worker-1"}, Children: true, Started: true, Finished: true, RequeueAfter: time.Second},
			says: map[string]string{convoy.ConditionFailed: "1 of 2 pods were still not running 10m0s after the gang was placed (spec.failurePolicy.startupTimeoutSeconds); pod llm-worker-0, container trainer: ImagePullBackOff: back-off"},
		},
		"a running gang that lost its Initializing reason: Running again clears Preempted": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionPreempted, metav1.ConditionTrue, convoy.ReasonPreempted, t0),
				cond(convoy.ConditionInitializing, metav1.ConditionTrue, convoy.ReasonPodsCreated, t0)}}).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning),
				Workers: convoy.WorkerCounts{Active: 2}, Children: true, Started: true},
			says: map[string]string{convoy.ConditionPreempted: "the gang runs again"},
		},
	})
}

// TestDecideSaysWhyTheGangIsNotPlaced: the Initializing condition carries the scheduler's words.
func TestDecideSaysWhyTheGangIsNotPlaced(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(2).Obj()
	why := "ns/llm needs 2 pod(s) × 8 GPU(s) in one rack; the best rack (z/b/r) has room for 1 pod (8 free GPUs)"
	pods := []*corev1.Pod{makePod(job, "worker", 0).obj(), makePod(job, "worker", 1).unschedulable(why).obj()}
	p, _ := mlframework.For(job.Spec.Framework)
	got := decide(observation{job: job, plugin: p, pods: pods, now: now, backoff: DefaultBackoff})
	c := meta.FindStatusCondition(got.status.Conditions, convoy.ConditionInitializing)
	want := `0 of 2 pods are running; scheduler "convoy-scheduler" cannot place the gang: ` + why
	if c == nil || c.Reason != convoy.ReasonUnschedulable || c.Message != want {
		t.Errorf("Initializing condition = %+v, want reason %s, message %q", c, convoy.ReasonUnschedulable, want)
	}
}
