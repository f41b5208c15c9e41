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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// A PodGroup whose minMember is below its pods is an elastic gang: Coscheduling lets it run once
// minMember pods are placed, and the plan places as many as fit, at least that many.

func setMinMember(h *harness, name string, n int32) {
	h.state.SetPodGroup(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: schedv1alpha1.PodGroupSpec{MinMember: n}})
}

// bindInAPI sets the pod's node in the API, as its binding would, and waits for the informer.
func bindInAPI(h *harness, p *corev1.Pod, node string) *corev1.Pod {
	h.t.Helper()
	ctx := context.Background()
	cur, err := h.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	cur.Spec.NodeName = node
	if cur, err = h.cs.CoreV1().Pods(p.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		got, err := h.factory.Core().V1().Pods().Lister().Pods(p.Namespace).Get(p.Name)
		return err == nil && got.Spec.NodeName == node, nil
	}); err != nil {
		h.t.Fatalf("the informer does not see pod %s bound", p.Name)
	}
	return cur
}

// TestElasticGangPlacesAsManyPodsAsFit: five 8-GPU pods, three free nodes. With minMember 2 the
// plan places the three lowest ranks and tells the other two they wait for room, without a plan
// or a preemption of their own; with minMember 4 or 5 nothing is placed, and the message says how
// many pods the gang may start with.
func TestElasticGangPlacesAsManyPodsAsFit(t *testing.T) {
	ctx := context.Background()
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r1", 8)}
	gangOf5 := func() []*corev1.Pod {
		var pods []*corev1.Pod
		for r := range 5 {
			pods = append(pods, member("ns", "job", r, 8).Obj())
		}
		return pods
	}

	t.Run("minMember 2", func(t *testing.T) {
		pods := gangOf5()
		h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8), inventory("c", 8))
		setMinMember(h, "job", 2)
		var got []string
		for _, p := range pods[:3] {
			st, status := h.state.PlanFor(ctx, p, h.nodeInfos())
			got = append(got, p.Name+"@"+slotOf(t, st, status))
		}
		slices.Sort(got)
		want := []string{"job-0@a:0,1,2,3,4,5,6,7", "job-1@b:0,1,2,3,4,5,6,7", "job-2@c:0,1,2,3,4,5,6,7"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("slots (-want,+got):\n%s", diff)
		}
		why := "ns/job starts with 3 of its 5 pending pods, as its PodGroup's minMember (2) allows: no room for this pod yet; it is placed when GPUs free up"
		for _, p := range pods[3:] {
			st, status := h.state.PlanFor(ctx, p, h.nodeInfos())
			if status.Code() != fwk.Unschedulable || status.Message() != why || st.Placed {
				t.Errorf("PlanFor(%s) = %v %q, want Unschedulable %q", p.Name, status.Code(), status.Message(), why)
			}
			if _, status := h.state.PreemptFor(ctx, p, h.nodeInfos(), PreemptOptions{Wait: time.Minute}); status.IsSuccess() || status.Message() != why {
				t.Errorf("PreemptFor(%s) = %v %q, want Unschedulable %q", p.Name, status.Code(), status.Message(), why)
			}
		}
		// The plan still holds for the pods it placed.
		if st, status := h.state.PlanFor(ctx, pods[1], h.nodeInfos()); slotOf(t, st, status) != "b:0,1,2,3,4,5,6,7" {
			t.Errorf("the plan changed after its pods left out were turned away: job-1 now at %s", slotOf(t, st, status))
		}
	})

	for _, tc := range []struct {
		minMember int32
		want      string
	}{
		{4, "ns/job needs 4 pod(s) × 8 GPU(s); the cluster has room for 3 pods (24 free GPUs on 3 nodes); its PodGroup's minMember (4) lets it start with 4 of its 5 pending pods"},
		{5, "ns/job needs 5 pod(s) × 8 GPU(s); the cluster has room for 3 pods (24 free GPUs on 3 nodes)"},
	} {
		t.Run("minMember "+itoa(int(tc.minMember)), func(t *testing.T) {
			pods := gangOf5()
			h := newHarness(t, nodes, pods, inventory("a", 8), inventory("b", 8), inventory("c", 8))
			setMinMember(h, "job", tc.minMember)
			st, status := h.state.PlanFor(ctx, pods[0], h.nodeInfos())
			if status.Code() != fwk.Unschedulable || status.Message() != tc.want || st.Placed {
				t.Errorf("PlanFor() = %v %q, want Unschedulable %q", status.Code(), status.Message(), tc.want)
			}
		})
	}
}

