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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestDecideCheckpointsBeforeAStop: a running gang that checkpoints is asked for a checkpoint
// before spec.suspend (the user's or Kueue's) or the scheduler's preemption stops it, and is
// stopped once one newer than the request is reported, or at the grace.
func TestDecideCheckpointsBeforeAStop(t *testing.T) {
	grace := 30 * time.Second
	base := utiltesting.MakeTrainingJob("llm", "ns").Workers(2).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, PreemptionGraceSeconds: ptr.To[int32](30)})
	withInterval := base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, PreemptionGraceSeconds: ptr.To[int32](30),
		IntervalSeconds: ptr.To[int32](600)})
	asked := func(at time.Time) metav1.Condition {
		return cond(convoy.ConditionCheckpointRequested, metav1.ConditionTrue, convoy.ReasonStopRequested, at)
	}
	checkpoint := func(at time.Time) *convoy.CheckpointStatus {
		return &convoy.CheckpointStatus{Latest: "s3://b/epoch-7", Epoch: 7, Time: ptr.To(metav1.NewTime(at))}
	}
	type want struct {
		requested    metav1.ConditionStatus // "" when absent
		reason       string
		deleted      int
		restartCount int32
		requeue      time.Duration
		preempted    bool
	}
	cases := map[string]struct {
		job            *convoy.TrainingJob
		preemptAttempt string
		want           want
	}{
		"suspended while running: asked, the pods kept": {
			job:  base.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Conditions: running(t0)}).Obj(),
			want: want{requested: metav1.ConditionTrue, reason: convoy.ReasonStopRequested, requeue: grace},
		},
		"asked, no checkpoint yet: keeps waiting": {
			job: base.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Conditions: append(running(t0), asked(now.Add(-10*time.Second))),
				Checkpoint: checkpoint(now.Add(-time.Minute))}).Obj(),
			want: want{requested: metav1.ConditionTrue, reason: convoy.ReasonStopRequested, requeue: 20 * time.Second},
		},
		"asked, a checkpoint since: stopped": {
			job: base.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Conditions: append(running(t0), asked(now.Add(-10*time.Second))),
				Checkpoint: checkpoint(now.Add(-5 * time.Second))}).Obj(),
			want: want{requested: metav1.ConditionFalse, reason: convoy.ReasonCheckpointSaved, deleted: 2, restartCount: 1},
		},
		"asked, the grace passed: stopped without one": {
			job:  base.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Conditions: append(running(t0), asked(now.Add(-grace)))}).Obj(),
			want: want{requested: metav1.ConditionFalse, reason: convoy.ReasonGraceExpired, deleted: 2, restartCount: 1},
		},
		"a checkpoint younger than a tenth of intervalSeconds: stopped at once without asking": {
			job: withInterval.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Conditions: running(t0),
				Checkpoint: checkpoint(now.Add(-50 * time.Second))}).Obj(),
			want: want{requested: metav1.ConditionFalse, reason: convoy.ReasonCheckpointRecent, deleted: 2, restartCount: 1},
		},
		"a stop decided on a recent checkpoint stays decided while the pods go": {
			job: withInterval.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Checkpoint: checkpoint(now.Add(-70 * time.Second)),
				Conditions: append(running(t0), cond(convoy.ConditionCheckpointRequested, metav1.ConditionFalse, convoy.ReasonCheckpointRecent, now.Add(-20*time.Second)))}).Obj(),
			want: want{requested: metav1.ConditionFalse, reason: convoy.ReasonCheckpointRecent, deleted: 2, restartCount: 1},
		},
		"a checkpoint older than a tenth of intervalSeconds: asked": {
			job: withInterval.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Conditions: running(t0),
				Checkpoint: checkpoint(now.Add(-70 * time.Second))}).Obj(),
			want: want{requested: metav1.ConditionTrue, reason: convoy.ReasonStopRequested, requeue: grace},
		},
		"a recent checkpoint of an earlier attempt: asked": {
			job: withInterval.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Conditions: running(t0), RestartCount: 1,
				Checkpoint: checkpoint(now.Add(-time.Second))}).Obj(),
			want: want{requested: metav1.ConditionTrue, reason: convoy.ReasonStopRequested, requeue: grace, restartCount: 1},
		},
		"a recent checkpoint without intervalSeconds: asked": {
			job: base.Clone().Suspend(true).Status(convoy.TrainingJobStatus{Conditions: running(t0),
				Checkpoint: checkpoint(now.Add(-time.Second))}).Obj(),
			want: want{requested: metav1.ConditionTrue, reason: convoy.ReasonStopRequested, requeue: grace},
		},
		"no checkpointing: stopped at once": {
			job:  utiltesting.MakeTrainingJob("llm", "ns").Workers(2).Suspend(true).Status(convoy.TrainingJobStatus{Conditions: running(t0)}).Obj(),
			want: want{deleted: 2, restartCount: 1},
		},
		"a grace of 0: stopped at once": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, PreemptionGraceSeconds: ptr.To[int32](0)}).Suspend(true).
				Status(convoy.TrainingJobStatus{Conditions: running(t0)}).Obj(),
			want: want{deleted: 2, restartCount: 1},
		},
		"preempted by the scheduler: asked, the pods kept": {
			job:            base.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: ptr.To(metav1.NewTime(t0))}).Obj(),
			preemptAttempt: "0",
			want:           want{requested: metav1.ConditionTrue, reason: convoy.ReasonStopRequested, requeue: grace},
		},
		"preempted by the scheduler, checkpointed: restarted as preempted, backoff not spent": {
			job: base.Clone().Status(convoy.TrainingJobStatus{Conditions: append(running(t0), asked(now.Add(-10*time.Second))),
				StartTime: ptr.To(metav1.NewTime(t0)), Checkpoint: checkpoint(now)}).Obj(),
			preemptAttempt: "0",
			want:           want{requested: metav1.ConditionFalse, reason: convoy.ReasonCheckpointSaved, deleted: 2, restartCount: 1, preempted: true},
		},
		"an earlier attempt preempted: runs on": {
			job: base.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), RestartCount: 1,
				StartTime: ptr.To(metav1.NewTime(t0))}).Obj(),
			preemptAttempt: "0",
			want:           want{restartCount: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := mlframework.For(tc.job.Spec.Framework)
			pods := runningAttempt(tc.job)
			got := decide(observation{job: tc.job, plugin: p, pods: pods, preemptAttempt: tc.preemptAttempt, now: now, backoff: DefaultBackoff})
			c := meta.FindStatusCondition(got.status.Conditions, convoy.ConditionCheckpointRequested)
			var g want
			if c != nil {
				g.requested, g.reason = c.Status, c.Reason
			}
			g.deleted, g.restartCount, g.requeue = len(got.delete), got.status.RestartCount, got.requeueAfter
			g.preempted = meta.IsStatusConditionTrue(got.status.Conditions, convoy.ConditionPreempted)
			if g != tc.want {
				t.Errorf("decide = %+v, want %+v", g, tc.want)
			}
		})
	}
}

