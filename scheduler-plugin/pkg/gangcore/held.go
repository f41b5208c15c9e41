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
	"cmp"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// A gang that requires a topology level keeps its pods without GPUs (parameter servers, an MXNet
// scheduler) in the domain of its GPU pods (see AnchorFor). The planner places GPUs only, so a
// plan is checked for their room too: a domain whose CPU, memory or pod slots cannot hold them
// beside the plan's GPU pods is left out, and the gang is planned again. Without the check such a
// pod stays pending while its gang's GPU pods wait at Permit, and the next plan may pick the same
// domain.

// maxDomainsForHeld is how many domains a gang is planned in before it is told that its pods
// without GPUs fit none of them.
const maxDomainsForHeld = 16

// heldUnplaceable says that no domain tried has room for a gang's pods without GPUs.
type heldUnplaceable struct{ message string }

func (e *heldUnplaceable) Error() string { return e.message }

// planWithHeld runs place, which plans g on cl (a new plan, or a preemption's), and returns its
// plan when g has no held pods or the plan's domain of their level has room for them beside its
// GPU pods; freed are the pods the plan evicts, whose room counts as free. Otherwise it leaves
// that domain out and runs place again, up to maxDomainsForHeld domains; the error then says what
// the gang needs and the most room a tried domain had.
func (s *State) planWithHeld(logger klog.Logger, cl *planner.Cluster, g *gang, place func() (*planner.Plan, map[types.UID]bool, error)) (*planner.Plan, error) {
	pl, freed, err := place()
	if err != nil || len(g.held) == 0 {
		return pl, err
	}
	level := planner.LevelCluster
	for _, p := range g.held {
		l, _, _ := s.Topology(p)
		level = min(level, l)
	}
	infos := s.handle.SnapshotSharedLister().NodeInfos()
	best, bestRoom, tried := "", -1, 0
	for {
		name, members := cl.Domain(pl.Assignments[0].NodeIndex(), level)
		room := heldRoom(logger, g, pl, freed, members, cl, infos)
		if room >= len(g.held) {
			return pl, nil
		}
		if room > bestRoom {
			best, bestRoom = name, room
		}
		tried++
		if tried == maxDomainsForHeld {
			break
		}
		for _, j := range members {
			cl.Nodes[j].Excluded = true
		}
		s.fleet.spoil(cl)
		if pl, freed, err = place(); err != nil {
			break
		}
	}
	noun := s.opts.levelName(level)
	msg := fmt.Sprintf("%s needs %s and %d pod(s) without GPUs in one %s", g.key, g.plannerGang(), len(g.held), noun)
	if tried == 1 {
		msg += fmt.Sprintf("; the only %s with room for its GPU pods (%s) has room beside them for %d pod(s) without GPUs", noun, best, bestRoom)
	} else {
		msg += fmt.Sprintf("; of the %d %ss with room for its GPU pods tried, the best (%s) has room beside them for %d pod(s) without GPUs", tried, noun, best, bestRoom)
	}
	return nil, &heldUnplaceable{message: msg + " (CPU, memory, pod slots, node selector, taints)"}
}

// heldRoom is how many of g's held pods the domain's nodes (members, indices in cl.Nodes) admit,
// first fit from the largest CPU request, beside the GPU pods pl puts there, with the room of the
// freed pods given back. Each node is a copy of the scheduler's NodeInfo with those pods added and
// removed, and the pods are fitted by NodeResourcesFit's own test, as DefaultPreemption simulates
// its victims' eviction.
func heldRoom(logger klog.Logger, g *gang, pl *planner.Plan, freed map[types.UID]bool, members []int32, cl *planner.Cluster, infos fwk.NodeInfoLister) int {
	// The gang's own pods the scheduler already assumed somewhere give their room back too: the
	// plan places them anew.
	gone := maps.Clone(freed)
	if gone == nil {
		gone = make(map[types.UID]bool, len(g.pending)+len(g.held))
	}
	for _, p := range slices.Concat(g.pending, g.held) {
		gone[p.UID] = true
	}
	planned := map[string][]*corev1.Pod{}
	for i, a := range pl.Assignments {
		planned[a.Node] = append(planned[a.Node], g.pending[i])
	}
	nodes := make([]fwk.NodeInfo, 0, len(members))
	for _, j := range members {
		ni, err := infos.Get(cl.Nodes[j].Name)
		if err != nil || ni.Node() == nil {
			continue
		}
		ni = ni.Snapshot()
		// RemovePod moves the last pod into the removed one's place: walk a copy.
		for _, pi := range slices.Clone(ni.GetPods()) {
			if gone[pi.GetPod().UID] {
				_ = ni.RemovePod(logger, pi.GetPod())
			}
		}
		for _, p := range planned[ni.Node().Name] {
			addPod(ni, p)
		}
		nodes = append(nodes, ni)
	}
	held := slices.Clone(g.held)
	slices.SortStableFunc(held, func(a, b *corev1.Pod) int {
		return cmp.Compare(cpuRequest(b), cpuRequest(a))
	})
	n := 0
	for _, p := range held {
		e := eligibility{template: p, affinity: nodeaffinity.GetRequiredNodeAffinity(p)}
		for _, ni := range nodes {
			if len(noderesources.Fits(p, ni, nil, noderesources.ResourceRequestsOptions{})) == 0 && !e.excluded(ni.Node()) {
				addPod(ni, p)
				n++
				break
			}
		}
	}
	return n
}

func cpuRequest(p *corev1.Pod) int64 {
	req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	return req.Cpu().MilliValue()
}

// addPod adds p's requests to ni, a copy of a node's NodeInfo, as if it ran there.
func addPod(ni fwk.NodeInfo, p *corev1.Pod) {
	if pi, err := framework.NewPodInfo(p); err == nil {
		ni.AddPodInfo(pi)
	}
}

// LeavesRoomForPlan reports whether pod, a pod without GPUs held for its gang's plan, leaves the
// gang's GPU pods planned on the node, and not yet reserved there, the room they need: the plan's
// check for held pods counted those GPU pods first. Without it a parameter server scheduled before
// a worker may take the worker's CPU, the worker's node then fails NodeResourcesFit, and the gang
// is planned again without that node.
func (s *State) LeavesRoomForPlan(pod *corev1.Pod, ni fwk.NodeInfo) bool {
	var planned []types.UID
	s.mu.Lock()
	if p := s.book.plans[GangKey(pod)]; p != nil {
		for uid, sl := range p.slots {
			if sl.phase == slotPlanned && sl.Node == ni.Node().Name {
				planned = append(planned, uid)
			}
		}
	}
	s.mu.Unlock()
	if len(planned) == 0 {
		return true
	}
	ni = ni.Snapshot()
	for _, m := range s.gangs.members(pod.Namespace, PodGroupName(pod)) {
		if slices.Contains(planned, m.UID) {
			addPod(ni, m)
		}
	}
	return len(noderesources.Fits(pod, ni, nil, noderesources.ResourceRequestsOptions{})) == 0
}
