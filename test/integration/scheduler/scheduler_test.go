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

package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

const bindTimeout = 30 * time.Second

// occupy binds a pod holding gpus GPUs straight to a node, as a pod of another scheduler would be.
func occupy(t *testing.T, c client.Client, ns, node string, gpus int) *corev1.Pod {
	t.Helper()
	return runOn(t, c, makePod(ns, "occupant-"+node, gpus), node)
}

// runOn creates p bound straight to node, as a pod of another scheduler would be.
func runOn(t *testing.T, c client.Client, p *corev1.Pod, node string) *corev1.Pod {
	t.Helper()
	p.Spec.SchedulerName = "other-scheduler"
	p.Spec.NodeName = node
	if err := c.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// occupyWithCPU binds a pod named name, holding gpus GPUs and cpu CPUs, straight to node.
func occupyWithCPU(t *testing.T, c client.Client, ns, name, node string, gpus int, cpu string) {
	t.Helper()
	p := makePod(ns, name, gpus)
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	runOn(t, c, p, node)
}

func nodeLabel(t *testing.T, c client.Client, node, key string) string {
	t.Helper()
	var n corev1.Node
	if err := c.Get(t.Context(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	return n.Labels[key]
}

// TestGangLandsInOneRack: a 4×8-GPU gang that asks for one rack lands in the one rack that can
// hold it, all four pods bound, each with the GPU indices the scheduler chose.
func TestGangLandsInOneRack(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2, NodesPerRack: 4, GPUsPerNode: 8})
	// One GPU taken in the first rack: it can hold three 8-GPU pods, not four.
	occupy(t, e.c.Client, ns, specs[0].Name, 1)

	gang := makeGang(ns, "llama", 4, 8).Topology(convoy.TopologyRack, convoy.TopologyRequired).create(t, e.c.Client)
	pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)

	var racks, nodes, indices []string
	for _, p := range pods {
		racks = append(racks, nodeLabel(t, e.c.Client, p.Spec.NodeName, framework.LabelRack))
		nodes = append(nodes, p.Spec.NodeName)
		indices = append(indices, p.Annotations[convoy.AnnotationGPUIndices])
	}
	if diff := cmp.Diff([]string{"rack-0-0-1", "rack-0-0-1", "rack-0-0-1", "rack-0-0-1"}, racks); diff != "" {
		t.Errorf("racks of the gang's pods (-want,+got):\n%s", diff)
	}
	if slices.Sort(nodes); len(slices.Compact(nodes)) != 4 {
		t.Errorf("the gang's pods share nodes: %v", nodes)
	}
	if diff := cmp.Diff(slices.Repeat([]string{"0,1,2,3,4,5,6,7"}, 4), indices); diff != "" {
		t.Errorf("%s annotations (-want,+got):\n%s", convoy.AnnotationGPUIndices, diff)
	}
}

// TestSmallJobLeavesTheBigNodeToTheJobThatNeedsIt: of two nodes of 8 free GPUs in one rack, one of
// 128 CPUs and one of 16, a one-node job asking 8 CPUs takes the node its CPUs fill most, so that a
// later job asking 100 CPUs beside its 8 GPUs still finds the big node free.
func TestSmallJobLeavesTheBigNodeToTheJobThatNeedsIt(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := []framework.NodeSpec{
		// The big node comes first by name, as the planner's last tie-break orders nodes.
		{Name: "cpu-big", GPUs: 8, CPU: "128", Memory: "1Ti", Zone: "zone-0", Block: "block-0", Rack: "rack-0"},
		{Name: "cpu-small", GPUs: 8, CPU: "16", Memory: "256Gi", Zone: "zone-0", Block: "block-0", Rack: "rack-0"},
	}
	e.nodes(t, specs, gpuNodesFor(specs)...)

	// A job asking more CPUs than any node has is told so, not only that GPUs are short.
	huge := makeGang(ns, "huge", 1, 8).CPU("200").create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, huge.names(), ns+"/huge needs 1 pod(s) × 8 GPU(s); the cluster has room for 0 pods (16 free GPUs on 2 nodes); "+
		"2 nodes have free GPUs but no room beside them for one more pod (CPU, memory, pod slots or the pods' spread)")
	if err := e.c.Client.Delete(t.Context(), huge.pods[0]); err != nil {
		t.Fatal(err)
	}

	wantBoundOn(t, e.c.Client, makeGang(ns, "small", 1, 8).CPU("8").create(t, e.c.Client), "cpu-small", "the 8-CPU job")
	wantBoundOn(t, e.c.Client, makeGang(ns, "big", 1, 8).CPU("100").create(t, e.c.Client), "cpu-big", "the 100-CPU job")
}

// TestSmallJobTakesTheFullestRackBeforeTheFullestCPU: two racks of two like nodes. In rack-0 one
// node is full and the other has 4 free GPUs; in rack-1 one node has 4 free GPUs beside four 1-GPU
// pods that hold more of its CPU, and the other is free. A 4-GPU job takes rack-0's node, so that
// rack-1 keeps its 12 free GPUs, and a later gang of 3 × 4 GPUs that requires one rack binds there.
// How full a node's CPU is, between nodes of one size, counts the pods already there: it comes
// after the rack.
func TestSmallJobTakesTheFullestRackBeforeTheFullestCPU(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := []framework.NodeSpec{
		{Name: "r0-a", GPUs: 8, CPU: "96", Zone: "zone-0", Block: "block-0", Rack: "rack-0"},
		{Name: "r0-b", GPUs: 8, CPU: "96", Zone: "zone-0", Block: "block-0", Rack: "rack-0"},
		{Name: "r1-a", GPUs: 8, CPU: "96", Zone: "zone-0", Block: "block-0", Rack: "rack-1"},
		{Name: "r1-b", GPUs: 8, CPU: "96", Zone: "zone-0", Block: "block-0", Rack: "rack-1"},
	}
	e.nodes(t, specs, gpuNodesFor(specs)...)
	occupyWithCPU(t, e.c.Client, ns, "full", "r0-a", 8, "8")
	occupyWithCPU(t, e.c.Client, ns, "half", "r0-b", 4, "4")
	for i := range 4 {
		occupyWithCPU(t, e.c.Client, ns, fmt.Sprintf("one-%d", i), "r1-a", 1, "8")
	}

	wantBoundOn(t, e.c.Client, makeGang(ns, "four", 1, 4).CPU("4").create(t, e.c.Client), "r0-b", "the 4-GPU job")
	gang := makeGang(ns, "rack", 3, 4).Topology(convoy.TopologyRack, convoy.TopologyRequired).create(t, e.c.Client)
	for _, p := range waitBound(t, e.c.Client, ns, gang.names(), bindTimeout) {
		if !strings.HasPrefix(p.Spec.NodeName, "r1-") {
			t.Errorf("%s is on %s, want a node of rack-1", p.Name, p.Spec.NodeName)
		}
	}
}

