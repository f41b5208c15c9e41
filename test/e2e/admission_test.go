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

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// placementCheck is deploy/queue's AdmissionCheck of convoy-scheduler's placement check.
const placementCheck kueue.AdmissionCheckReference = "convoy-placement"

// withCheck runs deploy/queue's placement check for every flavor of a ClusterQueue.
var withCheck = &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: placementCheck}}}

// bookingTimeout is how long the e2e scheduler holds an admitted gang's place for its pods.
const bookingTimeout = 20 * time.Second

// noPlace starts the Queued message of a job whose gang convoy-scheduler has no place for.
const noPlace = "convoy-scheduler has no place for the gang yet"

// fillRacks binds a pod of 8 GPUs to each of the first n nodes of every rack listed, as a job
// outside the queue would hold them, and returns the racks of the fleet by name, each with its
// nodes in order.
func (e *env) fillRacks(n int, racks ...string) map[string][]string {
	e.t.Helper()
	nodes := &corev1.NodeList{}
	must(e.t, e.k.List(e.t.Context(), nodes))
	byRack := map[string][]string{}
	for _, node := range nodes.Items {
		if r := node.Labels[framework.LabelRack]; r != "" {
			byRack[r] = append(byRack[r], node.Name)
		}
	}
	for _, r := range racks {
		slices.Sort(byRack[r])
		for _, node := range byRack[r][:n] {
			e.create8GPUPod("filler-"+node, node)
		}
	}
	return byRack
}

// create8GPUPod creates a pod of 8 GPUs bound to node, meeting the namespace's restricted Pod
// Security level.
func (e *env) create8GPUPod(name, node string) {
	e.t.Helper()
	must(e.t, e.k.Create(e.t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "c", Image: "filler:1",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")},
					Limits: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")}}}}},
	}))
}

func (e *env) deletePod(name string) {
	e.t.Helper()
	must(e.t, e.k.Delete(e.t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}, client.GracePeriodSeconds(0)))
}

// queuedMessage is the job's Queued condition's message while it is true.
func queuedMessage(j *convoy.TrainingJob) string {
	if c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionQueued); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	return ""
}

func admitted(j *convoy.TrainingJob) bool {
	return meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionAdmitted)
}

// TestJobWithoutPlaceIsNotAdmittedUntilRoomAppears: with every rack fragmented (one node of each
// held by another pod), a job of 4 × 8 GPUs that requires one rack has its quota free but no
// place: Kueue does not admit it, no pod of it is created, and its Queued condition says why in
// the planner's words. Once a rack's filler is gone the job is admitted and its whole gang runs
// in that rack.
func TestJobWithoutPlaceIsNotAdmittedUntilRoomAppears(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, flavor, withCheck)
	racks := e.fillRacks(1, "rack-0-0-0", "rack-0-0-1", "rack-0-1-0", "rack-0-1-1")
	e.create(e.job("big", 4, 8, ""))

	j := e.waitJob("big", "told it has no place", func(j *convoy.TrainingJob) bool {
		return strings.Contains(queuedMessage(j), noPlace)
	})
	msg := queuedMessage(j)
	if !strings.Contains(msg, "rack") || !strings.Contains(msg, "quota reserved") {
		t.Errorf("Queued says %q, want the quota reserved and the planner's reason naming the rack it needs", msg)
	}
	t.Logf("Queued: %s", msg)
	util.Consistently(e.t, 250*time.Millisecond, 5*time.Second, "big stays unadmitted, without pods", func() (bool, string) {
		j := e.get("big")
		return !admitted(j) && len(e.pods("big")) == 0, fmt.Sprintf("admitted %v, %d pods", admitted(j), len(e.pods("big")))
	})

	e.deletePod("filler-" + racks["rack-0-1-0"][0])
	e.waitState("big", convoy.StateRunning)
	pods := e.requireWholeGang("big", 4)
	if got := e.racks(pods); got[0] != "rack-0-1-0" {
		t.Errorf("big runs in %v, want rack-0-1-0, the one rack with room", got)
	}
}

