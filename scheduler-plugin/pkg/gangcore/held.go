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
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

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
func (s *State) planWithHeld(cl *planner.Cluster, g *gang, place func() (*planner.Plan, map[types.UID]bool, error)) (*planner.Plan, error) {
	pl, freed, err := place()
	if err != nil || len(g.held) == 0 {
		return pl, err
	}
	level := planner.LevelCluster
	for _, p := range g.held {
		l, _ := Topology(p)
		level = min(level, l)
	}
	infos := s.handle.SnapshotSharedLister().NodeInfos()
	best, bestRoom, tried := "", -1, 0
	for {
		name, members := cl.Domain(pl.Assignments[0].NodeIndex(), level)
		room := heldRoom(g, pl, freed, members, cl, infos)
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
		if pl, freed, err = place(); err != nil {
			break
		}
	}
	noun := level.String()
	if level <= planner.LevelNode {
		noun = "node"
	}
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
// freed pods given back.
func heldRoom(g *gang, pl *planner.Plan, freed map[types.UID]bool, members []int32, cl *planner.Cluster, infos framework.NodeInfoLister) int {
	// The gang's own pods the scheduler already assumed somewhere give their room back too: the
	// plan places them anew.
	mine := maps.Clone(freed)
	if mine == nil {
		mine = make(map[types.UID]bool, len(g.pending)+len(g.held))
	}
	for _, p := range slices.Concat(g.pending, g.held) {
		mine[p.UID] = true
	}
	planned := map[string][]*corev1.Pod{}
	for i, a := range pl.Assignments {
		planned[a.Node] = append(planned[a.Node], g.pending[i])
	}
	rooms := make([]*nodeRoom, 0, len(members))
	for _, j := range members {
		ni, err := infos.Get(cl.Nodes[j].Name)
		if err != nil || ni.Node() == nil {
			continue
		}
		r := roomOf(ni, mine)
		for _, p := range planned[ni.Node().Name] {
			r.take(requests(p), 1)
		}
		rooms = append(rooms, r)
	}
	held := slices.Clone(g.held)
	slices.SortStableFunc(held, func(a, b *corev1.Pod) int {
		ra, rb := requests(a), requests(b)
		return cmp.Compare(rb.Cpu().MilliValue(), ra.Cpu().MilliValue())
	})
	n := 0
	for _, p := range held {
		req := requests(p)
		e := eligibility{template: p, affinity: nodeaffinity.GetRequiredNodeAffinity(p)}
		for _, r := range rooms {
			if r.fits(req) && !e.excluded(r.node) {
				r.take(req, 1)
				n++
				break
			}
		}
	}
	return n
}

func requests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
}

// nodeRoom is what a node has left of CPU, memory, ephemeral storage, extended resources and pod
// slots.
type nodeRoom struct {
	node                      *corev1.Node
	milliCPU, memory, storage int64
	scalar                    map[corev1.ResourceName]int64
	pods                      int64
}

// roomOf is the node's allocatable less the requests of its pods, not counting the pods in skip.
func roomOf(ni fwk.NodeInfo, skip map[types.UID]bool) *nodeRoom {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	r := &nodeRoom{node: ni.Node(), milliCPU: alloc.GetMilliCPU() - used.GetMilliCPU(), memory: alloc.GetMemory() - used.GetMemory(),
		storage: alloc.GetEphemeralStorage() - used.GetEphemeralStorage(), pods: int64(alloc.GetAllowedPodNumber() - len(ni.GetPods())),
		scalar: map[corev1.ResourceName]int64{}}
	for name, q := range alloc.GetScalarResources() {
		r.scalar[name] = q - used.GetScalarResources()[name]
	}
	for _, pi := range ni.GetPods() {
		if skip[pi.GetPod().UID] {
			r.take(requests(pi.GetPod()), -1)
		}
	}
	return r
}

// take subtracts sign times the requests of one pod.
func (r *nodeRoom) take(req corev1.ResourceList, sign int64) {
	r.pods -= sign
	for name, q := range req {
		switch name {
		case corev1.ResourceCPU:
			r.milliCPU -= sign * q.MilliValue()
		case corev1.ResourceMemory:
			r.memory -= sign * q.Value()
		case corev1.ResourceEphemeralStorage:
			r.storage -= sign * q.Value()
		case corev1.ResourcePods:
		default:
			r.scalar[name] -= sign * q.Value()
		}
	}
}

// fits reports whether one pod of these requests fits the room.
func (r *nodeRoom) fits(req corev1.ResourceList) bool {
	if r.pods < 1 {
		return false
	}
	for name, q := range req {
		var left, want int64
		switch name {
		case corev1.ResourceCPU:
			left, want = r.milliCPU, q.MilliValue()
		case corev1.ResourceMemory:
			left, want = r.memory, q.Value()
		case corev1.ResourceEphemeralStorage:
			left, want = r.storage, q.Value()
		case corev1.ResourcePods:
			continue
		default:
			left, want = r.scalar[name], q.Value()
		}
		// A resource the pod asks none of (nvidia.com/gpu: 0) is never short, even where a
		// preemption's plan takes GPUs its victims still hold.
		if want > 0 && want > left {
			return false
		}
	}
	return true
}

// LeavesRoomForPlan reports whether pod, a pod without GPUs held for its gang's plan, leaves the
// gang's GPU pods planned on the node, and not yet reserved there, the room they need: the plan's
// check for held pods counted those GPU pods first. Without it a parameter server scheduled before
// a worker may take the worker's CPU, the worker's node then fails NodeResourcesFit, and the gang
// is planned again without that node.
func (s *State) LeavesRoomForPlan(pod *corev1.Pod, ni fwk.NodeInfo) bool {
	var planned []types.UID
	s.mu.Lock()
	if p := s.plans[GangKey(pod)]; p != nil {
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
	r := roomOf(ni, nil)
	for _, m := range s.members(pod.Namespace, PodGroupName(pod)) {
		if slices.Contains(planned, m.UID) {
			r.take(requests(m), 1)
		}
	}
	return r.fits(requests(pod))
}
