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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestDecideMovesAGangOffANoticedNode: a reclaim notice on the node of a running pod asks the gang
// for a checkpoint, then restarts it whole (reason NodeReclaimed) once it has one or the grace
// passed, spending neither backoffLimit nor disruptionLimit; a gang that does not checkpoint moves
// at once, and a notice on a node the gang left changes nothing.
func TestDecideMovesAGangOffANoticedNode(t *testing.T) {
	notice := map[string]string{"node-a": "node node-a carries the reclaim notice taint karpenter.sh/disrupted:NoSchedule"}
	started := ptr.To(metav1.NewTime(t0))
	checkpointing := utiltesting.MakeTrainingJob("llm", "ns").Workers(2).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, PreemptionGraceSeconds: ptr.To[int32](30)})
	asked := cond(convoy.ConditionCheckpointRequested, metav1.ConditionTrue, convoy.ReasonStopRequested, now.Add(-10*time.Second))
	type want struct {
		requested           metav1.ConditionStatus
		stoppedFirst        bool
		restarting          string
		deleted             int
		restartCount        int32
		failure, disruption int32
		requeue             time.Duration
	}
	cases := map[string]struct {
		job     *convoy.TrainingJob
		notices map[string]string
		// evicted: the first pod was evicted (DisruptionTarget, being deleted), as a drain does.
		evicted bool
		want    want
	}{
		"notice: asked to checkpoint, the pods kept": {
			job:     checkpointing.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: started}).Obj(),
			notices: notice,
			want:    want{requested: metav1.ConditionTrue, requeue: 30 * time.Second},
		},
		"notice, checkpointed: moved without spending a budget": {
			job: checkpointing.Clone().Status(convoy.TrainingJobStatus{Conditions: append(running(t0), asked), StartTime: started,
				Checkpoint: &convoy.CheckpointStatus{Latest: "s3://b/epoch-7", Epoch: 7, Time: ptr.To(metav1.NewTime(now))}}).Obj(),
			notices: notice,
			want:    want{requested: metav1.ConditionFalse, restarting: convoy.ReasonNodeReclaimed, deleted: 2, restartCount: 1},
		},
		"notice, no checkpointing: moved at once": {
			job:     utiltesting.MakeTrainingJob("llm", "ns").Workers(2).Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: started}).Obj(),
			notices: notice,
			want:    want{restarting: convoy.ReasonNodeReclaimed, deleted: 2, restartCount: 1},
		},
		"evicted from the noticed node (a drain): moved without spending a budget": {
			job:     checkpointing.Clone().Status(convoy.TrainingJobStatus{Conditions: append(running(t0), asked), StartTime: started}).Obj(),
			notices: notice,
			evicted: true,
			want:    want{requested: metav1.ConditionFalse, stoppedFirst: true, restarting: convoy.ReasonNodeReclaimed, deleted: 1, restartCount: 1},
		},
		"evicted from a node without a notice: a disruption restart": {
			job:     checkpointing.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: started}).Obj(),
			evicted: true,
			want:    want{restarting: convoy.ReasonNodeLost, deleted: 1, restartCount: 1, disruption: 1},
		},
		"notice on another node: runs on": {
			job:     checkpointing.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: started}).Obj(),
			notices: map[string]string{"node-b": "node node-b carries the reclaim notice"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := mlframework.For(tc.job.Spec.Framework)
			pods := runningAttempt(tc.job)
			if tc.evicted {
				pods[0].DeletionTimestamp = ptr.To(metav1.NewTime(now))
				pods[0].Status.Conditions = append(pods[0].Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
					Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"})
			}
			got := decide(observation{job: tc.job, plugin: p, pods: pods, reclaimNotices: tc.notices, now: now, backoff: DefaultBackoff})
			var g want
			if c := meta.FindStatusCondition(got.status.Conditions, convoy.ConditionCheckpointRequested); c != nil {
				g.requested = c.Status
				g.stoppedFirst = c.Reason == convoy.ReasonStoppedBeforeCheckpoint
			}
			if c := meta.FindStatusCondition(got.status.Conditions, convoy.ConditionRestarting); c != nil && c.Status == metav1.ConditionTrue {
				g.restarting = c.Reason
			}
			st := got.status
			g.deleted, g.restartCount, g.failure, g.disruption, g.requeue = len(got.delete), st.RestartCount, st.FailureRestarts, st.DisruptionRestarts, got.requeueAfter
			if diff := cmp.Diff(tc.want, g, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("decide (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestNoticeOn: the notice a node carries, in words: a notice taint of any value and effect, a
// notice condition while True, a cordon unless IgnoreCordon; none otherwise.
func TestNoticeOn(t *testing.T) {
	notice := ReclaimNotice{Taints: []string{"karpenter.sh/disrupted"}, Conditions: []string{"ImpendingNodeTermination"}}
	cordoned := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Unschedulable: true}}
	cases := map[string]struct {
		notice ReclaimNotice
		node   *corev1.Node
		want   string
	}{
		"taint": {notice: notice, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}}},
			want: "node n carries the reclaim notice taint karpenter.sh/disrupted:NoSchedule"},
		"condition true": {notice: notice, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: "ImpendingNodeTermination", Status: corev1.ConditionTrue, Reason: "SpotInterruption"}}}},
			want: "node n has the reclaim notice condition ImpendingNodeTermination (SpotInterruption)"},
		"condition false": {notice: notice, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: "ImpendingNodeTermination", Status: corev1.ConditionFalse}}}}},
		"other taint": {notice: notice, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}}}},
		"cordon":                {notice: notice, node: cordoned, want: "node n is cordoned, to be drained"},
		"cordon, IgnoreCordon":  {notice: ReclaimNotice{IgnoreCordon: true}, node: cordoned},
		"cordon, default":       {notice: ReclaimNotice{}.orDefault(), node: cordoned, want: "node n is cordoned, to be drained"},
		"stripped node, cordon": {notice: notice, node: strip(t, notice, cordoned), want: "node n is cordoned, to be drained"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.notice.noticeOn(tc.node); got != tc.want {
				t.Errorf("noticeOn = %q, want %q", got, tc.want)
			}
		})
	}
}

// strip is the node as the operator's cache keeps it.
func strip(t *testing.T, n ReclaimNotice, node *corev1.Node) *corev1.Node {
	t.Helper()
	out, err := n.stripNode(node)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Node)
}