// TestJobInFlavorWithoutNodesIsNotAdmitted: a ClusterQueue with quota in a flavor whose nodes the
// fleet does not have (A100 on-demand, on an H100 fleet) reserves the quota, but the job is not
// admitted: it says that no node fits.
func TestJobInFlavorWithoutNodesIsNotAdmitted(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, "a100-on-demand", withCheck)
	e.create(e.job("a100", 1, 8, ""))
	j := e.waitJob("a100", "told it has no place", func(j *convoy.TrainingJob) bool {
		return strings.Contains(queuedMessage(j), noPlace)
	})
	t.Logf("Queued: %s", queuedMessage(j))
	util.Consistently(e.t, 250*time.Millisecond, 3*time.Second, "a100 stays unadmitted", func() (bool, string) {
		return !admitted(e.get("a100")), "admitted"
	})
}

// TestTwoJobsRaceForTheLastRack: three racks full, one free; two jobs that each need a whole rack
// have quota for both. Exactly one is admitted and runs in the free rack; the other waits, told
// why, and is never admitted while the first runs.
func TestTwoJobsRaceForTheLastRack(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, flavor, withCheck)
	e.fillRacks(4, "rack-0-0-0", "rack-0-0-1", "rack-0-1-0")
	e.create(e.job("first", 4, 8, ""))
	e.create(e.job("second", 4, 8, ""))

	var winner, loser string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		a, b := e.get("first"), e.get("second")
		if admitted(a) && admitted(b) {
			return false, fmt.Errorf("both jobs were admitted for one rack")
		}
		switch {
		case admitted(a) && strings.Contains(queuedMessage(b), noPlace):
			winner, loser = "first", "second"
		case admitted(b) && strings.Contains(queuedMessage(a), noPlace):
			winner, loser = "second", "first"
		}
		return winner != "", nil
	})
	if err != nil {
		t.Fatalf("waiting for one job admitted and the other told it has no place: %v", err)
	}
	e.waitRunningInRack(winner, 4, "rack-0-1-1")
	util.Consistently(e.t, 250*time.Millisecond, 5*time.Second, loser+" stays unadmitted while "+winner+" runs", func() (bool, string) {
		j := e.get(loser)
		return !admitted(j) && len(e.pods(loser)) == 0, queuedMessage(j)
	})
}

// TestUnusedBookingIsReleased: a Workload admitted into the one free rack whose pods never come
// (no job runs it) holds the rack only for the booking timeout: then its check goes to Retry,
// saying why, Kueue gives its quota back, and a job that waited for the rack is admitted and runs
// there.
func TestUnusedBookingIsReleased(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, flavor, withCheck)
	e.fillRacks(4, "rack-0-0-0", "rack-0-0-1", "rack-0-1-0")
	e.createIdleWorkload("idle")
	e.waitWorkload("idle", "admitted", workloadAdmitted)
	admittedAt := time.Now()
	e.create(e.job("waiting", 4, 8, ""))
	e.waitJob("waiting", "told it has no place", func(j *convoy.TrainingJob) bool {
		return strings.Contains(queuedMessage(j), noPlace)
	})

	wl := e.waitWorkload("idle", "sent back through the check", func(wl *kueue.Workload) bool {
		c := findCheck(wl)
		return c != nil && strings.Contains(c.Message, "did not reach convoy-scheduler")
	})
	t.Logf("idle's check after %s: %s: %s", time.Since(admittedAt).Round(time.Second), findCheck(wl).State, findCheck(wl).Message)
	// The booking is made before Kueue admits, and the admission is seen a poll later still: a
	// second's slack for both; a booking released without waiting its timeout is far below it.
	if waited := time.Since(admittedAt); waited < bookingTimeout-time.Second {
		t.Errorf("idle's booking was released %s after admission, before the %s timeout", waited, bookingTimeout)
	}
	e.waitRunningInRack("waiting", 4, "rack-0-1-1")
}

