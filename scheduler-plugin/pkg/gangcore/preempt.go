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
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// preemption is a preemptor gang's eviction in progress.
type preemption struct {
	victims  []types.NamespacedName
	uids     []types.UID
	nodes    []string
	deadline time.Time
	// evicted is how many of the victims the gang evicted; the rest terminated already.
	evicted int
}

// waitMessage tells the gang's pods what they wait for.
func (pr *preemption) waitMessage(key string) string {
	if pr == nil || pr.evicted > 0 {
		return fmt.Sprintf("%s waits for the pods it preempted to terminate", key)
	}
	return fmt.Sprintf("%s waits for %d terminating pod(s) of lower priority to leave the nodes planned for it", key, len(pr.victims))
}

// preemptions holds, by gang, the evictions in progress for preemptor gangs, and the verdicts
// that preemption cannot make room for a gang. It has no lock: State.mu guards it.
type preemptions struct {
	inProgress map[string]*preemption
	cannot     *verdicts
}

func newPreemptions() *preemptions {
	return &preemptions{inProgress: map[string]*preemption{}, cannot: newVerdicts(nil)}
}

// remain reports whether a pod the gang preempted still exists (by exists) and the gang has not
// waited for them past its deadline. A preemption found over is forgotten.
func (ps *preemptions) remain(key string, now time.Time, exists func(victim types.NamespacedName, uid types.UID, node string) bool) bool {
	pr := ps.inProgress[key]
	if pr == nil {
		return false
	}
	if now.After(pr.deadline) {
		delete(ps.inProgress, key)
		return false
	}
	for i, n := range pr.victims {
		if exists(n, pr.uids[i], pr.nodes[i]) {
			return true
		}
	}
	delete(ps.inProgress, key)
	return false
}

// forget forgets the gang's preemption and verdict: the gang is gone.
func (ps *preemptions) forget(key string) {
	delete(ps.inProgress, key)
	ps.cannot.clear(key)
}

// victimsRemain reports whether pods the gang preempted still exist, in the informer or in the
// scheduling cycle's snapshot (which lags it: a plan checked on a snapshot that still holds a
// victim would look broken, be dropped, and preempt again), and it has not waited too long.
func (s *State) victimsRemain(key string) bool {
	return s.preemptions.remain(key, s.now(), s.victimExists)
}

// victimExists reports whether the pod uid, a victim named victim on node, is in the informer or
// in the scheduling cycle's snapshot.
func (s *State) victimExists(victim types.NamespacedName, uid types.UID, node string) bool {
	if p, err := s.pods.Pods(victim.Namespace).Get(victim.Name); err == nil && p.UID == uid {
		return true
	}
	if ni, err := s.handle.SnapshotSharedLister().NodeInfos().Get(node); err == nil {
		for _, pi := range ni.GetPods() {
			if pi.GetPod().UID == uid {
				return true
			}
		}
	}
	return false
}

// Victims is the outcome of PreemptFor: the pods to evict and the node the preemptor is
// nominated to.
type Victims struct {
	// Gangs names the victims, gangs and lone pods, for messages; LonePods is how many of them
	// are pods of no gang.
	Gangs    []string
	LonePods int
	// Pods are every pod of every victim to evict.
	Pods []*corev1.Pod
	// Checkpointing are the victims asked to checkpoint before they stop instead: gangs of a
	// TrainingJob with a preemption grace (spec.checkpoint.preemptionGraceSeconds). Their
	// PodGroups get the convoy.dev/preempt-attempt annotation, and the operator stops them
	// within the grace; the preemptor waits for their pods as for evicted ones.
	Checkpointing []CheckpointingVictim
	// Node is the preemptor's node in the plan it gets once the victims are gone.
	Node string
	// Message tells the preemptor's pods what they wait for: the pods it preempted, or pods of
	// lower priority already terminating on its planned nodes.
	Message string
}

// CheckpointingVictim is a victim gang asked to checkpoint before it stops: its PodGroup and the
// restart attempt of its pods.
type CheckpointingVictim struct {
	PodGroup types.NamespacedName
	Attempt  string
}

// PreemptOptions come from GangPreemptionArgs.
type PreemptOptions struct {
	LonePods bool
	Wait     time.Duration
}

