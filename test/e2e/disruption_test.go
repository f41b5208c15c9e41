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
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
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

// TestSchedulerPreemptsTheGangThatLosesTheLeastWork: four low-priority gangs of 4 × 8 GPUs fill
// the fleet, one per rack, pinned by nodeSelector. The gang on the last rack starts first and
// checkpoints every epoch; the others start later and checkpoint only when asked. A high-priority
// gang of the same shape makes convoy-scheduler preempt one of them: priority, size and domain tie,
// so it preempts the gang whose last checkpoint is the most recent, which loses the least work,
// although it has run the longest and its rack comes last.
func TestSchedulerPreemptsTheGangThatLosesTheLeastWork(t *testing.T) {
	e := setup(t)
	e.queue(1000)
	var racks []string
	for _, n := range fleet.Nodes() {
		if !slices.Contains(racks, n.Rack) {
			racks = append(racks, n.Rack)
		}
	}
	slices.Sort(racks)
	lows := []string{"low-0", "low-1", "low-2", "low-3"}
	saver := lows[len(lows)-1]
	create := func(i int) {
		j := e.job(lows[i], 4, 8, "low")
		j.Spec.Scheduling.NodeSelector = map[string]string{framework.LabelRack: racks[i]}
		j.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Frequency: 1000, PreemptionGraceSeconds: ptr.To[int32](300),
			Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
		if lows[i] == saver {
			j.Spec.Checkpoint.Frequency = 1
		}
		e.create(j)
	}
	create(len(lows) - 1)
	e.waitState(saver, convoy.StateRunning)
	for i := range len(lows) - 1 {
		create(i)
	}
	for _, name := range lows {
		e.waitState(name, convoy.StateRunning)
	}
	// Every other gang has run for more than 5 s when the saver reports its latest checkpoint, an
	// epoch (1 s) after the one before it.
	after := time.Now().Add(5 * time.Second)
	e.waitJob(saver, "checkpointed 5 s after every gang ran", func(j *convoy.TrainingJob) bool {
		cp := j.Status.Checkpoint
		return cp != nil && cp.Time != nil && cp.Time.After(after)
	})

	e.create(e.job("high", 4, 8, "high"))
	e.waitState("high", convoy.StateRunning)
	e.requireWholeGang("high", 4)
	var preempted []string
	for _, name := range lows {
		if e.get(name).Status.RestartCount > 0 {
			preempted = append(preempted, name)
		}
	}
	if !slices.Equal(preempted, []string{saver}) {
		t.Errorf("preempted gangs: %v, want only %s, the gang that checkpointed last", preempted, saver)
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

// TestCordonMovesTheGangAfterItsCheckpoint: a gang of 2 × 8 GPUs that checkpoints only when asked
// runs on two nodes; `kubectl cordon` of one of them, the first step of a drain, makes the operator
// ask the gang for a checkpoint (simtrainer writes one) and restart it on other nodes from it,
// spending neither backoffLimit nor disruptionLimit. `kubectl drain` of the node then finds no pod
// of the gang to evict.
func TestCordonMovesTheGangAfterItsCheckpoint(t *testing.T) {
	e := setup(t)
	doomed := e.gangToDrain("llm", 300, nil)
	util.MustKubectl(t, e.Cluster, "cordon", doomed)

	moved := e.waitMovedOff("llm", doomed)
	c := meta.FindStatusCondition(moved.Status.Conditions, convoy.ConditionCheckpointRequested)
	if c == nil || c.Reason != convoy.ReasonCheckpointSaved {
		t.Errorf("CheckpointRequested = %+v, want False with reason %s", c, convoy.ReasonCheckpointSaved)
	}
	if msg := e.warning("llm", convoy.ReasonNodeReclaimed); !strings.Contains(msg, "node "+doomed+" is cordoned") {
		t.Errorf("the %s event says %q, want it to name the cordon of %s", convoy.ReasonNodeReclaimed, msg, doomed)
	}
	cp := moved.Status.Checkpoint
	if cp == nil || cp.Epoch == 0 {
		t.Fatalf("status.checkpoint = %+v, want the checkpoint simtrainer wrote when asked", cp)
	}
	for _, p := range e.requireWholeGang("llm", 2) {
		if got := util.EnvOf(&p, "CONVOY_RESUME_FROM"); got != cp.Latest {
			t.Errorf("pod %s resumes from %q, want %q", p.Name, got, cp.Latest)
		}
	}
	out := util.MustKubectl(t, e.Cluster, "drain", doomed, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s")
	if strings.Contains(out, "evicting pod") {
		t.Errorf("kubectl drain after the move evicted pods:\n%s", out)
	}
}

// TestDrainWaitsForTheGangsCheckpoint: `kubectl drain` of a node of a running gang, with no
// cordon before it. The gang's PodDisruptionBudget makes the Eviction API refuse its pod there
// (429, which the drain retries every 5 s) while the operator, seeing the cordon the drain begins
// with, asks the gang for a checkpoint and restarts it on other nodes from it (NodeReclaimed),
// spending neither backoffLimit nor disruptionLimit. The drain then finds the pod gone and
// completes; the new attempt's pods, named apart from the old, are never evicted by its retries.
func TestDrainWaitsForTheGangsCheckpoint(t *testing.T) {
	e := setup(t)
	doomed := e.gangToDrain("llm", 300, nil)
	began := metav1.Now().Rfc3339Copy()
	out := util.MustKubectl(t, e.Cluster, "drain", doomed, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=240s")
	t.Logf("kubectl drain:\n%s", out)
	if !strings.Contains(out, "disruption budget") {
		t.Errorf("kubectl drain never met the gang's disruption budget, so its wait proves nothing:\n%s", out)
	}

	moved := e.waitMovedOff("llm", doomed)
	c := meta.FindStatusCondition(moved.Status.Conditions, convoy.ConditionCheckpointRequested)
	if c == nil || c.Reason != convoy.ReasonCheckpointSaved {
		t.Errorf("CheckpointRequested = %+v, want False with reason %s", c, convoy.ReasonCheckpointSaved)
	}
	cp := moved.Status.Checkpoint
	if cp == nil || cp.Time == nil || cp.Time.Before(&began) || cp.Attempt != 0 {
		t.Fatalf("status.checkpoint = %+v, want one the first attempt reported after the drain began (%s)", cp, began)
	}
	e.wantMovedFrom("llm", doomed, "node "+doomed+" is cordoned", cp.Latest)
}

// TestDrainMovesAGangThatNeverCheckpointsAtTheGrace: a gang whose trainer never answers the
// request for a checkpoint holds `kubectl drain` back only for spec.checkpoint.preemptionGraceSeconds:
// then the operator moves it (NodeReclaimed, GraceExpired), spending no budget, and the drain completes.
func TestDrainMovesAGangThatNeverCheckpointsAtTheGrace(t *testing.T) {
	e := setup(t)
	doomed := e.gangToDrain("mute", 5, func(j *convoy.TrainingJob) {
		j.Spec.Hyperparameters.AdditionalParams = map[string]string{"sim-checkpoint": "never"}
	})
	out := util.MustKubectl(t, e.Cluster, "drain", doomed, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=240s")
	t.Logf("kubectl drain:\n%s", out)

	moved := e.waitMovedOff("mute", doomed)
	c := meta.FindStatusCondition(moved.Status.Conditions, convoy.ConditionCheckpointRequested)
	if c == nil || c.Reason != convoy.ReasonGraceExpired {
		t.Errorf("CheckpointRequested = %+v, want False with reason %s", c, convoy.ReasonGraceExpired)
	}
	if cp := moved.Status.Checkpoint; cp != nil {
		t.Errorf("status.checkpoint = %+v from a gang that never checkpoints", cp)
	}
	e.wantMovedFrom("mute", doomed, "node "+doomed+" is cordoned", "")
}

// wantMovedFrom fails the test unless the job's NodeReclaimed Warning says notice and no budget
// spent, and every pod of its gang resumes from checkpoint (CONVOY_RESUME_FROM; "" for none).
func (e *env) wantMovedFrom(name, node, notice, checkpoint string) {
	e.t.Helper()
	if msg := e.warning(name, convoy.ReasonNodeReclaimed); !strings.Contains(msg, notice) || !strings.Contains(msg, "without spending backoffLimit or disruptionLimit") {
		e.t.Errorf("the %s event says %q, want %q and no budget spent", convoy.ReasonNodeReclaimed, msg, notice)
	}
	for _, p := range e.requireWholeGang(name, 2) {
		if got := util.EnvOf(&p, "CONVOY_RESUME_FROM"); got != checkpoint {
			e.t.Errorf("pod %s resumes from %q, want %q", p.Name, got, checkpoint)
		}
	}
	pods := &corev1.PodList{}
	must(e.t, e.k.List(e.t.Context(), pods, client.InNamespace(e.ns), client.MatchingFields{"spec.nodeName": node}))
	for _, p := range pods.Items {
		if p.Labels[convoy.LabelJobName] == name {
			e.t.Errorf("pod %s of the gang is still on the drained node %s", p.Name, node)
		}
	}
}

// gangToDrain runs the job name, a gang of 2 × 8 GPUs that checkpoints only when asked
// (simtrainer) with a grace of graceSeconds, changed by edit when not nil, and returns the node
// of its first pod, which the test's cleanup uncordons.
func (e *env) gangToDrain(name string, graceSeconds int32, edit func(*convoy.TrainingJob)) string {
	e.t.Helper()
	e.queue(16)
	job := e.job(name, 2, 8, "normal")
	job.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Frequency: 1000, PreemptionGraceSeconds: ptr.To(graceSeconds),
		Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
	if edit != nil {
		edit(job)
	}
	e.create(job)
	e.waitState(name, convoy.StateRunning)
	node := e.requireWholeGang(name, 2)[0].Spec.NodeName
	e.t.Cleanup(func() { _, _ = e.Kubectl(context.Background(), "uncordon", node) })
	return node
}

// waitMovedOff waits until the job runs again after one restart, and fails the test unless the
// restart spent no budget and no pod of the gang runs on node.
func (e *env) waitMovedOff(name, node string) *convoy.TrainingJob {
	e.t.Helper()
	moved := e.waitJob(name, "moved off "+node, func(j *convoy.TrainingJob) bool {
		return j.Status.RestartCount == 1 && j.Status.State == convoy.StateRunning
	})
	if st := moved.Status; st.FailureRestarts != 0 || st.DisruptionRestarts != 0 {
		e.t.Errorf("failureRestarts %d, disruptionRestarts %d after the move, want 0 and 0", st.FailureRestarts, st.DisruptionRestarts)
	}
	for _, p := range e.requireWholeGang(name, 2) {
		if p.Spec.NodeName == node {
			e.t.Errorf("pod %s of the moved gang landed back on %s", p.Name, node)
		}
	}
	return moved
}

// warning waits for the job's Warning event of reason and returns its message.
func (e *env) warning(job, reason string) string {
	e.t.Helper()
	var msg string
	util.Eventually(e.t, 200*time.Millisecond, timeout, "a Warning event "+reason+" on "+job, func() (bool, string) {
		events := &corev1.EventList{}
		if err := e.k.List(e.t.Context(), events, client.InNamespace(e.ns)); err != nil {
			return false, err.Error()
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == job && ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
				msg = ev.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none of reason %s", len(events.Items), reason)
	})
	return msg
}
