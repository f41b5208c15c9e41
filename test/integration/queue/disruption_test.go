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

package queue

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	"github.com/convoy-dev/convoy/test/util"
)

// checkpointingJob is trainingJob checkpointing to S3 every 5 epochs, given grace seconds to
// checkpoint before a stop.
func checkpointingJob(namespace, name, priority string, grace int32) *convoy.TrainingJob {
	job := trainingJob(namespace, name, "q", priority, 2, 8)
	job.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Frequency: 5, PreemptionGraceSeconds: ptr.To(grace),
		Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
	return job
}

// runVictim runs the low-priority gang "low" of 2 × 8 GPUs, given grace seconds to checkpoint, in a
// ClusterQueue of 16 GPUs that preempts by priority, and reports its checkpoint of epoch 5. It
// returns its pods and checkpoint location.
func (e *env) runVictim(grace int32) ([]corev1.Pod, string) {
	e.t.Helper()
	e.create(clusterQueue(e.ns, "", 16, nil, nil, kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}))
	e.localQueue(e.ns)
	e.create(checkpointingJob(e.ns, "low", "low", grace))
	pods := e.startGang(e.ns, "low", 2)
	uri := util.EnvOf(&pods[0], "CONVOY_CHECKPOINT_URI")
	e.reportCheckpoint(&pods[0], progress.Checkpoint{Path: uri + "/epoch-5", Epoch: 5})
	return pods, uri
}

// TestKueuePreemptionWaitsForTheVictimsCheckpoint: a high-priority job preempts a running
// low-priority gang that checkpoints. The victim's pods keep running, and the preemptor waits
// for the quota, while the operator's replies to the victim's progress reports ask for a
// checkpoint; once the victim reports one (epoch 7, between its periodic checkpoints of every 5
// epochs), its pods are stopped, the preemptor is admitted, and the victim later resumes from
// epoch 7, not from the periodic epoch 5. Meanwhile the preemptor's forecast names its victim.
func TestKueuePreemptionWaitsForTheVictimsCheckpoint(t *testing.T) {
	e := newEnv(t)
	pods, uri := e.runVictim(600)
	if r := e.reportProgress(&pods[0], progress.Report{Epoch: ptr.To[int32](7)}); r.CheckpointRequested {
		t.Fatalf("a checkpoint is asked of a job nobody stops: %+v", r)
	}

	e.create(checkpointingJob(e.ns, "high", "high", 600))
	asked := e.waitJob(e.ns, "low", "asked to checkpoint", func(j *convoy.TrainingJob) bool {
		return condition(j, convoy.ConditionCheckpointRequested) != nil
	})
	if msg := condition(asked, convoy.ConditionCheckpointRequested).Message; !strings.Contains(msg, "TrainingJob "+e.ns+"/high") {
		t.Errorf("CheckpointRequested does not say who stops the job: %q", msg)
	}
	r := e.reportProgress(&pods[0], progress.Report{Epoch: ptr.To[int32](7)})
	if !r.CheckpointRequested || r.Deadline.Before(time.Now().Add(5*time.Minute)) {
		t.Errorf("reply to a progress report of the victim = %+v, want a checkpoint request with the 600 s grace's deadline", r)
	}
	time.Sleep(2 * time.Second) // long enough for Kueue to admit the preemptor, were the quota free
	if live := e.pods(e.ns, "low"); len(live) != 2 || live[0].DeletionTimestamp != nil || live[1].DeletionTimestamp != nil {
		t.Errorf("the victim's pods were stopped before it checkpointed: %v", podNames(live))
	}
	if high := e.job(e.ns, "high"); high.Status.Admission != nil {
		t.Errorf("the preemptor was admitted while the victim checkpoints")
	}
	// While it waits, the preemptor's forecast says whom it preempts, and that it starts now.
	high := e.waitJob(e.ns, "high", "a forecast naming its victim", func(j *convoy.TrainingJob) bool {
		return j.Status.Forecast != nil && strings.HasPrefix(j.Status.Forecast.Reason, "preempts "+e.ns+"/low")
	})
	if start := high.Status.Forecast.EstimatedStartTime; start == nil || start.After(time.Now().Add(time.Minute)) {
		t.Errorf("the preemptor's estimated start %v, want about now", start)
	}

	e.reportCheckpoint(&pods[0], progress.Checkpoint{Path: uri + "/epoch-7", Epoch: 7})
	e.waitVictimStopped(convoy.ReasonCheckpointSaved)
	e.preemptorRunsThenVictimResumes(uri + "/epoch-7")
	if st := e.job(e.ns, "low").Status; st.RestartCount != 1 || st.FailureRestarts != 0 {
		t.Errorf("restartCount %d, failureRestarts %d after the preempted gang runs again, want 1 and 0", st.RestartCount, st.FailureRestarts)
	}
}

// TestVictimThatNeverCheckpointsIsStoppedAtTheGrace: a preempted gang that never answers the
// checkpoint request is stopped once its preemptionGraceSeconds (5) have passed, and resumes from
// the checkpoint it had.
func TestVictimThatNeverCheckpointsIsStoppedAtTheGrace(t *testing.T) {
	e := newEnv(t)
	_, uri := e.runVictim(5)

	e.create(checkpointingJob(e.ns, "high", "high", 5))
	e.waitJob(e.ns, "low", "asked to checkpoint", func(j *convoy.TrainingJob) bool {
		return condition(j, convoy.ConditionCheckpointRequested) != nil
	})
	e.waitVictimStopped(convoy.ReasonGraceExpired)
	e.preemptorRunsThenVictimResumes(uri + "/epoch-5")
}

// waitVictimStopped waits until the victim "low" is stopped and queued, its checkpoint request
// ended for reason.
func (e *env) waitVictimStopped(reason string) {
	e.t.Helper()
	e.waitJob(e.ns, "low", "stopped and queued, "+reason, func(j *convoy.TrainingJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionCheckpointRequested)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason && j.Status.State == convoy.StateQueued
	})
}

// preemptorRunsThenVictimResumes waits for the preemptor "high" to be admitted, runs it to
// completion, and checks that every pod of the victim "low", admitted again, resumes from want.
func (e *env) preemptorRunsThenVictimResumes(want string) {
	e.t.Helper()
	e.waitJob(e.ns, "high", "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	e.startGang(e.ns, "high", 2)
	for _, pod := range e.pods(e.ns, "high") {
		e.finishPod(&pod)
	}
	e.waitState(e.ns, "high", convoy.StateCompleted)
	for _, pod := range e.startGang(e.ns, "low", 2) {
		if got := util.EnvOf(&pod, "CONVOY_RESUME_FROM"); got != want {
			e.t.Errorf("pod %s CONVOY_RESUME_FROM = %q, want %s", pod.Name, got, want)
		}
	}
}