// PreemptFor chooses whole victims of lower priority whose eviction makes room for the pod's gang,
// records the plan the gang then gets (other gangs of no higher priority keep off it) and returns
// every pod of every victim. It returns Unschedulable while earlier victims of the gang still
// terminate, and when no set of victims makes room.
func (s *State) PreemptFor(ctx context.Context, pod *corev1.Pod, nodes []fwk.NodeInfo, o PreemptOptions) (*Victims, *fwk.Status) {
	logger := klog.FromContext(ctx)
	key := GangKey(pod)
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr := s.preemptions.inProgress[key]; s.victimsRemain(key) {
		return nil, fwk.NewStatus(fwk.Unschedulable, pr.waitMessage(key))
	}
	now := s.now()
	if v, ok := s.preemptions.cannot.holds(key, s.generation.Load(), now); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, v.message)
	}
	cannot := func(msg string) (*Victims, *fwk.Status) {
		s.preemptions.cannot.set(key, verdict{generation: s.generation.Load(), at: now, message: msg})
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	if p := s.book.plans[key]; p != nil && p.leftOut[pod.UID] {
		// The gang is placed without this pod: it waits for room, and evicts nothing.
		return nil, fwk.NewStatus(fwk.Unschedulable, p.leftOutWhy)
	}
	g := s.gangOf(pod)
	if len(g.pending) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "no pod of the gang is pending")
	}
	whole := g
	if g.elastic() {
		// An elastic gang preempts for the pods its minMember needs, no more; once minMember
		// pods are bound, its other pods wait for room and evict nothing.
		if g.fewest == 0 {
			return cannot(fmt.Sprintf("%s has its PodGroup's minMember (%d) of pods bound: its other pods wait for room and preempt nothing", key, g.minMember))
		}
		g = g.kept(g.fewest, pod)
	}
	if !s.anyVictim(nodes, pod, g, o.LonePods) {
		return cannot("no pod of lower priority holds GPUs or stands in the way: preemption cannot help")
	}
	if g.levelErr != nil {
		return cannot(g.levelErr.Error())
	}
	elig, err := s.eligibilityFor(ctx, pod, g, nodes)
	if err != nil {
		return cannot(err.Error())
	}
	cl, vt := s.view(ctx, nodes, viewOptions{gang: g, elig: elig, victims: true, lonePods: o.LonePods})
	var res *planner.Preemption
	victims := map[int][]*corev1.Pod{}
	_, err = s.planWithHeld(logger, cl, g, func() (*planner.Plan, map[types.UID]bool, error) {
		r, err := cl.Preempt(g.plannerGang())
		if err != nil {
			return nil, nil, err
		}
		res = r
		freed := map[types.UID]bool{}
		for _, pods := range vt.leaving {
			for _, p := range pods {
				freed[p.UID] = true
			}
		}
		for _, v := range r.Victims {
			if victims[v] == nil {
				victims[v] = s.victimPods(vt.meta[v])
			}
			for _, p := range victims[v] {
				freed[p.UID] = true
			}
		}
		return r.Plan, freed, nil
	})
	if err != nil {
		logger.V(2).Info("Preemption cannot make room", "gang", key, "reason", err.Error())
		if held := (*heldUnplaceable)(nil); errors.As(err, &held) {
			return cannot("preempting whole lower-priority gangs would not make room either: " + err.Error())
		}
		return cannot("preempting whole lower-priority gangs would not make room either")
	}
	s.preemptions.cannot.clear(key)
	out := &Victims{}
	pr := &preemption{deadline: s.now().Add(o.Wait)}
	for _, v := range res.Victims {
		out.Gangs = append(out.Gangs, vt.list[v].Key)
		if vt.meta[v].pod != "" {
			out.LonePods++
		}
		m := vt.meta[v]
		grace, checkpoints := s.preemptionGrace(ctx, m)
		if checkpoints && len(victims[v]) > 0 {
			out.Checkpointing = append(out.Checkpointing, CheckpointingVictim{
				PodGroup: types.NamespacedName{Namespace: m.namespace, Name: m.podGroup},
				Attempt:  victims[v][0].Labels[convoy.LabelRestartAttempt]})
			pr.deadline = later(pr.deadline, s.now().Add(grace+o.Wait))
		}
		for _, p := range victims[v] {
			if !checkpoints {
				out.Pods = append(out.Pods, p)
			}
			pr.victims = append(pr.victims, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
			pr.uids = append(pr.uids, p.UID)
			pr.nodes = append(pr.nodes, p.Spec.NodeName)
		}
	}
	pr.evicted = len(pr.victims)
	// The plan counts on the pods leaving its nodes already: the gang waits for them as for its
	// victims.
	seen := map[string]bool{}
	for _, a := range res.Plan.Assignments {
		node := a.Node
		if seen[node] {
			continue
		}
		seen[node] = true
		for _, p := range vt.leaving[node] {
			pr.victims = append(pr.victims, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
			pr.uids = append(pr.uids, p.UID)
			pr.nodes = append(pr.nodes, node)
		}
	}
	p := s.storePlanLocked(key, g, res.Plan, len(pr.victims) > 0)
	p.leaveOut(whole, g)
	if len(pr.victims) > 0 {
		s.preemptions.inProgress[key] = pr
		out.Message = pr.waitMessage(key)
	}
	s.verdicts.clear(key)
	out.Node = p.slots[pod.UID].Node
	logger.V(2).Info("Preempting whole gangs", "preemptor", key, "victims", strings.Join(out.Gangs, ","), "pods", len(out.Pods),
		"terminatingPodsAwaited", len(pr.victims)-pr.evicted, "node", out.Node)
	return out, nil
}

// victimPods are the pods of a victim, gang or lone pod, not yet terminating.
func (s *State) victimPods(m victimMeta) []*corev1.Pod {
	var pods []*corev1.Pod
	if m.pod != "" {
		if p, err := s.pods.Pods(m.namespace).Get(m.pod); err == nil {
			pods = append(pods, p)
		}
	} else {
		pods = s.gangs.members(m.namespace, m.podGroup)
	}
	return slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

// anyVictim reports whether any pod that preemption may evict for g holds GPUs, or may stand in the
// way of pod without holding any (by its terms, or by the CPU and memory it holds), or whether a
// pod of lower priority that terminates already holds GPUs: a cheap test before the full search.
func (s *State) anyVictim(nodes []fwk.NodeInfo, pod *corev1.Pod, g *gang, lonePods bool) bool {
	if !s.priorities.below(g.priority) {
		return false
	}
	// A pod without GPUs can only stand in the way: of a pod whose anti-affinity, topology spread
	// or host ports other pods can break, or by its own anti-affinity.
	apart := hasRequiredAntiAffinity(pod) || len(schedutil.GetHostPorts(pod)) > 0 ||
		slices.ContainsFunc(pod.Spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
			return c.WhenUnsatisfiable == corev1.DoNotSchedule
		})
	// A pod that asks CPU or memory may find them held by pods without GPUs.
	asks := len(LimitsOf(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), s.opts.GPUResource)) > 0
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if p.DeletionTimestamp == nil && corev1helpers.PodPriority(p) < g.priority && GangKey(p) != g.key &&
				(lonePods || PodGroupName(p) != "") &&
				(s.PodGPUs(p) > 0 || apart || asks || hasRequiredAntiAffinity(p)) {
				return true
			}
			// GPUs on their way to free: the plan may wait for them (see leavingFor).
			if leavingFor(p, g) && s.PodGPUs(p) > 0 {
				return true
			}
		}
	}
	return false
}

func hasRequiredAntiAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// fillWorkLost sets each victim's work lost: the time since its last checkpoint, or since it
// started when it has not checkpointed since. The checkpoint time is the PodGroup's
// convoy.dev/last-checkpoint-time annotation, or the TrainingJob's status.checkpoint.time.
func (s *State) fillWorkLost(ctx context.Context, vt *victimTable) {
	now := s.now()
	for i := range vt.list {
		m := vt.meta[i]
		progress := m.started
		if t, ok := s.checkpointTime(ctx, m); ok && t.After(progress) {
			progress = t
		}
		vt.list[i].WorkLost = max(now.Sub(progress), 0)
	}
}

func (s *State) checkpointTime(ctx context.Context, m victimMeta) (time.Time, bool) {
	if s.reader == nil || m.podGroup == "" {
		return time.Time{}, false
	}
	var pg schedv1alpha1.PodGroup
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: m.podGroup}, &pg); err == nil {
		if t, err := time.Parse(time.RFC3339, pg.Annotations[convoy.AnnotationLastCheckpointTime]); err == nil {
			return t, true
		}
	}
	if !s.trainingJobs {
		return time.Time{}, false
	}
	name := m.jobName
	if name == "" {
		name = m.podGroup
	}
	var tj convoy.TrainingJob
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: name}, &tj); err == nil &&
		tj.Status.Checkpoint != nil && tj.Status.Checkpoint.Time != nil {
		return tj.Status.Checkpoint.Time.Time, true
	}
	return time.Time{}, false
}

// preemptionGrace is how long a victim gang of a TrainingJob that checkpoints is given to
// checkpoint before the operator stops it (spec.checkpoint.preemptionGraceSeconds), and whether it
// is such a gang: one with the job's labels whose pods name their attempt.
func (s *State) preemptionGrace(ctx context.Context, m victimMeta) (time.Duration, bool) {
	if s.reader == nil || !s.trainingJobs || m.podGroup == "" || m.jobName == "" {
		return 0, false
	}
	var tj convoy.TrainingJob
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: m.namespace, Name: m.jobName}, &tj); err != nil {
		return 0, false
	}
	grace := tj.PreemptionGrace()
	return grace, grace > 0 && tj.Name == m.podGroup
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
