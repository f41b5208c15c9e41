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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// TestInterPodConstraints: what a gang's required inter-pod terms make of a plan: a per-node cap,
// a required level, nodes to filter, or an error that names the field.
func TestInterPodConstraints(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{schedv1alpha1.PodGroupLabel: "job"}}
	other := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}
	pod := func() *st.PodWrapper { return member("ns", "job", 0, 2) }
	cases := []struct {
		name string
		pod  *corev1.Pod
		// wantNil: nothing to honour; else the caps, level and filters wanted.
		wantNil     bool
		wantCaps    []int
		wantLevel   planner.Level
		wantFilters int
		wantErr     string
	}{
		{name: "no terms", pod: pod().Obj(), wantNil: true},
		{name: "preferred terms only", pod: pod().PodAntiAffinity(corev1.LabelHostname, own, st.PodAntiAffinityWithPreferredReq).Obj(), wantNil: true},
		{name: "spread that may schedule anyway", pod: pod().SpreadConstraint(1, convoy.LabelTopologyZone, corev1.ScheduleAnyway, own, nil, nil, nil, nil).Obj(), wantNil: true},
		{name: "apart by hostname", pod: pod().PodAntiAffinity(corev1.LabelHostname, own, st.PodAntiAffinityWithRequiredReq).Obj(),
			wantCaps: []int{1}, wantFilters: 1},
		{name: "apart from other pods by zone", pod: pod().PodAntiAffinity(convoy.LabelTopologyZone, other, st.PodAntiAffinityWithRequiredReq).Obj(),
			wantFilters: 1},
		{name: "apart by zone", pod: pod().PodAntiAffinity(convoy.LabelTopologyZone, own, st.PodAntiAffinityWithRequiredReq).Obj(),
			wantErr: `ns/job needs pod anti-affinity among its own pods by "topology.kubernetes.io/zone" (spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]): Convoy keeps a gang's pods apart by kubernetes.io/hostname only; use that topologyKey`},
		{name: "together by rack", pod: pod().PodAffinity(convoy.LabelTopologyRack, own, st.PodAffinityWithRequiredReq).Obj(),
			wantLevel: planner.TopologyLevel(2, len(testLevels)), wantFilters: 1},
		{name: "together by hostname", pod: pod().PodAffinity(corev1.LabelHostname, own, st.PodAffinityWithRequiredReq).Obj(),
			wantLevel: planner.LevelNode, wantFilters: 1},
		{name: "together by another key", pod: pod().PodAffinity("example.com/pod", own, st.PodAffinityWithRequiredReq).Obj(),
			wantErr: `ns/job needs pod affinity among its own pods by "example.com/pod" (spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0])`},
		{name: "with other pods by zone", pod: pod().PodAffinity(convoy.LabelTopologyZone, other, st.PodAffinityWithRequiredReq).Obj(),
			wantFilters: 1},
		{name: "spread by hostname", pod: pod().SpreadConstraint(3, corev1.LabelHostname, corev1.DoNotSchedule, own, nil, nil, nil, nil).Obj(),
			wantCaps: []int{3}, wantFilters: 1},
		{name: "spread by hostname, matchLabelKeys", pod: pod().SpreadConstraint(2, corev1.LabelHostname, corev1.DoNotSchedule, &metav1.LabelSelector{}, nil, nil, nil,
			[]string{schedv1alpha1.PodGroupLabel}).Obj(), wantCaps: []int{2}, wantFilters: 1},
		{name: "spread of other pods by zone", pod: pod().SpreadConstraint(1, convoy.LabelTopologyZone, corev1.DoNotSchedule, other, nil, nil, nil, nil).Obj(),
			wantFilters: 1},
		{name: "spread by zone", pod: pod().SpreadConstraint(1, convoy.LabelTopologyZone, corev1.DoNotSchedule, own, nil, nil, nil, nil).Obj(),
			wantErr: `ns/job needs a topology spread of its own pods by "topology.kubernetes.io/zone" with whenUnsatisfiable DoNotSchedule (spec.topologySpreadConstraints[0])`},
	}
	nodes := []*corev1.Node{fakeNode("n0", "r0", 8), fakeNode("n1", "r1", 8)}
	h := newHarness(t, nodes, nil, inventory("n0", 8), inventory("n1", 8))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &gang{key: "ns/job"}
			e, err := h.state.eligibilityFor(context.Background(), tc.pod, g, h.nodeInfos())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := e.interPod
			if tc.wantNil {
				if c != nil {
					t.Fatalf("constraints = %+v, want none", c)
				}
				return
			}
			if c == nil {
				t.Fatal("no constraints")
			}
			var caps []int
			for _, cp := range c.caps {
				caps = append(caps, cp.limit)
			}
			if len(caps) != len(tc.wantCaps) || (len(caps) > 0 && caps[0] != tc.wantCaps[0]) {
				t.Errorf("caps = %v, want %v", caps, tc.wantCaps)
			}
			if c.level != tc.wantLevel {
				t.Errorf("level = %v, want %v", c.level, tc.wantLevel)
			}
			if tc.wantLevel != planner.LevelNone && (g.level != tc.wantLevel || !g.required) {
				t.Errorf("gang level = %v required %v, want %v required", g.level, g.required, tc.wantLevel)
			}
			if len(c.filters) != tc.wantFilters {
				t.Errorf("%d upstream filters run, want %d", len(c.filters), tc.wantFilters)
			}
		})
	}
}