// TestSmallJobTakesTheTightestGPUsNotTheLastCPU: node a has 4 free GPUs but 16 free CPUs, node b
// 2 free GPUs and 86 CPUs. A 1-GPU, 10-CPU job takes b, the best fit in GPUs, though a's CPU holds
// fewer such jobs: on a it would leave 3 GPUs beside 6 CPUs, and a later 4-GPU, 16-CPU job would
// find no node.
func TestSmallJobTakesTheTightestGPUsNotTheLastCPU(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := []framework.NodeSpec{
		{Name: "gpu-a", GPUs: 8, CPU: "96", Zone: "zone-0", Block: "block-0", Rack: "rack-0"},
		{Name: "gpu-b", GPUs: 8, CPU: "96", Zone: "zone-0", Block: "block-0", Rack: "rack-0"},
	}
	e.nodes(t, specs, gpuNodesFor(specs)...)
	for node, use := range map[string]struct {
		gpus int
		cpu  string
	}{"gpu-a": {4, "80"}, "gpu-b": {6, "10"}} {
		occupyWithCPU(t, e.c.Client, ns, "occupant-"+node, node, use.gpus, use.cpu)
	}

	wantBoundOn(t, e.c.Client, makeGang(ns, "small", 1, 1).CPU("10").create(t, e.c.Client), "gpu-b", "the 1-GPU job")
	wantBoundOn(t, e.c.Client, makeGang(ns, "four", 1, 4).CPU("16").create(t, e.c.Client), "gpu-a", "the 4-GPU job")
}

// TestGangTakesTheRackWhereItStrandsNoGPUs: rack a has two free nodes, rack b four, one of them
// half used. A gang of three 4-GPU pods fits either rack on two nodes. It goes to b, where its
// third pod fills the half-used node, and not to a, the fuller rack, where that pod would open a
// free node and leave 4 GPUs no 8-GPU pod can use.
func TestGangTakesTheRackWhereItStrandsNoGPUs(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	var specs []framework.NodeSpec
	for _, n := range []string{"gpu-a0", "gpu-a1"} {
		specs = append(specs, framework.NodeSpec{Name: n, GPUs: 8, Zone: "zone-0", Block: "block-0", Rack: "rack-a"})
	}
	for _, n := range []string{"gpu-b0", "gpu-b1", "gpu-b2", "gpu-b3"} {
		specs = append(specs, framework.NodeSpec{Name: n, GPUs: 8, Zone: "zone-0", Block: "block-0", Rack: "rack-b"})
	}
	e.nodes(t, specs, gpuNodesFor(specs)...)
	runOn(t, e.c.Client, makePod(ns, "occupant", 4), "gpu-b3")

	three := makeGang(ns, "three", 3, 4).create(t, e.c.Client)
	got := perNode(waitBound(t, e.c.Client, ns, three.names(), bindTimeout))
	if got["gpu-b3"] != 1 || got["gpu-a0"]+got["gpu-a1"] != 0 {
		t.Errorf("the 3×4 gang's pods per node: %v, want one on the half-used gpu-b3 and none in rack-a", got)
	}
}

// TestInfeasibleGangBindsNothing: a gang bigger than any rack binds no pod, and every pod says
// why in its PodScheduled condition.
func TestInfeasibleGangBindsNothing(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2, NodesPerRack: 2, GPUsPerNode: 8})

	gang := makeGang(ns, "too-big", 3, 8).Topology(convoy.TopologyRack, convoy.TopologyRequired).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, gang.names(),
		ns+"/too-big needs 3 pod(s) × 8 GPU(s) in one rack; the best rack (zone-0/block-0-0/rack-0-0-0) has room for 2 pods (16 free GPUs)")
}

// TestHighPriorityGangPreemptsWholeLowerGangs: a high-priority gang that does not fit evicts every
// pod of the one lower-priority gang whose eviction makes room, and nothing else.
func TestHighPriorityGangPreemptsWholeLowerGangs(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 4, GPUsPerNode: 8})

	// Fill the cluster: two 4-GPU workers share a node, two 8-GPU workers take two, and a
	// high-priority 8-GPU job the last.
	small := makeGang(ns, "low-small", 2, 4).Priority(lowPriority).create(t, e.c.Client)
	waitBound(t, e.c.Client, ns, small.names(), bindTimeout)
	big := makeGang(ns, "low-big", 2, 8).Priority(lowPriority).create(t, e.c.Client)
	bigPods := waitBound(t, e.c.Client, ns, big.names(), bindTimeout)
	peer := makeGang(ns, "high-peer", 1, 8).Priority(highPriority).create(t, e.c.Client)
	waitBound(t, e.c.Client, ns, peer.names(), bindTimeout)
	before := map[string]*corev1.Pod{}
	for _, p := range get(t, e.c.Client, ns, append(small.names(), peer.names()...)) {
		before[p.Name] = p
	}

	// Watch deletions to see each victim's last state.
	w, err := e.c.Clientset.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	deleted := map[string]*corev1.Pod{}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Deleted {
				mu.Lock()
				deleted[p.Name] = p
				mu.Unlock()
			}
		}
	}()

	metricsBefore := e.metrics(t)
	urgent := makeGang(ns, "urgent", 2, 8).Priority(highPriority).create(t, e.c.Client)
	pods := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)

	var got, want []string
	for _, p := range pods {
		got = append(got, p.Spec.NodeName)
	}
	for _, p := range bigPods {
		want = append(want, p.Spec.NodeName)
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes of the preemptor (-the victim's nodes,+got):\n%s", diff)
	}
	util.Eventually(t, 200*time.Millisecond, 10*time.Second, "both pods of low-big to be deleted", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return deleted[big.pods[0].Name] != nil && deleted[big.pods[1].Name] != nil, describe(get(t, e.c.Client, ns, big.names()))
	})
	mu.Lock()
	for _, name := range big.names() {
		if !hasDisruptionTarget(deleted[name]) {
			t.Errorf("victim %s was deleted without a DisruptionTarget condition: %+v", name, deleted[name].Status.Conditions)
		}
	}
	mu.Unlock()
	for _, p := range get(t, e.c.Client, ns, append(small.names(), peer.names()...)) {
		if p == nil || p.UID != before[p.Name].UID || p.DeletionTimestamp != nil {
			t.Errorf("pod %s was not a victim but is gone or going", before[p.Name].Name)
		}
	}

	// The scheduler's metrics count one preemption, of one whole gang of two pods.
	after := e.metrics(t)
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"convoy_scheduler_gang_preemptions_total", nil, 1},
		{"convoy_scheduler_preemption_victims_total", map[string]string{"kind": "gang"}, 1},
		{"convoy_scheduler_preemption_victims_total", map[string]string{"kind": "pod"}, 0},
		{"convoy_scheduler_preemption_victim_pods_total", nil, 2},
	} {
		if got := after.value(m.name, m.labels) - metricsBefore.value(m.name, m.labels); got != m.want {
			t.Errorf("%s rose by %v, want %v", series(m.name, m.labels), got, m.want)
		}
	}
}

