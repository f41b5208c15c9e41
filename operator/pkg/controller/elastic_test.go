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

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestElasticSize: an elastic gang's size follows what Kueue accounts for
// (convoy.dev/elastic-workers); growing adds workers to the running gang without restarting it,
// shrinking deletes the highest ranks, and each change counts as a resize.
func TestElasticSize(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(4).Elastic(1, convoy.ElasticSpec{})
	at := func(size string, target int32) *convoy.TrainingJob {
		j := job.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start,
			Elastic: &convoy.ElasticStatus{CurrentWorkers: target, TargetWorkers: target}}).Obj()
		j.Annotations = map[string]string{convoy.AnnotationElasticWorkers: size}
		return j
	}
	pods := func(j *convoy.TrainingJob, n int32) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			out = append(out, makePod(j, mlframework.RoleWorker, i).phase(corev1.PodRunning).obj())
		}
		return out
	}
	cases := map[string]struct {
		job     *convoy.TrainingJob
		running int32
		gated   int32 // pods after the running ones, pending at Kueue's gate
		queue   QueueStatus
		want    convoy.ElasticStatus
		// wantRunning is the Running condition's message; not checked when empty.
		wantRunning string
		wantCreate  []mlframework.Replica
		wantDelete  []string
	}{
		"steady": {
			job: at("2", 2), running: 2,
			want: convoy.ElasticStatus{CurrentWorkers: 2, TargetWorkers: 2},
		},
		"grows by creating the added ranks, the gang running on": {
			job: at("3", 2), running: 2,
			want:       convoy.ElasticStatus{CurrentWorkers: 2, TargetWorkers: 3, ResizeCount: 1, LastResizeTime: start.DeepCopy()},
			wantCreate: []mlframework.Replica{{Role: mlframework.RoleWorker, Rank: 2}},
		},
		"a grown rank whose pod the cache does not show yet is created, not lost": {
			job: func() *convoy.TrainingJob {
				j := at("3", 3)
				j.Status.Elastic.CurrentWorkers = 2
				return j
			}(), running: 2,
			want:       convoy.ElasticStatus{CurrentWorkers: 2, TargetWorkers: 3},
			wantCreate: []mlframework.Replica{{Role: mlframework.RoleWorker, Rank: 2}},
		},
		"a grow the queue has not admitted says why its workers wait": {
			job: func() *convoy.TrainingJob {
				j := at("3", 3)
				j.Status.Elastic.CurrentWorkers = 2
				return j
			}(), running: 2, gated: 1,
			queue: QueueStatus{Managed: true, Admitted: true, GrowWaiting: "waiting for admission checks (convoy-placement: no place)"},
			want:  convoy.ElasticStatus{CurrentWorkers: 2, TargetWorkers: 3},
			wantRunning: "2 of 3 pods are running; the 1 the gang grew by wait for the queue to admit the larger size: " +
				"waiting for admission checks (convoy-placement: no place)",
		},
		"shrinks by deleting the highest ranks": {
			job: func() *convoy.TrainingJob {
				j := at("4", 4)
				j.Annotations[convoy.AnnotationElasticShrinkTo] = "2"
				return j
			}(), running: 4,
			want:       convoy.ElasticStatus{CurrentWorkers: 2, TargetWorkers: 2, ResizeCount: 1, LastResizeTime: start.DeepCopy()},
			wantDelete: []string{"llm-worker-2", "llm-worker-3"},
		},
		"a withdrawn grow deletes the workers that never started, and is not counted": {
			job: func() *convoy.TrainingJob {
				j := at("2", 3)
				j.Status.Elastic.CurrentWorkers, j.Status.Elastic.ResizeCount = 2, 1
				return j
			}(), running: 2, gated: 1,
			want:       convoy.ElasticStatus{CurrentWorkers: 2, TargetWorkers: 2, LastResizeTime: start.DeepCopy(), WithdrawnGrows: 1},
			wantDelete: []string{"llm-worker-2"},
		},
		"a second grow withdrawn in a row counts on": {
			job: func() *convoy.TrainingJob {
				j := at("2", 3)
				j.Status.Elastic.CurrentWorkers, j.Status.Elastic.ResizeCount, j.Status.Elastic.WithdrawnGrows = 2, 1, 1
				return j
			}(), running: 2, gated: 1,
			want:       convoy.ElasticStatus{CurrentWorkers: 2, TargetWorkers: 2, LastResizeTime: start.DeepCopy(), WithdrawnGrows: 2},
			wantDelete: []string{"llm-worker-2"},
		},
		"a job admitted again smaller after a preemption withdrew no grow": {
			job: func() *convoy.TrainingJob {
				j := at("1", 2)
				j.Status.Elastic.CurrentWorkers = 0
				return j
			}(), running: 1,
			want: convoy.ElasticStatus{CurrentWorkers: 1, TargetWorkers: 1, LastResizeTime: start.DeepCopy()},
		},
		"a grown worker that starts ends the run of withdrawn grows": {
			job: func() *convoy.TrainingJob {
				j := at("3", 3)
				j.Status.Elastic.CurrentWorkers, j.Status.Elastic.ResizeCount, j.Status.Elastic.WithdrawnGrows = 2, 1, 3
				return j
			}(), running: 3,
			want: convoy.ElasticStatus{CurrentWorkers: 3, TargetWorkers: 3, ResizeCount: 1},
		},
		"a grow still waiting keeps the count": {
			job: func() *convoy.TrainingJob {
				j := at("3", 3)
				j.Status.Elastic.CurrentWorkers, j.Status.Elastic.ResizeCount, j.Status.Elastic.WithdrawnGrows = 2, 1, 3
				return j
			}(), running: 2, gated: 1,
			want: convoy.ElasticStatus{CurrentWorkers: 2, TargetWorkers: 3, ResizeCount: 1, WithdrawnGrows: 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := mlframework.For(tc.job.Spec.Framework)
			all := pods(tc.job, tc.running)
			for i := range tc.gated {
				all = append(all, makePod(tc.job, mlframework.RoleWorker, tc.running+i).obj())
			}
			plan := decide(observation{job: tc.job, plugin: p, pods: all, now: t0, backoff: DefaultBackoff, queue: tc.queue})
			if plan.status.RestartCount != 0 {
				t.Errorf("restartCount = %d, want 0: a resize does not restart the gang", plan.status.RestartCount)
			}
			if c := meta.FindStatusCondition(plan.status.Conditions, convoy.ConditionRunning); c == nil || c.Status != metav1.ConditionTrue {
				t.Errorf("Running = %+v, want True: the gang runs on while the workers it grew by start", c)
			} else if tc.wantRunning != "" && c.Message != tc.wantRunning {
				t.Errorf("Running says %q, want %q", c.Message, tc.wantRunning)
			}
			if diff := cmp.Diff(&tc.want, plan.status.Elastic); diff != "" {
				t.Errorf("status.elastic (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCreate, plan.create, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("create (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDelete, names(plan.delete), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("delete (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestElasticShrinkCheckpointsFirst: an elastic gang the resizer asks to shrink
// (convoy.dev/elastic-shrink-to) keeps its workers while it is asked for a checkpoint, and shrinks
// (the size written for Kueue, the highest ranks deleted) once one newer than the request is
// reported, or at spec.checkpoint.preemptionGraceSeconds; a gang that does not checkpoint shrinks
// at once, and one that is not running drops the request.
func TestElasticShrinkCheckpointsFirst(t *testing.T) {
	ckpt := convoy.CheckpointSpec{Enabled: true, PreemptionGraceSeconds: ptr.To[int32](30)}
	asked := func(at time.Time) []metav1.Condition {
		return append(running(t0), cond(convoy.ConditionCheckpointRequested, metav1.ConditionTrue, convoy.ReasonStopRequested, at))
	}
	job := func(spec *convoy.CheckpointSpec, conds []metav1.Condition, cp *convoy.CheckpointStatus) *convoy.TrainingJob {
		w := utiltesting.MakeTrainingJob("llm", "ns").Workers(4).Elastic(1, convoy.ElasticSpec{})
		if spec != nil {
			w = w.Checkpoint(*spec)
		}
		j := w.Status(convoy.TrainingJobStatus{Conditions: conds, StartTime: start, Checkpoint: cp,
			Elastic: &convoy.ElasticStatus{CurrentWorkers: 4, TargetWorkers: 4}}).Obj()
		j.Annotations = map[string]string{convoy.AnnotationElasticWorkers: "4", convoy.AnnotationElasticShrinkTo: "2"}
		return j
	}
	saved := &convoy.CheckpointStatus{Latest: "s3://b/epoch-7", Epoch: 7, Time: ptr.To(metav1.NewTime(t0.Add(-5 * time.Second)))}
	type want struct {
		requested metav1.ConditionStatus // "" when absent
		reason    string
		shrinkTo  int32
		target    int32
		deleted   int
	}
	cases := map[string]struct {
		job  *convoy.TrainingJob
		want want
	}{
		"asked for a checkpoint, the workers kept": {
			job:  job(&ckpt, running(t0), nil),
			want: want{requested: metav1.ConditionTrue, reason: convoy.ReasonStopRequested, target: 4},
		},
		"a checkpoint since the request: shrinks": {
			job:  job(&ckpt, asked(t0.Add(-10*time.Second)), saved),
			want: want{requested: metav1.ConditionFalse, reason: convoy.ReasonCheckpointSaved, shrinkTo: 2, target: 2, deleted: 2},
		},
		"no checkpoint within the grace: shrinks": {
			job:  job(&ckpt, asked(t0.Add(-30*time.Second)), nil),
			want: want{requested: metav1.ConditionFalse, reason: convoy.ReasonGraceExpired, shrinkTo: 2, target: 2, deleted: 2},
		},
		"no checkpointing: shrinks at once": {
			job:  job(nil, running(t0), nil),
			want: want{shrinkTo: 2, target: 2, deleted: 2},
		},
		"not running: the request is dropped": {
			job:  job(&ckpt, nil, nil),
			want: want{shrinkTo: 4, target: 4},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := mlframework.For(tc.job.Spec.Framework)
			var pods []*corev1.Pod
			for i := range int32(4) {
				pods = append(pods, makePod(tc.job, mlframework.RoleWorker, i).phase(corev1.PodRunning).obj())
			}
			got := decide(observation{job: tc.job, plugin: p, pods: pods, now: t0, backoff: DefaultBackoff})
			var g want
			if c := meta.FindStatusCondition(got.status.Conditions, convoy.ConditionCheckpointRequested); c != nil {
				g.requested, g.reason = c.Status, c.Reason
			}
			g.shrinkTo, g.target, g.deleted = got.shrinkTo, got.status.Elastic.TargetWorkers, len(got.delete)
			if g != tc.want {
				t.Errorf("decide = %+v, want %+v", g, tc.want)
			}
		})
	}
}

// TestElasticMoveCheckpointsThenRestartsTheGangWhole: an elastic gang whose grow Kueue admitted by
// moving it (the placement check's message names the running attempt) keeps running while it is
// asked for a checkpoint, then restarts whole, every pod deleted and neither failure budget spent;
// a message naming an earlier attempt, one that moves none, or a gang that is not running changes
// nothing.
func TestElasticMoveCheckpointsThenRestartsTheGangWhole(t *testing.T) {
	ckpt := convoy.CheckpointSpec{Enabled: true, PreemptionGraceSeconds: ptr.To[int32](30)}
	move := func(attempt int32) QueueStatus {
		return QueueStatus{Managed: true, Admitted: true,
			Move: "convoy-scheduler holds 16 GPU(s) for the gang on node(s) b-0, b-1" + convoy.ElasticMoveMessage(attempt, "rack a is full")}
	}
	job := func(spec *convoy.CheckpointSpec, conds []metav1.Condition, restarts int32, cp *convoy.CheckpointStatus) *convoy.TrainingJob {
		w := utiltesting.MakeTrainingJob("llm", "ns").Workers(2).Elastic(1, convoy.ElasticSpec{})
		if spec != nil {
			w = w.Checkpoint(*spec)
		}
		j := w.Status(convoy.TrainingJobStatus{Conditions: conds, StartTime: start, RestartCount: restarts, Checkpoint: cp,
			Elastic: &convoy.ElasticStatus{CurrentWorkers: 1, TargetWorkers: 2}}).Obj()
		j.Annotations = map[string]string{convoy.AnnotationElasticWorkers: "2"}
		return j
	}
	asked := append(running(t0), cond(convoy.ConditionCheckpointRequested, metav1.ConditionTrue, convoy.ReasonStopRequested, t0.Add(-10*time.Second)))
	saved := &convoy.CheckpointStatus{Latest: "s3://b/epoch-7", Epoch: 7, Attempt: 1, Time: ptr.To(metav1.NewTime(t0.Add(-5 * time.Second)))}
	type want struct {
		restarts   int32
		restarting string // the Restarting condition's reason while true, else ""
		requested  metav1.ConditionStatus
		deleted    int
	}
	cases := map[string]struct {
		job   *convoy.TrainingJob
		queue QueueStatus
		want  want
	}{
		"asked for a checkpoint, the gang kept": {
			job: job(&ckpt, running(t0), 1, nil), queue: move(1),
			want: want{restarts: 1, requested: metav1.ConditionTrue},
		},
		"a checkpoint since the request: restarts whole": {
			job: job(&ckpt, asked, 1, saved), queue: move(1),
			want: want{restarts: 2, restarting: convoy.ReasonElasticMove, requested: metav1.ConditionFalse, deleted: 2},
		},
		"no checkpointing: restarts whole at once": {
			job: job(nil, running(t0), 1, nil), queue: move(1),
			want: want{restarts: 2, restarting: convoy.ReasonElasticMove, deleted: 2},
		},
		"the attempt that moved is gone: nothing more": {
			job: job(nil, running(t0), 2, nil), queue: move(1),
			want: want{restarts: 2},
		},
		"a grow admitted in place: nothing": {
			job: job(nil, running(t0), 1, nil), queue: QueueStatus{Managed: true, Admitted: true},
			want: want{restarts: 1},
		},
		"not running: nothing": {
			job: job(nil, nil, 1, nil), queue: move(1),
			want: want{restarts: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := mlframework.For(tc.job.Spec.Framework)
			pods := []*corev1.Pod{
				makePod(tc.job, mlframework.RoleWorker, 0).phase(corev1.PodRunning).obj(),
				makePod(tc.job, mlframework.RoleWorker, 1).obj(),
			}
			got := decide(observation{job: tc.job, plugin: p, pods: pods, now: t0, backoff: DefaultBackoff, queue: tc.queue})
			g := want{restarts: got.status.RestartCount, deleted: len(got.delete)}
			if c := meta.FindStatusCondition(got.status.Conditions, convoy.ConditionRestarting); c != nil && c.Status == metav1.ConditionTrue {
				g.restarting = c.Reason
			}
			if c := meta.FindStatusCondition(got.status.Conditions, convoy.ConditionCheckpointRequested); c != nil {
				g.requested = c.Status
			}
			if g != tc.want {
				t.Errorf("decide = %+v, want %+v", g, tc.want)
			}
			if got.status.FailureRestarts != 0 || got.status.DisruptionRestarts != 0 {
				t.Errorf("failureRestarts %d, disruptionRestarts %d; want 0: a move spends neither budget", got.status.FailureRestarts, got.status.DisruptionRestarts)
			}
		})
	}
}
