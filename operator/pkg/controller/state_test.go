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
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

var (
	t0  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now = t0.Add(time.Hour)
)

// podWrapper builds a pod of the job as the operator would have created it.
type podWrapper struct{ corev1.Pod }

func makePod(job *convoy.TrainingJob, role mlframework.Role, rank int32) *podWrapper {
	p, _ := mlframework.For(job.Spec.Framework)
	pod := builder.Pod(job, mlframework.Replica{Role: role, Rank: rank}, p, builder.Options{})
	pod.UID = types.UID("uid-" + pod.Name)
	return &podWrapper{*pod}
}

func (w *podWrapper) phase(phase corev1.PodPhase) *podWrapper {
	w.Status.Phase = phase
	if w.Spec.NodeName == "" && phase != corev1.PodPending {
		w.Spec.NodeName = "node-a"
	}
	return w
}

func (w *podWrapper) exit(code int32) *podWrapper {
	w.phase(map[bool]corev1.PodPhase{true: corev1.PodSucceeded, false: corev1.PodFailed}[code == 0])
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
	return w
}

// finishedAt sets when the container of an exited pod terminated.
func (w *podWrapper) finishedAt(t time.Time) *podWrapper {
	w.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(t)
	return w
}

func (w *podWrapper) node(name string) *podWrapper {
	w.Spec.NodeName = name
	return w
}

func (w *podWrapper) attempt(n int) *podWrapper {
	w.Labels[convoy.LabelRestartAttempt] = strconv.Itoa(n)
	return w
}

func (w *podWrapper) disrupted(reason string) *podWrapper {
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
		Status: corev1.ConditionTrue, Reason: reason, Message: "preempted"})
	return w
}

func (w *podWrapper) deleting() *podWrapper {
	w.DeletionTimestamp = &metav1.Time{Time: now}
	return w
}

// unschedulable sets the PodScheduled=False condition the scheduler writes on a pod it cannot place.
func (w *podWrapper) unschedulable(msg string) *podWrapper {
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg})
	return w
}

func (w *podWrapper) obj() *corev1.Pod { return &w.Pod }

// gang returns the job's worker pods in phase.
func gang(job *convoy.TrainingJob, phase corev1.PodPhase) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range job.Spec.NumWorkers {
		pods = append(pods, makePod(job, mlframework.RoleWorker, i).phase(phase).obj())
	}
	return pods
}

func cond(condType string, status metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: condType, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
}