// TestInterPodCapsCountPodsOnTheNode: a cap counts the matching pods already on a node, except the
// gang's own pending ones (planned anew), and a node at its cap takes none.
func TestInterPodCapsCountPodsOnTheNode(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{schedv1alpha1.PodGroupLabel: "job"}}
	bound := member("ns", "job", 1, 2).Node("n0").Obj()
	pending := member("ns", "job", 2, 2).Node("n1").Obj() // assumed, waiting at Permit
	stranger := lone("other", "x", 2).Label(schedv1alpha1.PodGroupLabel, "job").Node("n1").Obj()
	nodes := []*corev1.Node{fakeNode("n0", "r0", 8), fakeNode("n1", "r0", 8), fakeNode("n2", "r0", 8)}
	h := newHarness(t, nodes, []*corev1.Pod{bound, pending, stranger})
	pod := member("ns", "job", 0, 2).SpreadConstraint(2, corev1.LabelHostname, corev1.DoNotSchedule, own, nil, nil, nil, nil).Obj()
	e, err := h.state.eligibilityFor(context.Background(), pod, &gang{key: "ns/job"}, h.nodeInfos())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"n0": 1, "n1": 2, "n2": 2}
	for _, ni := range h.nodeInfos() {
		if got := e.interPod.maxPods(ni, map[types.UID]bool{pending.UID: true}); got != want[ni.Node().Name] {
			t.Errorf("%s takes %d pods of the gang, want %d", ni.Node().Name, got, want[ni.Node().Name])
		}
	}
	apart := member("ns", "job", 0, 2).PodAntiAffinity(corev1.LabelHostname, own, st.PodAntiAffinityWithRequiredReq).Obj()
	e, err = h.state.eligibilityFor(context.Background(), apart, &gang{key: "ns/job"}, h.nodeInfos())
	if err != nil {
		t.Fatal(err)
	}
	n0, _ := h.snap.NodeInfos().Get("n0")
	if got := e.interPod.maxPods(n0, nil); got != -1 {
		t.Errorf("n0, holding a pod of the gang, takes %d more under anti-affinity, want none (-1)", got)
	}
	if !e.interPod.excludes(context.Background(), n0) {
		t.Error("InterPodAffinity's Filter lets the gang's pod beside a pod it keeps apart from")
	}
}

// TestReplanFreesTheGangsOwnHeldPods: a gang whose pods keep apart by hostname is planned again
// while one of its pods is still held on a node (assumed, waiting at Permit). That pod is placed
// anew, so its node is not ruled out by its own anti-affinity: on two nodes the gang still fits.
func TestReplanFreesTheGangsOwnHeldPods(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{schedv1alpha1.PodGroupLabel: "job"}}
	apart := func(rank int) *corev1.Pod {
		return member("ns", "job", rank, 8).PodAntiAffinity(corev1.LabelHostname, own, st.PodAntiAffinityWithRequiredReq).Obj()
	}
	pods := []*corev1.Pod{apart(0), apart(1)}
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8))
	node := replanWithLeaderHeld(t, h, pods[0])
	cs, status := h.state.PlanFor(context.Background(), pods[1], h.nodeInfos())
	if got := slotOf(t, cs, status); strings.HasPrefix(got, node+":") {
		t.Errorf("second pod's slot = %s, on the leader's node", got)
	}
}

// TestReplanSeesTheGangsOwnHostPortsFree: a gang of host-port pods planned again while its leader
// is held on a node may use that node again; NodePorts reads the node's used ports, which include
// the held leader's.
func TestReplanSeesTheGangsOwnHostPortsFree(t *testing.T) {
	pods := []*corev1.Pod{member("ns", "job", 0, 8).HostPort(8080).Obj(), member("ns", "job", 1, 8).HostPort(8080).Obj()}
	h := newHarness(t, []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}, pods, inventory("a", 8), inventory("b", 8))
	replanWithLeaderHeld(t, h, pods[0])
}

