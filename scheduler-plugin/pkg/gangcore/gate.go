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
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	apipod "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/scheduler/util"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// Gate says whether a pod may enter the active queue, and why not. A pod of a PodGroup waits
// while its PodGroup is not seen or lacks members (Coscheduling would reject it anyway) and, once
// complete, until its gang has a plan: only the gang's leader, its pending GPU pod of the lowest
// rank, is scheduled first and plans the whole gang. If the gang fits, its siblings are let
// through; if not, they wait without a scheduling cycle each, and are told why (tellUnplaceable).
// Pods that ask no GPU take no part in a plan; they are held for one only when their gang
// requires a topology level, for they must run in the domain of the plan (see AnchorFor). The
// pods of an attempt whose gang is booked to move whole (BookMove) wait until the booking goes.
func (s *State) Gate(pod *corev1.Pod) (bool, string) {
	pg := PodGroupName(pod)
	if pg == "" {
		return true, ""
	}
	if a, ok := s.Moving(GangKey(pod)); ok && pod.Labels[convoy.LabelRestartAttempt] == strconv.Itoa(int(a)) {
		// Kueue let the workers the gang grows by through: they would wait for room beside the
		// running ones, and preempt for it, where the operator restarts the gang elsewhere.
		return false, fmt.Sprintf("gang %s moves whole to the place convoy-scheduler holds for it: its pods of attempt %d wait for the operator to restart it there", GangKey(pod), a)
	}
	if why := s.Incomplete(pod); why != "" {
		s.leaders.Delete(GangKey(pod))
		return false, why
	}
	if s.PodGPUs(pod) == 0 && !s.requiresDomain(pod) {
		return true, ""
	}
	key := GangKey(pod)
	if _, open := s.open.Load(key); open {
		// Pods let through here are not weighed as leaders: the next leader is looked for anew.
		s.leaders.Delete(key)
		return true, ""
	}
	l := s.leader(key, pod)
	if l == nil || l.UID == pod.UID {
		return true, ""
	}
	// The leader may itself wait here since it was created, for members: a pod's creation
	// requeues no other pod, so bring it back, once.
	if prev, ok := s.kicked.Load(key); !ok || prev.(types.UID) != l.UID {
		s.kicked.Store(key, l.UID)
		// Not from here: the scheduling queue calls PreEnqueue under the lock Activate takes.
		go s.handle.Activate(klog.Background(), map[string]*corev1.Pod{l.Namespace + "/" + l.Name: l})
	}
	return false, fmt.Sprintf("waiting for gang %s to be planned", key)
}

// leader is the pending GPU pod of gang key, pod's, of pod's scheduler and without scheduling
// gates, of the lowest rank (then name). It is found among the gang's pods in the index, not from
// the pod informer's events, which would lag the scheduling queue (it hears of a new pod on its
// own handler) and hold a complete gang for a member it already has; and then kept in leaders,
// for the gang's other pods. A kept leader stands while the index still has it pending, and no
// pod since let through here comes before it: every pod the gang gains passes here, weighed
// against it, unless its gang is incomplete or planned, and then the gang's leader is looked for
// anew (see Gate).
func (s *State) leader(key string, pod *corev1.Pod) *corev1.Pod {
	sched := pod.Spec.SchedulerName
	if v, ok := s.leaders.Load(key); ok {
		if l, err := s.pods.Pods(pod.Namespace).Get(v.(*corev1.Pod).Name); err == nil && l.UID == v.(*corev1.Pod).UID && s.leads(l, sched) {
			if s.leads(pod, sched) && before(pod, l) {
				s.leaders.Store(key, pod)
				return pod
			}
			return l
		}
	}
	var best *corev1.Pod
	for _, p := range s.gangs.members(pod.Namespace, PodGroupName(pod)) {
		if s.leads(p, sched) && (best == nil || before(p, best)) {
			best = p
		}
	}
	if best != nil {
		s.leaders.Store(key, best)
	}
	return best
}

// leads reports whether p may lead its gang for scheduler sched: a pending GPU pod of it,
// without scheduling gates.
func (s *State) leads(p *corev1.Pod, sched string) bool {
	return s.gangs.nodeOf(p) == "" && p.DeletionTimestamp == nil && p.Spec.SchedulerName == sched &&
		len(p.Spec.SchedulingGates) == 0 && s.PodGPUs(p) > 0
}

// before orders a gang's pods for its leader: by rank, then name.
func before(a, b *corev1.Pod) bool {
	ra, rb := rank(a), rank(b)
	return ra < rb || ra == rb && a.Name < b.Name
}

// gatedSiblings are the pod's pending siblings, to activate once the gang has a plan.
func (s *State) gatedSiblings(pod *corev1.Pod) map[string]*corev1.Pod {
	pg := PodGroupName(pod)
	if pg == "" {
		return nil
	}
	out := s.gangs.pendingMembers(pod.Namespace, pg)
	delete(out, pod.Namespace+"/"+pod.Name)
	return out
}

// tellDelay is how long a gang waits before its waiting pods are told why: a gang placed, or
// completed, moments later is never told. tellQPS caps the status updates of all tells together:
// they are background work that must not take the API server from binds (a backlog of gangs that
// do not fit is thousands of pods to tell). For the same reason a tell waits, before each update,
// until no pod has been reserved for tellQuiet, but no longer than tellMaxDefer from its start:
// while the scheduler places other gangs, their Bindings go first.
const (
	tellDelay    = 3 * time.Second
	tellQPS      = 50
	tellQuiet    = time.Second
	tellMaxDefer = 30 * time.Second
)

