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

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// gang is the gang of the pod being scheduled.
type gang struct {
	key       string
	namespace string
	podGroup  string
	// pending are the gang's unbound GPU pods, in rank order: the pods a plan places.
	pending []*corev1.Pod
	// pendingUIDs are their UIDs: GPUs the scheduler holds for them (assumed, waiting at Permit)
	// count as free when the gang is planned again.
	pendingUIDs map[types.UID]bool
	// held are its unbound pods without GPUs that GangGate holds for the plan (see AnchorFor).
	held []*corev1.Pod
	// anchor is a node of a bound pod of the gang: a required level keeps the rest with it.
	anchor string
	// moveFrom, for a gang booked to move whole (State.BookMove), are the nodes of its running
	// pods, whose GPUs count as free for it.
	moveFrom map[string]bool
	// gpusPerPod is the largest GPU count of the pending pods; podGPUs, when their counts differ,
	// each one's, in the order of pending.
	gpusPerPod int
	podGPUs    []int
	// podNeeds, when the pending pods ask different CPU, memory or other resources, is what each
	// asks of the gang's Limits, in the order of pending (planner.Gang.PodNeeds); set per plan by
	// eligibilityFor.
	podNeeds [][]int64
	// dra says that its pods claim their GPUs through DRA: the nodes whose GPUs the device plugin
	// hands out are not for it, nor are the nodes whose GPUs DRA hands out for other gangs (but
	// those of extended).
	dra bool
	// devices, for a DRA gang whose claims select devices, is what they ask of each device; for a
	// gang of the extended resource that a DeviceClass backs (extended), what the class selects.
	devices *deviceFilter
	// extended, for a gang whose pods ask the GPU extended resource, is the DeviceClass that backs
	// it with DRA devices (spec.extendedResourceName), if any: DynamicResources then allocates the
	// pods devices of that class on nodes without the resource's allocatable, so those nodes'
	// DRA GPUs are for the gang as well.
	extended *resourcev1.DeviceClass
	level    planner.Level
	required bool
	// levelErr says that the level the gang asks is none of the scheduler's.
	levelErr error
	priority int32
	// fewest is the fewest of the pending pods a plan may place: all of them, unless the
	// PodGroup's minMember is met with fewer (an elastic gang: minMember below its pods). A plan
	// then places as many as fit, at least fewest, the lowest ranks first; each pod left out waits
	// for room of its own. Zero when the gang's PodGroup already has minMember pods bound.
	fewest int
	// minMember is the gang's PodGroup's minMember, for messages; 0 for a pod of no PodGroup.
	minMember int32
}

// elastic reports whether a plan may leave some of the gang's pending pods out.
func (g *gang) elastic() bool { return g.fewest < len(g.pending) }

// kept returns g with only k of its pending pods, the lowest ranks and pod among them: what a
// plan that leaves the others out places. The pods left out keep their UIDs in pendingUIDs, as
// pods of the gang.
func (g *gang) kept(k int, pod *corev1.Pod) *gang {
	idx := make([]int, 0, k)
	for i := range k {
		idx = append(idx, i)
	}
	if j := slices.IndexFunc(g.pending, func(p *corev1.Pod) bool { return p.UID == pod.UID }); j >= k && k > 0 {
		idx[k-1] = j
	}
	out := *g
	out.pending, out.podGPUs, out.podNeeds, out.gpusPerPod = nil, nil, nil, 0
	for _, i := range idx {
		out.pending = append(out.pending, g.pending[i])
		out.gpusPerPod = max(out.gpusPerPod, g.gpusOf(i))
		if g.podGPUs != nil {
			out.podGPUs = append(out.podGPUs, g.podGPUs[i])
		}
		if g.podNeeds != nil {
			out.podNeeds = append(out.podNeeds, g.podNeeds[i])
		}
	}
	out.fewest = min(out.fewest, k)
	return &out
}

func (g *gang) plannerGang() planner.Gang {
	return planner.Gang{Key: g.key, Pods: len(g.pending), GPUsPerPod: g.gpusPerPod, PodGPUs: g.podGPUs, PodNeeds: g.podNeeds,
		Level: g.level, Required: g.required, Priority: g.priority}
}

// gangOf collects the gang of pod from the informer: its unbound GPU pods of the same scheduler,
// not terminating.
func (s *State) gangOf(pod *corev1.Pod) *gang {
	g := &gang{key: GangKey(pod), namespace: pod.Namespace, podGroup: PodGroupName(pod),
		priority: corev1helpers.PodPriority(pod), pendingUIDs: map[types.UID]bool{}}
	g.level, g.required, g.levelErr = s.Topology(pod)
	members := []*corev1.Pod{pod}
	mixed := false
	if g.podGroup != "" {
		members = append(members, s.gangs.members(pod.Namespace, g.podGroup)...)
	}
	for _, p := range members {
		if g.pendingUIDs[p.UID] || p.DeletionTimestamp != nil || p.Spec.SchedulerName != pod.Spec.SchedulerName {
			continue
		}
		n := s.PodGPUs(p)
		node := s.gangs.nodeOf(p)
		if n == 0 {
			if node == "" && s.requiresDomain(p) {
				g.held = append(g.held, p)
			}
			continue
		}
		if node != "" {
			if g.anchor == "" {
				g.anchor = node
			}
			continue
		}
		g.pendingUIDs[p.UID] = true
		g.pending = append(g.pending, p)
		mixed = mixed || g.gpusPerPod != 0 && n != g.gpusPerPod
		g.gpusPerPod = max(g.gpusPerPod, n)
	}
	slices.SortFunc(g.pending, func(a, b *corev1.Pod) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	if mixed {
		g.podGPUs = make([]int, len(g.pending))
		for i, p := range g.pending {
			g.podGPUs[i] = s.PodGPUs(p)
		}
	}
	s.setDRA(g)
	g.fewest = len(g.pending)
	if info, ok := s.gangs.podGroup(pod.Namespace, g.podGroup); ok && g.podGroup != "" {
		// Coscheduling's Permit lets a gang's pods through once minMember of its pods are
		// assigned: those bound count, and the plan's GPU pods must make up the rest (pods
		// without GPUs are scheduled apart, and are not counted on).
		g.minMember = info.minMember
		bound := 0
		for _, p := range members {
			if s.gangs.nodeOf(p) != "" && p.DeletionTimestamp == nil &&
				p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				bound++
			}
		}
		g.fewest = min(g.fewest, max(int(info.minMember)-bound, 0))
	}
	return g
}

// setDRA sets g.dra, and g.devices for a DRA gang; for a gang of the extended resource, g.extended
// and the devices its DeviceClass selects.
func (s *State) setDRA(g *gang) {
	g.dra = len(g.pending) > 0 && GPURequest(g.pending[0], s.opts.GPUResource) == 0
	switch {
	case s.dra == nil:
	case g.dra:
		g.devices = s.filterFor(g.pending)
	case len(g.pending) > 0:
		if g.extended = s.extendedClass(); g.extended != nil {
			g.devices = s.classFilter(g.extended)
		}
	}
}

// gpusOf is the GPU count of the gang's i-th pending pod.
func (g *gang) gpusOf(i int) int {
	if g.podGPUs != nil {
		return g.podGPUs[i]
	}
	return g.gpusPerPod
}
