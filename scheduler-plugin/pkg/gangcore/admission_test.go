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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// bookingHarness is a harness whose nodes the informers show too, as Book reads them: two racks
// of two 8-GPU nodes, with one node of rack r1 full, and the pods given.
func bookingHarness(t *testing.T, pods ...*corev1.Pod) *harness {
	t.Helper()
	nodes := []*corev1.Node{fakeNode("a0", "r0", 8), fakeNode("a1", "r0", 8), fakeNode("b0", "r1", 8), fakeNode("b1", "r1", 8)}
	h := newHarness(t, nodes, append([]*corev1.Pod{lone("ns", "filler", 8).Node("b0").Obj()}, pods...))
	ctx := context.Background()
	for _, n := range nodes {
		if _, err := h.cs.CoreV1().Nodes().Create(ctx, n, metav1CreateOptions); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		list, err := h.state.nodesNow()
		return err == nil && len(list) == len(nodes), nil
	}); err != nil {
		t.Fatal("the informer does not show the nodes")
	}
	return h
}

// rackGang is the not yet created pods of a gang of two 8-GPU pods that requires one rack.
func rackGang(name string) []*corev1.Pod {
	var pods []*corev1.Pod
	for r := range 2 {
		pods = append(pods, member("ns", name, r, 8).Annotation(convoy.AnnotationTopologyLevel, "rack").Obj())
	}
	return pods
}

func TestBookingHoldsTheGangsPlaceUntilItsPodsArePlanned(t *testing.T) {
	h := bookingHarness(t)
	ctx := context.Background()

	where, err := h.state.Book(ctx, "ns/wl-a", "ns/a", rackGang("a"))
	if err != nil || !strings.Contains(where, "a0, a1") {
		t.Fatalf("Book(a) = %q, %v; want a booked on a0 and a1, the one free rack", where, err)
	}
	if again, err := h.state.Book(ctx, "ns/wl-a", "ns/a", rackGang("a")); err != nil || again != where {
		t.Errorf("Book(a) again = %q, %v; want the same booking kept", again, err)
	}
	if _, err := h.state.Book(ctx, "ns/wl-b", "ns/b", rackGang("b")); err == nil || !strings.Contains(err.Error(), "rack") {
		t.Errorf("Book(b) = %v; want b refused, with the planner's reason naming the rack it needs", err)
	}

	// A plan of any priority keeps off the booked GPUs: a pod of 8 GPUs of the highest priority
	// gets b1, the one node left.
	urgent := lone("ns", "urgent", 8).Priority(1 << 30).Obj()
	st, status := h.state.PlanFor(ctx, urgent, h.nodeInfos())
	if !status.IsSuccess() || st.Slot.Node != "b1" {
		t.Errorf("PlanFor(urgent) = %+v, %v; want b1, off the booking", st, status)
	}

	// a's pods come: their plan takes the booking's place, and the booking is gone.
	pods := rackGang("a")
	h.setPods(append(pods, lone("ns", "filler", 8).Node("b0").Obj())...)
	for _, p := range pods {
		if _, err := h.cs.CoreV1().Pods("ns").Create(ctx, p, metav1CreateOptions); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(h.state.gangs.members("ns", "a")) == 2, nil
	}); err != nil {
		t.Fatal("the informer does not show a's pods")
	}
	st, status = h.state.PlanFor(ctx, pods[0], h.nodeInfos())
	if !status.IsSuccess() || (st.Slot.Node != "a0" && st.Slot.Node != "a1") {
		t.Errorf("PlanFor(a-0) = %+v, %v; want a slot in rack r0", st, status)
	}
	if _, ok := h.state.BookedAt("ns/a"); ok {
		t.Error("a still holds its booking once its pods are planned")
	}
}

