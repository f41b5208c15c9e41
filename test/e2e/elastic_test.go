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
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workloadslicing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/util"
)

// TestElasticGrowWaitsForAPlaceInItsRack: an elastic job (2 × 8 GPUs, minWorkers 1, one rack),
// its ClusterQueue's quota 8 GPUs, starts with 1 worker on the one free node, in rack-0-1-0. The
// administrator raises the quota to 16 and a node of another rack frees up. Once its cooldown has
// passed the operator grows the job; Kueue reserves the quota, but the placement check holds the
// grow, saying that the gang's rack has no room: the added worker waits at Kueue's gate, worker 0
// runs on, and the job's Running condition says why. When a node of the gang's rack frees up, the
// check admits the grow, convoy-scheduler binds the added worker to that node, and worker 0 is the
// pod that ran before.
func TestElasticGrowWaitsForAPlaceInItsRack(t *testing.T) {
	e := setup(t)
	racks, worker0 := e.growElasticJobInAFullRack()
	rack := racks["rack-0-1-0"]
	// The check's words for a grow whose rack has no room.
	inRack := "running on node " + rack[3] + " keep the pods it adds in rack "
	e.waitJob("llm", "growing to 2 workers", func(j *convoy.TrainingJob) bool { return j.Status.Elastic.TargetWorkers == 2 })
	wl := e.waitWorkloadWhere("llm's grow", growSlice("llm"), "held by the placement check for want of room in rack-0-1-0", func(wl *kueue.Workload) bool {
		c := findCheck(wl)
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) && c != nil &&
			c.State == kueue.CheckStatePending && strings.Contains(c.Message, noPlace) && strings.Contains(c.Message, inRack) && strings.Contains(c.Message, "/rack-0-1-0")
	})
	t.Logf("the grow's check: %s", findCheck(wl).Message)
	util.Consistently(t, 250*time.Millisecond, 3*time.Second, "the grow stays unadmitted, its worker gated, worker 0 running", func() (bool, string) {
		j, added, w0 := e.get("llm"), e.workerPod("llm", "1"), e.workerPod("llm", "0")
		grow := e.workloadWhere(growSlice("llm"))
		ok := j.Status.State == convoy.StateRunning && j.Status.Elastic.CurrentWorkers == 1 && w0 != nil && w0.UID == worker0.UID &&
			added != nil && added.Spec.NodeName == "" && len(added.Spec.SchedulingGates) > 0 && grow != nil
		return ok, fmt.Sprintf("state %s, elastic %+v, pods %v, grow slice %v", j.Status.State, *j.Status.Elastic, podNames(e.pods("llm")), grow != nil)
	})
	// The job says why it runs with 1 worker, in the check's words.
	e.waitJob("llm", "saying that its grow waits for a place", func(j *convoy.TrainingJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionRunning)
		return c != nil && strings.HasPrefix(c.Message, "1 of 2 pods are running; the 1 the gang grew by wait for the queue to admit the larger size: ") &&
			strings.Contains(c.Message, noPlace) && strings.Contains(c.Message, inRack) && strings.Contains(c.Message, "/rack-0-1-0")
	})
	e.waitEvent("llm", "Resized", "grew from 1 to 2 workers: the added workers start once Kueue admits the larger size")

	e.deletePod("filler-" + rack[0])
	grown := e.waitJob("llm", "running with 2 workers", func(j *convoy.TrainingJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionRunning)
		return j.Status.Elastic.CurrentWorkers == 2 && j.Status.Elastic.TargetWorkers == 2 && c != nil && c.Message == "all 2 pods are running"
	})
	if st := grown.Status; st.RestartCount != 0 || st.Elastic.ResizeCount != 1 {
		t.Errorf("restartCount %d, resizeCount %d; want 0 and 1: the gang grew without restarting", st.RestartCount, st.Elastic.ResizeCount)
	}
	if w0 := e.workerPod("llm", "0"); w0 == nil || w0.UID != worker0.UID {
		t.Errorf("worker 0 is a new pod after the grow, want the one that ran before")
	}
	if added := e.workerPod("llm", "1"); added == nil || added.Spec.NodeName != rack[0] || added.Spec.SchedulerName != "convoy-scheduler" {
		t.Errorf("the added worker is %v, want it bound by convoy-scheduler to %s, the node of rack-0-1-0 that freed up", podNames(e.pods("llm")), rack[0])
	}
	if racks := e.racks(e.requireWholeGang("llm", 2)); racks[0] != "rack-0-1-0" {
		t.Errorf("llm runs in %v, want rack-0-1-0", racks)
	}
	if c := findCheck(e.waitWorkloadWhere("llm's admitted slice", admittedSlice("llm"), "read", func(*kueue.Workload) bool { return true })); c == nil || c.State != kueue.CheckStateReady {
		t.Errorf("the placement check of llm's admitted slice is %+v, want Ready", c)
	}
}