// TestPreemptionEvictsAGangOfSmallPods: the only node is full with a low-priority gang of eight
// 1-GPU pods; a high-priority 8-GPU pod evicts the whole gang (no one of its pods frees room
// alone) and binds there.
func TestPreemptionEvictsAGangOfSmallPods(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})

	small := makeGang(ns, "low-small", 8, 1).Priority(lowPriority).create(t, e.c.Client)
	victims := waitBound(t, e.c.Client, ns, small.names(), bindTimeout)
	urgent := makeGang(ns, "urgent", 1, 8).Priority(highPriority).create(t, e.c.Client)
	if p := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)[0]; p.Spec.NodeName != specs[0].Name {
		t.Errorf("the urgent pod went to %s, want %s", p.Spec.NodeName, specs[0].Name)
	}
	for i, p := range get(t, e.c.Client, ns, small.names()) {
		if p != nil && p.UID == victims[i].UID && p.DeletionTimestamp == nil {
			t.Errorf("pod %s of the low gang was not evicted", p.Name)
		}
	}
}

// TestPreemptNeverClassEvictsNothing: the only node is full with a low-priority gang; a gang of a
// higher PriorityClass with preemptionPolicy Never waits for free GPUs, saying why, and evicts
// nothing.
func TestPreemptNeverClassEvictsNothing(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})
	const queueFirst = "convoy-test-high-never"
	never := corev1.PreemptNever
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: queueFirst}, Value: 1000, PreemptionPolicy: &never}
	if err := e.c.Client.Create(t.Context(), pc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	low := makeGang(ns, "low", 1, 8).Priority(lowPriority).create(t, e.c.Client)
	running := waitBound(t, e.c.Client, ns, low.names(), bindTimeout)
	urgent := makeGang(ns, "urgent", 1, 8).Priority(queueFirst).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, urgent.names(),
		"priority class "+queueFirst+" has preemptionPolicy Never: the gang waits for free GPUs and preempts nothing")
	for i, p := range get(t, e.c.Client, ns, low.names()) {
		if p == nil || p.UID != running[i].UID || p.DeletionTimestamp != nil {
			t.Errorf("pod %s of the low gang was evicted", running[i].Name)
		}
	}
}

// TestPreemptionFreesTheCPUItsVictimsHeld: on a 96-CPU node, a low-priority gang's 8-GPU, 90-CPU
// pod holds both; a high-priority gang of the same shape evicts it and binds there.
func TestPreemptionFreesTheCPUItsVictimsHeld(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})

	low := makeGang(ns, "low", 1, 8).CPU("90").Priority(lowPriority).create(t, e.c.Client)
	victims := waitBound(t, e.c.Client, ns, low.names(), bindTimeout)
	urgent := makeGang(ns, "urgent", 1, 8).CPU("90").Priority(highPriority).create(t, e.c.Client)
	if p := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)[0]; p.Spec.NodeName != specs[0].Name {
		t.Errorf("the urgent pod went to %s, want %s", p.Spec.NodeName, specs[0].Name)
	}
	if p := get(t, e.c.Client, ns, low.names())[0]; p != nil && p.UID == victims[0].UID && p.DeletionTimestamp == nil {
		t.Errorf("the low gang's pod was not evicted")
	}
}

// TestPreemptionEvictsOneOfTwoJobsSharingANode: two low-priority jobs share a 96-CPU node, 4 GPUs
// and 45 CPUs each. A high-priority job of the same shape evicts one of them, not both.
func TestPreemptionEvictsOneOfTwoJobsSharingANode(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})

	lows := []*gangWrapper{
		makeGang(ns, "low-a", 1, 4).CPU("45").Priority(lowPriority).create(t, e.c.Client),
		makeGang(ns, "low-b", 1, 4).CPU("45").Priority(lowPriority).create(t, e.c.Client),
	}
	var before []*corev1.Pod
	for _, g := range lows {
		before = append(before, waitBound(t, e.c.Client, ns, g.names(), bindTimeout)...)
	}
	urgent := makeGang(ns, "urgent", 1, 4).CPU("45").Priority(highPriority).create(t, e.c.Client)
	if p := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)[0]; p.Spec.NodeName != specs[0].Name {
		t.Errorf("the urgent pod went to %s, want %s", p.Spec.NodeName, specs[0].Name)
	}
	kept := 0
	for i, p := range get(t, e.c.Client, ns, []string{before[0].Name, before[1].Name}) {
		if p != nil && p.UID == before[i].UID && p.DeletionTimestamp == nil {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("%d of the two low jobs kept running, want 1: one job's GPUs and CPUs make the room", kept)
	}
}

// TestPreemptionEvictsACPUJobInTheWay: a GPU node's GPUs are free, but a low-priority pod of no
// gang and no GPUs (a CPU batch job) holds 50 of its 96 CPUs. A high-priority 8-GPU, 90-CPU job
// evicts it and binds there (deploy/'s preemptLonePods: true).
func TestPreemptionEvictsACPUJobInTheWay(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})

	batch := cpuPod(ns, "cpu-batch", "50", lowPriority)
	if err := e.c.Client.Create(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	before := waitBound(t, e.c.Client, ns, []string{batch.Name}, bindTimeout)[0]
	urgent := makeGang(ns, "urgent", 1, 8).CPU("90").Priority(highPriority).create(t, e.c.Client)
	if p := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)[0]; p.Spec.NodeName != specs[0].Name {
		t.Errorf("the urgent pod went to %s, want %s", p.Spec.NodeName, specs[0].Name)
	}
	if p := get(t, e.c.Client, ns, []string{batch.Name})[0]; p != nil && p.UID == before.UID && p.DeletionTimestamp == nil {
		t.Errorf("the CPU job was not evicted")
	}
}

// TestGangWaitsForGPUsOnTheirWay: a job's pod terminates (its finalizer holds it) on the only
// node. A gang of the same priority is told that the GPUs are held by a pod that terminates, and
// binds once it is gone.
func TestGangWaitsForGPUsOnTheirWay(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})

	old := makeGang(ns, "old", 1, 8)
	release := holdTerminating(t, e.c.Client, old.pods[0])
	old.create(t, e.c.Client)
	waitBound(t, e.c.Client, ns, old.names(), bindTimeout)
	if err := e.c.Client.Delete(t.Context(), old.pods[0]); err != nil {
		t.Fatal(err)
	}
	next := makeGang(ns, "next", 1, 8).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, next.names(), "8 GPU(s) on 1 node(s) are held by pods that terminate")
	release()
	if p := waitBound(t, e.c.Client, ns, next.names(), bindTimeout)[0]; p.Spec.NodeName != specs[0].Name {
		t.Errorf("the gang went to %s, want %s", p.Spec.NodeName, specs[0].Name)
	}
}

