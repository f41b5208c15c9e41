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

package gangcore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

func slotOf(t *testing.T, st *CycleState, status *fwk.Status) string {
	t.Helper()
	if !status.IsSuccess() {
		t.Fatalf("PlanFor() = %v, want a slot", status)
	}
	return st.Slot.Node + ":" + FormatGPUIndices(st.Slot.GPUs)
}

// TestPlanForGang plans the whole gang on its first pod; the others follow the plan.
func TestPlanForGang(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r2", 8)}
	pods := []*corev1.Pod{member("ns", "job", 0, 4).Obj(), member("ns", "job", 1, 4).Obj(), member("ns", "job", 2, 4).Obj()}
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8), inventory("c", 8))
	var got []string
	for _, p := range []*corev1.Pod{pods[1], pods[0], pods[2]} {
		st, status := h.state.PlanFor(context.Background(), p, h.nodeInfos())
		got = append(got, p.Name+"@"+slotOf(t, st, status))
	}
	// Three 4-GPU pods need two nodes of one rack; ranks 0 and 1 share a node.
	want := []string{"job-1@a:4,5,6,7", "job-0@a:0,1,2,3", "job-2@b:0,1,2,3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slots (-want,+got):\n%s", diff)
	}
}

// TestPlanForFillsTheNodeBestBesideTheGPUs: of two nodes with the same free GPUs, a gang of one
// node goes where its CPU and memory fill the node most, so that the node of 96 CPUs stays free
// for a pod that needs them.
func TestPlanForFillsTheNodeBestBesideTheGPUs(t *testing.T) {
	small := st.MakeNode().Name("b").Label(corev1.LabelHostname, "b").Label(convoy.LabelTopologyZone, "z").
		Label(convoy.LabelTopologyBlock, "b").Label(convoy.LabelTopologyRack, "r1").Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: "16", corev1.ResourceMemory: "256Gi", corev1.ResourcePods: "110", convoy.ResourceGPU: "8"}).Obj()
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), small}
	pod := member("ns", "job", 0, 8).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi"}).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{pod}, inventory("a", 8), inventory("b", 8))
	st, status := h.state.PlanFor(context.Background(), pod, h.nodeInfos())
	if got, want := slotOf(t, st, status), "b:0,1,2,3,4,5,6,7"; got != want {
		t.Errorf("slot = %s, want %s", got, want)
	}
}

// TestLimitsFill is how full a node's CPU and memory would be with one more pod, as upstream's
// MostAllocated counts it.
func TestLimitsFill(t *testing.T) {
	node := fakeNode("a", "r1", 8) // 96 CPUs, 1Ti
	running := lone("ns", "running", 0).Node("a").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "40", corev1.ResourceMemory: "256Gi"}).Obj()
	h := newHarness(t, []*corev1.Node{node}, []*corev1.Pod{running})
	ni, _ := h.snap.NodeInfos().Get("a")
	cases := map[string]struct {
		requests corev1.ResourceList
		want     int32
	}{
		// (40+8)/96 CPUs and (256+256)/1024 GiB: 500 and 500 thousandths
		"CPU and memory":         {requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("256Gi")}, want: 500},
		"CPU alone":              {requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}, want: 375},
		"GPUs count for none":    {requests: corev1.ResourceList{convoy.ResourceGPU: resource.MustParse("8")}, want: 333},
		"more than the node has": {requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200")}, want: 625},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := LimitsOf(tc.requests, convoy.ResourceGPU).Fill(ni); got != tc.want {
				t.Errorf("Fill() = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestPlanForGangOfMixedCounts plans a gang whose launcher asks fewer GPUs than its workers with
// each pod's own count: planned at the largest, three 8-GPU pods would not fit.
func TestPlanForGangOfMixedCounts(t *testing.T) {
	// c publishes no GPUNode: it is known by its count of free GPUs.
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r1", 2)}
	pods := []*corev1.Pod{member("ns", "job", 0, 2).Obj(), member("ns", "job", 1, 8).Obj(), member("ns", "job", 2, 8).Obj()}
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8))
	var got []string
	for _, p := range []*corev1.Pod{pods[2], pods[0], pods[1]} {
		st, status := h.state.PlanFor(context.Background(), p, h.nodeInfos())
		got = append(got, p.Name+"@"+slotOf(t, st, status))
		if st.Slot.GPUs.Len() != GPURequest(p, corev1.ResourceName("nvidia.com/gpu")) {
			t.Errorf("%s asks %d GPUs, its slot has %d", p.Name, GPURequest(p, "nvidia.com/gpu"), st.Slot.GPUs.Len())
		}
	}
	want := []string{"job-2@b:0,1,2,3,4,5,6,7", "job-0@c:0,1", "job-1@a:0,1,2,3,4,5,6,7"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slots (-want,+got):\n%s", diff)
	}
}

// TestPlanForGangWhoseMasterAsksMoreCPU plans a gang whose master asks more CPU than its workers
// with each pod's own CPU, whichever pod comes first: counted at the master's 60 CPUs a node of 96
// takes one pod and the gang would not fit; the master and a worker of 30 share one.
func TestPlanForGangWhoseMasterAsksMoreCPU(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	pods := []*corev1.Pod{member("ns", "job", 0, 4).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "60"}).Obj()}
	for r := 1; r < 4; r++ {
		pods = append(pods, member("ns", "job", r, 4).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "30"}).Obj())
	}
	want := []string{"job-0@a:0,1,2,3", "job-1@a:4,5,6,7", "job-2@b:0,1,2,3", "job-3@b:4,5,6,7"}
	for _, first := range []int{0, 3} {
		h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8))
		got := make([]string, len(pods))
		for _, i := range []int{first, (first + 1) % 4, (first + 2) % 4, (first + 3) % 4} {
			st, status := h.state.PlanFor(context.Background(), pods[i], h.nodeInfos())
			got[i] = pods[i].Name + "@" + slotOf(t, st, status)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("planned from %s: slots (-want,+got):\n%s", pods[first].Name, diff)
		}
	}
}

// TestPlanForGangWhoseWorkersAskMoreCPU does not stack two workers of 50 CPUs on a node of 96
// when the pod that plans first asks 10: it joins one of them.
func TestPlanForGangWhoseWorkersAskMoreCPU(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	pods := []*corev1.Pod{
		member("ns", "job", 2, 4).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "10"}).Obj(),
		member("ns", "job", 0, 4).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "50"}).Obj(),
		member("ns", "job", 1, 4).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "50"}).Obj(),
	}
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8))
	perNode := map[string]int64{}
	for _, p := range pods {
		st, status := h.state.PlanFor(context.Background(), p, h.nodeInfos())
		slotOf(t, st, status)
		cpu := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[corev1.ResourceCPU]
		perNode[st.Slot.Node] += cpu.Value()
	}
	for node, cpus := range perNode {
		if cpus > 96 {
			t.Errorf("the plan puts %d CPUs of pods on node %s of 96", cpus, node)
		}
	}
}

// TestPlanForUnplaceable rejects every pod of a gang that does not fit with the planner's
// message, plans once, and retries the siblings that show another message.
func TestPlanForUnplaceable(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r2", 8)}
	stale := member("ns", "job", 1, 8).Obj()
	stale.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "not enough sibling pods"}}
	pods := []*corev1.Pod{member("ns", "job", 0, 8).Annotation(convoy.AnnotationTopologyLevel, "rack").Obj(), stale}
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8))
	want := "ns/job needs 2 pod(s) × 8 GPU(s) in one rack; the best rack (z/b/r1) has room for 1 pod (8 free GPUs)"
	for _, p := range pods {
		st, status := h.state.PlanFor(context.Background(), p, h.nodeInfos())
		if status.Code() != fwk.Unschedulable || status.Message() != want || st.Placed || st.Unplaceable != want {
			t.Errorf("PlanFor(%s) = %v %q, want Unschedulable %q", p.Name, status.Code(), status.Message(), want)
		}
	}
	// The sibling that showed another message is told, off the scheduling cycle.
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, tellDelay+5*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := h.cs.CoreV1().Pods("ns").Get(ctx, "job-1", metav1.GetOptions{})
		return err == nil && saysAlready(p, want), nil
	}); err != nil {
		t.Errorf("the waiting sibling was not told why the gang does not fit: %v", err)
	}
}