func running(at time.Time) []metav1.Condition {
	return []metav1.Condition{
		cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, at),
		cond(convoy.ConditionRunning, metav1.ConditionTrue, convoy.ReasonPodsRunning, at),
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// outcome is what a test compares of a plan: the summary a user sees and the writes.
type outcome struct {
	State           convoy.TrainingJobState
	Reasons         map[string]string // condition type -> reason, of true conditions
	RestartCount    int32
	FailureRestarts int32
	// DisruptionRestarts counts restarts for lost pods.
	DisruptionRestarts int32
	FailureReason      string
	Workers            convoy.WorkerCounts
	Create             []mlframework.Replica
	Delete             []string
	Children           bool
	DeleteJob          bool
	RequeueAfter       time.Duration
	Started            bool
	Finished           bool
}

func summarize(p plan) outcome {
	o := outcome{
		State: convoy.StateFromConditions(p.status.Conditions), Reasons: map[string]string{},
		RestartCount: p.status.RestartCount, FailureRestarts: p.status.FailureRestarts, DisruptionRestarts: p.status.DisruptionRestarts, FailureReason: p.status.FailureReason,
		Workers: p.status.Workers, Create: p.create, Delete: names(p.delete), Children: p.ensureChildren,
		DeleteJob: p.deleteJob, RequeueAfter: p.requeueAfter,
		Started: p.status.StartTime != nil, Finished: p.status.CompletionTime != nil,
	}
	for _, c := range p.status.Conditions {
		if c.Status == metav1.ConditionTrue {
			o.Reasons[c.Type] = c.Reason
		}
	}
	return o
}

func TestDecide(t *testing.T) {
	start := &metav1.Time{Time: t0}
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(2)
	runningJob := job.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start})
	w0, w1 := mlframework.Replica{Role: mlframework.RoleWorker, Rank: 0}, mlframework.Replica{Role: mlframework.RoleWorker, Rank: 1}
	admitted := map[string]string{convoy.ConditionAdmitted: convoy.ReasonNoQueue}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}

	cases := map[string]struct {
		job       *convoy.TrainingJob
		pods      []*corev1.Pod
		goneNodes map[string]bool
		queue     QueueStatus
		want      outcome
	}{
		"a new job without a queue is admitted at once and its gang created": {
			job: job.Clone().Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
		},
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
		},
		"every pod running: running": {
			job:  job.Clone().Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning),
				Workers: convoy.WorkerCounts{Active: 2}, Children: true, Started: true},
		},
		"every worker succeeded: completed, parameter servers stopped": {
			job: job.Clone().Framework(convoy.FrameworkTensorFlow).ParameterServers(1).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start}).Obj(),
			pods: []*corev1.Pod{
				makePod(job.Clone().Framework(convoy.FrameworkTensorFlow).Obj(), "worker", 0).exit(0).obj(),
				makePod(job.Clone().Framework(convoy.FrameworkTensorFlow).Obj(), "worker", 1).exit(0).obj(),
				makePod(job.Clone().Framework(convoy.FrameworkTensorFlow).Obj(), "ps", 0).phase(corev1.PodRunning).obj(),
			},
			want: outcome{State: convoy.StateCompleted, Reasons: with(admitted, convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded),
				Workers: convoy.WorkerCounts{Succeeded: 2, Active: 1}, Delete: []string{"llm-ps-0"}, Started: true, Finished: true},
		},
		"mpi: the launcher's success completes the job and stops the ssh workers": {
			job:  job.Clone().Framework(convoy.FrameworkMPI).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(0).obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateCompleted, Reasons: with(admitted, convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded),
				Workers: convoy.WorkerCounts{Succeeded: 1, Active: 1}, Delete: []string{"llm-worker-1"}, Started: true, Finished: true},
		},
		"a failed worker under OnFailure restarts the whole gang after a backoff": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).exit(1).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0", "llm-worker-1"}, RequeueAfter: 10 * time.Second, Started: true},
		},
		"restarting: waits for the old gang's pods to go": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 1, FailureRestarts: 1, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonPodFailed, now.Add(-time.Minute))}}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).deleting().obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Delete: []string{"llm-worker-1"}, Started: true},
		},
		"restarting: the old pods are gone but the backoff has not passed": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 2, FailureRestarts: 2, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonPodFailed, now.Add(-5*time.Second))}}).Obj(),
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 2, FailureRestarts: 2, RequeueAfter: 15 * time.Second, Started: true},
		},
		"restarting: backoff passed, the next attempt's pods are created": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 1, FailureRestarts: 1, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonPodFailed, now.Add(-11*time.Second))}}).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				RestartCount: 1, FailureRestarts: 1, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
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
		},
		"pods of an earlier attempt are deleted and not mistaken for the new gang": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 1, Conditions: running(t0)}).Obj(),
			pods: []*corev1.Pod{
				makePod(job.Obj(), "worker", 0).attempt(1).phase(corev1.PodRunning).obj(),
				makePod(job.Obj(), "worker", 1).attempt(0).exit(1).obj(),
			},
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				RestartCount: 1, Workers: convoy.WorkerCounts{Active: 1}, Delete: []string{"llm-worker-1"}, Children: true, Started: true},
		},
		"backoff limit exhausted: failed": {
			job:  runningJob.Clone().FailurePolicy(convoy.RestartOnFailure, 2).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start, RestartCount: 2, FailureRestarts: 2}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).attempt(2).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).attempt(2).exit(1).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonBackoffLimitExceeded),
				RestartCount: 2, FailureRestarts: 2, FailureReason: convoy.ReasonBackoffLimitExceeded, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0"}, Started: true, Finished: true},
		},
		"restartPolicy Never: the first failure fails the job": {
			job:  runningJob.Clone().FailurePolicy(convoy.RestartNever, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).exit(137).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonPodFailed),
				FailureReason: convoy.ReasonPodFailed, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0"}, Started: true, Finished: true},
		},
		"restartPolicy ExitCode: a program error fails the job": {
			job:  runningJob.Clone().FailurePolicy(convoy.RestartExitCode, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).exit(2).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonNonRetryableExitCode),
				FailureReason: convoy.ReasonNonRetryableExitCode, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0"}, Started: true, Finished: true},
		},
		"restartPolicy ExitCode: a kill restarts the gang": {
			job:  runningJob.Clone().FailurePolicy(convoy.RestartExitCode, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).exit(137).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0", "llm-worker-1"}, RequeueAfter: 10 * time.Second, Started: true},
		},
		"restartPolicy ExitCode: a kill that broke the other rank's collective restarts the gang": {
			job: runningJob.Clone().FailurePolicy(convoy.RestartExitCode, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(1).finishedAt(time.Unix(1002, 0)).obj(),
				makePod(job.Obj(), "worker", 1).exit(137).finishedAt(time.Unix(1000, 0)).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonPodFailed),
				RestartCount: 1, FailureRestarts: 1, Workers: convoy.WorkerCounts{Failed: 2},
				Delete: []string{"llm-worker-0", "llm-worker-1"}, RequeueAfter: 10 * time.Second, Started: true},
		},
		"restartPolicy ExitCode: the program error that came first fails the job": {
			job: runningJob.Clone().FailurePolicy(convoy.RestartExitCode, 3).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(137).finishedAt(time.Unix(1002, 0)).obj(),
				makePod(job.Obj(), "worker", 1).exit(1).finishedAt(time.Unix(1000, 0)).obj()},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonNonRetryableExitCode),
				FailureReason: convoy.ReasonNonRetryableExitCode, Workers: convoy.WorkerCounts{Failed: 2},
				Delete: []string{}, Started: true, Finished: true},
		},
		"a pod preempted by the scheduler restarts the gang without spending the budget": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).disrupted(corev1.PodReasonPreemptionByScheduler).deleting().obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost, convoy.ConditionPreempted, convoy.ReasonPreempted),
				RestartCount: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1}, Delete: []string{"llm-worker-1"}, Started: true},
		},
		"a pod whose node is gone restarts the gang without spending the budget": {
			job:       runningJob.Clone().Obj(),
			pods:      []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).node("gone").obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			goneNodes: map[string]bool{"gone": true},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost),
				RestartCount: 1, DisruptionRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1}, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true},
		},
		"pods lost more often than disruptionLimit: failed with DisruptionLimitExceeded": {
			job:       runningJob.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start, RestartCount: 10, DisruptionRestarts: 10}).Obj(),
			pods:      []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).node("gone").attempt(10).obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).attempt(10).obj()},
			goneNodes: map[string]bool{"gone": true},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonDisruptionLimitExceeded),
				RestartCount: 10, DisruptionRestarts: 10, FailureReason: convoy.ReasonDisruptionLimitExceeded, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true, Finished: true},
		},
		"a second restart for lost pods waits the backoff": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 2, DisruptionRestarts: 2, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonNodeLost, now.Add(-5*time.Second))}}).Obj(),
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost),
				RestartCount: 2, DisruptionRestarts: 2, RequeueAfter: 5 * time.Second, Started: true},
		},
		"a pod gone from a running gang without being seen terminating restarts the gang": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost),
				RestartCount: 1, DisruptionRestarts: 1, Workers: convoy.WorkerCounts{Active: 1}, Delete: []string{"llm-worker-1"}, Started: true},
		},
		"a lost pod's gang restarts at once": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 1, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionRestarting, metav1.ConditionTrue, convoy.ReasonNodeLost, now)}}).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				RestartCount: 1, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
		},
		"activeDeadlineSeconds passed: failed with DeadlineExceeded": {
			job:  runningJob.Clone().Deadline(3600).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonDeadlineExceeded),
				FailureReason: convoy.ReasonDeadlineExceeded, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true, Finished: true},
		},
		"activeDeadlineSeconds not yet passed: wake up at the deadline": {
			job:  runningJob.Clone().Deadline(3700).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning),
				Workers: convoy.WorkerCounts{Active: 2}, Children: true, RequeueAfter: 100 * time.Second, Started: true},
		},
		"suspended by the user: pods deleted, deadline clock reset": {
			job:  runningJob.Clone().Suspend(true).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateSuspended, Reasons: with(admitted, convoy.ConditionSuspended, convoy.ReasonUserSuspended),
				Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-0", "llm-worker-1"}, RestartCount: 1},
		},
		"suspended with a queue: queued for admission": {
			job:  job.Clone().Queue("team-a").Suspend(true).Obj(),
			want: outcome{State: convoy.StateQueued, Reasons: map[string]string{convoy.ConditionQueued: convoy.ReasonWaitingForAdmission}},
		},
		"preempted by the queue: queued again, the whole gang deleted and counted until gone": {
			job:   runningJob.Clone().Queue("team-a").Suspend(true).Obj(),
			pods:  gang(job.Obj(), corev1.PodRunning),
			queue: QueueStatus{WaitingMessage: "waiting", Preempted: "preempted by TrainingJob ns/urgent"},
			want: outcome{State: convoy.StateQueued, Reasons: map[string]string{convoy.ConditionQueued: convoy.ReasonWaitingForAdmission,
				convoy.ConditionPreempted: convoy.ReasonPreempted}, Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-0", "llm-worker-1"},
				RestartCount: 1},
		},
		"resumed while the suspended gang still terminates: wait": {
			job: job.Clone().Status(convoy.TrainingJobStatus{Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionSuspended, metav1.ConditionTrue, convoy.ReasonUserSuspended, t0)}}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).deleting().obj()},
			want: outcome{State: convoy.StateSuspended, Reasons: with(admitted, convoy.ConditionSuspended, convoy.ReasonUserSuspended)},
		},
		"resumed once the pods are gone: the gang starts again": {
			job: job.Clone().Status(convoy.TrainingJobStatus{Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0),
				cond(convoy.ConditionSuspended, metav1.ConditionTrue, convoy.ReasonUserSuspended, t0)}}).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
		},
		"admitted by the queue: runs": {
			job:  job.Clone().Queue("team-a").Suspend(false).Obj(),
			want: outcome{State: convoy.StateInitializing, Reasons: map[string]string{convoy.ConditionAdmitted: convoy.ReasonAdmitted, convoy.ConditionInitializing: convoy.ReasonPodsCreated}, Create: []mlframework.Replica{w0, w1}, Children: true, Started: true},
		},
		"target accuracy reached: completed early, the gang stopped": {
			job: runningJob.Clone().TargetAccuracy(0.9).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start,
				CurrentEpoch: 4, Metrics: &convoy.TrainingMetrics{Accuracy: ptr.To(0.91)}}).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateCompleted, Reasons: with(admitted, convoy.ConditionCompleted, convoy.ReasonTargetAccuracy),
				Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true, Finished: true},
		},
		"no improvement for the patience: completed by early stopping": {
			job: runningJob.Clone().Patience(3).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start,
				CurrentEpoch: 8, Best: &convoy.BestMetric{Name: "loss", Value: 0.2, Epoch: 5}}).Obj(),
			pods: gang(job.Obj(), corev1.PodRunning),
			want: outcome{State: convoy.StateCompleted, Reasons: with(admitted, convoy.ConditionCompleted, convoy.ReasonEarlyStopping),
				Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true, Finished: true},
		},
		"finished with a TTL not yet passed: wake up then": {
			job: job.Clone().TTL(7200).Status(convoy.TrainingJobStatus{StartTime: start, CompletionTime: start, Conditions: []metav1.Condition{
				cond(convoy.ConditionCompleted, metav1.ConditionTrue, convoy.ReasonAllWorkersSucceeded, t0)}}).Obj(),
			want: outcome{State: convoy.StateCompleted, Reasons: map[string]string{convoy.ConditionCompleted: convoy.ReasonAllWorkersSucceeded},
				RequeueAfter: time.Hour, Started: true, Finished: true},
		},
		"finished and the TTL passed: the job is deleted": {
			job: job.Clone().TTL(60).Status(convoy.TrainingJobStatus{StartTime: start, CompletionTime: start, Conditions: []metav1.Condition{
				cond(convoy.ConditionFailed, metav1.ConditionTrue, convoy.ReasonPodFailed, t0)}}).Obj(),
			want: outcome{State: convoy.StateFailed, Reasons: map[string]string{convoy.ConditionFailed: convoy.ReasonPodFailed},
				DeleteJob: true, Started: true, Finished: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := mlframework.For(tc.job.Spec.Framework)
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(decide(observation{job: tc.job, plugin: p, pods: tc.pods, goneNodes: tc.goneNodes, queue: tc.queue, now: now, backoff: DefaultBackoff}))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decide (-want,+got):\n%s", diff)
			}
		})
	}
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