// TestElasticGrowWithNoPlaceInItsRackIsWithdrawn: the job of TestElasticGrowWaitsForAPlaceInItsRack
// grows while its rack stays full. Kueue reserves the quota of 2 workers and finishes the running
// slice as replaced; the placement check holds the grow, and a job of the same priority for 8 GPUs
// waits for the quota it holds. 30 s after the grow (elastic.GrowAdmitTimeout) it is withdrawn:
// worker 0 runs on alone, the added worker is deleted before it ran, a Resized event says so, and
// the job's slice is admitted for 1 worker; the waiting job gets the quota and runs on the node
// that freed up.
func TestElasticGrowWithNoPlaceInItsRackIsWithdrawn(t *testing.T) {
	e := setup(t)
	racks, worker0 := e.growElasticJobInAFullRack()
	freed := racks["rack-0-1-1"][0]
	grow := e.waitWorkloadWhere("llm's grow", growSlice("llm"), "holding the quota of 2 workers, held by the placement check", func(wl *kueue.Workload) bool {
		c := findCheck(wl)
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) && c != nil &&
			c.State == kueue.CheckStatePending && strings.Contains(c.Message, noPlace)
	})
	if running := e.workloadWhere(admittedSlice("llm")); running != nil {
		t.Errorf("llm's slice %s is admitted and not finished while its grow holds the quota; Kueue finishes it as replaced", running.Name)
	}
	e.create(e.job("other", 1, 8, ""))
	e.waitState("other", convoy.StateQueued)
	util.Consistently(t, 250*time.Millisecond, 3*time.Second, "job other waits for the quota the grow holds", func() (bool, string) {
		j := e.get("other")
		return j.Status.State == convoy.StateQueued, string(j.Status.State)
	})

	withdrawn := e.waitJob("llm", "its grow withdrawn", func(j *convoy.TrainingJob) bool {
		return j.Status.Elastic.TargetWorkers == 1 && j.Status.Elastic.CurrentWorkers == 1 && e.workerPod("llm", "1") == nil
	})
	if waited := time.Since(grow.CreationTimestamp.Time); waited < 30*time.Second {
		t.Errorf("the grow was withdrawn %s after its slice was made, want 30 s or more", waited)
	}
	if st := withdrawn.Status; st.State != convoy.StateRunning || st.RestartCount != 0 || st.Elastic.ResizeCount != 0 || st.Elastic.WithdrawnGrows != 1 {
		t.Errorf("state %s, restartCount %d, resizeCount %d, withdrawnGrows %d; want Running, 0, 0 and 1: a withdrawn grow is no resize, and doubles the cooldown",
			st.State, st.RestartCount, st.Elastic.ResizeCount, st.Elastic.WithdrawnGrows)
	}
	if w0 := e.workerPod("llm", "0"); w0 == nil || w0.UID != worker0.UID {
		t.Errorf("worker 0 is %v, want the pod that ran before the grow", podNames(e.pods("llm")))
	}
	e.waitEvent("llm", "Resized", "withdrew the grow from 1 to 2 workers: Kueue did not admit the larger size within 30s")
	e.waitJob("other", "running on the node that freed up, on the quota the grow gave back", func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateRunning
	})
	if pods := e.pods("other"); len(pods) != 1 || pods[0].Spec.NodeName != freed {
		t.Errorf("job other's pods %v, want one on %s", podNames(pods), freed)
	}
	wl := e.waitWorkloadWhere("llm's Workload slice", admittedSlice("llm"), "admitted for 1 worker", func(wl *kueue.Workload) bool {
		return wl.Spec.PodSets[0].Count == 1
	})
	if left := e.workloadWhere(growSlice("llm")); left != nil {
		t.Errorf("llm's slice %s still waits beside %s", left.Name, wl.Name)
	}
	if c := findCheck(wl); c == nil || c.State != kueue.CheckStateReady {
		t.Errorf("the placement check of llm's slice is %+v, want Ready", c)
	}
}