// TestUnplaceableGangTellsEachSiblingOnce: a gang that does not fit, planned again as the
// cluster changes and failing with other numbers, writes the status of each waiting sibling once,
// whether the next verdict comes before its siblings are told or after: a backlog of such gangs
// would otherwise rewrite its pending pods as gangs bind.
func TestUnplaceableGangTellsEachSiblingOnce(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r2", 8)}
	pods := []*corev1.Pod{member("ns", "job", 0, 8).Annotation(convoy.AnnotationTopologyLevel, "rack").Obj(), member("ns", "job", 1, 8).Obj(), member("ns", "job", 2, 8).Obj()}
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8))
	var last string
	// verdict plans the gang again on a node that lost GPUs: a verdict with other numbers.
	verdict := func(node string, gpus int) {
		t.Helper()
		h.state.SetGPUNode(inventory(node, gpus))
		h.state.bump()
		_, status := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos())
		if status.IsSuccess() || !strings.HasPrefix(status.Message(), "ns/job needs 3 pod(s)") || status.Message() == last {
			t.Fatalf("PlanFor() = %v %q, want Unschedulable with other numbers than %q", status.Code(), status.Message(), last)
		}
		last = status.Message()
	}
	// Two verdicts before the siblings are told (tellDelay), a third once the scheduler's
	// informer has seen them told.
	verdict("a", 8)
	verdict("a", 4)
	h.state.telling.Wait()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for _, name := range []string{"job-1", "job-2"} {
			if p, err := h.state.pods.Pods("ns").Get(name); err != nil || !saysAlready(p, "ns/job needs ") {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the waiting siblings were not told why the gang does not fit: %v", err)
	}
	verdict("b", 4)
	h.state.telling.Wait()
	told := map[string]int{}
	for _, a := range h.cs.Actions() {
		if a.GetResource().Resource == "pods" && a.GetSubresource() == "status" && a.GetVerb() == "patch" {
			told[a.(k8stesting.PatchAction).GetName()]++
		}
	}
	if diff := cmp.Diff(map[string]int{"job-1": 1, "job-2": 1}, told); diff != "" {
		t.Errorf("status writes by pod (-want,+got):\n%s", diff)
	}
}

// TestGate holds a complete gang's pods but its leader until the gang has a plan.
func TestGate(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	pods := []*corev1.Pod{member("ns", "job", 0, 4).Obj(), member("ns", "job", 1, 4).Obj(),
		st.MakePod().Namespace("ns").Name("job-ps").UID("ns-job-ps").SchedulerName("convoy-scheduler").
			Label(schedv1alpha1.PodGroupLabel, "job").Obj()}
	h := newHarness(t, nodes, pods, inventory("a", 8))
	h.state.SetPodGroup(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 4}})
	gate := func() []string { return gateAll(h.state, pods) }
	if diff := cmp.Diff([]string{"job-0: waiting for 1 more pod(s) of gang ns/job (minMember 4)", "job-1: waiting for 1 more pod(s) of gang ns/job (minMember 4)",
		"job-ps: waiting for 1 more pod(s) of gang ns/job (minMember 4)"}, gate()); diff != "" {
		t.Errorf("incomplete gang (-want,+got):\n%s", diff)
	}
	h.state.SetPodGroup(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}})
	if diff := cmp.Diff([]string{"job-0: through", "job-1: waiting for gang ns/job to be planned", "job-ps: through"}, gate()); diff != "" {
		t.Errorf("complete gang without a plan (-want,+got):\n%s", diff)
	}
	if _, status := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos()); !status.IsSuccess() {
		t.Fatal(status)
	}
	if diff := cmp.Diff([]string{"job-0: through", "job-1: through", "job-ps: through"}, gate()); diff != "" {
		t.Errorf("gang with a plan (-want,+got):\n%s", diff)
	}
	if got := h.activated.list(); !slices.Contains(got, "ns/job-1") {
		t.Errorf("activated %v, want the waiting sibling ns/job-1", got)
	}
}

// inOneRack is the pod, required to share one rack with its gang.
func inOneRack(w *st.PodWrapper) *corev1.Pod {
	return w.Annotation(convoy.AnnotationTopologyLevel, "rack").Annotation(convoy.AnnotationTopologyMode, "Required").Obj()
}

// TestPodWithoutGPUsFollowsItsGangsRequiredDomain: a parameter server of a gang that requires one
// rack waits until the gang's GPU pods are planned, then is kept to their rack; without a
// required level it goes anywhere at once.
func TestPodWithoutGPUsFollowsItsGangsRequiredDomain(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r2", 8), fakeNode("c", "r2", 8)}
	ps := inOneRack(member("ns", "job", 2, 0))
	free := member("ns", "job", 3, 0).Obj()
	pods := []*corev1.Pod{inOneRack(member("ns", "job", 0, 8)), inOneRack(member("ns", "job", 1, 8)), ps, free}
	// a's GPUs are taken: only rack r2 holds the two workers.
	h := newHarness(t, nodes, append(pods, lone("ns", "other", 8).Node("a").Obj()), inventory("a", 8), inventory("b", 8), inventory("c", 8))
	h.state.SetPodGroup(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 4}})

	if diff := cmp.Diff([]string{"job-2: waiting for gang ns/job to be planned", "job-3: through"}, gateAll(h.state, pods[2:])); diff != "" {
		t.Errorf("before the plan (-want,+got):\n%s", diff)
	}
	if a := h.state.AnchorFor(ps); a != "" {
		t.Errorf("AnchorFor() = %q before the plan, want none", a)
	}
	if _, status := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos()); !status.IsSuccess() {
		t.Fatal(status)
	}
	if diff := cmp.Diff([]string{"job-2: through", "job-3: through"}, gateAll(h.state, pods[2:])); diff != "" {
		t.Errorf("after the plan (-want,+got):\n%s", diff)
	}
	if got := h.activated.list(); !slices.Contains(got, "ns/job-2") {
		t.Errorf("activated %v, want the parameter server ns/job-2", got)
	}
	anchor := h.state.AnchorFor(ps)
	if anchor != "b" && anchor != "c" {
		t.Fatalf("AnchorFor() = %q, want a node of rack r2", anchor)
	}
	var in []string
	for _, n := range nodes {
		if h.state.InDomain(ps, nodes[slices.IndexFunc(nodes, func(n *corev1.Node) bool { return n.Name == anchor })], n) {
			in = append(in, n.Name)
		}
	}
	if diff := cmp.Diff([]string{"b", "c"}, in); diff != "" {
		t.Errorf("nodes the parameter server may take (-want,+got):\n%s", diff)
	}
	if a := h.state.AnchorFor(free); a != "" {
		t.Errorf("AnchorFor() = %q for a pod that asks no level, want none", a)
	}
}

// TestHeldParameterServerIsToldWhyItsGangWaits: the parameter server GangGate holds for the plan
// of a gang that does not fit gets the planner's message, as the gang's GPU pods do.
func TestHeldParameterServerIsToldWhyItsGangWaits(t *testing.T) {
	pods := []*corev1.Pod{inOneRack(member("ns", "job", 0, 8)), inOneRack(member("ns", "job", 1, 8)), inOneRack(member("ns", "job", 2, 0))}
	h := newHarness(t, []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r2", 8)}, pods, inventory("a", 8), inventory("b", 8))
	want := "ns/job needs 2 pod(s) × 8 GPU(s) in one rack; the best rack (z/b/r1) has room for 1 pod (8 free GPUs)"
	if _, status := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos()); status.Message() != want {
		t.Fatalf("PlanFor() = %v %q, want %q", status.Code(), status.Message(), want)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, tellDelay+5*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := h.cs.CoreV1().Pods("ns").Get(ctx, "job-2", metav1.GetOptions{})
		return err == nil && saysAlready(p, want), nil
	}); err != nil {
		t.Errorf("the held parameter server was not told why its gang does not fit: %v", err)
	}
}

// psGang is a gang that requires one rack: two 8-GPU workers asking 90 CPUs each, and a parameter
// server asking psCPUs.
func psGang(psCPUs string) []*corev1.Pod {
	cpus := func(n string) map[corev1.ResourceName]string {
		return map[corev1.ResourceName]string{corev1.ResourceCPU: n}
	}
	return []*corev1.Pod{inOneRack(member("ns", "job", 0, 8).Req(cpus("90"))), inOneRack(member("ns", "job", 1, 8).Req(cpus("90"))),
		inOneRack(member("ns", "job", 2, 0).Req(cpus(psCPUs)))}
}

// TestParameterServerTakesARackWithRoomForIt: rack r1 fits the two workers best (two free nodes
// against three), but has no CPU left for the parameter server beside them (96 CPUs a node, 90 per
// worker) unless the server asks less or the rack has a node of CPUs alone it may use.
func TestParameterServerTakesARackWithRoomForIt(t *testing.T) {
	tainted := fakeNode("cpu", "r1", 0)
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "etl", Effect: corev1.TaintEffectNoSchedule}}
	cases := map[string]struct {
		psCPUs string
		extra  *corev1.Node
		want   string
	}{
		"no CPU beside the workers":             {psCPUs: "8", want: "r2"},
		"room beside a worker":                  {psCPUs: "6", want: "r1"},
		"a node of CPUs in the rack":            {psCPUs: "8", extra: fakeNode("cpu", "r1", 0), want: "r1"},
		"a node of CPUs the server may not use": {psCPUs: "8", extra: tainted, want: "r2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r2", 8), fakeNode("d", "r2", 8), fakeNode("e", "r2", 8)}
			if tc.extra != nil {
				nodes = append(nodes, tc.extra)
			}
			pods := psGang(tc.psCPUs)
			h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8), inventory("c", 8), inventory("d", 8), inventory("e", 8))
			st, status := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos())
			node := strings.Split(slotOf(t, st, status), ":")[0]
			if got := nodes[slices.IndexFunc(nodes, func(n *corev1.Node) bool { return n.Name == node })].Labels[convoy.LabelTopologyRack]; got != tc.want {
				t.Errorf("first worker planned on %s in rack %s, want rack %s", node, got, tc.want)
			}
		})
	}
}

