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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// StateKey is the CycleState key of GangPlacement's PreFilter result.
const StateKey fwk.StateKey = "PreFilterGangPlacement"

// CycleState is what GangPlacement's PreFilter decided for a pod; its Filter and Bind and
// GangPreemption's PostFilter read it.
type CycleState struct {
	// Gang is the pod's gang key.
	Gang string
	// Placed reports whether the gang has a plan; Slot is the pod's part of it.
	Placed bool
	Slot   Slot
	// Unplaceable says why the gang does not fit; preemption may make room.
	Unplaceable string
	// Anchor, for a pod that asks no GPU in a gang that requires a topology level, is a node of
	// the gang's GPU pods: the pod runs in its domain (see AnchorFor).
	Anchor string
}

// Clone returns the state itself: it is never changed after PreFilter.
func (c *CycleState) Clone() fwk.StateData { return c }

// ReadCycleState returns GangPlacement's PreFilter result for the pod of cs.
func ReadCycleState(cs fwk.CycleState) (*CycleState, error) {
	d, err := cs.Read(StateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from the cycle state: %w", StateKey, err)
	}
	c, ok := d.(*CycleState)
	if !ok {
		return nil, fmt.Errorf("%q in the cycle state is a %T, not a *gangcore.CycleState", StateKey, d)
	}
	return c, nil
}

// PlanFor finds the pod's slot: from its gang's plan when the plan still holds on the snapshot,
// else from a new plan for all the gang's unbound pods. An unplaceable gang returns Unschedulable
// with the planner's message, and its other pods fail fast until the cluster changes. A pod turned
// away is remembered, to be activated when GPUs may have freed up (see wake.go).
func (s *State) PlanFor(ctx context.Context, pod *corev1.Pod, nodes []fwk.NodeInfo) (*CycleState, *fwk.Status) {
	st, status := s.planFor(ctx, pod, nodes)
	if status.IsSuccess() {
		s.waiters.found(pod.UID)
	} else {
		s.waiters.await(pod)
	}
	return st, status
}