// TestNodeChangeSendsBookingBackThroughTheCheck: a job admitted into the one rack with room,
// its pods not created yet (the operator is down), loses the place when a node of that rack is
// cordoned: its check goes to Retry saying the nodes held for it changed, Kueue evicts it, and once
// the operator is back the job is queued again, unadmitted, told it has no place. When the node is
// uncordoned it is admitted and runs in that rack.
func TestNodeChangeSendsBookingBackThroughTheCheck(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, flavor, withCheck)
	racks := e.fillRacks(4, "rack-0-0-0", "rack-0-0-1", "rack-0-1-0")
	rack := racks["rack-0-1-1"]
	slices.Sort(rack)
	e.create8GPUPod("filler-"+rack[0], rack[0])
	e.create(e.job("big", 4, 8, ""))
	e.waitJob("big", "told it has no place", func(j *convoy.TrainingJob) bool {
		return strings.Contains(queuedMessage(j), noPlace)
	})

	must(t, e.StopOperator())
	t.Cleanup(func() { _ = e.StartOperator(context.Background()) })
	e.deletePod("filler-" + rack[0])
	wl := e.waitJobWorkload("big", "admitted", workloadAdmitted)
	if c := findCheck(wl); c == nil || !strings.Contains(c.Message, rack[3]) {
		t.Fatalf("big's check is %+v, want it to hold rack-0-1-1's nodes", c)
	}
	if pods := e.pods("big"); len(pods) != 0 {
		t.Fatalf("big has pods %v with the operator down", podNames(pods))
	}
	e.cordon(rack[3], true)
	t.Cleanup(func() { e.cordon(rack[3], false) })
	wl = e.waitJobWorkload("big", "sent back through the check", func(wl *kueue.Workload) bool {
		c := findCheck(wl)
		return c != nil && strings.Contains(c.Message, "the nodes held for the gang changed")
	})
	t.Logf("big's check: %s: %s", findCheck(wl).State, findCheck(wl).Message)
	// Kueue evicts it; the operator, once back, stops the job (it has no pods) and gives the quota
	// back. An operator running all along would do so at once.
	e.waitJobWorkload("big", "evicted for its check", func(wl *kueue.Workload) bool {
		c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == kueue.WorkloadEvictedByAdmissionCheck
	})

	must(t, e.StartOperator(t.Context()))
	wl = e.waitJobWorkload("big", "queued again, waiting for a place", func(wl *kueue.Workload) bool {
		c := findCheck(wl)
		return !workloadAdmitted(wl) && c != nil && c.State == kueue.CheckStatePending && strings.Contains(c.Message, noPlace)
	})
	t.Logf("big's check: %s: %s", findCheck(wl).State, findCheck(wl).Message)
	util.Consistently(e.t, 250*time.Millisecond, 3*time.Second, "big stays unadmitted, without pods, while the node is cordoned", func() (bool, string) {
		j := e.get("big")
		return !admitted(j) && len(e.pods("big")) == 0, fmt.Sprintf("admitted %v, %d pods", admitted(j), len(e.pods("big")))
	})
	if msg := queuedMessage(e.get("big")); !strings.Contains(msg, noPlace) {
		t.Errorf("big's Queued condition says %q, want that it has no place", msg)
	}

	e.cordon(rack[3], false)
	e.waitRunningInRack("big", 4, "rack-0-1-1")
}

// TestSchedulerPreemptionKeepsOffABookedPlace: the one free rack is booked for an admitted
// Workload whose pods have not come. A high-priority job of a ClusterQueue without the check,
// admitted by quota alone, needs a whole rack: convoy-scheduler does not give it the booked rack,
// free as it looks, but preempts lower-priority pods for it elsewhere, and the booking stays.
func TestSchedulerPreemptionKeepsOffABookedPlace(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, flavor, withCheck)
	e.fillRacks(4, "rack-0-0-0", "rack-0-0-1")
	e.create(e.job("low", 4, 8, "low"))
	e.waitState("low", convoy.StateRunning)
	lowRack := e.racks(e.requireWholeGang("low", 4))[0]
	e.createIdleWorkload("idle")
	wl := e.waitWorkload("idle", "admitted", workloadAdmitted)
	booked := findCheck(wl).Message
	t.Logf("idle's check: %s", booked)

	e.uncheckedQueue("urgent", 64)
	urgent := e.job("urgent", 4, 8, "high")
	urgent.Spec.Scheduling.Queue = "urgent"
	e.create(urgent)
	e.waitState("urgent", convoy.StateRunning)
	pods := e.requireWholeGang("urgent", 4)
	for _, p := range pods {
		if strings.Contains(booked, p.Spec.NodeName) {
			t.Errorf("urgent's pod %s runs on %s, a node booked for idle (%s)", p.Name, p.Spec.NodeName, booked)
		}
	}
	t.Logf("urgent runs in %v; low ran in %s, restarts %d", e.racks(pods), lowRack, e.get("low").Status.RestartCount)
	if c := findCheck(e.waitWorkload("idle", "read", func(*kueue.Workload) bool { return true })); c.State != kueue.CheckStateReady && !strings.Contains(c.Message, "did not reach convoy-scheduler") {
		t.Errorf("idle's check is %s: %s; want it Ready, or released only for its pods' timeout", c.State, c.Message)
	}
}