func TestDecideKeepsTransitionTimes(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(2).Status(convoy.TrainingJobStatus{
		Conditions: running(t0), StartTime: &metav1.Time{Time: t0}}).Obj()
	p, _ := mlframework.For(job.Spec.Framework)
	got := decide(observation{job: job, plugin: p, pods: gang(job, corev1.PodRunning), now: now, backoff: DefaultBackoff})
	got.status.State = convoy.StateFromConditions(got.status.Conditions)
	want := job.Status.DeepCopy()
	want.State = convoy.StateRunning
	want.Workers = convoy.WorkerCounts{Active: 2}
	want.Resources = &convoy.ResourcesStatus{GPUs: 2, Nodes: 1, Placement: "1 node"}
	if diff := cmp.Diff(*want, got.status, cmpopts.IgnoreFields(metav1.Condition{}, "Message")); diff != "" {
		t.Errorf("a running job's status changed on a quiet reconcile (-want,+got):\n%s", diff)
	}
}

func TestRetryableExitCode(t *testing.T) {
	cases := map[string]struct {
		code  int32
		known bool
		want  bool
	}{
		"no exit code (rejected by the node)": {known: false, want: true},
		"exit 1: the program's error":         {code: 1, known: true},
		"exit 127: command not found":         {code: 127, known: true},
		"exit 128":                            {code: 128, known: true},
		"SIGINT":                              {code: 130, known: true, want: true},
		"SIGKILL, as after an OOM kill":       {code: 137, known: true, want: true},
		"SIGTERM":                             {code: 143, known: true, want: true},
		"SIGSEGV is a bug":                    {code: 139, known: true},
		"SIGABRT is a bug":                    {code: 134, known: true},
		"SIGBUS is a bug":                     {code: 135, known: true},
		"255 is not a signal":                 {code: 255, known: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := RetryableExitCode(tc.code, tc.known); got != tc.want {
				t.Errorf("RetryableExitCode(%d, %v) = %v, want %v", tc.code, tc.known, got, tc.want)
			}
		})
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 10 * time.Second, Max: time.Minute}
	for n, want := range map[int32]time.Duration{0: 0, 1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 4: time.Minute, 30: time.Minute} {
		if got := b.delay(n); got != want {
			t.Errorf("delay(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestExpectations(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(3).Obj()
	w := []mlframework.Replica{{Role: mlframework.RoleWorker, Rank: 0}, {Role: mlframework.RoleWorker, Rank: 1}, {Role: mlframework.RoleWorker, Rank: 2}}
	var e expectations
	if got := e.pending(job, w, nil, now); len(got) != 3 {
		t.Fatalf("nothing created yet: pending %v, want all 3", got)
	}
	e.created(job, []string{"llm-worker-0", "llm-worker-1", "llm-worker-2"}, now)
	e.failed(job, "llm-worker-2")
	seen := []*corev1.Pod{makePod(job, mlframework.RoleWorker, 0).obj()}
	// decide asks only for the pods the cache lacks: here workers 1 and 2.
	if diff := cmp.Diff(w[2:], e.pending(job, w[1:], seen, now.Add(time.Second))); diff != "" {
		t.Errorf("pods created but not yet cached are not created again (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(w[1:], e.pending(job, w[1:], seen, now.Add(time.Minute))); diff != "" {
		t.Errorf("an expectation expires (-want,+got):\n%s", diff)
	}
	restarted := job.DeepCopy()
	restarted.Status.RestartCount = 1
	if got := e.pending(restarted, w, nil, now); len(got) != 3 {
		t.Errorf("a new restart attempt starts afresh: pending %v", got)
	}
}

func TestConditionMessagesFitTheAPI(t *testing.T) {
	long := strings.Repeat("é", maxMessage)
	got := truncate(long)
	if len(got) > maxMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "(truncated)") {
		t.Errorf("truncate of %d bytes gave %d bytes, valid UTF-8 %v, ending %q", len(long), len(got), utf8.ValidString(got), got[len(got)-20:])
	}
	if short := "the scheduler's words"; truncate(short) != short {
		t.Errorf("truncate changed a short message: %q", truncate(short))
	}
}

// A pod terminating on a node whose kubelet is not Ready is deleted without a grace period once
// its own has passed, and the job looks again when it will have.
func TestDecideForceDeletesPodsStuckOnUnreadyNodes(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "team-a").Workers(2).Obj()
	p, _ := mlframework.For(job.Spec.Framework)
	overdue := makePod(job, "worker", 0).node("dead").deleting().obj()
	overdue.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
	pending := makePod(job, "worker", 1).node("dead").deleting().obj()
	pending.DeletionTimestamp = &metav1.Time{Time: now.Add(20 * time.Second)}
	elsewhere := makePod(job, "worker", 1).node("alive").deleting().obj()
	elsewhere.Name, elsewhere.DeletionTimestamp = "llm-worker-9", &metav1.Time{Time: now.Add(-time.Second)}
	got := decide(observation{job: job, plugin: p, pods: []*corev1.Pod{overdue, pending, elsewhere},
		unreadyNodes: map[string]bool{"dead": true}, now: now, backoff: DefaultBackoff})
	if names := names(got.forceDelete); len(names) != 1 || names[0] != "llm-worker-0" {
		t.Errorf("force-deleted %v, want only llm-worker-0, past its grace period on the unready node", names)
	}
	if got.requeueAfter <= 0 || got.requeueAfter > 20*time.Second {
		t.Errorf("requeueAfter = %v, want at most 20s, when llm-worker-1's grace period ends", got.requeueAfter)
	}
}