// TestPreemptionWaitsForAJobAlreadyLeaving: one low-priority job terminates already (Kueue evicted
// it; its pod checkpoints before it stops), another runs. A high-priority gang that needs one of
// the two nodes waits for the one leaving and evicts nothing; it binds there once the pod is gone.
func TestPreemptionWaitsForAJobAlreadyLeaving(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
	ctx := t.Context()

	leaving := makeGang(ns, "leaving", 1, 8).Priority(lowPriority)
	release := holdTerminating(t, e.c.Client, leaving.pods[0])
	leaving.create(t, e.c.Client)
	node := waitBound(t, e.c.Client, ns, leaving.names(), bindTimeout)[0].Spec.NodeName
	other := makeGang(ns, "other", 1, 8).Priority(lowPriority).create(t, e.c.Client)
	otherPod := waitBound(t, e.c.Client, ns, other.names(), bindTimeout)[0]
	if err := e.c.Client.Delete(ctx, leaving.pods[0]); err != nil {
		t.Fatal(err)
	}

	urgent := makeGang(ns, "urgent", 1, 8).Priority(highPriority).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, urgent.names(), ns+"/urgent waits for 1 terminating pod(s) of lower priority to leave the nodes planned for it")
	if p := get(t, e.c.Client, ns, other.names())[0]; p == nil || p.UID != otherPod.UID || p.DeletionTimestamp != nil {
		t.Fatalf("the running low job was evicted while the leaving one still terminated")
	}
	release()
	if p := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)[0]; p.Spec.NodeName != node {
		t.Errorf("the urgent pod went to %s, want %s, the node the leaving job left", p.Spec.NodeName, node)
	}
	if p := get(t, e.c.Client, ns, other.names())[0]; p == nil || p.UID != otherPod.UID || p.DeletionTimestamp != nil {
		t.Errorf("the running low job was evicted")
	}
}

// TestCancelledPreemptorLeavesNoClaim: a high-priority gang preempts a low gang and its job is
// cancelled while the victim still terminates. Once the victim is gone, a new low-priority gang
// takes the node: nothing of the cancelled gang's plan keeps the GPUs it had planned on.
func TestCancelledPreemptorLeavesNoClaim(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})
	ctx := t.Context()

	// The victim terminates until the test lets it go: a finalizer holds it.
	victim := makeGang(ns, "low", 1, 8).Priority(lowPriority)
	release := holdTerminating(t, e.c.Client, victim.pods[0])
	victim.create(t, e.c.Client)
	waitBound(t, e.c.Client, ns, victim.names(), bindTimeout)

	urgent := makeGang(ns, "urgent", 1, 8).Priority(highPriority).create(t, e.c.Client)
	util.Eventually(t, 200*time.Millisecond, bindTimeout, "the low gang to be preempted", func() (bool, string) {
		p := get(t, e.c.Client, ns, victim.names())[0]
		return p != nil && p.DeletionTimestamp != nil, describe([]*corev1.Pod{p})
	})
	waitUnschedulable(t, e.c.Client, ns, urgent.names(), "waits for the pods it preempted to terminate")

	// The urgent job is cancelled, then the victim finishes terminating.
	for _, p := range urgent.pods {
		if err := e.c.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.c.Client.Delete(ctx, urgent.pg); err != nil {
		t.Fatal(err)
	}
	release()
	util.Eventually(t, 200*time.Millisecond, bindTimeout, "the victim and the cancelled gang to be gone", func() (bool, string) {
		pods := get(t, e.c.Client, ns, append(victim.names(), urgent.names()...))
		return all(pods, func(p *corev1.Pod) bool { return p == nil }), describe(pods)
	})

	next := makeGang(ns, "next", 1, 8).Priority(lowPriority).create(t, e.c.Client)
	waitBound(t, e.c.Client, ns, next.names(), bindTimeout)
	if got := e.metrics(t).value("convoy_scheduler_gangs_planned", nil); got != 0 {
		t.Errorf("convoy_scheduler_gangs_planned = %v with every gang bound or gone, want 0", got)
	}
}

// holdTerminating gives p, not yet created, a finalizer that keeps it Terminating once deleted
// (kwok runs PodDeleteKeepingFinalizers here), as a pod that takes its grace period to stop. The
// returned func removes it; the test's end does too.
func holdTerminating(t *testing.T, c client.Client, p *corev1.Pod) func() {
	p.Finalizers = append(p.Finalizers, "convoy.dev/test-hold")
	release := func() {
		_ = c.Patch(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}},
			client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))
	}
	t.Cleanup(release)
	return release
}

// cpus sets the CPU every container of the pods requests; a pod given no GPUs asks none.
func cpus(q string, pods ...*corev1.Pod) {
	for _, p := range pods {
		for i := range p.Spec.Containers {
			r := &p.Spec.Containers[i].Resources
			r.Requests[corev1.ResourceCPU] = resource.MustParse(q)
			if g := r.Requests[framework.ResourceGPU]; g.IsZero() {
				delete(r.Requests, framework.ResourceGPU)
				delete(r.Limits, framework.ResourceGPU)
			}
		}
	}
}

// cpuPod is a pod of convoy-scheduler that asks q CPUs and no GPUs.
func cpuPod(ns, name, q, priorityClass string) *corev1.Pod {
	p := makePod(ns, name, 0)
	p.Spec.PriorityClassName = priorityClass
	cpus(q, p)
	return p
}

// wantGangIntact fails the test for each of the gang's pods (before, as bound) that is gone,
// replaced or terminating; why says why it should have stayed.
func wantGangIntact(t *testing.T, c client.Client, ns string, gang *gangWrapper, before []*corev1.Pod, why string) {
	t.Helper()
	for i, p := range get(t, c, ns, gang.names()) {
		if p == nil || p.UID != before[i].UID || p.DeletionTimestamp != nil {
			t.Errorf("pod %s of gang %s was evicted, %s", before[i].Name, gang.pg.Name, why)
		}
	}
}

// TestPodWithoutGPUsPreemptsPodsOfNoGang: a high-priority pod without GPUs that finds no CPU
// preempts as upstream kube-scheduler would, but never a member of a gang. The lone pod is the
// older, which upstream keeps before younger pods of the same priority: upstream would evict a
// gang worker here.
func TestPodWithoutGPUsPreemptsPodsOfNoGang(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})

	lone := cpuPod(ns, "low-lone", "30", lowPriority)
	if err := e.c.Client.Create(t.Context(), lone); err != nil {
		t.Fatal(err)
	}
	lone = waitBound(t, e.c.Client, ns, []string{lone.Name}, bindTimeout)[0]
	gang := makeGang(ns, "low-gang", 2, 4).Priority(lowPriority)
	cpus("30", gang.pods...)
	gang.create(t, e.c.Client)
	before := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)

	// 90 of the node's 96 CPUs are taken: the urgent pod needs one 30-CPU pod gone.
	urgent := cpuPod(ns, "urgent", "30", highPriority)
	if err := e.c.Client.Create(t.Context(), urgent); err != nil {
		t.Fatal(err)
	}
	if p := waitBound(t, e.c.Client, ns, []string{urgent.Name}, bindTimeout)[0]; p.Spec.NodeName != specs[0].Name {
		t.Errorf("the urgent pod went to %s, want %s", p.Spec.NodeName, specs[0].Name)
	}
	if p := get(t, e.c.Client, ns, []string{lone.Name})[0]; p != nil && p.UID == lone.UID && p.DeletionTimestamp == nil {
		t.Errorf("the lone low-priority pod was not evicted")
	}
	wantGangIntact(t, e.c.Client, ns, gang, before, "by a pod preempting pod by pod")
}