// replanWithLeaderHeld plans the gang from its leader, holds the leader on its planned node (as
// at Permit), drops the plan (as when it times out) and plans again from the leader, which must
// get the same slot. It returns the leader's node.
func replanWithLeaderHeld(t *testing.T, h *harness, leader *corev1.Pod) string {
	t.Helper()
	ctx := context.Background()
	cs, status := h.state.PlanFor(ctx, leader, h.nodeInfos())
	first := slotOf(t, cs, status)
	node := strings.Split(first, ":")[0]
	h.state.Reserve(leader, node)
	assumed := leader.DeepCopy()
	assumed.Spec.NodeName = node
	h.setPods(assumed)

	h.state.mu.Lock()
	h.state.book.remove(GangKey(leader))
	h.state.mu.Unlock()
	cs, status = h.state.PlanFor(ctx, leader, h.nodeInfos())
	if !status.IsSuccess() {
		t.Fatalf("planning again with the leader held on %s: %v", node, status)
	}
	if got := slotOf(t, cs, status); got != first {
		t.Errorf("leader's slot = %s, want %s again", got, first)
	}
	return node
}

// TestInterPodTermSelectingSiblings: a term that selects the gang's other pods, not the pod being
// planned (a launcher keeping the workers apart), is among the gang's own pods.
func TestInterPodTermSelectingSiblings(t *testing.T) {
	workers := &metav1.LabelSelector{MatchLabels: map[string]string{convoy.LabelReplicaRole: "worker"}}
	launcher := member("ns", "job", 0, 1).Label(convoy.LabelReplicaRole, "launcher").
		PodAntiAffinity(corev1.LabelHostname, workers, st.PodAntiAffinityWithRequiredReq).Obj()
	worker := member("ns", "job", 1, 1).Label(convoy.LabelReplicaRole, "worker").
		PodAntiAffinity(corev1.LabelHostname, workers, st.PodAntiAffinityWithRequiredReq).Obj()
	h := newHarness(t, []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}, []*corev1.Pod{launcher, worker},
		inventory("a", 8), inventory("b", 8))
	h.state.mu.Lock()
	g := h.state.gangOf(launcher)
	h.state.mu.Unlock()
	e, err := h.state.eligibilityFor(context.Background(), launcher, g, h.nodeInfos())
	if err != nil {
		t.Fatal(err)
	}
	if e.interPod == nil || len(e.interPod.caps) != 1 || e.interPod.caps[0].limit != 1 {
		t.Fatalf("constraints = %+v, want one pod per node", e.interPod)
	}
	cs, status := h.state.PlanFor(context.Background(), launcher, h.nodeInfos())
	first := slotOf(t, cs, status)
	cs, status = h.state.PlanFor(context.Background(), worker, h.nodeInfos())
	if second := slotOf(t, cs, status); first[:1] == second[:1] {
		t.Errorf("launcher at %s and worker at %s share a node", first, second)
	}
}

// TestPreemptionEvictsWhatAntiAffinityForbids: a high-priority pod that keeps away from a
// lower-priority gang finds the one node with free GPUs beside that gang; preemption evicts the
// gang (whose pods stand in the way, not for their GPUs) and nominates that node. A node where a
// pod of higher priority stands in the way stays out.
func TestPreemptionEvictsWhatAntiAffinityForbids(t *testing.T) {
	noisy := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "noisy"}}
	low := member("ns", "low", 0, 4).Priority(1).Label("app", "noisy").Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3").Obj()
	high := lone("ns", "high", 8).Priority(100).Node("b").Obj()
	urgent := member("ns", "urgent", 0, 2).Priority(10).PodAntiAffinity(corev1.LabelHostname, noisy, st.PodAntiAffinityWithRequiredReq).Obj()
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	wantEvictedFromA(t, newHarness(t, nodes, []*corev1.Pod{low, high, urgent}, inventory("a", 8), inventory("b", 8)), urgent, "ns/low")

	// The same, with the noisy pod of higher priority than the urgent one: nothing can be done.
	h2 := newHarness(t, nodes, []*corev1.Pod{
		lone("ns", "noisy-high", 4).Priority(50).Label("app", "noisy").Node("a").Obj(),
		lone("ns", "filler", 4).Priority(1).Node("a").Obj(),
		high, urgent}, inventory("a", 8), inventory("b", 8))
	if _, status := h2.state.PreemptFor(context.Background(), urgent, h2.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute}); status.IsSuccess() {
		t.Errorf("PreemptFor() succeeded where a pod of higher priority keeps the urgent pod away")
	}
}

