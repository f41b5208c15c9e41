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

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// claimPod is a pod named name that claims the ResourceClaim claim.
func claimPod(name, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To(claim)}}}}
}

// claimAt is claim name at resourceVersion rv, allocated a device when allocated, reserved for
// the pods named.
func claimAt(name, rv string, allocated bool, reservedFor ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	if allocated {
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "dev", Driver: "nic.example.com", Pool: "a", Device: "nic-0"}}}}
	}
	for _, p := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID(p)})
	}
	return c
}

// startClaimWaiters runs claimWaiters over a claim cache at version *cached, sending each
// activation's pods, sorted, on the channel.
func startClaimWaiters(t *testing.T, cached *atomic.Int64) (*claimWaiters, chan []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	activated := make(chan []string, 10)
	w := newClaimWaiters(func(_ klog.Logger, pods map[string]*corev1.Pod) {
		var names []string
		for k := range pods {
			names = append(names, k)
		}
		slices.Sort(names)
		activated <- names
	}, func(string) (string, bool) { return itoa(int(cached.Load())), true })
	go w.loop(ctx)
	return w, activated
}

// TestClaimWaitersActivateThePodsAClaimChangeConcerns: a pod DynamicResources may have turned away
// is activated when its own claim's status changes or any claim frees its devices (as upstream's
// queueing hint for a claim updated would requeue it), and not for a change of no status.
func TestClaimWaitersActivateThePodsAClaimChangeConcerns(t *testing.T) {
	cases := map[string]struct {
		change func(w *claimWaiters)
		want   []string
	}{
		"its claim reserved for another pod, then released": {
			change: func(w *claimWaiters) { w.updated(claimAt("c1", "9", true, "x"), claimAt("c1", "10", true)) },
			want:   []string{"ns/a"},
		},
		"an unused claim's devices freed": {
			change: func(w *claimWaiters) { w.updated(claimAt("c3", "9", true), claimAt("c3", "10", false)) },
			want:   []string{"ns/a", "ns/b"},
		},
		"an allocation assumed in the claim cache taken back": {
			change: func(w *claimWaiters) { w.freed() },
			want:   []string{"ns/a", "ns/b"},
		},
		"another claim allocated": {
			change: func(w *claimWaiters) { w.updated(claimAt("c3", "9", false), claimAt("c3", "10", true)) },
		},
		"its claim labelled": {
			change: func(w *claimWaiters) {
				labelled := claimAt("c1", "10", false)
				labelled.Labels = map[string]string{"team": "a"}
				w.updated(claimAt("c1", "9", false), labelled)
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var cached atomic.Int64
			cached.Store(10)
			w, activated := startClaimWaiters(t, &cached)
			w.await(claimPod("a", "c1"))
			w.await(claimPod("b", "c2"))
			tc.change(w)
			var got []string
			select {
			case got = <-activated:
			case <-time.After(200 * time.Millisecond):
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pods activated (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestClaimWaitersWaitForTheClaimCache: a pod is activated for a claim's update only once the
// scheduler's claim cache has it, so that its next attempt reads it; a pod forgotten (bound) is
// not, and one activated is not again for the next change.
func TestClaimWaitersWaitForTheClaimCache(t *testing.T) {
	var cached atomic.Int64
	cached.Store(9)
	w, activated := startClaimWaiters(t, &cached)
	w.await(claimPod("a", "c1"))
	w.await(claimPod("b", "c2"))
	w.forget("b")
	w.updated(claimAt("c3", "9", true), claimAt("c3", "10", false))
	select {
	case got := <-activated:
		t.Fatalf("pods %v activated before the claim cache had the claim's update", got)
	case <-time.After(100 * time.Millisecond):
	}
	cached.Store(10)
	select {
	case got := <-activated:
		if diff := cmp.Diff([]string{"ns/a"}, got); diff != "" {
			t.Errorf("pods activated (-want,+got):\n%s", diff)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no pod activated once the claim cache had the update")
	}
	w.freed()
	select {
	case got := <-activated:
		t.Errorf("pods %v activated again without being turned away again", got)
	case <-time.After(100 * time.Millisecond):
	}
}