// TestParameterServerLeavesItsWorkersTheirRoom: once the gang is planned, its parameter server
// may not take the CPU of a node where a worker is planned and not yet reserved (90 + 8 of 96
// CPUs); the rack's third node takes it.
func TestParameterServerLeavesItsWorkersTheirRoom(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r1", 8)}
	pods := psGang("8")
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8), inventory("c", 8))
	planned := map[string]bool{}
	for _, p := range pods[:2] {
		st, status := h.state.PlanFor(context.Background(), p, h.nodeInfos())
		planned[strings.Split(slotOf(t, st, status), ":")[0]] = true
	}
	var admits []string
	for _, ni := range h.nodeInfos() {
		if h.state.LeavesRoomForPlan(pods[2], ni) {
			admits = append(admits, ni.Node().Name)
		}
	}
	if len(admits) != 1 || planned[admits[0]] {
		t.Errorf("the parameter server may take %v, want only the node of no worker (workers planned on %v)", admits, planned)
	}
}

// TestGangIsToldItsParameterServerFitsNoRack names the pods without GPUs and the best room found
// when every rack that holds the workers lacks CPU for them.
func TestGangIsToldItsParameterServerFitsNoRack(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r2", 8), fakeNode("d", "r2", 8)}
	pods := psGang("8")
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8), inventory("c", 8), inventory("d", 8))
	want := "ns/job needs 2 pod(s) × 8 GPU(s) and 1 pod(s) without GPUs in one rack; of the 2 racks with room for its GPU pods tried, " +
		"the best (z/b/r1) has room beside them for 0 pod(s) without GPUs (CPU, memory, pod slots, node selector, taints)"
	if _, status := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos()); status.Message() != want {
		t.Fatalf("PlanFor() = %v %q, want %q", status.Code(), status.Message(), want)
	}
}

// TestPlanForDropsAStalePlan makes a new plan when the slot's GPUs were taken since.
func TestPlanForDropsAStalePlan(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	pods := []*corev1.Pod{member("ns", "job", 0, 8).Obj(), member("ns", "job", 1, 8).Obj()}
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8))
	st, status := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos())
	first := slotOf(t, st, status)

	// Another scheduler's pod takes one GPU of each node: the gang fits no more.
	h.setPods(lone("ns", "x", 1).Node("a").Obj(), lone("ns", "y", 1).Node("b").Obj())
	st, status = h.state.PlanFor(context.Background(), pods[1], h.nodeInfos())
	if status.IsSuccess() {
		t.Fatalf("PlanFor() after the cluster changed = %s, want the gang rejected (first slot was %s)", slotOf(t, st, status), first)
	}
	if !strings.Contains(status.Message(), "needs 2 pod(s) × 8 GPU(s)") {
		t.Errorf("PlanFor() message = %q", status.Message())
	}
}

// TestReservedAndPlannedGPUsAreNotReused: a reserved pod's GPUs, and the planned GPUs of a gang of
// higher or equal priority, stay off-limits to later plans.
func TestReservedAndPlannedGPUsAreNotReused(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	high := []*corev1.Pod{member("ns", "high", 0, 2).Priority(10).Obj(), member("ns", "high", 1, 2).Priority(10).Obj()}
	low := lone("ns", "low", 2).Priority(1).Obj()
	h := newHarness(t, nodes, append(high, low), inventory("a", 8))
	ctx := context.Background()

	st, status := h.state.PlanFor(ctx, high[0], h.nodeInfos())
	if got := slotOf(t, st, status); got != "a:0,1" {
		t.Fatalf("first slot = %s, want a:0,1", got)
	}
	h.state.Reserve(high[0], "a")
	// The scheduler's cache now holds high-0 on a (assumed, no annotation yet).
	assumed := high[0].DeepCopy()
	assumed.Spec.NodeName = "a"
	h.setPods(assumed)

	st, status = h.state.PlanFor(ctx, low, h.nodeInfos())
	// 0,1 are reserved by high-0, 2,3 planned for high-1.
	if got := slotOf(t, st, status); got != "a:4,5" {
		t.Errorf("lower-priority slot = %s, want a:4,5", got)
	}
	st, status = h.state.PlanFor(ctx, high[1], h.nodeInfos())
	if got := slotOf(t, st, status); got != "a:2,3" {
		t.Errorf("second slot of the gang = %s, want a:2,3", got)
	}
}

// TestPreemptFor evicts every pod of the one lower-priority gang that makes room, and waits for
// them before choosing again.
func TestPreemptFor(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r1", 8)}
	victims := []*corev1.Pod{
		member("ns", "low", 0, 8).Priority(1).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj(),
		member("ns", "low", 1, 8).Priority(1).Node("b").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj(),
		member("ns", "low", 2, 8).Priority(1).Obj(), // pending: evicted too, the gang restarts whole
	}
	peer := member("ns", "peer", 0, 8).Priority(10).Node("c").Obj()
	urgent := []*corev1.Pod{member("ns", "urgent", 0, 8).Priority(10).Obj(), member("ns", "urgent", 1, 8).Priority(10).Obj()}
	all := append(append(append([]*corev1.Pod{}, victims...), peer), urgent...)
	h := newHarness(t, nodes, all, inventory("a", 8), inventory("b", 8), inventory("c", 8))
	ctx := context.Background()

	if _, status := h.state.PlanFor(ctx, urgent[0], h.nodeInfos()); status.IsSuccess() {
		t.Fatal("the urgent gang fits before preemption")
	}
	v, status := h.state.PreemptFor(ctx, urgent[0], h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute})
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v", status)
	}
	var evicted []string
	for _, p := range v.Pods {
		evicted = append(evicted, p.Name)
	}
	slices.Sort(evicted)
	if diff := cmp.Diff([]string{"low-0", "low-1", "low-2"}, evicted); diff != "" {
		t.Errorf("evicted pods (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ns/low"}, v.Gangs); diff != "" {
		t.Errorf("victim gangs (-want,+got):\n%s", diff)
	}
	if v.Node != "a" {
		t.Errorf("nominated node = %q, want a", v.Node)
	}
	// The victims still exist: no second choice, and the gang's pods wait for them.
	if _, status := h.state.PreemptFor(ctx, urgent[1], h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute}); status.IsSuccess() ||
		!strings.Contains(status.Message(), "waits for the pods it preempted") {
		t.Errorf("second PreemptFor() = %v, want it to wait for the victims", status)
	}

	// The victims are gone from the informer but not yet from the scheduling cycle's snapshot:
	// the plan still waits, and nothing more is preempted.
	for _, p := range victims {
		h.deletePod(p)
	}
	if _, status := h.state.PlanFor(ctx, urgent[0], h.nodeInfos()); !strings.Contains(status.Message(), "waits for the pods it preempted") {
		t.Errorf("PlanFor() with the victims in the snapshot = %v %q, want it to wait for them", status.Code(), status.Message())
	}
	// Once the snapshot has no victims either, the gang gets the room it made.
	h.setPods(peer)
	for _, p := range urgent {
		if _, status := h.state.PlanFor(ctx, p, h.nodeInfos()); !status.IsSuccess() {
			t.Errorf("PlanFor(%s) after the victims left = %v", p.Name, status)
		}
	}
}