func (s *State) planFor(ctx context.Context, pod *corev1.Pod, nodes []fwk.NodeInfo) (*CycleState, *fwk.Status) {
	logger := klog.FromContext(ctx)
	key := GangKey(pod)
	// After the lock: siblings to activate once the gang has a plan that holds, or to tell why
	// the gang does not fit (see PreEnqueue).
	var activate map[string]*corev1.Pod
	var tell []*corev1.Pod
	var told string
	defer func() {
		if len(activate) > 0 {
			s.handle.Activate(logger, activate)
		}
		if len(tell) > 0 {
			s.telling.Go(func() { s.tellUnplaceable(logger, tell, told) })
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if p := s.book.plans[key]; p != nil {
		sl := p.slots[pod.UID]
		var why, reason string
		switch {
		case sl == nil && p.leftOut[pod.UID]:
			return &CycleState{Gang: key, Unplaceable: p.leftOutWhy}, fwk.NewStatus(fwk.Unschedulable, p.leftOutWhy)
		case sl == nil:
			why, reason = dropRescheduled, "a pod of the gang is not in its plan"
		case sl.phase != slotPlanned:
			why, reason = dropRescheduled, "a pod of the gang is scheduled again"
		case now.Sub(p.created) > s.opts.PlanTimeout:
			why, reason = dropTimeout, "the plan timed out"
		case p.preempting && s.victimsRemain(key):
			// Even where the slot's GPUs are free already, a victim may still stand in the way
			// (by its anti-affinity, or its CPU): the filters would turn the node down and the
			// gang would plan without it, losing the room it made.
			msg := s.preemptions.inProgress[key].waitMessage(key)
			return &CycleState{Gang: key, Unplaceable: msg}, fwk.NewStatus(fwk.Unschedulable, msg)
		case s.slotHolds(pod, key, p.priority, sl):
			if _, open := s.open.LoadOrStore(key, true); !open {
				activate = s.gatedSiblings(pod)
			}
			return &CycleState{Gang: key, Placed: true, Slot: sl.Slot}, nil
		default:
			why, reason = dropClusterChanged, "the cluster changed under the plan"
		}
		logger.V(2).Info("Dropping the gang's plan", "gang", key, "reason", reason)
		s.dropPlanLocked(key, why, reason)
	}
	if v, ok := s.verdicts.holds(key, s.generation.Load(), now); ok {
		return &CycleState{Gang: key, Unplaceable: v.message}, fwk.NewStatus(fwk.Unschedulable, v.message)
	}
	start := time.Now()
	g := s.gangOf(pod)
	err := g.levelErr
	var elig eligibility
	if err == nil {
		elig, err = s.eligibilityFor(ctx, pod, g, nodes)
	}
	var pl *planner.Plan
	whole := g
	if err == nil {
		o := viewOptions{gang: g, elig: elig}
		cl := s.keptView(ctx, nodes, o)
		if cl == nil {
			cl, _ = s.view(ctx, nodes, o)
		}
		place := func(g *gang) (*planner.Plan, error) {
			return s.planWithHeld(logger, cl, g, func() (*planner.Plan, map[types.UID]bool, error) {
				p, err := cl.Place(g.plannerGang())
				return p, nil, err
			})
		}
		pl, err = place(g)
		if err != nil && g.elastic() {
			g, pl, err = placeFewer(g, pod, place)
		}
	}
	if err != nil {
		observePlan(planUnschedulable, start)
		err = fmt.Errorf("%w%s%s%s", err, s.selectorMessage(ctx, g), s.leavingMessage(nodes), avoidedMessage(elig.avoid))
		s.verdicts.set(key, verdict{generation: s.generation.Load(), at: now, message: err.Error()})
		logger.V(2).Info("Gang does not fit", "gang", key, "pods", len(g.pending), "reason", err.Error())
		// The siblings wait in PreEnqueue for a plan: tell them why there is none. Those that
		// already say it, even with older numbers, or are still to be told by an earlier verdict,
		// are left alone: one status write per pod.
		for _, p := range slices.Concat(g.pending, g.held) {
			if p.UID == pod.UID || saysAlready(p, key+" needs ") {
				continue
			}
			if _, queued := s.toTell.LoadOrStore(p.UID, true); !queued {
				tell = append(tell, p)
			}
		}
		told = err.Error()
		return &CycleState{Gang: key, Unplaceable: err.Error()}, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	observePlan(planPlanned, start)
	s.verdicts.clear(key)
	s.useBookingLocked(key)
	p := s.storePlanLocked(key, g, pl, false)
	p.leaveOut(whole, g)
	s.open.Store(key, true)
	activate = s.gatedSiblings(pod)
	logger.V(2).Info("Planned the gang", "gang", key, "pods", len(g.pending), "level", pl.Level.String(),
		"domain", pl.Domain, "nodes", pl.Nodes(), "racks", pl.Racks(), "leftOut", len(p.leftOut))
	return &CycleState{Gang: key, Placed: true, Slot: p.slots[pod.UID].Slot}, nil
}

// placeFewer plans an elastic gang that does not fit whole: as many of its pending pods as fit,
// at least g.fewest (one when its PodGroup's minMember is met already), the lowest ranks and pod
// among them. A gang of pods alike that fits with k pods fits with fewer, so the count is found by
// bisection. When even the fewest do not fit, the error is theirs.
func placeFewer(g *gang, pod *corev1.Pod, place func(*gang) (*planner.Plan, error)) (*gang, *planner.Plan, error) {
	lo, hi := max(g.fewest, 1), len(g.pending)-1
	best := g.kept(lo, pod)
	pl, err := place(best)
	if err != nil && g.fewest == 0 {
		return g, nil, fmt.Errorf("%w; the gang has its PodGroup's minMember (%d) of pods bound, and its other pods wait for room", err, g.minMember)
	}
	if err != nil {
		return g, nil, fmt.Errorf("%w; its PodGroup's minMember (%d) lets it start with %d of its %d pending pods", err, g.minMember, lo, len(g.pending))
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		k := g.kept(mid, pod)
		if p, err := place(k); err == nil {
			lo, best, pl = mid, k, p
		} else {
			hi = mid - 1
		}
	}
	return best, pl, nil
}

// leaveOut records the pending pods of whole that the plan, made for kept, leaves out.
func (p *plan) leaveOut(whole, kept *gang) {
	if len(kept.pending) == len(whole.pending) {
		return
	}
	p.leftOut = map[types.UID]bool{}
	for _, pod := range whole.pending {
		if p.slots[pod.UID] == nil {
			p.leftOut[pod.UID] = true
		}
	}
	p.leftOutWhy = fmt.Sprintf("%s starts with %d of its %d pending pods, as its PodGroup's minMember (%d) allows: "+
		"no room for this pod yet; it is placed when GPUs free up", whole.key, len(kept.pending), len(whole.pending), whole.minMember)
}

// selectorMessage is the gang's deviceFilter's message; "" without one.
func (s *State) selectorMessage(ctx context.Context, g *gang) string {
	if g.devices == nil {
		return ""
	}
	return g.devices.message(ctx, s.nodes.bases)
}

// leavingMessage says how many GPUs pods that terminate hold: room on its way, which the gang
// waits for; "" when none. It reads the node bases of the view just made for nodes.
func (s *State) leavingMessage(nodes []fwk.NodeInfo) string {
	gpus, on := s.nodes.leaving(len(nodes))
	if f := s.fleet.last; f != nil {
		gpus, on = f.leaving()
	}
	if gpus == 0 {
		return ""
	}
	return fmt.Sprintf("; %d GPU(s) on %d node(s) are held by pods that terminate, and the gang is planned again when they are gone", gpus, on)
}

// saysAlready reports whether the pod's PodScheduled condition already carries msg.
func saysAlready(p *corev1.Pod, msg string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, msg)
		}
	}
	return false
}