func stringOf(n int32) string { return strconv.Itoa(int(n)) }

// runningAttempt is the job's gang, running, as pods of its current restart attempt.
func runningAttempt(job *convoy.TrainingJob) []*corev1.Pod {
	pods := gang(job, corev1.PodRunning)
	for _, pod := range pods {
		pod.Labels[convoy.LabelRestartAttempt] = stringOf(job.Status.RestartCount)
	}
	return pods
}

// TestLostPods: a lost pod restarts the whole gang without spending backoffLimit, until disruptionLimit.
func TestLostPods(t *testing.T) {
	job, runningJob := twoWorkers()
	testDecide(t, map[string]decideCase{
		"a pod preempted by the scheduler restarts the gang without spending the budget": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).disrupted(corev1.PodReasonPreemptionByScheduler).deleting().obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost, convoy.ConditionPreempted, convoy.ReasonPreempted),
				RestartCount: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1}, Delete: []string{"llm-worker-1"}, Started: true},
			says: map[string]string{convoy.ConditionPreempted: "pod llm-worker-0 was disrupted (PreemptionByScheduler: preempted); the gang restarts when it fits again"},
		},
		"a pod whose node is gone restarts the gang without spending the budget": {
			job:       runningJob.Clone().Obj(),
			pods:      []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).node("gone").obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			goneNodes: map[string]bool{"gone": true},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost),
				RestartCount: 1, DisruptionRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1}, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "node gone of pod llm-worker-0 no longer exists; restarting the whole gang from the latest checkpoint without spending backoffLimit (disruption restart 1 of 10)"},
		},
		"a pod on a node tainted unreachable restarts the gang elsewhere without spending the budget, whatever its 300 s toleration": {
			job: runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).node("lost").tolerates(corev1.TaintNodeUnreachable, ptr.To[int64](300)).obj(),
				makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			notReady: map[string]*corev1.Taint{"lost": {Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost),
				RestartCount: 1, DisruptionRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1}, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "node lost of pod llm-worker-0 is not Ready (taint node.kubernetes.io/unreachable:NoExecute); restarting the whole gang"},
		},
		"a pod that tolerates its node's not-ready taint for ever stays": {
			job: runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).node("lost").tolerates(corev1.TaintNodeNotReady, nil).obj(),
				makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			notReady: map[string]*corev1.Taint{"lost": {Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}},
			want:     outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning), Workers: convoy.WorkerCounts{Active: 2}, Children: true, Started: true},
		},
		"a pod that finished on a node now not Ready is not lost": {
			job: runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).exit(0).node("lost").obj(),
				makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			notReady: map[string]*corev1.Taint{"lost": {Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}},
			want:     outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning), Workers: convoy.WorkerCounts{Active: 1, Succeeded: 1}, Children: true, Started: true},
		},
		"pods lost more often than disruptionLimit: failed with DisruptionLimitExceeded": {
			job:       runningJob.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start, RestartCount: 10, DisruptionRestarts: 10}).Obj(),
			pods:      []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).node("gone").attempt(10).obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).attempt(10).obj()},
			goneNodes: map[string]bool{"gone": true},
			want: outcome{State: convoy.StateFailed, Reasons: with(admitted, convoy.ConditionFailed, convoy.ReasonDisruptionLimitExceeded),
				RestartCount: 10, DisruptionRestarts: 10, FailureReason: convoy.ReasonDisruptionLimitExceeded, Workers: convoy.WorkerCounts{Active: 1, Failed: 1},
				Delete: []string{"llm-worker-0-r10", "llm-worker-1-r10"}, Started: true, Finished: true},
			says: map[string]string{convoy.ConditionFailed: "node gone of pod llm-worker-0-r10 no longer exists after 10 restarts for lost pods; spec.failurePolicy.disruptionLimit is 10"},
		},
		"a pod gone from a running gang without being seen terminating restarts the gang": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost),
				RestartCount: 1, DisruptionRestarts: 1, Workers: convoy.WorkerCounts{Active: 1}, Delete: []string{"llm-worker-1"}, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "pod llm-worker-0 of the running gang was deleted or evicted"},
		},

		"an evicted pod restarts the gang without spending backoffLimit": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).evicted("The node was low on resource: ephemeral-storage.").obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost),
				RestartCount: 1, DisruptionRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1}, Delete: []string{"llm-worker-0", "llm-worker-1"}, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "pod llm-worker-0 was evicted: The node was low on resource: ephemeral-storage."},
		},
		"a pod deleted by someone else restarts the gang": {
			job:  runningJob.Clone().Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).deleting().obj(), makePod(job.Obj(), "worker", 1).phase(corev1.PodRunning).obj()},
			want: outcome{State: convoy.StateRestarting, Reasons: with(admitted, convoy.ConditionRestarting, convoy.ReasonNodeLost),
				RestartCount: 1, DisruptionRestarts: 1, Workers: convoy.WorkerCounts{Active: 1, Failed: 1}, Delete: []string{"llm-worker-1"}, Started: true},
			says: map[string]string{convoy.ConditionRestarting: "pod llm-worker-0 was deleted"},
		},
	})
}