// TestPreemptionMakesRoomForTheParameterServerToo: evicting the one low gang of rack r1 makes
// room for the urgent gang's workers. When 90-CPU pods of higher priority stay on r1's nodes, it
// does not make room for the gang's parameter server (8 CPUs), and the two low gangs of rack r2
// are evicted instead; when the 90 CPUs are the low gang's own, they are freed with it.
func TestPreemptionMakesRoomForTheParameterServerToo(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r2", 8), fakeNode("d", "r2", 8)}
	all8 := "0,1,2,3,4,5,6,7"
	cpus := func(n string) map[corev1.ResourceName]string {
		return map[corev1.ResourceName]string{corev1.ResourceCPU: n}
	}
	for name, tc := range map[string]struct {
		hogs, low1CPUs string
		want           []string
	}{
		"pods of higher priority hold the CPUs": {hogs: "90", low1CPUs: "0", want: []string{"ns/low2a", "ns/low2b"}},
		"the victim holds the CPUs":             {hogs: "0", low1CPUs: "90", want: []string{"ns/low1"}},
	} {
		t.Run(name, func(t *testing.T) {
			pods := []*corev1.Pod{
				member("ns", "low1", 0, 8).Priority(1).Req(cpus(tc.low1CPUs)).Node("a").Annotation(AnnotationGPUIndices, all8).Obj(),
				member("ns", "low1", 1, 8).Priority(1).Req(cpus(tc.low1CPUs)).Node("b").Annotation(AnnotationGPUIndices, all8).Obj(),
				lone("ns", "hog-a", 0).Priority(100).Req(cpus(tc.hogs)).Node("a").Obj(),
				lone("ns", "hog-b", 0).Priority(100).Req(cpus(tc.hogs)).Node("b").Obj(),
				member("ns", "low2a", 0, 8).Priority(1).Node("c").Annotation(AnnotationGPUIndices, all8).Obj(),
				member("ns", "low2b", 0, 8).Priority(1).Node("d").Annotation(AnnotationGPUIndices, all8).Obj(),
			}
			urgent := []*corev1.Pod{inOneRack(member("ns", "urgent", 0, 8).Priority(10)), inOneRack(member("ns", "urgent", 1, 8).Priority(10)),
				inOneRack(member("ns", "urgent", 2, 0).Priority(10).Req(cpus("8")))}
			h := newHarness(t, nodes, append(pods, urgent...), inventory("a", 8), inventory("b", 8), inventory("c", 8), inventory("d", 8))
			v, status := h.state.PreemptFor(context.Background(), urgent[0], h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute})
			if !status.IsSuccess() {
				t.Fatalf("PreemptFor() = %v", status)
			}
			if diff := cmp.Diff(tc.want, v.Gangs, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("victim gangs (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPreemptForNothingToPreempt fails fast when no lower-priority pod holds GPUs.
func TestPreemptForNothingToPreempt(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	peer := member("ns", "peer", 0, 8).Priority(10).Node("a").Obj()
	pod := member("ns", "job", 0, 8).Priority(10).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{peer, pod}, inventory("a", 8))
	_, status := h.state.PreemptFor(context.Background(), pod, h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute})
	if want := "no pod of lower priority holds GPUs or stands in the way: preemption cannot help"; status.Message() != want {
		t.Errorf("PreemptFor() = %q, want %q", status.Message(), want)
	}
}

// TestPreemptForSeesPodsOfLowerPriorityThatCameLater: preemption learns that no pod has a lower
// priority than the preemptor's without walking the nodes, from a count of the informer's pods
// by priority. A low-priority pod bound later is a victim, and once it is deleted there is none.
func TestPreemptForSeesPodsOfLowerPriorityThatCameLater(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	peerA := member("ns", "peer-a", 0, 8).Priority(10).Node("a").Obj()
	peerB := member("ns", "peer-b", 0, 8).Priority(10).Node("b").Obj()
	first := member("ns", "first", 0, 8).Priority(10).Obj()
	second := member("ns", "second", 0, 8).Priority(10).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{peerA, peerB, first, second}, inventory("a", 8), inventory("b", 8))
	ctx := context.Background()
	opts := PreemptOptions{LonePods: true, Wait: time.Minute}
	const cannot = "no pod of lower priority holds GPUs or stands in the way: preemption cannot help"
	if _, status := h.state.PreemptFor(ctx, first, h.nodeInfos(), opts); status.Message() != cannot {
		t.Fatalf("PreemptFor() with peers only = %q, want %q", status.Message(), cannot)
	}

	h.deletePod(peerB)
	low := member("ns", "low", 0, 8).Priority(1).Node("b").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj()
	if _, err := h.cs.CoreV1().Pods(low.Namespace).Create(ctx, low, metav1CreateOptions); err != nil {
		t.Fatal(err)
	}
	h.setPods(peerA, low)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return h.state.priorities.below(10), nil
	}); err != nil {
		t.Fatal("the count of pods by priority never had the low pod")
	}
	v, status := h.state.PreemptFor(ctx, second, h.nodeInfos(), opts)
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() with a low pod bound = %v", status)
	}
	if diff := cmp.Diff([]string{"ns/low"}, v.Gangs); diff != "" {
		t.Errorf("victim gangs (-want,+got):\n%s", diff)
	}

	h.deletePod(low)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return !h.state.priorities.below(10), nil
	}); err != nil {
		t.Error("the count of pods by priority still has the deleted low pod")
	}
}

func TestNodeView(t *testing.T) {
	node := fakeNode("a", "r1", 8)
	cases := map[string]struct {
		inventory *convoy.GPUNode
		pods      []*corev1.Pod
		wantFree  string
		indexed   bool
	}{
		"count only: the device plugin's allocatable less requests": {
			pods:     []*corev1.Pod{lone("ns", "x", 3).Node("a").Obj()},
			wantFree: "0,1,2,3,4",
		},
		"unhealthy and unknown-health GPUs are not free": {
			inventory: func() *convoy.GPUNode {
				g := inventory("a", 8)
				g.Status.GPUs[1].Health = convoy.GPUUnhealthy
				g.Status.GPUs[2].Health = convoy.GPUUnknown
				return g
			}(),
			wantFree: "0,3,4,5,6,7",
			indexed:  true,
		},
		"holders by the node agent, by annotation, and unknown ones": {
			inventory: func() *convoy.GPUNode {
				g := inventory("a", 8)
				g.Status.GPUs[0].AllocatedTo = "ns/seen"
				return g
			}(),
			pods: []*corev1.Pod{lone("ns", "seen", 1).Node("a").Obj(),
				lone("ns", "annotated", 2).Node("a").Annotation(AnnotationGPUIndices, "1,2").Obj(),
				lone("ns", "unknown", 1).Node("a").Obj()},
			// the pod whose GPUs are unknown holds the highest free one
			wantFree: "3,4,5,6",
			indexed:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var inv []*convoy.GPUNode
			if tc.inventory != nil {
				inv = append(inv, tc.inventory)
			}
			h := newHarness(t, []*corev1.Node{node}, tc.pods, inv...)
			ni, _ := h.snap.NodeInfos().Get("a")
			pn := nodeView(h.state.nodes.base(ni, h.state.inventory.get("a"), h.state.book), &gang{key: "other", pendingUIDs: nil}, nil, nil, false)
			if got := FormatGPUIndices(pn.Free); got != tc.wantFree || pn.Indexed != tc.indexed {
				t.Errorf("free = %q indexed %v, want %q indexed %v", got, pn.Indexed, tc.wantFree, tc.indexed)
			}
		})
	}
}

func TestNewGPUNodeIslands(t *testing.T) {
	g := inventory("n", 4)
	for i := range g.Status.GPUs {
		g.Status.GPUs[i].NVLinkDomain = ""
	}
	g.Status.Links = []convoy.GPULink{
		{A: 0, B: 1, Type: convoy.LinkNVLink, NVLinks: 4}, {A: 2, B: 3, Type: convoy.LinkNVLink, NVLinks: 4},
		{A: 0, B: 2, Type: convoy.LinkSYS}, {A: 0, B: 3, Type: convoy.LinkSYS}, {A: 1, B: 2, Type: convoy.LinkSYS}, {A: 1, B: 3, Type: convoy.LinkSYS},
	}
	n := newGPUNode(g)
	if diff := cmp.Diff([]string{"n/nvlink-0", "n/nvlink-0", "n/nvlink-1", "n/nvlink-1"}, n.topology.Domains); diff != "" {
		t.Errorf("NVLink domains from the link matrix (-want,+got):\n%s", diff)
	}
	if got, want := n.topology.Score(0, 1), planner.NVLinkScore+4; got != want {
		t.Errorf("score of an NVLink pair = %d, want %d", got, want)
	}
}

