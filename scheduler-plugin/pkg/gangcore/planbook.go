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
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// planBook holds what GPUs are promised to whom: the plans of gangs being placed, the bookings the
// admission check holds for admitted gangs (see admission.go), an index of both's slots by node,
// and the GPUs reserved for pods on their way to binding. It has no lock: State.mu guards it.
type planBook struct {
	plans map[string]*plan
	// bookings hold, by gang, the placements the admission check holds for admitted gangs until
	// their pods are planned; bookedFor names, by gang, the Workload each booking is for.
	bookings  map[string]*plan
	bookedFor map[string]string
	// onNode holds the slots of plans and bookings, by node, for a later pod's check of its own
	// slot (see claimsOn).
	onNode   map[string][]planSlot
	reserved map[types.UID]reservation
	// log lists the nodes whose claims changed, for the kept views (see keptView): a slot
	// indexed or unindexed, reserved or bound there.
	log changeLog
}

func newPlanBook() *planBook {
	return &planBook{plans: map[string]*plan{}, bookings: map[string]*plan{}, bookedFor: map[string]string{},
		onNode: map[string][]planSlot{}, reserved: map[types.UID]reservation{}}
}

// Slot is where a plan puts one pod.
type Slot struct {
	// Node is the node's name.
	Node string
	// GPUs are the GPUs chosen on it; Indexed tells whether they are real indices (the node has a
	// GPUNode) or stand-ins for a count.
	GPUs    planner.GPUSet
	Indexed bool
}

type slotPhase int

const (
	slotPlanned slotPhase = iota
	slotReserved
	slotBound
)

type slot struct {
	Slot
	phase slotPhase
}

// plan is a gang's placement while its pods are scheduled one by one.
type plan struct {
	priority int32
	created  time.Time
	slots    map[types.UID]*slot
	// preempting marks a plan made by preemption, waiting for its victims to go.
	preempting bool
	// since is when the first of the planned pods was created (see gang_time_to_bound_seconds).
	since time.Time
	// leftOut are the pending pods of an elastic gang the plan has no room for, and what they are
	// told: they wait for room of their own, and start no plan or preemption while this one holds.
	leftOut    map[types.UID]bool
	leftOutWhy string
}

// reservation is a pod's GPUs from Reserve until the pod is deleted.
type reservation struct {
	node string
	gpus planner.GPUSet
}

// claim is a planned, not yet reserved slot of another gang: gangs of no higher priority keep off.
type claim struct {
	gpus    planner.GPUSet
	indexed bool
}

// planSlot is a slot of the plan of gang key.
type planSlot struct {
	key  string
	plan *plan
	slot *slot
}

// set records the gang's plan, in place of any other.
func (b *planBook) set(key string, p *plan) {
	b.remove(key)
	b.plans[key] = p
	gangsPlanned.Inc()
	b.index(key, p)
}

// remove forgets the gang's plan, if any, and returns it.
func (b *planBook) remove(key string) *plan {
	p := b.plans[key]
	if p == nil {
		return nil
	}
	delete(b.plans, key)
	gangsPlanned.Dec()
	b.unindex(p)
	return p
}

// book holds p as the gang's booking, for Workload workload, in place of any other.
func (b *planBook) book(key, workload string, p *plan) {
	b.unbook(key)
	b.bookings[key] = p
	b.bookedFor[key] = workload
	b.index(key, p)
}

// unbook drops the gang's booking and reports whether it had one.
func (b *planBook) unbook(key string) bool {
	p := b.bookings[key]
	if p == nil {
		return false
	}
	delete(b.bookings, key)
	delete(b.bookedFor, key)
	b.unindex(p)
	return true
}

// index adds the slots of the gang's plan or booking to onNode.
func (b *planBook) index(key string, p *plan) {
	for _, sl := range p.slots {
		b.onNode[sl.Node] = append(b.onNode[sl.Node], planSlot{key: key, plan: p, slot: sl})
		b.log.add(sl.Node)
	}
}

// unindex removes the slots of a plan or booking from onNode.
func (b *planBook) unindex(p *plan) {
	for _, sl := range p.slots {
		b.log.add(sl.Node)
		list := slices.DeleteFunc(b.onNode[sl.Node], func(ps planSlot) bool { return ps.plan == p })
		if len(list) == 0 {
			delete(b.onNode, sl.Node)
		} else {
			b.onNode[sl.Node] = list
		}
	}
}

// setPhase moves a slot to phase: a reserved or bound slot is no longer a claim.
func (b *planBook) setPhase(sl *slot, phase slotPhase) {
	sl.phase = phase
	b.log.add(sl.Node)
}

// slotNodes are the nodes of the slots of the gang's plan and booking.
func (b *planBook) slotNodes(key string) []string {
	var out []string
	for _, p := range []*plan{b.plans[key], b.bookings[key]} {
		if p != nil {
			for _, sl := range p.slots {
				out = append(out, sl.Node)
			}
		}
	}
	return out
}

// claims returns, by node, the slots other gangs' plans, and the bookings of admitted gangs, hold
// that g may not take.
func (b *planBook) claims(g *gang) map[string][]claim {
	out := map[string][]claim{}
	for _, plans := range []map[string]*plan{b.plans, b.bookings} {
		for key, p := range plans {
			if key == g.key || p.priority < g.priority {
				continue
			}
			for _, sl := range p.slots {
				if sl.phase == slotPlanned {
					out[sl.Node] = append(out[sl.Node], claim{sl.GPUs, sl.Indexed})
				}
			}
		}
	}
	return out
}

// claimsOn returns claims(g)[node], from the plans' slots on node alone: every later pod of a gang
// checks its slot this way, and with a backlog there are hundreds of open plans.
func (b *planBook) claimsOn(g *gang, node string) []claim {
	var out []claim
	for _, ps := range b.onNode[node] {
		if ps.key != g.key && ps.plan.priority >= g.priority && ps.slot.phase == slotPlanned {
			out = append(out, claim{ps.slot.GPUs, ps.slot.Indexed})
		}
	}
	return out
}