// TestPreemptorWaitsForTheVictimsInTheWay: the urgent pod keeps away from app=noisy, and node a
// holds two noisy low gangs; preemption evicts both. When the victim whose GPUs the urgent pod is
// planned to take is gone and the other is not yet, the slot's GPUs are free but the other victim
// still stands in the way: the urgent pod waits for it, rather than go to a node its filters
// would turn down (and then plan without a, the room it made).
func TestPreemptorWaitsForTheVictimsInTheWay(t *testing.T) {
	noisy := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "noisy"}}
	victims := []*corev1.Pod{
		member("ns", "loud", 0, 4).Priority(1).Label("app", "noisy").Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3").Obj(),
		member("ns", "quiet", 0, 2).Priority(1).Label("app", "noisy").Node("a").Annotation(AnnotationGPUIndices, "4,5").Obj(),
	}
	high := lone("ns", "high", 8).Priority(100).Node("b").Obj()
	urgent := member("ns", "urgent", 0, 2).Priority(10).PodAntiAffinity(corev1.LabelHostname, noisy, st.PodAntiAffinityWithRequiredReq).Obj()
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	h := newHarness(t, nodes, []*corev1.Pod{victims[0], victims[1], high, urgent}, inventory("a", 8), inventory("b", 8))
	wantEvictedFromA(t, h, urgent, "ns/quiet", "ns/loud")

	// The victim holding the planned GPUs goes first.
	planned := h.state.book.plans["ns/urgent"].slots[urgent.UID].GPUs
	gone, stays := victims[0], victims[1]
	if g, _ := ParseGPUIndices(stays.Annotations[AnnotationGPUIndices]); planned&^g == 0 {
		gone, stays = stays, gone
	}
	ctx := context.Background()
	h.deletePod(gone)
	h.setPods(stays, high)
	if _, status := h.state.PlanFor(ctx, urgent, h.nodeInfos()); status.IsSuccess() || !strings.Contains(status.Message(), "waits for the pods it preempted") {
		t.Errorf("PlanFor() with its GPUs (%s) free and %s still on a = %v %q, want it to wait for the victim",
			FormatGPUIndices(planned), stays.Name, status.Code(), status.Message())
	}

	h.deletePod(stays)
	h.setPods(high)
	got, status := h.state.PlanFor(ctx, urgent, h.nodeInfos())
	if !status.IsSuccess() || got.Slot.Node != "a" {
		t.Errorf("PlanFor() once the victims left = %v %q on %q, want the slot on a", status.Code(), status.Message(), got.Slot.Node)
	}
}

// TestPreemptionEvictsTheVictimsInTheWay: node a holds two lower-priority gangs and the urgent
// pod keeps away from pods labelled app=noisy. When one gang is noisy, preemption evicts that one
// alone and nominates a; when both are, it evicts both.
func TestPreemptionEvictsTheVictimsInTheWay(t *testing.T) {
	noisy := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "noisy"}}
	loud := member("ns", "loud", 0, 4).Priority(1).Label("app", "noisy").Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3").Obj()
	quiet := member("ns", "quiet", 0, 2).Priority(1).Node("a").Annotation(AnnotationGPUIndices, "4,5").Obj()
	high := lone("ns", "high", 8).Priority(100).Node("b").Obj()
	urgent := member("ns", "urgent", 0, 2).Priority(10).PodAntiAffinity(corev1.LabelHostname, noisy, st.PodAntiAffinityWithRequiredReq).Obj()
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	for _, tc := range []struct {
		name  string
		quiet *corev1.Pod
		want  []string // cheapest first
	}{
		{name: "one of two in the way", quiet: quiet, want: []string{"ns/loud"}},
		{name: "both in the way", quiet: member("ns", "quiet", 0, 2).Priority(1).Label("app", "noisy").Node("a").Annotation(AnnotationGPUIndices, "4,5").Obj(),
			want: []string{"ns/quiet", "ns/loud"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantEvictedFromA(t, newHarness(t, nodes, []*corev1.Pod{loud, tc.quiet, high, urgent}, inventory("a", 8), inventory("b", 8)), urgent, tc.want...)
		})
	}
}