func TestPodHelpers(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	gpus := func(n string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{convoy.ResourceGPU: resourceMust(n)}}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers:     []corev1.Container{{Resources: gpus("2")}, {Resources: gpus("1")}},
		InitContainers: []corev1.Container{{Resources: gpus("4")}, {RestartPolicy: &always, Resources: gpus("1")}},
	}}
	if got := GPURequest(pod, convoy.ResourceGPU); got != 4 {
		t.Errorf("GPURequest() = %d, want 4 (the sidecar's 1 with the containers' 3)", got)
	}
	for in, want := range map[string]string{"0,1,2,3": "0,1,2,3", "3, 1": "1,3"} {
		s, ok := ParseGPUIndices(in)
		if got := FormatGPUIndices(s); !ok || got != want {
			t.Errorf("ParseGPUIndices(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "a", "1,64", "-1"} {
		if _, ok := ParseGPUIndices(bad); ok {
			t.Errorf("ParseGPUIndices(%q) succeeded", bad)
		}
	}
}

// TestTopology reads the level a pod asks by a topology level's name or node label, or a
// built-in level's name, and names the scheduler's levels for one it does not know.
func TestTopology(t *testing.T) {
	s := &State{opts: testOptions()}
	clique := planner.TopologyLevel(3, 4)
	for level, want := range map[string]planner.Level{
		"rack": planner.TopologyLevel(2, 4), "Zone": planner.TopologyLevel(0, 4), "clique": clique,
		"nvidia.com/gpu.clique": clique, convoy.LabelTopologyBlock: planner.TopologyLevel(1, 4),
		"node": planner.LevelNode, "kubernetes.io/hostname": planner.LevelNode, "nvlink": planner.LevelNVLink,
		"cluster": planner.LevelCluster, "": planner.LevelNone,
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{convoy.AnnotationTopologyLevel: level}}}
		if l, req, err := s.Topology(p); err != nil || l != want || req != (level != "") {
			t.Errorf("Topology(level %q, no mode) = %v %v %v, want %v required", level, l, req, err, want)
		}
		p.Annotations[convoy.AnnotationTopologyMode] = "preferred"
		if l, req, err := s.Topology(p); err != nil || l != want || req {
			t.Errorf("Topology(level %q preferred) = %v %v %v, want %v preferred", level, l, req, err, want)
		}
	}
	if got := s.opts.levelName(clique); got != "clique" {
		t.Errorf("levelName(clique) = %q", got)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{convoy.AnnotationTopologyLevel: "leaf"}}}
	want := `topology level "leaf" (spec.scheduling.topology.level) is none of the scheduler's levels: zone (topology.kubernetes.io/zone), block (convoy.dev/topology-block), rack (convoy.dev/topology-rack), clique (nvidia.com/gpu.clique), node, nvlink, cluster; name one of them or its node label`
	if _, _, err := s.Topology(p); err == nil || err.Error() != want {
		t.Errorf("Topology(level leaf) error = %v, want %s", err, want)
	}
}

// TestIncomplete holds the pods of a PodGroup not seen yet, or short of members, as Coscheduling
// would turn them away, activates them when it appears, and tells them why they wait.
func TestIncomplete(t *testing.T) {
	pods := []*corev1.Pod{member("ns", "job", 0, 1).Obj(), member("ns", "job", 1, 1).Obj(), member("other", "job", 2, 1).Obj()}
	h := newHarness(t, []*corev1.Node{fakeNode("a", "r1", 8)}, pods)
	// told waits until both of the gang's pods show msg in their PodScheduled condition.
	told := func(msg string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, tellDelay+5*time.Second, true, func(ctx context.Context) (bool, error) {
			for _, name := range []string{"job-0", "job-1"} {
				if p, err := h.cs.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{}); err != nil || !saysAlready(p, msg) {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			t.Errorf("the gang's pods were not told %q: %v", msg, err)
		}
	}
	want := "waiting for PodGroup ns/job: create it, or remove the pod's scheduling.x-k8s.io/pod-group label"
	if got := h.state.Incomplete(pods[0]); got != want {
		t.Errorf("Incomplete() before the PodGroup is seen = %q, want %q", got, want)
	}
	if got := h.activated.list(); len(got) != 0 {
		t.Errorf("activated %v before the PodGroup is seen, want none", got)
	}
	told(want)

	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 4}}
	h.state.SetPodGroup(pg)
	// The pods held for the PodGroup are activated once it is seen, the other namespace's not.
	got := h.activated.list()
	slices.Sort(got)
	if diff := cmp.Diff([]string{"ns/job-0", "ns/job-1"}, got); diff != "" {
		t.Errorf("activated when the PodGroup appeared (-want +got):\n%s", diff)
	}
	want = "waiting for 2 more pod(s) of gang ns/job (minMember 4)"
	if got := h.state.Incomplete(pods[0]); got != want {
		t.Errorf("Incomplete() = %q, want %q (two pods in the namespace)", got, want)
	}
	told(want)
	// A PodGroup seen before any pod waited for it activates no one when it changes.
	h.state.SetPodGroup(pg)
	if n := len(h.activated.list()); n != 2 {
		t.Errorf("%d activations after the PodGroup changed, want the 2 from its first sight", n)
	}
	if got := h.state.Incomplete(lone("ns", "solo", 1).Obj()); got != "" {
		t.Errorf("Incomplete() of a lone pod = %q, want \"\"", got)
	}
}

// TestLess orders the queue: priority, then older PodGroups, then a gang's pods in rank order.
func TestLess(t *testing.T) {
	h := newHarness(t, []*corev1.Node{fakeNode("a", "r1", 8)}, nil)
	old, young := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(2000, 0))
	for name, created := range map[string]metav1.Time{"old": old, "young": young} {
		h.state.SetPodGroup(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: created}})
	}
	queued := func(p *corev1.Pod) fwk.QueuedPodInfo {
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: pi}
	}
	pods := []*corev1.Pod{
		member("ns", "young", 1, 8).Obj(),
		member("ns", "old", 1, 8).Obj(),
		member("ns", "young", 0, 8).Priority(5).Obj(),
		member("ns", "old", 0, 8).Obj(),
		member("ns", "young", 2, 8).Obj(),
	}
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		if h.state.Less(queued(a), queued(b)) {
			return -1
		}
		if h.state.Less(queued(b), queued(a)) {
			return 1
		}
		return 0
	})
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	want := []string{"young-0", "old-0", "old-1", "young-1", "young-2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queue order (-want,+got):\n%s", diff)
	}
}

// gateAll says, for each pod, "<name>: through" or "<name>: <why Gate holds it>".
func gateAll(s *State, pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		ok, why := s.Gate(p)
		if ok {
			why = "through"
		}
		out = append(out, p.Name+": "+why)
	}
	return out
}

// TestLeaderFollowsPodEvents: the cached leader and member count of a gang change as its pods are
// bound and deleted.
func TestLeaderFollowsPodEvents(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	pods := []*corev1.Pod{member("ns", "job", 0, 1).Obj(), member("ns", "job", 1, 1).Obj(), member("ns", "job", 2, 1).Obj()}
	h := newHarness(t, nodes, pods, inventory("a", 8))
	h.state.SetPodGroup(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}})
	pending := pods
	eventually := func(what string, want ...string) {
		t.Helper()
		var got []string
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			got = gateAll(h.state, pending)
			return slices.Equal(got, want), nil
		}); err != nil {
			t.Errorf("%s: Gate() = %q, want %q", what, got, want)
		}
	}
	planned := "waiting for gang ns/job to be planned"
	eventually("job-0 leads", "job-0: through", "job-1: "+planned, "job-2: "+planned)

	bound := pods[0].DeepCopy()
	bound.Spec.NodeName = "a"
	if _, err := h.cs.CoreV1().Pods("ns").Update(context.Background(), bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pending = pods[1:]
	eventually("job-0 bound, job-1 leads", "job-1: through", "job-2: "+planned)

	if err := h.cs.CoreV1().Pods("ns").Delete(context.Background(), "job-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The gang lacks a member again.
	pending = pods[2:]
	eventually("job-1 deleted", "job-2: waiting for 1 more pod(s) of gang ns/job (minMember 3)")
}

// TestLeaderIsTheLowestRankThatJoins: a pod of a lower rank that joins a complete gang after its
// leader was found leads it from then on.
func TestLeaderIsTheLowestRankThatJoins(t *testing.T) {
	pods := []*corev1.Pod{member("ns", "job", 1, 1).Obj(), member("ns", "job", 2, 1).Obj()}
	h := newHarness(t, []*corev1.Node{fakeNode("a", "r1", 8)}, pods, inventory("a", 8))
	h.state.SetPodGroup(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}})
	planned := "waiting for gang ns/job to be planned"
	if diff := cmp.Diff([]string{"job-1: through", "job-2: " + planned}, gateAll(h.state, pods)); diff != "" {
		t.Errorf("before job-0 (-want,+got):\n%s", diff)
	}
	first := member("ns", "job", 0, 1).Obj()
	if _, err := h.cs.CoreV1().Pods("ns").Create(context.Background(), first, metav1CreateOptions); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return h.state.gangs.memberCount("ns", "job") == 3, nil
	}); err != nil {
		t.Fatal("the informer does not show job-0")
	}
	pods = append([]*corev1.Pod{first}, pods...)
	if diff := cmp.Diff([]string{"job-0: through", "job-1: " + planned, "job-2: " + planned}, gateAll(h.state, pods)); diff != "" {
		t.Errorf("after job-0 joined (-want,+got):\n%s", diff)
	}
}