// TestPodWithoutGPUsLeavesGangsWhole: when only gang workers stand in the way, a pod without GPUs
// preempts nothing and says that no victim was found.
func TestPodWithoutGPUsLeavesGangsWhole(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})

	gang := makeGang(ns, "low-gang", 2, 4).Priority(lowPriority)
	cpus("45", gang.pods...)
	gang.create(t, e.c.Client)
	before := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)

	urgent := cpuPod(ns, "urgent", "30", highPriority)
	if err := e.c.Client.Create(t.Context(), urgent); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(t, e.c.Client, ns, []string{urgent.Name}, "No preemption victims found for incoming pod")
	wantGangIntact(t, e.c.Client, ns, gang, before, "by a pod preempting pod by pod")
}

func hasDisruptionTarget(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler {
			return true
		}
	}
	return false
}

// TestUnhealthyGPUIsAvoided: a node with an unhealthy GPU cannot take a whole-node pod, and a
// smaller pod there gets healthy GPUs of one NVLink island.
func TestUnhealthyGPUIsAvoided(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8}.Nodes()
	sick, healthy := specs[0].Name, specs[1].Name
	e.nodes(t, specs,
		makeGPUNode(sick, 8).Islands(seq(0, 4), seq(4, 8)).Unhealthy(3).Obj(),
		makeGPUNode(healthy, 8).Obj())

	whole := makeGang(ns, "whole-node", 1, 8).create(t, e.c.Client)
	if p := waitBound(t, e.c.Client, ns, whole.names(), bindTimeout)[0]; p.Spec.NodeName != healthy {
		t.Errorf("the 8-GPU pod went to %s, want %s (the node whose GPUs are all healthy)", p.Spec.NodeName, healthy)
	}
	half := makeGang(ns, "half-node", 1, 4).create(t, e.c.Client)
	p := waitBound(t, e.c.Client, ns, half.names(), bindTimeout)[0]
	if p.Spec.NodeName != sick || p.Annotations[convoy.AnnotationGPUIndices] != "4,5,6,7" {
		t.Errorf("the 4-GPU pod got %s GPUs %q, want %s GPUs \"4,5,6,7\" (the healthy NVLink island, not GPU 3)",
			p.Spec.NodeName, p.Annotations[convoy.AnnotationGPUIndices], sick)
	}
}

// TestGangStartsWhenItsGPUsRecover: a gang that waits because a GPU is unhealthy binds as soon as
// the node agent reports the GPU healthy again, with no other change in the cluster to requeue it.
func TestGangStartsWhenItsGPUsRecover(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8}.Nodes()
	node := specs[0].Name
	e.nodes(t, specs, makeGPUNode(node, 8).Unhealthy(2, 5).Obj())

	gang := makeGang(ns, "whole-node", 1, 8).create(t, e.c.Client)
	util.Eventually(t, 200*time.Millisecond, bindTimeout, "the pod to show why it does not fit", func() (bool, string) {
		pods := get(t, e.c.Client, ns, gang.names())
		return all(pods, func(p *corev1.Pod) bool {
			return strings.Contains(unschedulableMessage(p), "needs 1 pod(s) × 8 GPU(s)")
		}), describe(pods)
	})
	var g convoy.GPUNode
	if err := e.c.Client.Get(t.Context(), client.ObjectKey{Name: node}, &g); err != nil {
		t.Fatal(err)
	}
	g.Status = makeGPUNode(node, 8).Obj().Status
	if err := e.c.Client.Status().Update(t.Context(), &g); err != nil {
		t.Fatal(err)
	}
	if p := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)[0]; p.Spec.NodeName != node {
		t.Errorf("the pod went to %s, want %s", p.Spec.NodeName, node)
	}
}

// TestGangWaitsForItsPodGroup: pods created before their PodGroup are held, none bound, each saying
// what it waits for, and the whole gang binds once the PodGroup exists.
func TestGangWaitsForItsPodGroup(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})

	gang := makeGang(ns, "late-podgroup", 3, 4)
	for _, p := range gang.pods {
		if err := e.c.Client.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	want := "waiting for PodGroup " + ns + "/late-podgroup: create it, or remove the pod's scheduling.x-k8s.io/pod-group label"
	util.Eventually(t, 200*time.Millisecond, bindTimeout, "every pod to say it waits for its PodGroup", func() (bool, string) {
		pods := get(t, e.c.Client, ns, gang.names())
		return all(pods, func(p *corev1.Pod) bool { return unschedulableMessage(p) == want }), describe(pods)
	})
	if pods := get(t, e.c.Client, ns, gang.names()); !all(pods, func(p *corev1.Pod) bool { return p.Spec.NodeName == "" }) {
		t.Fatalf("pods bound before their PodGroup exists: %s", describe(pods))
	}
	if err := e.c.Client.Create(t.Context(), gang.pg); err != nil {
		t.Fatal(err)
	}
	pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
	nodes := map[string]int{}
	for _, p := range pods {
		nodes[p.Spec.NodeName]++
	}
	if len(nodes) != 2 {
		t.Errorf("three 4-GPU pods on %v, want two 8-GPU nodes", nodes)
	}
}

// TestPodsOfAnotherSchedulerAreLeftAlone: the scheduler binds its own pods and never touches a pod
// that names another scheduler.
func TestPodsOfAnotherSchedulerAreLeftAlone(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})

	foreign := makePod(ns, "foreign", 1)
	foreign.Spec.SchedulerName = "other-scheduler"
	if err := e.c.Client.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	own := makeGang(ns, "own", 1, 1).create(t, e.c.Client)
	waitBound(t, e.c.Client, ns, own.names(), bindTimeout)

	p := get(t, e.c.Client, ns, []string{foreign.Name})[0]
	if p.Spec.NodeName != "" || len(p.Status.Conditions) != 0 || p.Annotations[convoy.AnnotationGPUIndices] != "" {
		t.Errorf("the other scheduler's pod was touched: node %q, conditions %+v, annotations %v", p.Spec.NodeName, p.Status.Conditions, p.Annotations)
	}
}

