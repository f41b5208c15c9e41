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
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestWaitersWakeOnceForABurst: a burst of wakes activates the pods still waiting once, and forgets
// them.
func TestWaitersWakeOnceForABurst(t *testing.T) {
	a := &activator{}
	const gather = 20 * time.Millisecond
	w := newWaiters(a.Activate, gather, time.Hour, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.loop(ctx)

	first, placed := lone("ns", "first", 1).Obj(), lone("ns", "placed", 1).Obj()
	w.await(first)
	w.await(placed)
	w.found(placed.UID)
	for range 3 {
		w.moreRoom()
	}
	waitFor(t, "an activation", func() bool { return len(a.list()) > 0 })
	time.Sleep(10 * gather)
	if got := a.list(); !slices.Equal(got, []string{"ns/first"}) {
		t.Errorf("activated %v, want [ns/first] once", got)
	}
	// Activated pods are forgotten: the next wake activates no one.
	w.moreRoom()
	time.Sleep(10 * gather)
	if got := a.list(); len(got) != 1 {
		t.Errorf("activated %v after a wake with no pod waiting, want [ns/first]", got)
	}
}

// TestWaitersRetryArmsOnceAndBacksOff: a gang's retry is armed once however often it is asked
// for, and each retry waits twice the one before, up to the most, until the backoff is reset.
func TestWaitersRetryArmsOnceAndBacksOff(t *testing.T) {
	a := &activator{}
	// A backoff forgets a gang not retried for twice the most: the steps stay well inside that.
	const first, most = 100 * time.Millisecond, 400 * time.Millisecond
	w := newWaiters(a.Activate, time.Hour, first, most)
	pod := lone("ns", "p", 1).Obj()
	var asked atomic.Int32
	pending := func() map[string]*corev1.Pod {
		asked.Add(1)
		return map[string]*corev1.Pod{"ns/p": pod}
	}
	for i, want := range []time.Duration{first, 2 * first, most, most} {
		w.retry("ns/job", pending)
		w.retry("ns/job", pending) // armed already
		if d := w.backoff.Get("ns/job"); d != want {
			t.Errorf("retry %d: delay %v, want %v", i, d, want)
		}
		waitFor(t, "the retry", func() bool { return len(a.list()) == i+1 })
		waitFor(t, "the retry to be disarmed", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return !w.armed["ns/job"]
		})
	}
	if n := asked.Load(); n != 4 {
		t.Errorf("the gang's pending pods were read %d times, want 4 (once per retry)", n)
	}
	w.resetBackoff("ns/job")
	if d := w.backoff.Get("ns/job"); d != 0 {
		t.Errorf("delay after reset = %v, want 0", d)
	}
}

// TestGangTriedBeforeTheStateSawAGPUPodGoIsTriedAgain: the scheduling queue requeues a gang when a
// pod holding GPUs is deleted, from its own handler: the gang may be tried before the State's
// handler has seen the pod go, and find its verdict still holding. Once the State sees it, the
// gang is activated and then plans into the GPUs the pod held.
func TestGangTriedBeforeTheStateSawAGPUPodGoIsTriedAgain(t *testing.T) {
	ctx := context.Background()
	old := lone("ns", "old", 8).Node("a").Obj()
	next := member("ns", "next", 0, 8).Obj()
	h := newHarness(t, []*corev1.Node{fakeNode("a", "r1", 8)}, []*corev1.Pod{old, next}, inventory("a", 8))
	setMinMember(h, "next", 1)
	// The GPUNode's arrival woke the waiters: let that wake pass with no pod waiting.
	waitFor(t, "the GPUNode's wake taken", func() bool { return len(h.state.waiters.wake) == 0 })
	time.Sleep(2 * wakeDelay)

	if _, status := h.state.PlanFor(ctx, next, h.nodeInfos()); status.IsSuccess() {
		t.Fatal("next planned while old holds the node's GPUs")
	}
	// The scheduler's cache has lost the pod; the State has not seen it go yet.
	h.setPods()
	if _, status := h.state.PlanFor(ctx, next, h.nodeInfos()); status.IsSuccess() {
		t.Fatal("next planned on a verdict the State could not yet know to be stale; the test no longer shows the race")
	}
	before := len(h.activated.list())
	h.deletePod(old)
	waitFor(t, "next activated once the State saw old go", func() bool {
		return slices.Contains(h.activated.list()[before:], "ns/next-0")
	})
	if _, status := h.state.PlanFor(ctx, next, h.nodeInfos()); !status.IsSuccess() {
		t.Errorf("PlanFor(next) once activated = %v %q, want a plan", status.Code(), status.Message())
	}
}