// TestGPUNodeWakesWaitingPods activates the pod whose gang found no room when a GPUNode appears or
// reports more healthy or free GPUs, once for a burst of updates, and not on a heartbeat or for
// fewer GPUs.
func TestGPUNodeWakesWaitingPods(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	leader := member("ns", "job", 0, 8).Obj()
	sick := inventory("a", 8)
	sick.Status.GPUs[3].Health = convoy.GPUUnhealthy
	h := newHarness(t, nodes, []*corev1.Pod{leader}, sick)
	waitActivated := func(want []string) {
		t.Helper()
		// Longer than wakeDelay: an activation that is not wanted would have come by then.
		time.Sleep(wakeDelay + 500*time.Millisecond)
		if diff := cmp.Diff(want, h.activated.list(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("activated pods (-want +got):\n%s", diff)
		}
	}
	waitActivated(nil) // the GPUNode's first sight woke no one: no pod waited yet
	if _, status := h.state.PlanFor(context.Background(), leader, h.nodeInfos()); status.IsSuccess() {
		t.Fatal("an 8-GPU pod fits on a node with 7 healthy GPUs")
	}
	h.state.SetGPUNode(sick) // the node agent's heartbeat
	fewer := inventory("a", 8)
	fewer.Status.GPUs[3].Health, fewer.Status.GPUs[4].Health = convoy.GPUUnhealthy, convoy.GPUUnhealthy
	h.state.SetGPUNode(fewer)
	waitActivated(nil)

	h.state.SetGPUNode(sick)
	h.state.SetGPUNode(inventory("a", 8)) // GPUs 3 and 4 healthy again
	waitActivated([]string{"ns/job-0"})

	// Activated pods are forgotten until their gang again finds no room.
	h.state.SetGPUNode(inventory("b", 8))
	waitActivated([]string{"ns/job-0"})
	h.state.waiters.mu.Lock()
	n := len(h.state.waiters.waiting)
	h.state.waiters.mu.Unlock()
	if n != 0 {
		t.Errorf("%d pods wait for room after their activation, want 0", n)
	}
}

// TestUnreserveRetriesTheGang activates a gang's pending pods after its plan is dropped by an
// Unreserve (Permit turned a pod away), with a backoff that doubles on each retry.
func TestUnreserveRetriesTheGang(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	pods := []*corev1.Pod{member("ns", "job", 0, 4).Obj(), member("ns", "job", 1, 4).Obj()}
	h := newHarness(t, nodes, pods, inventory("a", 8))
	h.state.SetPodGroup(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}})
	// dropPlan plans the gang, reserves its leader and unreserves it; it returns what was
	// activated since, after wait.
	dropPlan := func(wait time.Duration) []string {
		t.Helper()
		st, status := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos())
		if !status.IsSuccess() {
			t.Fatal(status)
		}
		h.state.Reserve(pods[0], st.Slot.Node)
		before := len(h.activated.list())
		h.state.Unreserve(pods[0])
		time.Sleep(wait)
		got := h.activated.list()[before:]
		slices.Sort(got)
		return got
	}
	both := []string{"ns/job-0", "ns/job-1"}
	if diff := cmp.Diff(both, dropPlan(retryDelay+500*time.Millisecond)); diff != "" {
		t.Errorf("activated after the first drop (-want +got):\n%s", diff)
	}
	// The second retry waits twice as long.
	if got := dropPlan(retryDelay + 500*time.Millisecond); len(got) != 0 {
		t.Errorf("activated %v 1.5s after the second drop, want none before 2s", got)
	}
	before := len(h.activated.list())
	time.Sleep(retryDelay)
	got := h.activated.list()[before:]
	slices.Sort(got)
	if diff := cmp.Diff(both, got); diff != "" {
		t.Errorf("activated 2.5s after the second drop (-want +got):\n%s", diff)
	}
	if d := h.state.waiters.backoff.Get("ns/job"); d != 2*retryDelay {
		t.Errorf("the gang's retry delay after 2 retries = %v, want %v", d, 2*retryDelay)
	}
	// A bound gang starts over.
	st, _ := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos())
	st1, _ := h.state.PlanFor(context.Background(), pods[1], h.nodeInfos())
	h.state.Reserve(pods[0], st.Slot.Node)
	h.state.Reserve(pods[1], st1.Slot.Node)
	h.state.Bound(pods[0])
	h.state.Bound(pods[1])
	if d := h.state.waiters.backoff.Get("ns/job"); d != 0 {
		t.Errorf("the gang's retry delay after it was bound = %v, want 0 (reset)", d)
	}
}

// TestViewFollowsGPUNodesAndNodeOrder: a view reuses each node's cached base from the last view
// by position; a GPUNode change with the same snapshot, and nodes in another order, still show.
func TestViewFollowsGPUNodesAndNodeOrder(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	pod := member("ns", "job", 0, 8).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{pod}, inventory("a", 8), inventory("b", 8))
	plan := func(infos []fwk.NodeInfo) string {
		t.Helper()
		h.state.mu.Lock()
		h.state.book.remove("ns/job")
		h.state.mu.Unlock()
		st, status := h.state.PlanFor(context.Background(), pod, infos)
		if !status.IsSuccess() {
			return status.Message()
		}
		return st.Slot.Node
	}
	infos := h.nodeInfos()
	first := plan(infos)
	other := map[string]string{"a": "b", "b": "a"}[first]
	if other == "" {
		t.Fatalf("the gang went to %q, want node a or b", first)
	}
	// The node it went to loses a GPU, in its GPUNode only: the snapshot is the same.
	sick := inventory(first, 8)
	sick.Status.GPUs[0].Health = convoy.GPUUnhealthy
	h.state.SetGPUNode(sick)
	if got := plan(infos); got != other {
		t.Errorf("after node %s reported an unhealthy GPU: gang on %q, want node %s", first, got, other)
	}
	// Both lose one: it fits nowhere, whatever order the nodes come in.
	sick = inventory(other, 8)
	sick.Status.GPUs[7].Health = convoy.GPUUnhealthy
	h.state.SetGPUNode(sick)
	reversed := []fwk.NodeInfo{infos[1], infos[0]}
	for _, order := range [][]fwk.NodeInfo{infos, reversed} {
		if got := plan(order); !strings.Contains(got, "needs 1 pod(s) × 8 GPU(s)") {
			t.Errorf("with an unhealthy GPU on each node: %q, want the gang rejected", got)
		}
	}
	// The first node recovers: the gang goes there, in the reversed order too.
	h.state.SetGPUNode(inventory(first, 8))
	if got := plan(reversed); got != first {
		t.Errorf("after node %s recovered: gang on %q, want node %s", first, got, first)
	}
}

// TestTellWaitsForAQuietMoment: the siblings of a gang that does not fit are told why only once no
// pod has been reserved for tellQuiet, so that their status updates do not compete with Bindings.
func TestTellWaitsForAQuietMoment(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r2", 8)}
	pods := []*corev1.Pod{member("ns", "job", 0, 8).Annotation(convoy.AnnotationTopologyLevel, "rack").Obj(), member("ns", "job", 1, 8).Obj()}
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8))
	// Other gangs' pods are reserved every 200 ms until busyUntil.
	busyUntil := time.Now().Add(tellDelay + 3*time.Second)
	busy := lone("ns", "busy", 1).Obj()
	go func() {
		for time.Now().Before(busyUntil) {
			h.state.Reserve(busy, "a")
			time.Sleep(200 * time.Millisecond)
		}
	}()
	if _, status := h.state.PlanFor(context.Background(), pods[0], h.nodeInfos()); status.IsSuccess() {
		t.Fatal("the gang was placed, want it rejected: two 8-GPU pods in one rack of one node")
	}
	var toldAt time.Time
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Until(busyUntil)+10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := h.cs.CoreV1().Pods("ns").Get(ctx, "job-1", metav1.GetOptions{})
		if err == nil && saysAlready(p, "ns/job needs ") {
			toldAt = time.Now()
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the waiting sibling was never told why the gang does not fit: %v", err)
	}
	if toldAt.Before(busyUntil) {
		t.Errorf("the sibling was told %v before the scheduler stopped reserving pods, want after", busyUntil.Sub(toldAt))
	}
}