func TestReleasedBookingMakesRoom(t *testing.T) {
	h := bookingHarness(t)
	ctx := context.Background()
	if _, err := h.state.Book(ctx, "ns/wl-a", "ns/a", rackGang("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.state.Book(ctx, "ns/wl-b", "ns/b", rackGang("b")); err == nil {
		t.Fatal("Book(b) succeeded while a holds the one free rack")
	}
	h.state.ReleaseBooking("ns/a")
	if where, err := h.state.Book(ctx, "ns/wl-b", "ns/b", rackGang("b")); err != nil {
		t.Errorf("Book(b) after a's booking was released = %q, %v; want b booked", where, err)
	}
	if got := h.state.Bookings(); len(got) != 1 || got["ns/b"] != "ns/wl-b" {
		t.Errorf("Bookings() = %v, want only b's", got)
	}
}

// TestBookingFollowsNodeChanges: a booking whose node is cordoned is planned again: where the gang
// fits elsewhere it is booked there; where it fits nowhere the booking is dropped and Book says
// why, so that the admission check sends the Workload back to Kueue.
func TestBookingFollowsNodeChanges(t *testing.T) {
	h := bookingHarness(t)
	ctx := context.Background()
	if where, err := h.state.Book(ctx, "ns/wl-a", "ns/a", rackGang("a")); err != nil || !strings.Contains(where, "a0, a1") {
		t.Fatalf("Book(a) = %q, %v; want a booked on a0 and a1", where, err)
	}
	h.deletePod(lone("ns", "filler", 8).Node("b0").Obj())
	h.cordon("a1")
	if where, err := h.state.Book(ctx, "ns/wl-a", "ns/a", rackGang("a")); err != nil || !strings.Contains(where, "b0, b1") {
		t.Errorf("Book(a) with a1 cordoned = %q, %v; want a booked again on b0 and b1, the rack now free", where, err)
	}
	h.cordon("b1")
	if where, err := h.state.Book(ctx, "ns/wl-a", "ns/a", rackGang("a")); err == nil || !strings.Contains(err.Error(), "cordon") {
		t.Errorf("Book(a) with a1 and b1 cordoned = %q, %v; want a refused, the planner naming the cordon", where, err)
	}
	if _, ok := h.state.BookedAt("ns/a"); ok {
		t.Error("a still holds a booking that no longer fits")
	}
}

// TestBookingOfAGrowingGangStaysInItsRack: a gang that requires one rack runs rank 0 on b1, the
// rest of rack r1 full; the rank it grows by is not booked in rack r0, free as it is, but only
// once a node of r1 has room.
func TestBookingOfAGrowingGangStaysInItsRack(t *testing.T) {
	h := bookingHarness(t, member("ns", "g", 0, 8).Annotation(convoy.AnnotationTopologyLevel, "rack").Node("b1").Obj())
	ctx := context.Background()
	added := []*corev1.Pod{rackGang("g")[1]}
	if where, err := h.state.Book(ctx, "ns/wl-g", "ns/g", added); err == nil || !strings.Contains(err.Error(), "running on node b1 keep the pods it adds in rack z/b/r1") {
		t.Fatalf("Book(g's rank 1) = %q, %v; want it refused, naming the gang's rack r1, which is full", where, err)
	}
	h.deletePod(lone("ns", "filler", 8).Node("b0").Obj())
	if where, err := h.state.Book(ctx, "ns/wl-g", "ns/g", added); err != nil || !strings.HasSuffix(where, "on node(s) b0") {
		t.Errorf("Book(g's rank 1) with b0 free = %q, %v; want it booked on b0, in the gang's rack", where, err)
	}
}

// cordon marks the node unschedulable in the API and waits until the State's informer has it so.
func (h *harness) cordon(name string) {
	h.t.Helper()
	ctx := context.Background()
	node, err := h.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	node.Spec.Unschedulable = true
	if _, err := h.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		n, err := h.factory.Core().V1().Nodes().Lister().Get(name)
		return err == nil && n.Spec.Unschedulable, nil
	}); err != nil {
		h.t.Fatalf("the informer does not show %s cordoned", name)
	}
}

// TestBookingOfAGrowingGangMovesWhole: the gang of TestBookingOfAGrowingGangStaysInItsRack, its
// rank 0 of attempt 3 on b1 and rack r1 full, has no room to grow in r1; booked to move, the whole
// gang at its grown size is held in rack r0, naming attempt 3, whose pods wait at the gate while
// the booking stands. A gang with no running pod has nothing to move.
func TestBookingOfAGrowingGangMovesWhole(t *testing.T) {
	running := member("ns", "g", 0, 8).Annotation(convoy.AnnotationTopologyLevel, "rack").Label(convoy.LabelRestartAttempt, "3").Node("b1").Obj()
	h := bookingHarness(t, running)
	ctx := context.Background()
	if _, err := h.state.Book(ctx, "ns/wl-g", "ns/g", rackGang("g")[1:]); err == nil {
		t.Fatal("Book(g's rank 1) fits in rack r1, which is full")
	}
	where, attempt, err := h.state.BookMove(ctx, "ns/wl-g", "ns/g", rackGang("g"))
	if err != nil || attempt != 3 || !strings.HasSuffix(where, "16 GPU(s) for the gang on node(s) a0, a1") {
		t.Fatalf("BookMove(g) = %q, %d, %v; want both ranks held on a0 and a1 in rack r0, for attempt 3", where, attempt, err)
	}
	added := member("ns", "g", 1, 8).Annotation(convoy.AnnotationTopologyLevel, "rack").Label(convoy.LabelRestartAttempt, "3").Obj()
	if ok, why := h.state.Gate(added); ok || !strings.Contains(why, "moves whole") {
		t.Errorf("Gate(g's added rank of attempt 3) = %t, %q; want it held while the gang moves", ok, why)
	}
	if where2, attempt2, err := h.state.BookMove(ctx, "ns/wl-g", "ns/g", rackGang("g")); err != nil || where2 != where || attempt2 != 3 {
		t.Errorf("BookMove(g) again = %q, %d, %v; want the booking kept", where2, attempt2, err)
	}
	h.state.ReleaseBooking("ns/g")
	if a, ok := h.state.Moving("ns/g"); ok {
		t.Errorf("Moving(g) = %d after its booking was released, want none", a)
	}
	if ok, why := h.state.Gate(added); !ok && strings.Contains(why, "moves whole") {
		t.Errorf("Gate(g's added rank) still says %q once the booking is gone", why)
	}
	if where, _, err := h.state.BookMove(ctx, "ns/wl-n", "ns/n", rackGang("n")); err == nil || !strings.Contains(err.Error(), "no running pods") {
		t.Errorf("BookMove(n), a gang with no pod running, = %q, %v; want it refused", where, err)
	}
}
