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
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// A booking is the placement the admission check (pkg/admissioncheck) holds for a gang whose
// Workload it lets Kueue admit, from that moment until the gang's pods reach the scheduler and the
// gang is planned: every other gang's plan, of any priority, and every preemption keep off its
// GPUs. It is stored as a plan of the highest priority whose slots are never reserved.

// Book plans the gang key, the pods of Workload workload not created yet, on the nodes as the
// scheduler's informers show them now, with the GPUs of every other gang's plan and booking and of
// every pod assumed or bound counted as taken, and holds the placement as the gang's booking. A
// booking the gang already has is kept while it still fits; one that no longer does is dropped and
// the gang planned again. A gang with pods bound (one that grows) is planned in their domain of
// its required level. It returns where the gang is booked, or the planner's reason it does not
// fit. The pods' node affinity, tolerations and requests count; their inter-pod affinity does
// not (GangPlacement honours it when the pods come).
func (s *State) Book(ctx context.Context, workload, key string, pods []*corev1.Pod) (string, error) {
	where, _, err := s.bookGang(ctx, workload, key, pods, false)
	return where, err
}

// BookMove books, as Book does, the elastic gang key that grows, pods being all its pods at the
// grown size, to move whole: its running pods' GPUs count as free, and no domain of theirs holds
// it. It returns where, and the restart attempt of the running pods (convoy.LabelRestartAttempt),
// whose pods wait at Gate while the booking stands: the operator restarts the whole gang there
// (see convoy.ElasticMoveMessage). A gang without running pods of an attempt has nothing to move.
func (s *State) BookMove(ctx context.Context, workload, key string, pods []*corev1.Pod) (where string, attempt int32, err error) {
	return s.bookGang(ctx, workload, key, pods, true)
}

func (s *State) bookGang(ctx context.Context, workload, key string, pods []*corev1.Pod, move bool) (string, int32, error) {
	nodes, err := s.nodesNow()
	if err != nil {
		return "", 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gangOfPods(key, pods)
	if len(g.pending) == 0 {
		return "the gang asks for no GPUs", 0, nil
	}
	attempt := int32(-1)
	if move {
		attempt = s.moveWhole(g)
		if a, ok := s.moving.Load(key); ok && attempt < 0 {
			// The running pods are gone: the operator restarts the gang on the booking.
			attempt = a.(int32)
		}
		if attempt < 0 {
			return "", 0, fmt.Errorf("gang %s has no running pods of a TrainingJob's attempt to move", key)
		}
	}
	elig := s.nodeNeeds(g.pending[0], g)
	cl, _ := s.view(ctx, nodes, viewOptions{gang: g, elig: elig})
	if b := s.book.bookings[key]; b != nil {
		if a, moving := s.moving.Load(key); moving == move && (!move || a == attempt) && bookingFits(cl, b) {
			s.book.bookedFor[key] = workload
			return bookingMessage(b), attempt, nil
		}
		s.dropBookingLocked(key)
		// The booking's GPUs are free for the gang again.
		cl, _ = s.view(ctx, nodes, viewOptions{gang: g, elig: elig})
	}
	if g.levelErr != nil {
		return "", 0, g.levelErr
	}
	pl, err := cl.Place(g.plannerGang())
	if err != nil {
		return "", 0, fmt.Errorf("%w%s%s%s", err, s.selectorMessage(ctx, g), s.anchorMessage(nodes, g), s.leavingMessage(nodes))
	}
	b := &plan{priority: math.MaxInt32, created: s.now(), slots: make(map[types.UID]*slot, len(g.pending))}
	for i, pod := range g.pending {
		b.slots[pod.UID] = assignedSlot(pl.Assignments[i], g.gpusOf(i))
	}
	s.book.book(key, workload, b)
	if move {
		s.moving.Store(key, attempt)
	}
	return bookingMessage(b), attempt, nil
}

// moveWhole makes g, a gang at its grown size, one that may move whole: the GPUs of its running
// pods count as free for it (pendingUIDs, moveFrom), and no domain of theirs holds it. It returns
// the restart attempt of those pods, -1 when none runs that carries one.
func (s *State) moveWhole(g *gang) int32 {
	attempt := int32(-1)
	for _, p := range s.gangs.members(g.namespace, g.podGroup) {
		node := s.gangs.nodeOf(p)
		if node == "" || s.PodGPUs(p) == 0 {
			continue
		}
		g.pendingUIDs[p.UID] = true
		if g.moveFrom == nil {
			g.moveFrom = map[string]bool{}
		}
		g.moveFrom[node] = true
		if a, err := strconv.ParseInt(p.Labels[convoy.LabelRestartAttempt], 10, 32); err == nil && p.DeletionTimestamp == nil {
			attempt = max(attempt, int32(a))
		}
	}
	g.anchor = ""
	return attempt
}

// Moving reports the attempt of gang key that its booking moves whole (BookMove); ok is false
// when none.
func (s *State) Moving(key string) (attempt int32, ok bool) {
	a, ok := s.moving.Load(key)
	if !ok {
		return 0, false
	}
	return a.(int32), true
}

// BookedAt returns when the gang's booking was made; ok is false when it has none.
func (s *State) BookedAt(key string) (at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.book.bookings[key]; b != nil {
		return b.created, true
	}
	return time.Time{}, false
}

// DateBooking dates the gang's booking from at: its timeout counts from then. The admission check
// dates a booking it makes again for a Workload another scheduler replica booked before a failover.
func (s *State) DateBooking(key string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.book.bookings[key]; b != nil {
		b.created = at
	}
}

// ReleaseBooking drops the gang's booking, if any: its GPUs are free for other gangs again.
func (s *State) ReleaseBooking(key string) {
	s.mu.Lock()
	dropped := s.dropBookingLocked(key)
	s.mu.Unlock()
	if dropped {
		s.waiters.moreRoom()
	}
}

// Bookings returns the gangs that hold a booking, with the Workload each is for.
func (s *State) Bookings() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.book.bookings))
	for key := range s.book.bookings {
		out[key] = s.book.bookedFor[key]
	}
	return out
}

