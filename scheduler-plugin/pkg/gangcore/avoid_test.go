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
)

// TestRejectedNodeIsLeftOut: a planned node another filter rejected is out of the gang's next
// plans, named in its message when the gang no longer fits, and back after avoidTTL (draAvoidTTL
// when DynamicResources rejected it).
func TestRejectedNodeIsLeftOut(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8)}
	// a is the best fit for a 4-GPU pod.
	busy := lone("other", "busy", 4).Node("a").Obj()
	pod := member("ns", "job", 0, 4).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{busy, pod}, inventory("a", 8), inventory("b", 8))
	ctx := context.Background()
	now := time.Now()
	h.state.now = func() time.Time { return now }

	cs, status := h.state.PlanFor(ctx, pod, h.nodeInfos())
	if got := slotOf(t, cs, status); !strings.HasPrefix(got, "a:") {
		t.Fatalf("first slot = %s, want on a (best fit)", got)
	}
	h.state.Rejected(ctx, pod, "a", "VolumeBinding", "node(s) had volume node affinity conflict")
	cs, status = h.state.PlanFor(ctx, pod, h.nodeInfos())
	if got := slotOf(t, cs, status); !strings.HasPrefix(got, "b:") {
		t.Fatalf("slot after a was rejected = %s, want on b", got)
	}

	h.state.Rejected(ctx, pod, "b", "VolumeZone", "node(s) had no available volume zone")
	_, status = h.state.PlanFor(ctx, pod, h.nodeInfos())
	want := "; left out after a filter rejected the plan there: a (VolumeBinding: node(s) had volume node affinity conflict), b (VolumeZone: node(s) had no available volume zone)"
	if status.IsSuccess() || !strings.HasSuffix(status.Message(), want) {
		t.Errorf("with both nodes rejected: %v %q, want unschedulable ending %q", status.Code(), status.Message(), want)
	}

	// A node DynamicResources rejected (the claims of a deleted gang not yet released) is back
	// after draAvoidTTL, the others after avoidTTL.
	h.state.Rejected(ctx, pod, "a", "DynamicResources", "cannot allocate all claims")
	now = now.Add(draAvoidTTL)
	h.state.bump() // the verdict holds until the cluster changes
	cs, status = h.state.PlanFor(ctx, pod, h.nodeInfos())
	if got := slotOf(t, cs, status); !strings.HasPrefix(got, "a:") {
		t.Errorf("slot draAvoidTTL after DynamicResources rejected a = %s, want on a again", got)
	}
	h.state.Rejected(ctx, pod, "a", "VolumeBinding", "node(s) had volume node affinity conflict")

	now = now.Add(avoidTTL)
	h.state.bump()
	cs, status = h.state.PlanFor(ctx, pod, h.nodeInfos())
	if got := slotOf(t, cs, status); !strings.HasPrefix(got, "a:") {
		t.Errorf("slot after avoidTTL = %s, want on a again", got)
	}
}
