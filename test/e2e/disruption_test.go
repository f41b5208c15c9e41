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

package e2e

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/util"
)

// TestSchedulerPreemptionWaitsForTheVictimsCheckpoint: four low-priority gangs that checkpoint
// only when asked fill the fleet; a high-priority gang makes the scheduler preempt one. The
// victim is not evicted: the operator asks it for a checkpoint in its replies to simtrainer's
// progress reports, simtrainer writes one, and only then is the gang stopped as preempted, its
// backoff unspent; the high gang runs, and the victim's next pods resume from that checkpoint.
func TestSchedulerPreemptionWaitsForTheVictimsCheckpoint(t *testing.T) {
	e := setup(t)
	e.queue(1000)
	job := func(name, priorityClass string) *convoy.TrainingJob {
		j := e.job(name, 4, 8, priorityClass)
		j.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Frequency: 1000, PreemptionGraceSeconds: ptr.To[int32](300),
			Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
		return j
	}
	for _, name := range e.preemptOneOfFour(job) {
		j := e.get(name)
		c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionCheckpointRequested)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != convoy.ReasonCheckpointSaved {
			t.Errorf("%s: CheckpointRequested = %+v, want False with reason %s", name, c, convoy.ReasonCheckpointSaved)
		}
		cp := j.Status.Checkpoint
		if cp == nil || cp.Epoch == 0 || !strings.HasSuffix(cp.Latest, "/epoch-"+strconv.Itoa(int(cp.Epoch))) {
			t.Fatalf("%s: status.checkpoint = %+v, want the checkpoint simtrainer wrote when asked", name, cp)
		}
		if !meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionPreempted) || j.Status.FailureRestarts != 0 {
			t.Errorf("%s: Preempted %v, failureRestarts %d; want preempted without spending backoffLimit", name,
				meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionPreempted), j.Status.FailureRestarts)
		}
		for _, p := range e.pods(name) {
			if p.DeletionTimestamp != nil {
				continue
			}
			if got := util.EnvOf(&p, "CONVOY_RESUME_FROM"); got != cp.Latest {
				t.Errorf("pod %s of the preempted gang resumes from %q, want %q", p.Name, got, cp.Latest)
			}
		}
	}
}

// TestReclaimNoticeMovesTheGangToAnotherNode: a gang of 2 × 8 GPUs that checkpoints only when
// asked runs on two nodes; Karpenter's disruption taint on one of them makes the operator ask for a
// checkpoint (simtrainer writes one), restart the gang while the node is still there, and
// convoy-scheduler place the new pods on nodes without the notice; they resume from that
// checkpoint, and neither backoffLimit nor disruptionLimit is spent.
func TestReclaimNoticeMovesTheGangToAnotherNode(t *testing.T) {
	e := setup(t)
	e.queue(16)
	job := e.job("llm", 2, 8, "normal")
	job.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Frequency: 1000, PreemptionGraceSeconds: ptr.To[int32](300),
		Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
	e.create(job)
	e.waitState("llm", convoy.StateRunning)
	doomed := e.requireWholeGang("llm", 2)[0].Spec.NodeName

	node := &corev1.Node{}
	must(t, e.k.Get(t.Context(), client.ObjectKey{Name: doomed}, node))
	taint := corev1.Taint{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}
	node.Spec.Taints = append(node.Spec.Taints, taint)
	must(t, e.k.Update(t.Context(), node))
	t.Cleanup(func() {
		n := &corev1.Node{}
		if err := e.k.Get(context.Background(), client.ObjectKey{Name: doomed}, n); err == nil {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taint.Key })
			_ = e.k.Update(context.Background(), n)
		}
	})

	moved := e.waitJob("llm", "moved off "+doomed, func(j *convoy.TrainingJob) bool {
		return j.Status.RestartCount == 1 && j.Status.State == convoy.StateRunning
	})
	c := meta.FindStatusCondition(moved.Status.Conditions, convoy.ConditionCheckpointRequested)
	if c == nil || c.Reason != convoy.ReasonCheckpointSaved {
		t.Errorf("CheckpointRequested = %+v, want False with reason %s", c, convoy.ReasonCheckpointSaved)
	}
	if st := moved.Status; st.FailureRestarts != 0 || st.DisruptionRestarts != 0 {
		t.Errorf("failureRestarts %d, disruptionRestarts %d after a move for a notice, want 0 and 0", st.FailureRestarts, st.DisruptionRestarts)
	}
	cp := moved.Status.Checkpoint
	if cp == nil || cp.Epoch == 0 {
		t.Fatalf("status.checkpoint = %+v, want the checkpoint simtrainer wrote when asked", cp)
	}
	for _, p := range e.requireWholeGang("llm", 2) {
		if p.Spec.NodeName == doomed {
			t.Errorf("pod %s of the moved gang landed back on %s, which carries the notice", p.Name, doomed)
		}
		if got := util.EnvOf(&p, "CONVOY_RESUME_FROM"); got != cp.Latest {
			t.Errorf("pod %s resumes from %q, want %q", p.Name, got, cp.Latest)
		}
	}
}