// TestRestartWhileGangWaitsAtPermit: three pods of a four-pod gang wait at Permit for the fourth;
// the scheduler is killed and restarted; no pod was bound meanwhile, and once the fourth pod can
// be scheduled the whole gang binds.
func TestRestartWhileGangWaitsAtPermit(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 4, GPUsPerNode: 8})

	// The fourth pod names no scheduler that runs: its three siblings are placed and wait at
	// Permit for it. It is created first, so that Coscheduling finds the gang complete when the
	// last of the others is tried.
	gang := makeGang(ns, "waits", 4, 8)
	foreign := gang.pods[3]
	foreign.Spec.SchedulerName = "not-running"
	gang.pods = append([]*corev1.Pod{foreign}, gang.pods[:3]...)
	gang.create(t, e.c.Client)
	// Coscheduling logs each pod it holds at Permit.
	waiting := func() int {
		n := 0
		for _, line := range strings.Split(e.schedulerLog(), "\n") {
			if strings.Contains(line, "Pod is waiting to be scheduled to node") && strings.Contains(line, `pod="`+ns+`/waits-worker-`) {
				n++
			}
		}
		return n
	}
	util.Eventually(t, 200*time.Millisecond, bindTimeout, "three pods to wait at Permit", func() (bool, string) {
		return waiting() >= 3, describe(get(t, e.c.Client, ns, gang.names()))
	})

	if err := e.stopScheduler(); err != nil {
		t.Fatal(err)
	}
	for _, p := range get(t, e.c.Client, ns, gang.names()) {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s before its gang was complete", p.Name, p.Spec.NodeName)
		}
	}

	// Replace the fourth pod by one of this scheduler, then restart it.
	if err := e.c.Client.Delete(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	util.Eventually(t, 200*time.Millisecond, 10*time.Second, "the fourth pod to be gone", func() (bool, string) {
		return get(t, e.c.Client, ns, []string{foreign.Name})[0] == nil, ""
	})
	fourth := makePod(ns, foreign.Name, 8)
	fourth.Labels = foreign.Labels
	if err := e.c.Client.Create(t.Context(), fourth); err != nil {
		t.Fatal(err)
	}
	if err := e.startScheduler(context.Background()); err != nil {
		t.Fatal(err)
	}
	pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
	var nodes []string
	for _, p := range pods {
		nodes = append(nodes, p.Spec.NodeName)
	}
	if slices.Sort(nodes); len(slices.Compact(nodes)) != 4 {
		t.Errorf("the gang's 8-GPU pods share nodes: %v", nodes)
	}
}

// nodePacking sets the GangPlacement args' nodePacking in every profile of a configuration.
func nodePacking(packing string) func(cfg map[string]any) {
	return func(cfg map[string]any) {
		for _, p := range cfg["profiles"].([]any) {
			for _, pc := range p.(map[string]any)["pluginConfig"].([]any) {
				if pc := pc.(map[string]any); pc["name"] == "GangPlacement" {
					pc["args"].(map[string]any)["nodePacking"] = packing
				}
			}
		}
	}
}

// TestPartlyUsedFirstFillsTheRackBeforeItOpensFreeNodes: with GangPlacement's nodePacking set to
// PartlyUsedFirst, a 4×4-GPU gang in a rack of two half-used and two free nodes takes both half
// used nodes and one free node, and leaves the other free node whole for an 8-GPU job; with the
// shipped FewestNodes it spans two free nodes (the planner's TestPlace shows both).
func TestPartlyUsedFirstFillsTheRackBeforeItOpensFreeNodes(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 4, GPUsPerNode: 8})
	e.restartWith(t, "config.yaml", nodePacking("PartlyUsedFirst"))
	occupy(t, e.c.Client, ns, specs[0].Name, 4)
	occupy(t, e.c.Client, ns, specs[1].Name, 4)

	gang := makeGang(ns, "llama", 4, 4).create(t, e.c.Client)
	got := perNode(waitBound(t, e.c.Client, ns, gang.names(), bindTimeout))
	want := map[string]int{specs[0].Name: 1, specs[1].Name: 1, specs[2].Name: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the gang's pods per node (-want,+got):\n%s", diff)
	}
	wantBoundOn(t, e.c.Client, makeGang(ns, "whole", 1, 8).create(t, e.c.Client), specs[3].Name, "the 8-GPU job")
}

// TestPartlyUsedFirstAfterPreemption: with nodePacking PartlyUsedFirst, a high-priority 3×4-GPU
// gang evicts the low-priority job that holds a rack's free node and takes both half-used nodes
// (held by pods of its own priority) and the freed node, one pod each; with FewestNodes it puts
// two pods on the freed node.
func TestPartlyUsedFirstAfterPreemption(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 3, GPUsPerNode: 8})
	e.restartWith(t, "config.yaml", nodePacking("PartlyUsedFirst"))
	for _, s := range specs[:2] {
		p := makePod(ns, "occupant-"+s.Name, 4)
		p.Spec.PriorityClassName = highPriority
		runOn(t, e.c.Client, p, s.Name)
	}
	low := makeGang(ns, "low", 1, 8).Priority(lowPriority).create(t, e.c.Client)
	victim := waitBound(t, e.c.Client, ns, low.names(), bindTimeout)[0]

	urgent := makeGang(ns, "urgent", 3, 4).Priority(highPriority).create(t, e.c.Client)
	got := perNode(waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout))
	want := map[string]int{specs[0].Name: 1, specs[1].Name: 1, specs[2].Name: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the urgent gang's pods per node (-want,+got):\n%s", diff)
	}
	if p := get(t, e.c.Client, ns, low.names())[0]; p != nil && p.UID == victim.UID && p.DeletionTimestamp == nil {
		t.Errorf("the low job's pod was not evicted")
	}
}

// TestAsTheClusterScheduler: run with deploy/scheduler/config-as-default.yaml, Convoy's scheduler
// is the cluster's: a GPU gang whose pods name no scheduler is planned whole by GangPlacement (its
// pods carry the GPU indices it chose, on two nodes), and a pod without GPUs that names no
// scheduler binds too.
func TestAsTheClusterScheduler(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
	e.restartWith(t, "config-as-default.yaml")

	gang := makeGang(ns, "llama", 2, 8)
	plain := cpuPod(ns, "plain", "1", "")
	for _, p := range append(gang.pods, plain) {
		p.Spec.SchedulerName = ""
	}
	gang.create(t, e.c.Client)
	if err := e.c.Client.Create(t.Context(), plain); err != nil {
		t.Fatal(err)
	}
	pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
	nodes := map[string]bool{}
	for _, p := range pods {
		if p.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("pod %s has schedulerName %q, want the API server's default %q", p.Name, p.Spec.SchedulerName, corev1.DefaultSchedulerName)
		}
		if p.Annotations[convoy.AnnotationGPUIndices] == "" {
			t.Errorf("pod %s bound to %s without %s: GangPlacement did not plan it", p.Name, p.Spec.NodeName, convoy.AnnotationGPUIndices)
		}
		nodes[p.Spec.NodeName] = true
	}
	if len(nodes) != 2 {
		t.Errorf("the gang's two 8-GPU pods are on %d nodes, want 2", len(nodes))
	}
	waitBound(t, e.c.Client, ns, []string{plain.Name}, bindTimeout)
}