// storePlanLocked records a plan: the gang's pending pods take its assignments in rank order.
func (s *State) storePlanLocked(key string, g *gang, pl *planner.Plan, preempting bool) *plan {
	p := &plan{priority: g.priority, created: s.now(), slots: make(map[types.UID]*slot, len(g.pending)), preempting: preempting}
	for i, pod := range g.pending {
		if c := pod.CreationTimestamp.Time; i == 0 || c.Before(p.since) {
			p.since = c
		}
		p.slots[pod.UID] = assignedSlot(pl.Assignments[i], g.gpusOf(i))
	}
	s.book.set(key, p)
	return p
}

// assignedSlot is the slot of a plan's assignment of a pod of gpus GPUs.
func assignedSlot(a planner.Assignment, gpus int) *slot {
	sl := &slot{Slot: Slot{Node: a.Node, Indexed: a.GPUs != nil}}
	for _, x := range a.GPUs {
		sl.GPUs |= planner.NewGPUSet(x)
	}
	if a.GPUs == nil {
		sl.GPUs = planner.FirstGPUs(gpus)
	}
	return sl
}

// slotHolds reports whether the slot's GPUs are still free on the snapshot.
func (s *State) slotHolds(pod *corev1.Pod, key string, priority int32, sl *slot) bool {
	ni, err := s.handle.SnapshotSharedLister().NodeInfos().Get(sl.Node)
	if err != nil || ni.Node() == nil {
		return false
	}
	g := &gang{key: key, priority: priority, pendingUIDs: map[types.UID]bool{}}
	pn := nodeView(s.nodes.base(ni, s.inventory.get(sl.Node), s.book), g, s.book.claimsOn(g, sl.Node), nil, false)
	if pn.Indexed != sl.Indexed {
		return false
	}
	if sl.Indexed {
		return sl.GPUs&^pn.Free == 0
	}
	return pn.Free.Len() >= s.PodGPUs(pod)
}

// dropPlanLocked forgets a gang's plan and sends its pods waiting at Permit back to the queue, so
// that no part of the gang binds on a stale plan. why is the reason's metric label.
func (s *State) dropPlanLocked(key, why, reason string) {
	gangPlansDropped.WithLabelValues(why).Inc()
	s.book.remove(key)
	s.open.Delete(key)
	// Its claims are free again.
	s.bump()
	s.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if GangKey(wp.GetPod()) == key {
			wp.Reject("GangPlacement", "the gang's plan was dropped: "+reason)
		}
	})
}