// TestClaimsOnAgreesWithClaims: the per-node index of plans' slots gives every node the claims the
// scan of all plans gives it, as plans are made, reserved, dropped and bound.
func TestClaimsOnAgreesWithClaims(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r2", 8)}
	var pods []*corev1.Pod
	for i, prio := range []int32{1, 5, 5, 10} {
		for r := range 2 {
			pods = append(pods, member("ns", "g"+itoa(i), r, 2).Priority(prio).Obj())
		}
	}
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8), inventory("c", 8))
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		h.state.mu.Lock()
		defer h.state.mu.Unlock()
		for _, probe := range []*gang{{key: "ns/g0", priority: 1}, {key: "ns/g1", priority: 5}, {key: "ns/other", priority: 5}, {key: "ns/other", priority: 0}, {key: "ns/g3", priority: 10}} {
			all := h.state.book.claims(probe)
			for _, n := range []string{"a", "b", "c"} {
				got, want := h.state.book.claimsOn(probe, n), all[n]
				key := func(c claim) string { return fmt.Sprintf("%v/%v", c.gpus, c.indexed) }
				g, w := slices.Sorted(slices.Values(mapSlice(got, key))), slices.Sorted(slices.Values(mapSlice(want, key)))
				if !slices.Equal(g, w) {
					t.Errorf("%s: claims on %s for %s (priority %d) = %v, want %v", when, n, probe.key, probe.priority, g, w)
				}
			}
		}
	}
	for i := 0; i < len(pods); i += 2 {
		if _, status := h.state.PlanFor(ctx, pods[i], h.nodeInfos()); !status.IsSuccess() {
			t.Fatalf("gang %s: %v", pods[i].Name, status)
		}
	}
	check("four plans")
	st, _ := h.state.PlanFor(ctx, pods[2], h.nodeInfos())
	h.state.Reserve(pods[2], st.Slot.Node)
	check("a pod reserved")
	h.state.Unreserve(pods[2])
	check("a plan dropped")
	for _, p := range pods[6:] {
		st, _ := h.state.PlanFor(ctx, p, h.nodeInfos())
		h.state.Reserve(p, st.Slot.Node)
		h.state.Bound(p)
	}
	check("a gang bound")
	h.state.mu.Lock()
	n := len(h.state.book.onNode["a"]) + len(h.state.book.onNode["b"]) + len(h.state.book.onNode["c"])
	slots := 0
	for _, p := range h.state.book.plans {
		slots += len(p.slots)
	}
	h.state.mu.Unlock()
	if n != slots {
		t.Errorf("the index holds %d slots, the plans %d", n, slots)
	}
}

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, x := range in {
		out = append(out, f(x))
	}
	return out
}

// TestDeletedPreemptorGivesItsGPUsBack: a high-priority gang preempts a low gang and is deleted
// (its job cancelled) while the victim still terminates. Its plan goes with it: once the victim is
// gone, a gang of middle priority gets the node the deleted gang had planned on.
func TestDeletedPreemptorGivesItsGPUsBack(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	victim := member("ns", "low", 0, 8).Priority(1).Node("a").Obj()
	urgent := member("ns", "urgent", 0, 8).Priority(10).Obj()
	mid := member("ns", "mid", 0, 8).Priority(5).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{victim, urgent, mid}, inventory("a", 8))
	ctx := context.Background()

	if _, status := h.state.PreemptFor(ctx, urgent, h.nodeInfos(), PreemptOptions{Wait: time.Minute}); !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v", status)
	}
	h.deletePod(urgent)
	h.deletePod(victim)
	h.setPods()

	st, status := h.state.PlanFor(ctx, mid, h.nodeInfos())
	if got := slotOf(t, st, status); got != "a:0,1,2,3,4,5,6,7" {
		t.Errorf("slot of the middle-priority gang = %s, want a:0,1,2,3,4,5,6,7", got)
	}
}

// TestDeletedGangIsForgotten: what the State remembers of a gang (its plan, that it did not fit,
// that preemption could not help) goes when its last pod is deleted, and the gauge of gangs
// waiting for room counts it no more.
func TestDeletedGangIsForgotten(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	tooBig := []*corev1.Pod{member("ns", "too-big", 0, 8).Obj(), member("ns", "too-big", 1, 8).Obj()}
	fits := []*corev1.Pod{member("ns", "fits", 0, 4).Obj(), member("ns", "fits", 1, 4).Obj()}
	h := newHarness(t, nodes, append(slices.Clone(tooBig), fits...), inventory("a", 8))
	ctx := context.Background()
	m := meter{t}
	waitingBefore := m.gauge(gangsWaitingForRoom)
	plannedBefore := m.gauge(gangsPlanned)

	if _, status := h.state.PlanFor(ctx, tooBig[0], h.nodeInfos()); status.IsSuccess() {
		t.Fatal("a gang of two 8-GPU pods fits one 8-GPU node")
	}
	if _, status := h.state.PreemptFor(ctx, tooBig[0], h.nodeInfos(), PreemptOptions{}); status.IsSuccess() {
		t.Fatal("preemption made room where there is nothing to preempt")
	}
	if got := m.gauge(gangsWaitingForRoom) - waitingBefore; got != 1 {
		t.Errorf("gangs_waiting_for_room rose by %v for the gang that does not fit, want 1", got)
	}
	st, status := h.state.PlanFor(ctx, fits[0], h.nodeInfos())
	slotOf(t, st, status)
	if got := m.gauge(gangsPlanned) - plannedBefore; got != 1 {
		t.Errorf("gangs_planned rose by %v for the planned gang, want 1", got)
	}

	// One pod of the unplaced gang goes: the gang is still there.
	h.deletePod(tooBig[0])
	if got := m.gauge(gangsWaitingForRoom) - waitingBefore; got != 1 {
		t.Errorf("gangs_waiting_for_room rose by %v with a pod of the gang left, want 1", got)
	}
	h.deletePod(tooBig[1])
	for _, p := range fits {
		h.deletePod(p)
	}
	if got := m.gauge(gangsWaitingForRoom) - waitingBefore; got != 0 {
		t.Errorf("gangs_waiting_for_room rose by %v once the gang was deleted, want 0", got)
	}
	if got := m.gauge(gangsPlanned) - plannedBefore; got != 0 {
		t.Errorf("gangs_planned rose by %v once the planned gang was deleted, want 0", got)
	}
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	if len(h.state.book.plans)+len(h.state.verdicts.m)+len(h.state.preemptions.cannot.m)+len(h.state.book.onNode) != 0 {
		t.Errorf("the State still holds deleted gangs: plans %v, verdicts %v, preemption verdicts %v, slots on %v",
			slices.Collect(maps.Keys(h.state.book.plans)), slices.Collect(maps.Keys(h.state.verdicts.m)),
			slices.Collect(maps.Keys(h.state.preemptions.cannot.m)), slices.Collect(maps.Keys(h.state.book.onNode)))
	}
}

// TestPreemptionFreesTheVictimsCPUToo: the urgent pod asks 90 CPUs beside its 8 GPUs. On node a,
// the low gang that holds the GPUs holds the CPUs too, and evicting it frees both. On node b,
// evicting the 4-GPU victim would free GPUs enough, and is cheaper, but a pod of higher priority
// keeps 80 of the node's 96 CPUs.
func TestPreemptionFreesTheVictimsCPUToo(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	cpus := func(n string) map[corev1.ResourceName]string {
		return map[corev1.ResourceName]string{corev1.ResourceCPU: n}
	}
	pods := []*corev1.Pod{
		member("ns", "low", 0, 8).Priority(1).Req(cpus("90")).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj(),
		member("ns", "small", 0, 4).Priority(1).Req(cpus("10")).Node("b").Annotation(AnnotationGPUIndices, "0,1,2,3").Obj(),
		lone("ns", "hog", 0).Priority(100).Req(cpus("80")).Node("b").Obj(),
	}
	urgent := member("ns", "urgent", 0, 8).Priority(10).Req(cpus("90")).Obj()
	h := newHarness(t, nodes, append(pods, urgent), inventory("a", 8), inventory("b", 8))
	v, status := h.state.PreemptFor(context.Background(), urgent, h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute})
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v", status)
	}
	if diff := cmp.Diff([]string{"ns/low"}, v.Gangs); diff != "" {
		t.Errorf("victims (-want,+got):\n%s", diff)
	}
	if v.Node != "a" {
		t.Errorf("nominated node = %q, want a", v.Node)
	}
}

