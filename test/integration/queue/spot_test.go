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
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// spotFirstQueue creates the ClusterQueue team-a of deploy/queue-spot-first, as kustomize renders
// it, under the test namespace's name and in a cohort of its own: its team namespaces and placement
// admission check left out (no scheduler runs here), and the test's LocalQueue "q" pointing at it.
func (e *env) spotFirstQueue() {
	e.t.Helper()
	out := e.kubectl("kustomize", filepath.Join(e.Root, "deploy/queue-spot-first"))
	var cq *kueue.ClusterQueue
	err := framework.EachYAMLDoc([]byte(out), func(doc []byte) error {
		obj := &kueue.ClusterQueue{}
		if err := yaml.Unmarshal(doc, obj); err != nil || obj.Kind != "ClusterQueue" || obj.Name != "team-a" {
			return nil // other kinds do not decode into a ClusterQueue; they are skipped
		}
		cq = obj
		return nil
	})
	if err != nil || cq == nil {
		e.t.Fatalf("no ClusterQueue team-a in deploy/queue-spot-first (%v):\n%s", err, out)
	}
	cq.ObjectMeta = metav1.ObjectMeta{Name: e.ns}
	cq.Spec.CohortName = kueue.CohortReference(e.ns)
	cq.Spec.NamespaceSelector = &metav1.LabelSelector{}
	cq.Spec.AdmissionChecksStrategy = nil
	e.create(cq)
	e.t.Cleanup(func() { _ = e.k.Delete(context.Background(), cq) })
	e.localQueue(e.ns)
}

// capacityJob is trainingJob of H100 GPUs in the test's LocalQueue "q", with
// spec.scheduling.capacity c.
func (e *env) capacityJob(name string, c convoy.CapacityType, workers int32) *convoy.TrainingJob {
	job := trainingJob(e.ns, name, "q", "normal", workers, 8)
	job.Spec.Scheduling.Capacity = c
	job.Spec.Scheduling.NodeSelector = map[string]string{convoy.LabelGPUProduct: h100}
	return job
}