// TestElasticGangPodsLeftOutStartWhenRoomComes: the pods left out are activated once the plan's
// pods are bound, and take room that frees up later, one plan at a time. With minMember met by the
// pods bound, the last pod waits and preempts nothing.
func TestElasticGangPodsLeftOutStartWhenRoomComes(t *testing.T) {
	ctx := context.Background()
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r1", 8)}
	other := member("ns", "other", 0, 8).Priority(-1).Node("c").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj()
	var pods []*corev1.Pod
	for r := range 4 {
		pods = append(pods, member("ns", "job", r, 8).Obj())
	}
	h := newHarness(t, nodes, append([]*corev1.Pod{other}, pods...), inventory("a", 8), inventory("b", 8), inventory("c", 8))
	setMinMember(h, "job", 2)
	setMinMember(h, "other", 1)

	boundPods := []*corev1.Pod{other}
	for _, p := range pods[:2] {
		st, status := h.state.PlanFor(ctx, p, h.nodeInfos())
		if !status.IsSuccess() {
			t.Fatalf("PlanFor(%s) = %v", p.Name, status)
		}
		h.state.Reserve(p, st.Slot.Node)
		boundPods = append(boundPods, bindInAPI(h, p, st.Slot.Node))
	}
	if _, status := h.state.PlanFor(ctx, pods[2], h.nodeInfos()); status.IsSuccess() {
		t.Fatal("job-2 has a slot: the plan should hold two pods")
	}
	before := len(h.activated.list())
	for _, p := range pods[:2] {
		h.state.Bound(p)
	}
	got := h.activated.list()[before:]
	slices.Sort(got)
	if diff := cmp.Diff([]string{"ns/job-2", "ns/job-3"}, got); diff != "" {
		t.Errorf("activated once the plan was bound (-want,+got):\n%s", diff)
	}
	h.setPods(boundPods...)

	// Nothing free: the pods beyond minMember wait, and evict nothing, though "other" has a lower
	// priority.
	st, status := h.state.PlanFor(ctx, pods[2], h.nodeInfos())
	if want := "ns/job needs 1 pod(s) × 8 GPU(s); the cluster has room for 0 pods (0 free GPUs on 0 nodes); " +
		"the gang has its PodGroup's minMember (2) of pods bound, and its other pods wait for room"; status.Message() != want || st.Placed {
		t.Fatalf("PlanFor(job-2) on a full cluster = %v %q, want Unschedulable %q", status.Code(), status.Message(), want)
	}
	if _, status := h.state.PreemptFor(ctx, pods[2], h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute}); status.IsSuccess() ||
		!strings.Contains(status.Message(), "has its PodGroup's minMember (2) of pods bound") {
		t.Errorf("PreemptFor(job-2) = %v %q, want no preemption for pods beyond minMember", status.Code(), status.Message())
	}

	// Node c frees up: one more pod fits, and the last is left out again.
	h.deletePod(other)
	h.setPods(boundPods[1:]...)
	if st, status := h.state.PlanFor(ctx, pods[2], h.nodeInfos()); slotOf(t, st, status) != "c:0,1,2,3,4,5,6,7" {
		t.Errorf("job-2 at %s, want c", slotOf(t, st, status))
	}
	if _, status := h.state.PlanFor(ctx, pods[3], h.nodeInfos()); status.IsSuccess() ||
		!strings.Contains(status.Message(), "ns/job starts with 1 of its 2 pending pods") {
		t.Errorf("PlanFor(job-3) = %v %q, want it left out", status.Code(), status.Message())
	}
}