// TestPreemptionMakesRoomForAMasterThatAsksMoreCPU evicts the lower-priority gangs that hold two
// nodes for a gang whose master asks more CPU than its workers: counted at the master's CPU, even
// both nodes emptied would not hold it. With a gang on each node, neither alone makes room.
func TestPreemptionMakesRoomForAMasterThatAsksMoreCPU(t *testing.T) {
	cpus := func(n string) map[corev1.ResourceName]string {
		return map[corev1.ResourceName]string{corev1.ResourceCPU: n}
	}
	for name, tc := range map[string]struct {
		low         []*corev1.Pod
		wantVictims []string
	}{
		"one gang over both nodes": {
			low: []*corev1.Pod{
				member("ns", "low", 0, 8).Priority(1).Req(cpus("10")).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj(),
				member("ns", "low", 1, 8).Priority(1).Req(cpus("10")).Node("b").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj(),
			},
			wantVictims: []string{"ns/low"},
		},
		"a gang on each node": {
			low: []*corev1.Pod{
				member("ns", "low-a", 0, 8).Priority(1).Req(cpus("10")).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj(),
				member("ns", "low-b", 0, 8).Priority(1).Req(cpus("10")).Node("b").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj(),
			},
			wantVictims: []string{"ns/low-a", "ns/low-b"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
			urgent := []*corev1.Pod{member("ns", "urgent", 0, 4).Priority(10).Req(cpus("60")).Obj()}
			for r := 1; r < 4; r++ {
				urgent = append(urgent, member("ns", "urgent", r, 4).Priority(10).Req(cpus("30")).Obj())
			}
			h := newHarness(t, nodes, append(tc.low, urgent...), inventory("a", 8), inventory("b", 8))
			v, status := h.state.PreemptFor(context.Background(), urgent[0], h.nodeInfos(), PreemptOptions{Wait: time.Minute})
			if !status.IsSuccess() {
				t.Fatalf("PreemptFor() = %v", status)
			}
			if diff := cmp.Diff(tc.wantVictims, v.Gangs); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestLimitsMaxPodsWithout: the pods gone give back their CPU, memory and pod slots.
func TestLimitsMaxPodsWithout(t *testing.T) {
	node := st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: "96", corev1.ResourceMemory: "1000Gi", corev1.ResourcePods: "3"}).Obj()
	a := st.MakePod().Name("a").UID("a").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "40", corev1.ResourceMemory: "400Gi"}).Obj()
	b := st.MakePod().Name("b").UID("b").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "40", corev1.ResourceMemory: "100Gi"}).Obj()
	ni := framework.NewNodeInfo(a, b)
	ni.SetNode(node)
	ls := LimitsOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("30"), corev1.ResourceMemory: resource.MustParse("300Gi")}, convoy.ResourceGPU)
	for _, tc := range []struct {
		gone []*corev1.Pod
		want int
	}{
		{nil, -1},                // 16 CPUs free
		{[]*corev1.Pod{b}, 1},    // 56 CPUs, 600Gi free
		{[]*corev1.Pod{a}, 1},    // 56 CPUs, 900Gi free
		{[]*corev1.Pod{a, b}, 3}, // 96 CPUs, 1000Gi, 3 pod slots
	} {
		if got := ls.MaxPodsWithout(ni, tc.gone); got != tc.want {
			t.Errorf("MaxPodsWithout(%v) = %d, want %d", mapSlice(tc.gone, func(p *corev1.Pod) string { return p.Name }), got, tc.want)
		}
	}
}

// TestPreemptionWaitsForPodsAlreadyLeaving: the low gang on node a terminates already (its job
// was evicted, or a scheduler before this one preempted it). The urgent gang waits for it and
// evicts nothing, though evicting the low gang on b would make room at once.
func TestPreemptionWaitsForPodsAlreadyLeaving(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	leaving := terminating(member("ns", "leaving", 0, 8).Priority(1).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj())
	other := member("ns", "other", 0, 8).Priority(1).Node("b").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj()
	urgent := member("ns", "urgent", 0, 8).Priority(10).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{leaving, other, urgent}, inventory("a", 8), inventory("b", 8))
	ctx := context.Background()

	if _, status := h.state.PlanFor(ctx, urgent, h.nodeInfos()); status.IsSuccess() {
		t.Fatal("the urgent gang fits while the leaving pod holds node a's GPUs")
	}
	v, status := h.state.PreemptFor(ctx, urgent, h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute})
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v", status)
	}
	if len(v.Pods) != 0 || v.Node != "a" {
		t.Errorf("PreemptFor() evicts %v and nominates %q, want nothing evicted and node a", v.Gangs, v.Node)
	}
	const waits = "ns/urgent waits for 1 terminating pod(s) of lower priority to leave the nodes planned for it"
	if v.Message != waits {
		t.Errorf("PreemptFor() tells the pods %q, want %q", v.Message, waits)
	}
	if _, status := h.state.PlanFor(ctx, urgent, h.nodeInfos()); status.Message() != waits {
		t.Errorf("PlanFor() while the pod leaves = %v %q, want it to wait", status.Code(), status.Message())
	}
	h.deletePod(leaving)
	h.setPods(other)
	st, status := h.state.PlanFor(ctx, urgent, h.nodeInfos())
	if got := slotOf(t, st, status); got != "a:0,1,2,3,4,5,6,7" {
		t.Errorf("slot once the pod left = %s, want a:0,1,2,3,4,5,6,7", got)
	}
}

// TestPreemptionWaitsWhenOnlyLeavingPodsHoldTheGPUs: no running pod of lower priority holds GPUs,
// but one that terminates does; the gang waits for it, told so, rather than hear that preemption
// cannot help.
func TestPreemptionWaitsWhenOnlyLeavingPodsHoldTheGPUs(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	leaving := terminating(member("ns", "leaving", 0, 8).Priority(1).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj())
	urgent := member("ns", "urgent", 0, 8).Priority(10).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{leaving, urgent}, inventory("a", 8))
	v, status := h.state.PreemptFor(context.Background(), urgent, h.nodeInfos(), PreemptOptions{Wait: time.Minute})
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v", status)
	}
	if len(v.Pods) != 0 || v.Node != "a" {
		t.Errorf("PreemptFor() evicts %v and nominates %q, want nothing evicted and node a", v.Gangs, v.Node)
	}
}

// TestPreemptionEvictsOneOfTwoJobsSharingANode: two low gangs share node a, 4 GPUs and 45 CPUs
// each; the urgent pod asks 4 GPUs and 45 CPUs. Evicting one of them frees both; the other stays.
func TestPreemptionEvictsOneOfTwoJobsSharingANode(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	cpus := map[corev1.ResourceName]string{corev1.ResourceCPU: "45"}
	pods := []*corev1.Pod{
		member("ns", "low-a", 0, 4).Priority(1).Req(cpus).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3").Obj(),
		member("ns", "low-b", 0, 4).Priority(1).Req(cpus).Node("a").Annotation(AnnotationGPUIndices, "4,5,6,7").Obj(),
	}
	urgent := member("ns", "urgent", 0, 4).Priority(10).Req(cpus).Obj()
	h := newHarness(t, nodes, append(pods, urgent), inventory("a", 8))
	v, status := h.state.PreemptFor(context.Background(), urgent, h.nodeInfos(), PreemptOptions{Wait: time.Minute})
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v", status)
	}
	if len(v.Gangs) != 1 || v.Node != "a" {
		t.Errorf("PreemptFor() evicts %v and nominates %q, want one of the two low gangs and node a", v.Gangs, v.Node)
	}
	if want := "ns/urgent waits for the pods it preempted to terminate"; v.Message != want {
		t.Errorf("PreemptFor() tells the pods %q, want %q", v.Message, want)
	}
}

// TestPreemptionEvictsAPodWithoutGPUsThatHoldsTheCPU: node a's GPUs are free, but a low-priority
// CPU job holds 50 of its 96 CPUs; the urgent 8-GPU pod asks 90. The CPU job is evicted, as
// upstream DefaultPreemption would evict it, when lone pods may be preempted.
func TestPreemptionEvictsAPodWithoutGPUsThatHoldsTheCPU(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	hog := lone("ns", "cpu-batch", 0).Priority(1).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "50"}).Node("a").Obj()
	urgent := member("ns", "urgent", 0, 8).Priority(10).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "90"}).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{hog, urgent}, inventory("a", 8))
	ctx := context.Background()

	if _, status := h.state.PreemptFor(ctx, urgent, h.nodeInfos(), PreemptOptions{Wait: time.Minute}); status.IsSuccess() {
		t.Errorf("PreemptFor() without preemptLonePods succeeds, want the lone CPU job kept")
	}
	h.state.bump()
	v, status := h.state.PreemptFor(ctx, urgent, h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute})
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v", status)
	}
	if diff := cmp.Diff([]string{"ns/cpu-batch (pod)"}, v.Gangs); diff != "" || v.LonePods != 1 || v.Node != "a" {
		t.Errorf("PreemptFor() evicts %v (%d lone pods) for node %q, want the CPU job for node a: %s", v.Gangs, v.LonePods, v.Node, diff)
	}
}

// TestUnplaceableGangIsToldOfGPUsOnTheirWay: a gang of no higher priority does not fit while a pod
// that terminates holds the GPUs; it is told so.
func TestUnplaceableGangIsToldOfGPUsOnTheirWay(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	leaving := terminating(member("ns", "leaving", 0, 8).Priority(10).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj())
	next := member("ns", "next", 0, 8).Priority(1).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{leaving, next}, inventory("a", 8))
	_, status := h.state.PlanFor(context.Background(), next, h.nodeInfos())
	want := "ns/next needs 1 pod(s) × 8 GPU(s); the cluster has room for 0 pods (0 free GPUs on 0 nodes); 8 GPU(s) on 1 node(s) are held by pods that terminate, and the gang is planned again when they are gone"
	if status.IsSuccess() || status.Message() != want {
		t.Errorf("PlanFor() = %v %q, want %q", status.Code(), status.Message(), want)
	}
}

// terminating marks p deleted, held by a finalizer: a pod that terminates.
func terminating(p *corev1.Pod) *corev1.Pod {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	p.Finalizers = []string{"test/hold"}
	return p
}