// admittedFlavor waits until the job is admitted and returns the flavor of its GPUs.
func (e *env) admittedFlavor(name string) string {
	e.t.Helper()
	j := e.waitJob(e.ns, name, "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil && !j.IsSuspended() })
	return j.Status.Admission.Flavors[convoy.ResourceGPU]
}

// TestSpotFirstQueueFallsBackToOnDemandAndKeepsCapacity: in deploy/queue-spot-first's ClusterQueue
// (16 H100 spot GPUs, then 32 H100 on-demand; the jobs select H100), an on-demand job skips the free spot quota; a job of
// capacity any takes the spot quota, the next one falls back to on-demand since spot is full; a
// spot-only job then waits, Queued, until spot quota is free, and runs on spot nodes.
func TestSpotFirstQueueFallsBackToOnDemandAndKeepsCapacity(t *testing.T) {
	e := newEnv(t)
	e.spotFirstQueue()

	e.create(e.capacityJob("od", convoy.CapacityOnDemand, 1))
	if got := e.admittedFlavor("od"); got != "h100-on-demand" {
		t.Errorf("capacity on-demand admitted to flavor %q, want h100-on-demand", got)
	}
	e.create(e.capacityJob("any-a", convoy.CapacityAny, 2))
	if got := e.admittedFlavor("any-a"); got != "h100-spot" {
		t.Errorf("capacity any admitted to flavor %q while spot quota is free, want h100-spot", got)
	}
	e.create(e.capacityJob("any-b", "", 1))
	if got := e.admittedFlavor("any-b"); got != "h100-on-demand" {
		t.Errorf("the default capacity admitted to flavor %q with spot full, want the fallback h100-on-demand", got)
	}
	for _, p := range e.pods(e.ns, "any-b") {
		if _, ok := p.Spec.NodeSelector[convoy.LabelCapacityType]; ok || p.Spec.NodeSelector[convoy.LabelGPUProduct] == "" {
			t.Errorf("pod %s of the fallback job: nodeSelector %v, want the on-demand flavor's labels: the GPU product alone", p.Name, p.Spec.NodeSelector)
		}
	}

	spot := e.capacityJob("spot", convoy.CapacitySpot, 1)
	e.create(spot)
	queued := e.waitJob(e.ns, "spot", "queued for spot quota", func(j *convoy.TrainingJob) bool {
		c := condition(j, convoy.ConditionQueued)
		// Kueue's words: spot is full, and the on-demand flavor is not the job's capacity.
		return c != nil && strings.Contains(c.Message, "more nvidia.com/gpu than flavor h100-spot has free") &&
			strings.Contains(c.Message, "nodes that flavor h100-on-demand does not have")
	})
	if queued.Status.Admission != nil {
		t.Fatalf("a spot-only job was admitted while spot quota is full: %+v", queued.Status.Admission)
	}

	if err := e.k.Delete(e.t.Context(), e.job(e.ns, "any-a")); err != nil {
		t.Fatal(err)
	}
	if got := e.admittedFlavor("spot"); got != "h100-spot" {
		t.Errorf("capacity spot admitted to flavor %q, want h100-spot", got)
	}
	for _, p := range e.startGang(e.ns, "spot", 1) {
		if !strings.HasPrefix(p.Spec.NodeName, "h100-spot-") {
			t.Errorf("pod %s of the spot job runs on %s, want a spot node", p.Name, p.Spec.NodeName)
		}
	}
}

// TestReclaimNoticeMovesTheGangBeforeTheNodeGoes: a spot gang checkpointing every 5 epochs runs
// on a spot node. Karpenter's disruption taint on that node makes the operator ask the gang for a
// checkpoint at once; the gang keeps running until it reports one (epoch 7), and is then restarted
// whole, while the node still exists, from that checkpoint: restartCount 1, without spending
// backoffLimit or disruptionLimit. The node's deletion afterwards costs the gang nothing more.
func TestReclaimNoticeMovesTheGangBeforeTheNodeGoes(t *testing.T) {
	e := newEnv(t)
	e.spotFirstQueue()
	spotNode := func(name string) framework.NodeSpec {
		return framework.NodeSpec{Name: name, GPUs: 16, GPUProduct: h100,
			Labels: map[string]string{capacityType: convoy.CapacityTypeSpot},
			Taints: []corev1.Taint{{Key: "convoy.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	}
	doomed, other := e.ns+"-a", e.ns+"-b"
	if err := e.c.CreateNodes(e.t.Context(), spotNode(doomed), spotNode(other)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{doomed, other} {
			_ = e.k.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})

	job := e.capacityJob("llm", convoy.CapacitySpot, 2)
	job.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Frequency: 5, PreemptionGraceSeconds: ptr.To[int32](600),
		Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
	e.create(job)
	if got := e.admittedFlavor("llm"); got != "h100-spot" {
		t.Fatalf("admitted to flavor %q, want h100-spot", got)
	}
	pods := e.bindGang("llm", 2, doomed)
	uri := util.EnvOf(&pods[0], "CONVOY_CHECKPOINT_URI")
	e.reportCheckpoint(&pods[0], progress.Checkpoint{Path: uri + "/epoch-5", Epoch: 5})

	node := &corev1.Node{}
	if err := e.k.Get(e.t.Context(), client.ObjectKey{Name: doomed}, node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule})
	if err := e.k.Update(e.t.Context(), node); err != nil {
		t.Fatal(err)
	}
	asked := e.waitJob(e.ns, "llm", "asked to checkpoint", func(j *convoy.TrainingJob) bool {
		return condition(j, convoy.ConditionCheckpointRequested) != nil
	})
	if msg := condition(asked, convoy.ConditionCheckpointRequested).Message; !strings.Contains(msg, "node "+doomed+" carries the reclaim notice taint karpenter.sh/disrupted") {
		t.Errorf("CheckpointRequested does not name the node and its notice: %q", msg)
	}
	if r := e.reportProgress(&pods[0], progress.Report{Epoch: ptr.To[int32](7)}); !r.CheckpointRequested {
		t.Errorf("reply to the gang's progress report = %+v, want a checkpoint request", r)
	}
	if live := e.pods(e.ns, "llm"); len(live) != 2 || live[0].DeletionTimestamp != nil || live[1].DeletionTimestamp != nil {
		t.Errorf("the gang was stopped before it checkpointed: %v", podNames(live))
	}

	e.reportCheckpoint(&pods[0], progress.Checkpoint{Path: uri + "/epoch-7", Epoch: 7})
	moved := e.waitJob(e.ns, "llm", "restarted for the notice", func(j *convoy.TrainingJob) bool {
		return j.Status.RestartCount == 1
	})
	if c := meta.FindStatusCondition(moved.Status.Conditions, convoy.ConditionCheckpointRequested); c == nil || c.Reason != convoy.ReasonCheckpointSaved {
		t.Errorf("CheckpointRequested = %+v, want False with reason %s", c, convoy.ReasonCheckpointSaved)
	}
	e.eventually("a Warning event "+convoy.ReasonNodeReclaimed, func() (bool, string) {
		events := &corev1.EventList{}
		if err := e.k.List(e.t.Context(), events, client.InNamespace(e.ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == "llm" && ev.Reason == convoy.ReasonNodeReclaimed && ev.Type == corev1.EventTypeWarning {
				return strings.Contains(ev.Message, "without spending backoffLimit"), ev.Message
			}
			seen = append(seen, ev.Reason)
		}
		return false, strings.Join(seen, ", ")
	})
	if err := e.k.Get(e.t.Context(), client.ObjectKey{Name: doomed}, &corev1.Node{}); err != nil {
		t.Errorf("node %s is gone before the gang moved: %v", doomed, err)
	}

	for _, p := range e.bindGang("llm", 2, other) {
		if got := util.EnvOf(&p, "CONVOY_RESUME_FROM"); got != uri+"/epoch-7" {
			t.Errorf("pod %s resumes from %q, want the checkpoint reported when asked, %s/epoch-7", p.Name, got, uri)
		}
	}
	if err := e.k.Delete(e.t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: doomed}}); err != nil {
		t.Fatal(err)
	}
	e.waitState(e.ns, "llm", convoy.StateRunning)
	st := e.job(e.ns, "llm").Status
	if st.RestartCount != 1 || st.FailureRestarts != 0 || st.DisruptionRestarts != 0 {
		t.Errorf("restartCount %d, failureRestarts %d, disruptionRestarts %d; want 1, 0, 0: a move for a notice spends no budget",
			st.RestartCount, st.FailureRestarts, st.DisruptionRestarts)
	}
}

// noticeCondition is the node condition the suite's operator takes as a reclaim notice while True,
// as a node problem detector or a provider's agent might set it.
const noticeCondition = "ImpendingNodeTermination"

// TestReclaimNoticeConditionMovesTheGang: a reclaim notice given by a node condition alone (the
// operator's --reclaim-notice-conditions), without a taint, asks the gang on that node for a
// checkpoint, names the condition, and restarts the gang from the checkpoint it reports, spending
// neither backoffLimit nor disruptionLimit.
func TestReclaimNoticeConditionMovesTheGang(t *testing.T) {
	e := newEnv(t)
	e.spotFirstQueue()
	doomed := e.ns + "-a"
	if err := e.c.CreateNodes(e.t.Context(), framework.NodeSpec{Name: doomed, GPUs: 16, GPUProduct: h100,
		Labels: map[string]string{capacityType: convoy.CapacityTypeSpot},
		Taints: []corev1.Taint{{Key: "convoy.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.k.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: doomed}})
	})

	job := e.capacityJob("llm", convoy.CapacitySpot, 2)
	job.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Frequency: 5, PreemptionGraceSeconds: ptr.To[int32](600),
		Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
	e.create(job)
	pods := e.bindGang("llm", 2, doomed)
	uri := util.EnvOf(&pods[0], "CONVOY_CHECKPOINT_URI")

	node := &corev1.Node{}
	if err := e.k.Get(e.t.Context(), client.ObjectKey{Name: doomed}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: noticeCondition, Status: corev1.ConditionTrue,
		Reason: "SpotInterruption", Message: "the provider reclaims the instance in 2 minutes", LastTransitionTime: metav1.Now()})
	if err := e.k.Status().Update(e.t.Context(), node); err != nil {
		t.Fatal(err)
	}
	asked := e.waitJob(e.ns, "llm", "asked to checkpoint", func(j *convoy.TrainingJob) bool {
		return condition(j, convoy.ConditionCheckpointRequested) != nil
	})
	if msg := condition(asked, convoy.ConditionCheckpointRequested).Message; !strings.Contains(msg, "node "+doomed+" has the reclaim notice condition "+noticeCondition+" (SpotInterruption)") {
		t.Errorf("CheckpointRequested does not name the node and its condition: %q", msg)
	}
	e.reportCheckpoint(&pods[0], progress.Checkpoint{Path: uri + "/epoch-3", Epoch: 3})
	moved := e.waitJob(e.ns, "llm", "restarted for the notice", func(j *convoy.TrainingJob) bool {
		return j.Status.RestartCount == 1
	})
	if c := meta.FindStatusCondition(moved.Status.Conditions, convoy.ConditionCheckpointRequested); c == nil || c.Reason != convoy.ReasonCheckpointSaved {
		t.Errorf("CheckpointRequested = %+v, want False with reason %s", c, convoy.ReasonCheckpointSaved)
	}
	if st := moved.Status; st.FailureRestarts != 0 || st.DisruptionRestarts != 0 {
		t.Errorf("failureRestarts %d, disruptionRestarts %d; want 0 and 0: a move for a notice spends no budget", st.FailureRestarts, st.DisruptionRestarts)
	}
}

// bindGang waits for n live pods of the job's current attempt, binds those unbound to node and
// waits until the job is Running.
func (e *env) bindGang(job string, n int, node string) []corev1.Pod {
	e.t.Helper()
	var live []corev1.Pod
	e.eventually("the live pods of "+job, func() (bool, string) {
		live = live[:0]
		for _, p := range e.pods(e.ns, job) {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		return len(live) == n, strings.Join(podNames(live), ", ")
	})
	for _, p := range live {
		if p.Spec.NodeName == "" {
			e.bind(&p, node)
		}
	}
	e.waitState(e.ns, job, convoy.StateRunning)
	return e.pods(e.ns, job)
}