// useBookingLocked drops the gang's booking once the gang has a plan of its own: the plan's slots
// take over.
func (s *State) useBookingLocked(key string) { s.dropBookingLocked(key) }

// dropBookingLocked drops the gang's booking, if any, and reports whether it had one: its GPUs
// may make room.
func (s *State) dropBookingLocked(key string) bool {
	if !s.book.unbook(key) {
		return false
	}
	s.moving.Delete(key)
	s.bump()
	return true
}

// bookingFits reports whether every slot of booking b is still free in cl, a view for its gang.
func bookingFits(cl *planner.Cluster, b *plan) bool {
	need := map[string]planner.GPUSet{}
	count := map[string]int{}
	for _, sl := range b.slots {
		if sl.Indexed {
			need[sl.Node] |= sl.GPUs
		}
		count[sl.Node] += sl.GPUs.Len()
	}
	for i := range cl.Nodes {
		n := &cl.Nodes[i]
		c, ok := count[n.Name]
		if !ok {
			continue
		}
		if n.Excluded || need[n.Name]&^n.Free != 0 || n.Free.Len() < c {
			return false
		}
		delete(count, n.Name)
	}
	return len(count) == 0
}

// BookingMessagePrefix starts the message that says where a gang is booked.
const BookingMessagePrefix = "convoy-scheduler holds "

// bookingMessage says where booking b holds the gang.
func bookingMessage(b *plan) string {
	var nodes []string
	gpus := 0
	for _, sl := range b.slots {
		if !slices.Contains(nodes, sl.Node) {
			nodes = append(nodes, sl.Node)
		}
		gpus += sl.GPUs.Len()
	}
	slices.Sort(nodes)
	return fmt.Sprintf("%s%d GPU(s) for the gang on node(s) %s", BookingMessagePrefix, gpus, strings.Join(nodes, ", "))
}

// anchorMessage says which domain the gang's bound pods keep the pods it adds in; "" when none.
func (s *State) anchorMessage(nodes []fwk.NodeInfo, g *gang) string {
	anchor := s.anchorNode(nodes, g.anchor)
	if anchor == nil || !g.required || g.level >= planner.LevelCluster {
		return ""
	}
	where := "node " + anchor.Name
	if i := len(s.opts.Levels) - 1 - int(g.level-planner.LevelRack); g.level >= planner.LevelRack && i >= 0 {
		where = s.opts.Levels[i].Name + " " + strings.Join(s.opts.domains(anchor)[:i+1], "/")
	}
	return fmt.Sprintf("; the gang's pods running on node %s keep the pods it adds in %s", anchor.Name, where)
}

// gangOfPods is the gang of pods not yet created: those asking GPUs, in rank order.
func (s *State) gangOfPods(key string, pods []*corev1.Pod) *gang {
	g := &gang{key: key, pendingUIDs: map[types.UID]bool{}}
	mixed := false
	for _, p := range pods {
		n := s.PodGPUs(p)
		if n == 0 {
			continue
		}
		if len(g.pending) == 0 {
			g.namespace, g.podGroup = p.Namespace, PodGroupName(p)
			g.level, g.required, g.levelErr = s.Topology(p)
			g.priority = corev1helpers.PodPriority(p)
		}
		g.pendingUIDs[p.UID] = true
		g.pending = append(g.pending, p)
		mixed = mixed || g.gpusPerPod != 0 && n != g.gpusPerPod
		g.gpusPerPod = max(g.gpusPerPod, n)
	}
	slices.SortStableFunc(g.pending, func(a, b *corev1.Pod) int { return rank(a) - rank(b) })
	// A gang that grows has pods bound already: the pods it adds are planned, as they will be when
	// they come (gangOf), in the domain those hold.
	for _, p := range s.gangs.members(g.namespace, g.podGroup) {
		if node := s.gangs.nodeOf(p); node != "" && p.DeletionTimestamp == nil && s.PodGPUs(p) > 0 {
			g.anchor = node
			break
		}
	}
	if mixed {
		g.podGPUs = make([]int, len(g.pending))
		for i, p := range g.pending {
			g.podGPUs[i] = s.PodGPUs(p)
		}
	}
	s.setDRA(g)
	g.fewest = len(g.pending)
	return g
}

// nodesNow builds the scheduler's view of every node from its informers, outside a scheduling
// cycle: each node with the pods bound to it, or assumed on it by this scheduler, in name order.
func (s *State) nodesNow() ([]fwk.NodeInfo, error) {
	informers := s.handle.SharedInformerFactory().Core().V1()
	nodeList, err := informers.Nodes().Lister().List(labels.Everything())
	if err != nil {
		return nil, err
	}
	pods, err := s.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	on := map[string][]*corev1.Pod{}
	for _, p := range pods {
		node := s.gangs.nodeOf(p)
		if node == "" {
			if r, ok := s.book.reserved[p.UID]; ok {
				node = r.node
			}
		}
		if node == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName != node {
			p = p.DeepCopy()
			p.Spec.NodeName = node
		}
		on[node] = append(on[node], p)
	}
	s.mu.Unlock()
	slices.SortFunc(nodeList, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	out := make([]fwk.NodeInfo, 0, len(nodeList))
	for _, n := range nodeList {
		ni := framework.NewNodeInfo(on[n.Name]...)
		ni.SetNode(n)
		out = append(out, ni)
	}
	return out, nil
}