// TestGangOfMixedGPUCountsLandsWhole: a gang whose launcher asks 2 GPUs beside two 8-GPU workers,
// all in one rack, binds whole in the one rack that holds 18 GPUs in that shape. Planned as three
// 8-GPU pods, as before, it would fit in no rack.
func TestGangOfMixedGPUCountsLandsWhole(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2, NodesPerRack: 3, GPUsPerNode: 8})
	// The first rack: 2, 8 and 8 free GPUs. The second: 6 free on each node, 18 in all, but no
	// room for an 8-GPU worker.
	occupy(t, e.c.Client, ns, specs[0].Name, 6)
	for _, s := range specs[3:] {
		occupy(t, e.c.Client, ns, s.Name, 2)
	}

	gang := makeGang(ns, "mpi", 3, 8).Launcher(2).Topology(convoy.TopologyRack, convoy.TopologyRequired).create(t, e.c.Client)
	pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)

	var got []string
	for _, p := range pods {
		got = append(got, fmt.Sprintf("%s on %s with %d GPUs", p.Name, p.Spec.NodeName,
			len(strings.Split(p.Annotations[convoy.AnnotationGPUIndices], ","))))
	}
	want := []string{
		"mpi-worker-0 on " + specs[0].Name + " with 2 GPUs",
		"mpi-worker-1 on " + specs[1].Name + " with 8 GPUs",
		"mpi-worker-2 on " + specs[2].Name + " with 8 GPUs",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the gang's pods (-want,+got):\n%s", diff)
	}
}

// TestGangWhoseMasterAsksMoreCPULandsWhole: a gang of four 4-GPU pods whose master asks 60 CPUs
// and its workers 30 fits two 96-CPU nodes, the master beside one worker. Counted at the master's
// CPU, each node would hold one pod and the gang would be turned away.
func TestGangWhoseMasterAsksMoreCPULandsWhole(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})

	gang := makeGang(ns, "pytorch", 4, 4).CPU("30").MasterCPU("60").create(t, e.c.Client)
	pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
	cpus, gpus := map[string]int64{}, map[string]int{}
	for _, p := range pods {
		cpus[p.Spec.NodeName] += p.Spec.Containers[0].Resources.Requests.Cpu().Value()
		gpus[p.Spec.NodeName] += len(strings.Split(p.Annotations[convoy.AnnotationGPUIndices], ","))
	}
	if len(cpus) != 2 {
		t.Errorf("the gang's pods are on %d nodes, want 2: %v", len(cpus), describe(pods))
	}
	for node, n := range cpus {
		if n > 96 || gpus[node] != 8 {
			t.Errorf("node %s holds %d CPUs and %d GPUs of the gang's pods, want at most 96 and 8", node, n, gpus[node])
		}
	}
}

// TestGangWhoseMasterAsksMoreCPUPreemptsTwoGangs: a high-priority gang of a 60-CPU master and
// three 30-CPU workers, 4 GPUs each, needs both nodes, each held whole by a lower-priority gang.
// It evicts both and binds whole. Counted at its master's CPU, even both nodes emptied would hold
// two of its pods, and it would be told that preemption cannot help.
func TestGangWhoseMasterAsksMoreCPUPreemptsTwoGangs(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
	var low []*gangWrapper
	for _, name := range []string{"low-a", "low-b"} {
		g := makeGang(ns, name, 1, 8).CPU("10").Priority(lowPriority).create(t, e.c.Client)
		waitBound(t, e.c.Client, ns, g.names(), bindTimeout)
		low = append(low, g)
	}

	urgent := makeGang(ns, "urgent", 4, 4).CPU("30").MasterCPU("60").Priority(highPriority).create(t, e.c.Client)
	pods := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)
	cpus := map[string]int64{}
	for _, p := range pods {
		cpus[p.Spec.NodeName] += p.Spec.Containers[0].Resources.Requests.Cpu().Value()
	}
	if len(cpus) != 2 || cpus[pods[0].Spec.NodeName] != 90 {
		t.Errorf("CPUs of the gang's pods by node = %v, want the master's 60 and a worker's 30 on one node, 60 on the other: %v", cpus, describe(pods))
	}
	for _, g := range low {
		util.Eventually(t, 200*time.Millisecond, 10*time.Second, g.pg.Name+" to be evicted", func() (bool, string) {
			p := get(t, e.c.Client, ns, g.names())[0]
			return p == nil, describe([]*corev1.Pod{p})
		})
	}
}

// TestMixedGangPreemptsOnlyTheGangItsPodsNeed: a high-priority gang of a 2-GPU launcher and an
// 8-GPU worker evicts the 8-GPU gang in its worker's way and binds its launcher beside the 2-GPU
// gang, which stays. Weighed as two 8-GPU pods, it would evict both.
func TestMixedGangPreemptsOnlyTheGangItsPodsNeed(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
	whole := makeGang(ns, "low-whole", 1, 8).Priority(lowPriority).create(t, e.c.Client)
	wholeNode := waitBound(t, e.c.Client, ns, whole.names(), bindTimeout)[0].Spec.NodeName
	small := makeGang(ns, "low-small", 1, 2).Priority(lowPriority).create(t, e.c.Client)
	smallBefore := waitBound(t, e.c.Client, ns, small.names(), bindTimeout)

	urgent := makeGang(ns, "urgent", 2, 8).Launcher(2).Priority(highPriority).create(t, e.c.Client)
	pods := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)
	got := []string{pods[0].Spec.NodeName, pods[1].Spec.NodeName}
	want := []string{smallBefore[0].Spec.NodeName, wholeNode}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes of the launcher and the worker (-want,+got):\n%s", diff)
	}
	util.Eventually(t, 200*time.Millisecond, 10*time.Second, "low-whole to be evicted", func() (bool, string) {
		p := get(t, e.c.Client, ns, whole.names())[0]
		return p == nil, describe([]*corev1.Pod{p})
	})
	wantGangIntact(t, e.c.Client, ns, small, smallBefore, "though the launcher fits beside it")
}