// TestBookingOutlivesASchedulerFailover: the one free rack is booked for an admitted Workload
// whose pods have not come, while a second scheduler replica stands by. The leader stops, giving
// its Lease up as in a rolling update, and is started again as the standby. The other replica
// leads, holds the booking again, and keeps a rival gang admitted by quota alone off the booked
// rack; once the Workload is deleted, the rival runs there.
func TestBookingOutlivesASchedulerFailover(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, flavor, withCheck)
	racks := e.fillRacks(4, "rack-0-0-0", "rack-0-0-1", "rack-0-1-0")
	free := racks["rack-0-1-1"]
	spare := e.Replicas(stack.Scheduler)[1]
	must(t, e.StartReplica(t.Context(), spare))
	t.Cleanup(func() {
		// The first replica leads again, as the other tests expect.
		holder := e.schedulerLeaseHolder()
		if err := e.Cluster.StopProcess(spare); err != nil {
			t.Errorf("stopping %s: %v", spare, err)
		}
		e.waitSchedulerLeader("the first replica to lead again", holder)
	})
	e.createIdleWorkload("idle")
	wl := e.waitWorkload("idle", "admitted", workloadAdmitted)
	booked := findCheck(wl).Message
	if !strings.Contains(booked, free[0]) {
		t.Fatalf("idle's check says %q, want it to hold rack-0-1-1's nodes %v", booked, free)
	}

	leader := e.schedulerLeaseHolder()
	must(t, e.StopScheduler())
	e.waitSchedulerLeader(spare+" to lead", leader)
	must(t, e.StartScheduler(t.Context()))
	e.uncheckedQueue("rival", 64)
	rival := e.job("rival", 4, 8, "")
	rival.Spec.Scheduling.Queue = "rival"
	e.create(rival)
	util.Consistently(t, 250*time.Millisecond, 6*time.Second, "the rival stays off the rack booked for idle while idle's check holds it", func() (bool, string) {
		c := findCheck(e.waitWorkload("idle", "read", func(*kueue.Workload) bool { return true }))
		for _, p := range e.pods("rival") {
			if slices.Contains(free, p.Spec.NodeName) && c.State == kueue.CheckStateReady && strings.HasPrefix(c.Message, "convoy-scheduler holds") {
				return false, fmt.Sprintf("rival's pod %s runs on %s while idle's check says %q", p.Name, p.Spec.NodeName, c.Message)
			}
		}
		return true, ""
	})
	if c := findCheck(e.waitWorkload("idle", "read", func(*kueue.Workload) bool { return true })); c.State != kueue.CheckStateReady {
		t.Logf("idle's check is %s after the failover: %s", c.State, c.Message)
	}

	must(t, e.k.Delete(t.Context(), &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "idle"}}))
	e.waitRunningInRack("rival", 4, "rack-0-1-1")
}

// schedulerLeaseHolder is the holder of the scheduler's leader-election Lease; "" when none.
func (e *env) schedulerLeaseHolder() string {
	e.t.Helper()
	lease := &coordinationv1.Lease{}
	must(e.t, e.k.Get(context.Background(), client.ObjectKey{Namespace: stack.Namespace, Name: stack.Scheduler}, lease))
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// waitSchedulerLeader waits until a scheduler replica other than the holder before leads.
func (e *env) waitSchedulerLeader(what, before string) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		h := e.schedulerLeaseHolder()
		return h != "" && h != before, nil
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// createIdleWorkload creates a Workload of 4 × 8 GPUs in one rack in the LocalQueue "training",
// as a job's would be, for which no job runs: once admitted, its booking is never used.
func (e *env) createIdleWorkload(name string) {
	e.t.Helper()
	must(e.t, e.k.Create(e.t.Context(), &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: kueue.WorkloadSpec{QueueName: "training", PodSets: []kueue.PodSet{{Name: "worker", Count: 4,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{convoy.AnnotationTopologyLevel: string(convoy.TopologyRack)}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "idle:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")}}}}},
			}}}},
	}))
}