// TestElasticGrowMovesTheGangWholeToARackWithRoom: the job of TestElasticGrowWaitsForAPlaceInItsRack
// grows while its rack stays full, but two nodes of rack-0-1-1 are free: the placement check
// books both workers there and admits the grow, saying that attempt 0 of the gang moves whole.
// The added worker never runs beside worker 0; the operator restarts the gang (Restarting,
// ElasticMove, spending neither failure budget), and convoy-scheduler binds both workers of
// attempt 1 in rack-0-1-1.
func TestElasticGrowMovesTheGangWholeToARackWithRoom(t *testing.T) {
	e := setup(t)
	racks, worker0 := e.growElasticJobInAFullRack()
	roomy := racks["rack-0-1-1"]
	e.deletePod("filler-" + roomy[1])
	wl := e.waitWorkloadWhere("llm's grow", func(wl *kueue.Workload) bool {
		return ownedBy(wl, "llm") && workloadslicing.ReplacementForKey(wl) != nil
	},
		"admitted by the placement check, moving attempt 0 whole", func(wl *kueue.Workload) bool {
			c := findCheck(wl)
			a, move := convoy.ElasticMoveAttempt(ptr.Deref(c, kueue.AdmissionCheckState{}).Message)
			return c != nil && c.State == kueue.CheckStateReady && move && a == 0
		})
	msg := findCheck(wl).Message
	t.Logf("the grow's check: %s", msg)
	if want := "16 GPU(s) for the gang on node(s) " + strings.Join(roomy[:2], ", "); !strings.Contains(msg, want) || !strings.Contains(msg, "/rack-0-1-0") {
		t.Errorf("the check says %q, want it to hold %q and name the full rack-0-1-0", msg, want)
	}
	moved := e.waitJob("llm", "running again with 2 workers", func(j *convoy.TrainingJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionRunning)
		return j.Status.RestartCount == 1 && j.Status.Elastic.CurrentWorkers == 2 && c != nil && c.Status == metav1.ConditionTrue && c.Message == "all 2 pods are running"
	})
	if st := moved.Status; st.FailureRestarts != 0 || st.DisruptionRestarts != 0 {
		t.Errorf("failureRestarts %d, disruptionRestarts %d; want 0: a move spends neither budget", st.FailureRestarts, st.DisruptionRestarts)
	}
	e.waitEvent("llm", convoy.ReasonElasticMove, "the gang grows to 2 workers, and convoy-scheduler holds a place for all of them elsewhere")
	events := &corev1.EventList{}
	if err := e.k.List(t.Context(), events, client.InNamespace(e.ns), client.MatchingFields{"reason": convoy.ReasonElasticMove}); err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Errorf("no %s event listed by its reason", convoy.ReasonElasticMove)
	}
	for _, ev := range events.Items {
		if ev.Type != corev1.EventTypeNormal {
			t.Errorf("the %s event is of type %s, want Normal: the move is no fault", ev.Reason, ev.Type)
		}
	}
	pods := e.requireWholeGang("llm", 2)
	if w0 := e.workerPod("llm", "0"); w0 == nil || w0.UID == worker0.UID {
		t.Errorf("worker 0 is the pod of attempt 0, want the gang restarted whole")
	}
	for _, p := range pods {
		if p.Labels[convoy.LabelRestartAttempt] != "1" || !slices.Contains(roomy[:2], p.Spec.NodeName) {
			t.Errorf("pod %s of attempt %s on %s, want attempt 1 on %v", p.Name, p.Labels[convoy.LabelRestartAttempt], p.Spec.NodeName, roomy[:2])
		}
	}
}