// TestParameterServerJoinsItsGangsRack: a gang that requires one rack keeps its parameter server,
// which asks no GPU, in the rack of its GPU workers, though the other rack has far more CPU free
// and kube-scheduler's scoring would put it there.
func TestParameterServerJoinsItsGangsRack(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2, NodesPerRack: 2, GPUsPerNode: 8})
	// The first rack's GPUs are taken; the second's CPU is mostly taken.
	for _, s := range specs[:2] {
		occupy(t, e.c.Client, ns, s.Name, 8)
	}
	for _, s := range specs[2:] {
		busy := makePod(ns, "busy-"+s.Name, 0)
		cpus("80", busy)
		runOn(t, e.c.Client, busy, s.Name)
	}

	gang := makeGang(ns, "tf", 3, 8).Topology(convoy.TopologyRack, convoy.TopologyRequired)
	parameterServer(gang.pods[2], "1")
	pods := waitBound(t, e.c.Client, ns, gang.create(t, e.c.Client).names(), bindTimeout)
	wantInRack(t, e.c.Client, pods, "rack-0-0-1")
}

// wantInRack fails the test unless every pod runs in rack.
func wantInRack(t *testing.T, c client.Client, pods []*corev1.Pod, rack string) {
	t.Helper()
	var got, want []string
	for _, p := range pods {
		got = append(got, p.Name+" in "+nodeLabel(t, c, p.Spec.NodeName, framework.LabelRack))
		want = append(want, p.Name+" in "+rack)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("racks of the gang's pods (-want,+got):\n%s", diff)
	}
}

// TestPreemptionMakesRoomForTheParameterServerToo: evicting the low gang of the first rack would
// free GPUs for the urgent gang's workers, but its parameter server needs 8 CPUs and pods of
// another scheduler, of the urgent gang's priority, hold 90 of the 96 on each node there. The two low gangs of the other rack are
// evicted instead, and the whole urgent gang runs there; the first rack's gang stays.
func TestPreemptionMakesRoomForTheParameterServerToo(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2, NodesPerRack: 2, GPUsPerNode: 8})
	low1 := makeGang(ns, "low1", 2, 8).Priority(lowPriority).create(t, e.c.Client)
	low1Pods := waitBound(t, e.c.Client, ns, low1.names(), bindTimeout)
	for _, p := range low1Pods {
		hog := makePod(ns, "hog-"+p.Spec.NodeName, 0)
		hog.Spec.PriorityClassName = highPriority
		cpus("90", hog)
		runOn(t, e.c.Client, hog, p.Spec.NodeName)
	}
	var low2 []string
	for _, name := range []string{"low2a", "low2b"} {
		low2 = append(low2, makeGang(ns, name, 1, 8).Priority(lowPriority).create(t, e.c.Client).names()...)
	}
	rack := nodeLabel(t, e.c.Client, waitBound(t, e.c.Client, ns, low2, bindTimeout)[0].Spec.NodeName, framework.LabelRack)

	urgent := makeGang(ns, "urgent", 3, 8).Priority(highPriority).Topology(convoy.TopologyRack, convoy.TopologyRequired)
	parameterServer(urgent.pods[2], "8")
	wantInRack(t, e.c.Client, waitBound(t, e.c.Client, ns, urgent.create(t, e.c.Client).names(), bindTimeout), rack)
	for _, p := range get(t, e.c.Client, ns, low2) {
		if p != nil && p.DeletionTimestamp == nil {
			t.Errorf("low gang pod %s was not evicted", p.Name)
		}
	}
	wantGangIntact(t, e.c.Client, ns, low1, low1Pods, "though its rack has no CPU for the parameter server")
}

// parameterServer makes p a parameter server asking cpu CPUs and no GPU.
func parameterServer(p *corev1.Pod, cpu string) {
	p.Labels[convoy.LabelReplicaRole] = "ps"
	delete(p.Spec.Containers[0].Resources.Requests, framework.ResourceGPU)
	delete(p.Spec.Containers[0].Resources.Limits, framework.ResourceGPU)
	cpus(cpu, p)
}

// TestParameterServerTurnsTheGangToARackWithRoomForIt: the rack that fits the workers best
// (one node's GPUs taken) has no CPU left for the parameter server beside them: 96 CPUs a node, 90
// for each worker and for the pod holding the taken GPUs. The gang lands in the other rack, whose
// third node takes the parameter server, instead of waiting at Permit for a pod that cannot bind.
// A second gang, whose GPU pods fit only the first rack, is told its parameter server fits there
// no more.
func TestParameterServerTurnsTheGangToARackWithRoomForIt(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2, NodesPerRack: 3, GPUsPerNode: 8})
	occupant := makePod(ns, "occupant", 8)
	cpus("90", occupant)
	runOn(t, e.c.Client, occupant, specs[0].Name)

	gang := makeGang(ns, "tf", 3, 8).Topology(convoy.TopologyRack, convoy.TopologyRequired)
	cpus("90", gang.pods[:2]...)
	parameterServer(gang.pods[2], "8")
	pods := waitBound(t, e.c.Client, ns, gang.create(t, e.c.Client).names(), bindTimeout)
	wantInRack(t, e.c.Client, pods, "rack-0-0-1")

	// A second such gang: only the first rack has two nodes' GPUs free, and no CPU beside them.
	again := makeGang(ns, "tf2", 3, 8).Topology(convoy.TopologyRack, convoy.TopologyRequired)
	cpus("90", again.pods[:2]...)
	parameterServer(again.pods[2], "8")
	waitUnschedulable(t, e.c.Client, ns, again.create(t, e.c.Client).names(), ns+"/tf2 needs 2 pod(s) × 8 GPU(s) and 1 pod(s) without GPUs in one rack; "+
		"the only rack with room for its GPU pods (zone-0/block-0-0/rack-0-0-0) has room beside them for 0 pod(s) without GPUs")
}

// TestMixedGangPreemptsForItsWorkerAndTakesAHoleForItsLauncher: a high-priority gang of a 1-GPU
// launcher and an 8-GPU worker evicts the low gang on one node for its worker and puts its
// launcher in the one GPU a gang of its own priority leaves free on the other. Weighed as two
// 8-GPU pods it would find no victims at all.
func TestMixedGangPreemptsForItsWorkerAndTakesAHoleForItsLauncher(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
	low := makeGang(ns, "low", 1, 8).Priority(lowPriority).create(t, e.c.Client)
	lowNode := waitBound(t, e.c.Client, ns, low.names(), bindTimeout)[0].Spec.NodeName
	peer := makeGang(ns, "peer", 1, 7).Priority(highPriority).create(t, e.c.Client)
	peerNode := waitBound(t, e.c.Client, ns, peer.names(), bindTimeout)[0].Spec.NodeName

	urgent := makeGang(ns, "urgent", 2, 8).Launcher(1).Priority(highPriority).create(t, e.c.Client)
	pods := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)
	if got, want := []string{pods[0].Spec.NodeName, pods[1].Spec.NodeName}, []string{peerNode, lowNode}; !slices.Equal(got, want) {
		t.Errorf("the launcher and the worker are on %v, want %v", got, want)
	}
	if p := get(t, e.c.Client, ns, peer.names())[0]; p == nil || p.DeletionTimestamp != nil {
		t.Errorf("the gang of the preemptor's own priority was evicted")
	}
}