// uncheckedQueue adds the LocalQueue name to the test's namespace, in a ClusterQueue of gpus H100
// GPUs of its own without the placement check.
func (e *env) uncheckedQueue(name string, gpus int) {
	e.t.Helper()
	cq := utiltestingapi.MakeClusterQueue(e.ns + "-" + name).
		NamespaceSelector(&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: e.ns}}).
		ResourceGroup(*utiltestingapi.MakeFlavorQuotas(flavor).
			Resource(framework.ResourceGPU, strconv.Itoa(gpus)).
			Resource(corev1.ResourceCPU, "10k").
			Resource(corev1.ResourceMemory, "100Ti").Obj()).
		Obj()
	must(e.t, e.k.Create(e.t.Context(), cq))
	must(e.t, e.k.Create(e.t.Context(), utiltestingapi.MakeLocalQueue(name, e.ns).ClusterQueue(cq.Name).Obj()))
	e.t.Cleanup(func() { _ = e.k.Delete(context.Background(), cq) })
}

// cordon marks the node unschedulable, or schedulable again, as kubectl cordon and uncordon do.
func (e *env) cordon(name string, unschedulable bool) {
	e.t.Helper()
	node := &corev1.Node{}
	must(e.t, e.k.Get(context.Background(), client.ObjectKey{Name: name}, node))
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = unschedulable
	must(e.t, e.k.Patch(context.Background(), node, patch))
}

func workloadAdmitted(wl *kueue.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
}

// waitRunningInRack waits until the job runs, and fails the test unless its whole gang of workers
// runs in rack.
func (e *env) waitRunningInRack(name string, workers int, rack string) {
	e.t.Helper()
	e.waitState(name, convoy.StateRunning)
	if got := e.racks(e.requireWholeGang(name, workers)); got[0] != rack {
		e.t.Errorf("%s runs in %v, want %s", name, got, rack)
	}
}

func findCheck(wl *kueue.Workload) *kueue.AdmissionCheckState {
	for i := range wl.Status.AdmissionChecks {
		if wl.Status.AdmissionChecks[i].Name == placementCheck {
			return &wl.Status.AdmissionChecks[i]
		}
	}
	return nil
}

// waitJobWorkload waits until cond holds for the Workload of the test's job name.
func (e *env) waitJobWorkload(job, what string, cond func(*kueue.Workload) bool) *kueue.Workload {
	e.t.Helper()
	return e.waitWorkloadWhere("the Workload of "+job, func(wl *kueue.Workload) bool {
		return len(wl.OwnerReferences) > 0 && wl.OwnerReferences[0].Name == job
	}, what, cond)
}

// waitWorkload waits until cond holds for the test's Workload name.
func (e *env) waitWorkload(name, what string, cond func(*kueue.Workload) bool) *kueue.Workload {
	e.t.Helper()
	return e.waitWorkloadWhere("Workload "+name, func(wl *kueue.Workload) bool { return wl.Name == name }, what, cond)
}

// waitWorkloadWhere waits until cond holds for the first Workload of the test's namespace that is
// picked; which names it in the failure.
func (e *env) waitWorkloadWhere(which string, pick func(*kueue.Workload) bool, what string, cond func(*kueue.Workload) bool) *kueue.Workload {
	e.t.Helper()
	var wl *kueue.Workload
	util.Eventually(e.t, 200*time.Millisecond, timeout, which+" to be "+what, func() (bool, string) {
		wls := &kueue.WorkloadList{}
		if err := e.k.List(e.t.Context(), wls, client.InNamespace(e.ns)); err != nil {
			return false, err.Error()
		}
		for i := range wls.Items {
			if pick(&wls.Items[i]) {
				wl = &wls.Items[i]
				return cond(wl), fmt.Sprintf("its status: %+v", wl.Status)
			}
		}
		return false, "no such Workload"
	})
	return wl
}