// growElasticJobInAFullRack runs the elastic job llm (2 × 8 GPUs, minWorkers 1, cooldown 30 s) in a
// ClusterQueue of 8 GPUs with the placement check: with 1 worker, on the one free node, in
// rack-0-1-0. Then the administrator raises the quota to 16 and the first node of rack-0-1-1
// frees up. It returns the fleet's racks, each with its nodes in order, and worker 0.
func (e *env) growElasticJobInAFullRack() (map[string][]string, *corev1.Pod) {
	e.t.Helper()
	e.clusterQueue(8, flavor, withCheck)
	racks := e.fillRacks(4, "rack-0-0-0", "rack-0-0-1", "rack-0-1-1")
	rack := racks["rack-0-1-0"]
	slices.Sort(rack)
	for _, node := range rack[:3] {
		e.create8GPUPod("filler-"+node, node)
	}
	job := e.job("llm", 2, 8, "")
	job.Spec.MinWorkers = ptr.To[int32](1)
	job.Spec.Elastic = &convoy.ElasticSpec{ResizeCooldownSeconds: ptr.To[int32](30)}
	e.create(job)
	e.waitJob("llm", "running with 1 worker", func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateRunning && j.Status.Elastic != nil && j.Status.Elastic.CurrentWorkers == 1
	})
	worker0 := e.workerPod("llm", "0")
	if worker0 == nil || worker0.Spec.NodeName != rack[3] {
		e.t.Fatalf("worker 0 is %v, want it on %s, the one free node", podNames(e.pods("llm")), rack[3])
	}
	if _, err := e.Kubectl(e.t.Context(), "patch", "clusterqueue", e.ns, "--type=json", "-p",
		`[{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": 16}]`); err != nil {
		e.t.Fatal(err)
	}
	e.deletePod("filler-" + racks["rack-0-1-1"][0])
	return racks, worker0
}

// workerPod is the job's worker of the rank, nil when it has none.
func (e *env) workerPod(job, rank string) *corev1.Pod {
	for _, p := range e.pods(job) {
		if p.Labels[convoy.LabelReplicaRole] == "worker" && p.Labels[convoy.LabelReplicaRank] == rank && p.DeletionTimestamp == nil {
			return &p
		}
	}
	return nil
}

// workloadWhere is the first Workload of the test's namespace that pick picks; nil when none.
func (e *env) workloadWhere(pick func(*kueue.Workload) bool) *kueue.Workload {
	e.t.Helper()
	wls := &kueue.WorkloadList{}
	must(e.t, e.k.List(e.t.Context(), wls, client.InNamespace(e.ns)))
	for i := range wls.Items {
		if pick(&wls.Items[i]) {
			return &wls.Items[i]
		}
	}
	return nil
}

// growSlice picks the job's Workload slice that waits to be admitted.
func growSlice(job string) func(*kueue.Workload) bool {
	return func(wl *kueue.Workload) bool {
		return ownedBy(wl, job) && !workloadAdmitted(wl) && !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
	}
}

// admittedSlice picks the job's admitted Workload slice that runs.
func admittedSlice(job string) func(*kueue.Workload) bool {
	return func(wl *kueue.Workload) bool {
		return ownedBy(wl, job) && workloadAdmitted(wl) && !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
	}
}

func ownedBy(wl *kueue.Workload, job string) bool {
	owner := metav1.GetControllerOf(wl)
	return owner != nil && owner.Name == job
}

// waitEvent waits for an event of the job with the reason whose message contains want.
func (e *env) waitEvent(job, reason, want string) {
	e.t.Helper()
	util.WaitEvent(e.t, e.k, 200*time.Millisecond, timeout, client.ObjectKey{Namespace: e.ns, Name: job}, reason, want)
}