// TestElasticGangPreemptsForItsMinMemberOnly: two nodes, each held by a low-priority job. An
// urgent gang of two 8-GPU pods with minMember 1 evicts one job, not both, and its second pod
// waits for room.
func TestElasticGangPreemptsForItsMinMemberOnly(t *testing.T) {
	ctx := context.Background()
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	low := []*corev1.Pod{
		member("ns", "low-a", 0, 8).Priority(1).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj(),
		member("ns", "low-b", 0, 8).Priority(1).Node("b").Annotation(AnnotationGPUIndices, "0,1,2,3,4,5,6,7").Obj(),
	}
	urgent := []*corev1.Pod{member("ns", "urgent", 0, 8).Priority(10).Obj(), member("ns", "urgent", 1, 8).Priority(10).Obj()}
	h := newHarness(t, nodes, append(slices.Clone(low), urgent...), inventory("a", 8), inventory("b", 8))
	setMinMember(h, "low-a", 1)
	setMinMember(h, "low-b", 1)
	setMinMember(h, "urgent", 1)

	_, status := h.state.PlanFor(ctx, urgent[0], h.nodeInfos())
	if want := "; its PodGroup's minMember (1) lets it start with 1 of its 2 pending pods"; status.IsSuccess() || !strings.HasSuffix(status.Message(), want) {
		t.Fatalf("PlanFor() = %v %q, want Unschedulable ending %q", status.Code(), status.Message(), want)
	}
	v, status := h.state.PreemptFor(ctx, urgent[0], h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute})
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v", status)
	}
	if len(v.Gangs) != 1 || len(v.Pods) != 1 || v.Node != v.Pods[0].Spec.NodeName {
		t.Errorf("PreemptFor() evicts %v (pods %d) for node %q, want one job, on the preemptor's node", v.Gangs, len(v.Pods), v.Node)
	}
	if _, status := h.state.PlanFor(ctx, urgent[1], h.nodeInfos()); status.IsSuccess() ||
		!strings.Contains(status.Message(), "ns/urgent starts with 1 of its 2 pending pods") {
		t.Errorf("PlanFor(urgent-1) = %v %q, want it left out", status.Code(), status.Message())
	}
}

// TestPodBoundBeforeTheInformerShowsItIsNotPending: a pod of an elastic gang created just after
// its sibling bound, while the pod informer still shows the sibling pending. The sibling is not
// taken for the gang's leader (the new pod would wait in PreEnqueue for it, for good) nor planned
// again.
func TestPodBoundBeforeTheInformerShowsItIsNotPending(t *testing.T) {
	ctx := context.Background()
	first := member("ns", "job", 0, 4).Obj()
	h := newHarness(t, []*corev1.Node{fakeNode("a", "r1", 8)}, []*corev1.Pod{first}, inventory("a", 8))
	setMinMember(h, "job", 1)
	st, status := h.state.PlanFor(ctx, first, h.nodeInfos())
	if got := slotOf(t, st, status); got != "a:0,1,2,3" {
		t.Fatalf("job-0 at %s, want a:0,1,2,3", got)
	}
	h.state.Reserve(first, "a")
	h.state.Bound(first)
	bound := first.DeepCopy()
	bound.Spec.NodeName = "a"
	bound.Annotations = map[string]string{AnnotationGPUIndices: "0,1,2,3"}
	h.setPods(bound)

	late := member("ns", "job", 1, 4).Obj()
	if _, err := h.cs.CoreV1().Pods("ns").Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, err := h.factory.Core().V1().Pods().Lister().Pods("ns").Get(late.Name)
		return err == nil, nil
	}); err != nil {
		t.Fatal("the informer does not see job-1")
	}
	if ok, why := h.state.Gate(late); !ok {
		t.Errorf("Gate(job-1) holds it: %s", why)
	}
	st, status = h.state.PlanFor(ctx, late, h.nodeInfos())
	if got := slotOf(t, st, status); got != "a:4,5,6,7" {
		t.Errorf("job-1 at %s, want a:4,5,6,7", got)
	}
}