// awaitQuiet returns once no pod has been reserved for tellQuiet, or at deadline, or when ctx ends.
func (s *State) awaitQuiet(ctx context.Context, deadline time.Time) {
	for {
		now := s.now()
		wait := tellQuiet - now.Sub(time.Unix(0, s.lastReserve.Load()))
		if wait <= 0 || !now.Before(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(wait, deadline.Sub(now))):
		}
	}
}

// tellUnplaceable tells a gang's waiting pods why the gang does not fit, unless it has a plan by
// then.
func (s *State) tellUnplaceable(logger klog.Logger, pods []*corev1.Pod, msg string) {
	defer func() {
		for _, p := range pods {
			s.toTell.Delete(p.UID)
		}
	}()
	time.Sleep(tellDelay)
	s.tell(logger, pods, msg, func(p *corev1.Pod) bool {
		_, open := s.open.Load(GangKey(p))
		return !open
	})
}

// tellIncomplete tells the pending pods of an incomplete gang (its PodGroup not seen, or short of
// members) why they wait, after tellDelay, if they still do: Coscheduling's PreFilter would have
// said so in their condition, and a pod held by PreEnqueue gets none from the scheduler. Armed
// again whenever the reason changes (see gangRegistry.incomplete).
func (s *State) tellIncomplete(logger klog.Logger, namespace, name string) {
	time.Sleep(tellDelay)
	pods := slices.Collect(maps.Values(s.gangs.pendingMembers(namespace, name)))
	if len(pods) == 0 {
		return
	}
	why := s.stillIncomplete(pods[0])
	if why == "" {
		return
	}
	s.tell(logger, pods, why, func(p *corev1.Pod) bool { return s.stillIncomplete(p) != "" })
}

// tell sets the PodScheduled condition of the pods that still wait to msg, as the scheduler would
// have after a cycle each, in parallel and off the scheduling cycle, at most tellQPS a second for
// all tells, and in a quiet moment (see awaitQuiet). The scheduler never writes the condition of a
// pod PreEnqueue holds back.
func (s *State) tell(logger klog.Logger, pods []*corev1.Pod, msg string, waiting func(*corev1.Pod) bool) {
	const workers = 16
	ctx := context.Background()
	deadline := s.now().Add(tellMaxDefer)
	jobs := make(chan *corev1.Pod)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				if !waiting(p) {
					continue
				}
				s.awaitQuiet(ctx, deadline)
				if s.tellLimiter.Wait(ctx) != nil {
					return
				}
				// The latest pod, after the wait.
				p, err := s.pods.Pods(p.Namespace).Get(p.Name)
				if err != nil || s.gangs.nodeOf(p) != "" || p.DeletionTimestamp != nil || !waiting(p) {
					continue
				}
				status := p.Status.DeepCopy()
				if !apipod.UpdatePodCondition(status, &corev1.PodCondition{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
					Message: msg, LastTransitionTime: metav1.Now(),
				}) {
					continue
				}
				if err := util.PatchPodStatus(ctx, s.handle.ClientSet(), p.Name, p.Namespace, &p.Status, status); err != nil {
					logger.V(2).Info("Cannot say why the pod waits", "pod", klog.KObj(p), "err", err)
				}
			}
		}()
	}
	for _, p := range pods {
		jobs <- p
	}
	close(jobs)
	wg.Wait()
}

// requiresDomain reports whether the pod asks its gang's required topology level of a domain
// smaller than the cluster.
func (s *State) requiresDomain(pod *corev1.Pod) bool {
	l, required, _ := s.Topology(pod)
	return required && l != planner.LevelNone && l != planner.LevelCluster
}

// AnchorFor returns, for a pod that asks no GPU (a parameter server, an MXNet scheduler) in a gang
// that requires a topology level, a node its gang's GPU pods are planned on or bound to: the pod
// must run inside that node's domain of the level (see InDomain). It returns "" when the pod may
// run anywhere: it asks no level, or its gang has no GPU pod placed.
func (s *State) AnchorFor(pod *corev1.Pod) string {
	if PodGroupName(pod) == "" || !s.requiresDomain(pod) {
		return ""
	}
	anchor := ""
	s.mu.Lock()
	if p := s.book.plans[GangKey(pod)]; p != nil {
		// Every slot of a plan lies in one domain of the gang's required level.
		for _, sl := range p.slots {
			anchor = sl.Node
			break
		}
	}
	s.mu.Unlock()
	if anchor != "" {
		return anchor
	}
	for _, p := range s.gangs.members(pod.Namespace, PodGroupName(pod)) {
		if node := s.gangs.nodeOf(p); node != "" && p.DeletionTimestamp == nil && s.PodGPUs(p) > 0 {
			return node
		}
	}
	return ""
}

// InDomain reports whether node lies in anchor's domain of the pod's required topology level (for
// the levels nvlink and node: is anchor).
func (s *State) InDomain(pod *corev1.Pod, anchor, node *corev1.Node) bool {
	l, required, _ := s.Topology(pod)
	return s.sameDomain(anchor, node, &gang{level: l, required: required})
}
