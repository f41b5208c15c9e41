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
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// TestPlanBookClaims: a gang keeps off the planned slots of plans of its priority or more and of
// bookings, whatever their priority; the index by node answers as the full walk does, and replacing
// or dropping plans and bookings leaves no slot behind.
func TestPlanBookClaims(t *testing.T) {
	registerMetrics()
	m := meter{t}
	planned0 := m.gauge(gangsPlanned)
	b := newPlanBook()
	on := func(priority int32, slots ...Slot) *plan {
		p := &plan{priority: priority, slots: map[types.UID]*slot{}}
		for i, sl := range slots {
			p.slots[types.UID(itoa(i))] = &slot{Slot: sl}
		}
		return p
	}
	low := on(0, Slot{Node: "a", GPUs: planner.NewGPUSet(0, 1), Indexed: true})
	high := on(10, Slot{Node: "a", GPUs: planner.NewGPUSet(2, 3), Indexed: true}, Slot{Node: "b", GPUs: planner.FirstGPUs(2)})
	booked := on(math.MaxInt32, Slot{Node: "c", GPUs: planner.NewGPUSet(4), Indexed: true})
	b.set("ns/low", low)
	b.set("ns/high", high)
	b.book("ns/booked", "wl", booked)
	if got := m.gauge(gangsPlanned) - planned0; got != 2 {
		t.Errorf("gangs_planned rose by %v, want 2 (bookings are not plans)", got)
	}

	g := &gang{key: "ns/mid", priority: 5}
	want := map[string][]claim{
		"a": {{planner.NewGPUSet(2, 3), true}},
		"b": {{planner.FirstGPUs(2), false}},
		"c": {{planner.NewGPUSet(4), true}},
	}
	if diff := cmp.Diff(want, b.claims(g), cmp.AllowUnexported(claim{})); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	for _, node := range []string{"a", "b", "c", "d"} {
		if diff := cmp.Diff(want[node], b.claimsOn(g, node), cmp.AllowUnexported(claim{})); diff != "" {
			t.Errorf("claims on %s (-want +got):\n%s", node, diff)
		}
	}
	// A gang's own plan and a reserved slot claim nothing.
	high.slots["0"].phase = slotReserved
	if got := b.claimsOn(&gang{key: "ns/high", priority: 10}, "b"); len(got) != 0 {
		t.Errorf("the gang's own slots claim %v of it", got)
	}
	if got := b.claimsOn(g, "a"); len(got) != 0 {
		t.Errorf("a reserved slot claims %v", got)
	}

	b.set("ns/high", on(10, Slot{Node: "d", GPUs: planner.FirstGPUs(1)}))
	if got := len(b.onNode["b"]); got != 0 {
		t.Errorf("node b holds %d slots of the replaced plan", got)
	}
	if b.unbook("ns/booked"); b.unbook("ns/booked") {
		t.Error("a booking was dropped twice")
	}
	b.remove("ns/low")
	b.remove("ns/high")
	if b.remove("ns/high") != nil {
		t.Error("a plan was removed twice")
	}
	if len(b.onNode)+len(b.plans)+len(b.bookings)+len(b.bookedFor) != 0 {
		t.Errorf("the book holds slots %v, plans %v, bookings %v after all went", b.onNode, b.plans, b.bookings)
	}
	if got := m.gauge(gangsPlanned) - planned0; got != 0 {
		t.Errorf("gangs_planned is %v above where it began once every plan went, want 0", got)
	}
}