// TestPreemptionEvictsTheOneInTheWayAmongMany: past eight victims on a node their sets are not
// weighed one by one, but evicting all of them is pruned to those the urgent pod needs gone: the
// noisy gang alone, not the nine quiet ones beside it.
func TestPreemptionEvictsTheOneInTheWayAmongMany(t *testing.T) {
	noisy := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "noisy"}}
	pods := []*corev1.Pod{
		member("ns", "loud", 0, 1).Priority(1).Label("app", "noisy").Node("a").Annotation(AnnotationGPUIndices, "0").Obj(),
		lone("ns", "high", 8).Priority(100).Node("b").Obj(),
	}
	for i := range 7 {
		pods = append(pods, member("ns", fmt.Sprintf("quiet-%d", i), 0, 1).Priority(1+int32(i%2)).Node("a").
			Annotation(AnnotationGPUIndices, strconv.Itoa(i+1)).Obj())
	}
	for i := range 2 {
		pods = append(pods, lone("ns", fmt.Sprintf("sidecar-%d", i), 0).Priority(1).Node("a").Obj())
	}
	urgent := member("ns", "urgent", 0, 1).Priority(10).PodAntiAffinity(corev1.LabelHostname, noisy, st.PodAntiAffinityWithRequiredReq).Obj()
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	wantEvictedFromA(t, newHarness(t, nodes, append(pods, urgent), inventory("a", 8), inventory("b", 8)), urgent, "ns/loud")
}

// TestPreemptionEvictsPodsWithoutGPUsInTheWay: the only node with room for the urgent pod holds no
// GPU pod of a lower priority, only a pod without GPUs that the urgent pod keeps away from: a
// parameter server, whose gang's worker holds GPUs elsewhere, or a lone pod. Preemption evicts its
// gang, or the lone pod, and nominates that node.
func TestPreemptionEvictsPodsWithoutGPUsInTheWay(t *testing.T) {
	noisy := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "noisy"}}
	urgent := member("ns", "urgent", 0, 4).Priority(10).PodAntiAffinity(corev1.LabelHostname, noisy, st.PodAntiAffinityWithRequiredReq).Obj()
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r1", 8)}
	// b is full with a pod of higher priority; c has 2 GPUs for the taking, too few.
	high := lone("ns", "high", 8).Priority(100).Node("b").Obj()
	highC := lone("ns", "high-c", 6).Priority(100).Node("c").Annotation(AnnotationGPUIndices, "2,3,4,5,6,7").Obj()
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want []string
	}{
		{name: "a parameter server", want: []string{"ns/tf"}, pods: []*corev1.Pod{
			member("ns", "tf", 0, 2).Priority(1).Node("c").Annotation(AnnotationGPUIndices, "0,1").Obj(),
			member("ns", "tf", 1, 0).Priority(1).Label("app", "noisy").Node("a").Obj(),
		}},
		{name: "a lone pod", want: []string{"ns/cache (pod)"}, pods: []*corev1.Pod{
			lone("ns", "cache", 0).Priority(1).Label("app", "noisy").Node("a").Obj(),
			lone("ns", "filler-c", 2).Priority(100).Node("c").Annotation(AnnotationGPUIndices, "0,1").Obj(),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantEvictedFromA(t, newHarness(t, nodes, append(tc.pods, high, highC, urgent), inventory("a", 8), inventory("b", 8), inventory("c", 8)), urgent, tc.want...)
		})
	}
}

// TestPreemptionFreesAHostPort: hostNetwork training gangs take the same ports on every node. A
// high-priority pod finds the one node with free GPUs taken, for its port, by a lower-priority
// gang's pod; preemption evicts that gang and nominates the node.
func TestPreemptionFreesAHostPort(t *testing.T) {
	low := member("ns", "low", 0, 4).Priority(1).HostPort(29500).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3").Obj()
	high := lone("ns", "high", 8).Priority(100).Node("b").Obj()
	urgent := member("ns", "urgent", 0, 4).Priority(10).HostPort(29500).Obj()
	wantEvictedFromA(t, newHarness(t, []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}, []*corev1.Pod{low, high, urgent},
		inventory("a", 8), inventory("b", 8)), urgent, "ns/low")
}

// wantEvictedFromA checks that urgent does not fit, and that preempting for it evicts the victims
// want (cheapest first) and nominates node a.
func wantEvictedFromA(t *testing.T, h *harness, urgent *corev1.Pod, want ...string) {
	t.Helper()
	ctx := context.Background()
	if _, status := h.state.PlanFor(ctx, urgent, h.nodeInfos()); status.IsSuccess() {
		t.Fatal("the urgent pod fits without preemption")
	}
	v, status := h.state.PreemptFor(ctx, urgent, h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute})
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v %q, want %v evicted", status.Code(), status.Message(), want)
	}
	if !slices.Equal(v.Gangs, want) || v.Node != "a" {
		t.Errorf("victims %v, nominated node %q; want %v evicted and a nominated", v.Gangs, v.Node, want)
	}
}