// Reserve marks the pod's slot taken: its GPUs count as used in every later view.
func (s *State) Reserve(pod *corev1.Pod, nodeName string) {
	s.lastReserve.Store(s.now().UnixNano())
	s.mu.Lock()
	defer s.mu.Unlock()
	r := reservation{node: nodeName}
	if p := s.book.plans[GangKey(pod)]; p != nil {
		if sl := p.slots[pod.UID]; sl != nil && sl.Node == nodeName {
			s.book.setPhase(sl, slotReserved)
			if sl.Indexed {
				r.gpus = sl.GPUs
			}
		}
	}
	s.book.reserved[pod.UID] = r
}

// Unreserve releases the pod's GPUs. The gang's plan is dropped: Coscheduling sends the gang's
// other waiting pods back too, and the gang is planned again as a whole, after a backoff (see
// retryGang). The GPUs the plan held may make room for a gang that found none.
func (s *State) Unreserve(pod *corev1.Pod) {
	s.mu.Lock()
	delete(s.book.reserved, pod.UID)
	s.bump()
	key := GangKey(pod)
	dropped := false
	if p := s.book.plans[key]; p != nil {
		if sl := p.slots[pod.UID]; sl != nil && sl.phase == slotReserved {
			s.dropPlanLocked(key, dropUnreserved, "a pod of the gang was unreserved")
			dropped = true
		}
	}
	s.mu.Unlock()
	if dropped {
		if pg := PodGroupName(pod); pg != "" {
			s.retryGang(pod.Namespace, pg)
		}
		s.waiters.moreRoom()
	}
}

// Bound marks the pod's slot bound and forgets the plan once every pod of it is bound. The pods
// the plan left out are tried again then: room that came while the plan held did not place them.
func (s *State) Bound(pod *corev1.Pod) {
	var retry map[string]*corev1.Pod
	defer func() {
		if len(retry) > 0 {
			s.handle.Activate(klog.Background(), retry)
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.book.reserved[pod.UID]; ok {
		s.gangs.bound(pod.UID, r.node)
	}
	key := GangKey(pod)
	p := s.book.plans[key]
	if p == nil {
		return
	}
	if sl := p.slots[pod.UID]; sl != nil {
		s.book.setPhase(sl, slotBound)
	}
	for _, sl := range p.slots {
		if sl.phase != slotBound {
			return
		}
	}
	if !p.since.IsZero() {
		gangTimeToBound.Observe(max(s.now().Sub(p.since), 0).Seconds())
	}
	s.book.remove(key)
	s.open.Delete(key)
	s.waiters.resetBackoff(key)
	s.avoid.forget(key)
	if len(p.leftOut) > 0 {
		retry = s.gangs.pendingMembers(pod.Namespace, PodGroupName(pod))
	}
}

// Less orders the scheduling queue: higher priority first; then older PodGroups (or, for a pod of
// no gang, older first attempts); then the gang's pods together, in rank order. Every key is fixed
// for the pod's life in the queue: a key that changed while the pod sits in the heap (as
// Coscheduling's, which moves a group that just failed behind the others) leaves it where it was,
// comparing larger than its children, and starves everything beneath it.
func (s *State) Less(a, b fwk.QueuedPodInfo) bool {
	pa, pb := a.GetPodInfo().GetPod(), b.GetPodInfo().GetPod()
	if x, y := corev1helpers.PodPriority(pa), corev1helpers.PodPriority(pb); x != y {
		return x > y
	}
	if ta, tb := s.since(pa, a), s.since(pb, b); !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if ka, kb := GangKey(pa), GangKey(pb); ka != kb {
		return ka < kb
	}
	if ra, rb := rank(pa), rank(pb); ra != rb {
		return ra < rb
	}
	return pa.Name < pb.Name
}

func (s *State) since(p *corev1.Pod, qi fwk.QueuedPodInfo) time.Time {
	if pg := PodGroupName(p); pg != "" {
		if info, ok := s.gangs.podGroup(p.Namespace, pg); ok {
			return info.created
		}
	}
	if t := qi.GetInitialAttemptTimestamp(); t != nil {
		return *t
	}
	return p.CreationTimestamp.Time
}
