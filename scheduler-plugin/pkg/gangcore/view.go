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
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
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
	// gpusPerPod is the largest GPU count of the pending pods; podGPUs, when their counts differ,
	// each one's, in the order of pending.
	gpusPerPod int
	podGPUs    []int
	// podNeeds, when the pending pods ask different CPU, memory or other resources, is what each
	// asks of the gang's Limits, in the order of pending (planner.Gang.PodNeeds); set per plan by
	// eligibilityFor.
	podNeeds [][]int64
	level    planner.Level
	required bool
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
	g.level, g.required = Topology(pod)
	members := []*corev1.Pod{pod}
	mixed := false
	if g.podGroup != "" {
		members = append(members, s.members(pod.Namespace, g.podGroup)...)
	}
	for _, p := range members {
		if g.pendingUIDs[p.UID] || p.DeletionTimestamp != nil || p.Spec.SchedulerName != pod.Spec.SchedulerName {
			continue
		}
		n := GPURequest(p, s.opts.GPUResource)
		node := s.nodeOf(p)
		if n == 0 {
			if node == "" && requiresDomain(p) {
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
			g.podGPUs[i] = GPURequest(p, s.opts.GPUResource)
		}
	}
	g.fewest = len(g.pending)
	if info, ok := s.podGroup(pod.Namespace, g.podGroup); ok && g.podGroup != "" {
		// Coscheduling's Permit lets a gang's pods through once minMember of its pods are
		// assigned: those bound count, and the plan's GPU pods must make up the rest (pods
		// without GPUs are scheduled apart, and are not counted on).
		g.minMember = info.minMember
		bound := 0
		for _, p := range members {
			if s.nodeOf(p) != "" && p.DeletionTimestamp == nil &&
				p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				bound++
			}
		}
		g.fewest = min(g.fewest, max(int(info.minMember)-bound, 0))
	}
	return g
}

// gpusOf is the GPU count of the gang's i-th pending pod.
func (g *gang) gpusOf(i int) int {
	if g.podGPUs != nil {
		return g.podGPUs[i]
	}
	return g.gpusPerPod
}

// eligibility is what the gang's pods need of a node besides GPUs, computed once per plan.
type eligibility struct {
	template *corev1.Pod
	affinity nodeaffinity.RequiredNodeAffinity
	requests corev1.ResourceList
	// limits are requests, but GPUs and pod slots, read once per plan: MaxPods runs on every node.
	limits Limits
	// interPod is what the pods ask of other pods' places; nil when nothing (see interpod.go).
	interPod *interPod
	// avoid are the nodes a filter rejected for the gang's last plans (see avoid.go).
	avoid map[string]avoidance
}

// eligibilityFor reads what g's pods, pod first, need of a node besides GPUs. Affinity among the
// gang's own pods may tighten g's topology level. The error names a constraint a plan cannot honour.
func (s *State) eligibilityFor(ctx context.Context, pod *corev1.Pod, g *gang, nodes []fwk.NodeInfo) (eligibility, error) {
	e := s.nodeNeeds(pod, g)
	ip, err := s.interPod.constraints(ctx, pod, g, nodes, s)
	if err != nil {
		return e, fmt.Errorf("%s needs %w", g.key, err)
	}
	e.interPod = ip
	if l := ip.requiredLevel(); l != planner.LevelNone && (!g.required || l < g.level) {
		g.level, g.required = l, true
	}
	return e, nil
}

// nodeNeeds reads what g's pods, pod first, need of a node besides GPUs and other pods' places:
// node affinity, tolerations, CPU, memory and the other resources they ask.
func (s *State) nodeNeeds(pod *corev1.Pod, g *gang) eligibility {
	e := eligibility{template: pod, affinity: nodeaffinity.GetRequiredNodeAffinity(pod),
		requests: resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), avoid: s.avoidedLocked(g.key)}
	// The pods of a gang may ask different CPU and memory (a master or launcher beside its
	// workers): Limits count the most any of them asks, and each pod's own needs go to the
	// planner, which counts a node's room pod by pod.
	differ := false
	reqs := make([]corev1.ResourceList, len(g.pending))
	for i, p := range g.pending {
		// GPUs apart, which the planner counts pod by pod (PodGPUs).
		reqs[i] = resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		delete(reqs[i], s.opts.GPUResource)
		differ = differ || !apiequality.Semantic.DeepEqual(reqs[i], reqs[0])
		for name, q := range reqs[i] {
			if cur, ok := e.requests[name]; !ok || q.Cmp(cur) > 0 {
				e.requests[name] = q
			}
		}
	}
	e.limits = LimitsOf(e.requests, s.opts.GPUResource)
	g.podNeeds = nil
	if differ {
		g.podNeeds = make([][]int64, len(g.pending))
		for i, req := range reqs {
			g.podNeeds[i] = e.limits.usesOf(req)
		}
	}
	return e
}

// taintComparison is whether tolerations may compare taint values numerically (Lt, Gt), as
// TaintToleration decides it: the feature gate, set from the command line before any plan, read once
// rather than for every node of every plan.
var taintComparison = sync.OnceValue(func() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.TaintTolerationComparisonOperators)
})

// excluded reports whether the gang's pods may not run on the node: cordon, an untolerated
// NoSchedule or NoExecute taint, or the node selector and required node affinity.
func (e eligibility) excluded(node *corev1.Node) bool {
	logger, comparison := klog.TODO(), taintComparison()
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, e.template.Spec.Tolerations,
		&corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, comparison) {
		return true
	}
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, e.template.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, comparison); untolerated {
		return true
	}
	match, err := e.affinity.Match(node)
	return err != nil || !match
}

// Limits are the requests of a gang's pods that bound how many of them a node admits beside their
// GPUs, as a plan's view gives that number to the planner (planner.Node.MaxPods).
type Limits []limit

// limit is one request of the gang's pods that bounds how many of them a node admits.
type limit struct {
	name corev1.ResourceName
	// value is in millicores for CPU, in units for the rest.
	value int64
}

// LimitsOf returns the requests that bound a node's room for the pods: all but the GPUs, which the
// planner counts, pod slots, which MaxPods counts by pods, and zero requests.
func LimitsOf(requests corev1.ResourceList, gpu corev1.ResourceName) Limits {
	var out Limits
	for name, q := range requests {
		v := q.Value()
		if name == corev1.ResourceCPU {
			v = q.MilliValue()
		}
		if name != gpu && name != corev1.ResourcePods && v > 0 {
			out = append(out, limit{name, v})
		}
	}
	return out
}

// MaxPods is how many of the pods the node's CPU, memory, ephemeral storage, pod slots and other
// extended resources admit; -1 when none.
func (ls Limits) MaxPods(ni fwk.NodeInfo) int {
	n := ni.GetAllocatable().GetAllowedPodNumber() - len(ni.GetPods())
	for _, l := range ls {
		n = min(n, int(max(l.free(ni), 0)/l.value))
	}
	if n <= 0 {
		return -1
	}
	return n
}

// MaxPodsWithout is MaxPods once the pods gone, which run on the node, have left it: what a
// preemption that evicts them frees beside their GPUs.
func (ls Limits) MaxPodsWithout(ni fwk.NodeInfo, gone []*corev1.Pod) int {
	if len(gone) == 0 {
		return ls.MaxPods(ni)
	}
	spare, n := ls.Spare(ni, gone), -1
	for r, need := range ls.Needs() {
		if k := int(max(spare[r], 0) / need); n < 0 || k < n {
			n = k
		}
	}
	if n <= 0 {
		return -1
	}
	return n
}

// free is what the node has left of l's resource (millicores for CPU).
func (l limit) free(ni fwk.NodeInfo) int64 {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	switch l.name {
	case corev1.ResourceCPU:
		return alloc.GetMilliCPU() - used.GetMilliCPU()
	case corev1.ResourceMemory:
		return alloc.GetMemory() - used.GetMemory()
	case corev1.ResourceEphemeralStorage:
		return alloc.GetEphemeralStorage() - used.GetEphemeralStorage()
	default:
		return alloc.GetScalarResources()[l.name] - used.GetScalarResources()[l.name]
	}
}

// Needs is what one pod asks of each limit, then one pod slot: planner.Cluster.Needs.
func (ls Limits) Needs() []int64 {
	out := make([]int64, 0, len(ls)+1)
	for _, l := range ls {
		out = append(out, l.value)
	}
	return append(out, 1)
}

// Spare is what the node has free of each limit, then of pod slots, once the pods gone have left
// it: planner.Node.Spare.
func (ls Limits) Spare(ni fwk.NodeInfo, gone []*corev1.Pod) []int64 {
	out := make([]int64, 0, len(ls)+1)
	for _, l := range ls {
		out = append(out, l.free(ni))
	}
	out = append(out, int64(ni.GetAllocatable().GetAllowedPodNumber()-len(ni.GetPods())))
	for _, p := range gone {
		for r, u := range ls.Uses(p) {
			out[r] += u
		}
	}
	return out
}

// Uses is what the pod holds of each limit, then its pod slot: planner.Holder.Uses.
func (ls Limits) Uses(p *corev1.Pod) []int64 {
	return ls.usesOf(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))
}

// usesOf is Uses of a pod that asks req.
func (ls Limits) usesOf(req corev1.ResourceList) []int64 {
	out := make([]int64, 0, len(ls)+1)
	for _, l := range ls {
		q := req[l.name]
		if l.name == corev1.ResourceCPU {
			out = append(out, q.MilliValue())
		} else {
			out = append(out, q.Value())
		}
	}
	return append(out, 1)
}

// Fill is how full the node's CPU and memory would be with one more of the pods, in thousandths:
// the mean of the two shares, as upstream NodeResourcesFit's MostAllocated scores a node
// (planner.Node.Fill). Zero when the node has no CPU or memory to share.
func (ls Limits) Fill(ni fwk.NodeInfo) int32 {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	var cpu, mem int64
	for _, l := range ls {
		switch l.name {
		case corev1.ResourceCPU:
			cpu = l.value
		case corev1.ResourceMemory:
			mem = l.value
		}
	}
	share := func(used, req, alloc int64) int64 {
		if alloc <= 0 {
			return 0
		}
		return min((used+req)*1000/alloc, 1000)
	}
	return int32((share(used.GetMilliCPU(), cpu, alloc.GetMilliCPU()) + share(used.GetMemory(), mem, alloc.GetMemory())) / 2)
}

// fewer combines two limits of the planner's Node.MaxPods (-1: none, 0: no limit).
func fewer(a, b int) int {
	switch {
	case a < 0 || b < 0:
		return -1
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// victimTable numbers the gangs and lone pods that hold GPUs, for preemption.
type victimTable struct {
	index map[string]int
	meta  []victimMeta
	list  []planner.Victim
	// leaving holds, by node, the pods of lower priority than the preemptor that hold GPUs there
	// and terminate already: preemption counts their GPUs, CPU and memory as free, and the
	// preemptor waits for them instead of evicting others (see leavingFor).
	leaving map[string][]*corev1.Pod
}

// leavingFor reports whether p, a pod holding GPUs, terminates already and has a lower priority
// than g: a preemption for g waits for it to go rather than evict anything in its place, as
// upstream's DefaultPreemption does not preempt while lower-priority pods terminate on the
// nominated node. Without it, a gang whose victims outlasted victimTerminationSeconds (a
// checkpoint on SIGTERM), or whose scheduler restarted while they terminated, or that came while
// Kueue evicted a job, would evict more gangs for room already on its way.
func leavingFor(p *corev1.Pod, g *gang) bool {
	return p.DeletionTimestamp != nil && GangKey(p) != g.key && corev1helpers.PodPriority(p) < g.priority
}

type victimMeta struct {
	namespace, podGroup, pod string
	jobName                  string
	started                  time.Time
}

// viewOptions say what a view is for.
type viewOptions struct {
	gang *gang
	elig eligibility
	// victims builds Cluster.Victims for preemption; lone pods are victims only with lonePods.
	victims  bool
	lonePods bool
}

// view turns the snapshot into the planner's cluster for g.
func (s *State) view(ctx context.Context, nodes []fwk.NodeInfo, o viewOptions) (*planner.Cluster, *victimTable) {
	// The node list of the view before last is no longer read (planFor and preemption use a view
	// under s.mu, and the last view's only until the next one's ShareIndex): fill it again rather
	// than allocate 5,000 nodes' worth per plan.
	buf := s.spareNodes
	s.spareNodes = nil
	if cap(buf) < len(nodes) {
		buf = make([]planner.Node, 0, len(nodes))
	}
	cl := &planner.Cluster{Nodes: buf[:0], PartlyUsedFirst: s.opts.PartlyUsedFirst}
	var vt *victimTable
	if o.victims {
		vt = &victimTable{index: map[string]int{}, leaving: map[string][]*corev1.Pod{}}
	}
	claims := s.claims(o.gang)
	// The nodes where the gang's own pending pods hold GPUs (reserved, not yet bound): they count
	// as free for the new plan.
	held := map[string]bool{}
	for uid := range o.gang.pendingUIDs {
		if r, ok := s.reserved[uid]; ok {
			held[r.node] = true
		}
	}
	var anchor *corev1.Node
	if o.gang.anchor != "" {
		for _, ni := range nodes {
			if ni.Node() != nil && ni.Node().Name == o.gang.anchor {
				anchor = ni.Node()
			}
		}
	}
	s.gpuMu.Lock()
	defer s.gpuMu.Unlock()
	// A base whose GPUNode changed since the last view is stale.
	for name := range s.gpuChanged {
		if b := s.bases[name]; b != nil && b.gn != s.gpuNodes[name] {
			b.stale = true
			delete(s.bases, name)
		}
	}
	clear(s.gpuChanged)
	if len(s.byPosition) != len(nodes) {
		s.byPosition = make([]*nodeBase, len(nodes))
	}
	for i, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		// The base at the node's position in the last view, if it is the node's and still
		// current, saves two lookups by name per node and plan.
		b := s.byPosition[i]
		if b == nil || b.stale || b.pn.Name != node.Name || b.generation != ni.GetGeneration() {
			b = s.base(ni, s.gpuNodes[node.Name])
			s.byPosition[i] = b
		}
		// Most nodes of a busy cluster have no free GPU: without victims to count, such a node is
		// its base, and its eligibility does not matter.
		if vt == nil && b.pn.Free == 0 && !held[node.Name] {
			cl.Nodes = append(cl.Nodes, b.pn)
			continue
		}
		pn := nodeView(b, o.gang, claims[node.Name], vt, o.lonePods)
		_, avoided := o.elig.avoid[node.Name]
		pn.Excluded = avoided || o.elig.excluded(node) || !s.sameDomain(anchor, node, o.gang)
		if !pn.Excluded && o.elig.interPod.excludes(ctx, ni) {
			pn.Excluded = vt == nil || !s.evictionAdmits(ctx, &pn, ni, o, vt)
		}
		if !pn.Excluded {
			var leaving []*corev1.Pod
			if vt != nil {
				leaving = vt.leaving[node.Name]
			}
			spreadCap := o.elig.interPod.maxPods(ni, o.gang.pendingUIDs)
			pn.MaxPods = fewer(o.elig.limits.MaxPodsWithout(ni, leaving), spreadCap)
			pn.Fill = o.elig.limits.Fill(ni)
			if o.gang.podNeeds != nil && spreadCap >= 0 {
				// Pods that ask different CPU and memory: the planner counts the node's room
				// from what it has spare, pod by pod.
				pn.Spare, pn.SpreadCap = o.elig.limits.Spare(ni, leaving), spreadCap
			}
			if vt != nil && pn.MaxPods != 0 && (pn.MaxPods < 0 || pn.MaxPods < pn.GPUs) {
				// Victims' pods hold CPU and memory too: evicted, they give them back.
				s.spareForVictims(&pn, b, ni, o, vt, leaving, spreadCap)
			}
		}
		cl.Nodes = append(cl.Nodes, pn)
	}
	if vt != nil {
		s.fillWorkLost(ctx, vt)
		cl.Victims = vt.list
		cl.Needs = o.elig.limits.Needs()
	}
	// Node names and labels rarely change between plans: keep the planner's topology index.
	if s.lastCluster != nil {
		cl.ShareIndex(s.lastCluster)
		s.spareNodes = s.lastCluster.Nodes
	}
	s.lastCluster = cl
	return cl, vt
}

// evictionAdmits reports whether evicting victims with pods on a node the inter-pod filters
// reject would let the gang's pod pass them there: its anti-affinity, or theirs, is what stands
// in the way. The victims are those of the pods holding GPUs there and of the pods holding none (a
// parameter server, a lone pod when lone pods may be preempted). It tries one victim, then every
// two, and so on, in that order (past eight victims: all of them, less each one the others do not
// need), and marks the node as requiring the first set that admits the pod (planner.Node.Requires): a plan takes the node only by evicting that whole set. The other
// victims' GPUs there are left out of pn (neither free nor to be freed), so that no plan counts on
// them. A node where even evicting every victim would not do (a pod that may not be evicted stands
// in the way) stays out.
func (s *State) evictionAdmits(ctx context.Context, pn *planner.Node, ni fwk.NodeInfo, o viewOptions, vt *victimTable) bool {
	// Victims of the gang's priority or more are never evicted: sets with them are not weighed.
	var victims []int
	candidate := func(v int) {
		if v >= 0 && vt.list[v].Priority < o.gang.priority && !slices.Contains(victims, v) {
			victims = append(victims, v)
		}
	}
	for _, h := range pn.Holders {
		candidate(h.Victim)
	}
	for _, pi := range ni.GetPods() {
		if p := pi.GetPod(); GPURequest(p, s.opts.GPUResource) == 0 {
			candidate(vt.add(p, o.gang, 0, o.lonePods))
		}
	}
	admits := func(set []int) bool {
		var pods []*corev1.Pod
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if slices.ContainsFunc(set, func(v int) bool { return GangKey(p) == vt.list[v].Key }) {
				pods = append(pods, p)
			}
		}
		return o.elig.interPod.passesWithout(ctx, ni, pods)
	}
	// Past maxRequired victims on one node the sets are not weighed one by one: when evicting all
	// of them admits the pod, each is dropped that the others do not need, those of the highest
	// priority first.
	const maxRequired = 8
	var found []int
	for k := 1; k <= len(victims) && found == nil; k++ {
		if len(victims) > maxRequired && k < len(victims) {
			continue
		}
		forEachSubset(victims, k, func(set []int) bool {
			if admits(set) {
				found = slices.Clone(set)
				return false
			}
			return true
		})
	}
	if found == nil {
		return false
	}
	if len(victims) > maxRequired {
		slices.SortStableFunc(found, func(a, b int) int { return cmp.Compare(vt.list[b].Priority, vt.list[a].Priority) })
		for i := 0; i < len(found); {
			if rest := slices.Delete(slices.Clone(found), i, i+1); admits(rest) {
				found = rest
				continue
			}
			i++
		}
	}
	pn.Holders = slices.DeleteFunc(pn.Holders, func(h planner.Holder) bool { return h.Victim >= 0 && !slices.Contains(found, h.Victim) })
	pn.Requires = found
	return true
}

// forEachSubset calls f with each subset of k elements of items, in order, until f returns false.
func forEachSubset(items []int, k int, f func([]int) bool) {
	set := make([]int, 0, k)
	var walk func(from int) bool
	walk = func(from int) bool {
		if len(set) == k {
			return f(set)
		}
		for i := from; i <= len(items)-(k-len(set)); i++ {
			set = append(set, items[i])
			if !walk(i + 1) {
				return false
			}
			set = set[:len(set)-1]
		}
		return true
	}
	walk(0)
}

// sameDomain keeps a gang that already has a bound pod (on anchor) inside anchor's domain of its
// required level.
func (s *State) sameDomain(anchor, node *corev1.Node, g *gang) bool {
	if anchor == nil || !g.required {
		return true
	}
	keys := []string{s.opts.ZoneLabel}
	switch g.level {
	case planner.LevelNVLink, planner.LevelNode:
		return node.Name == anchor.Name
	case planner.LevelRack:
		keys = append(keys, s.opts.BlockLabel, s.opts.RackLabel)
	case planner.LevelBlock:
		keys = append(keys, s.opts.BlockLabel)
	case planner.LevelZone:
	default:
		return true
	}
	for _, k := range keys {
		if node.Labels[k] != anchor.Labels[k] {
			return false
		}
	}
	return true
}

// nodeBase is what a node's GPUs look like before any gang's view of them: its labels, its free
// GPUs after every pod on it, and those pods' holds. It is cached per node and recomputed only
// when the node's NodeInfo generation or GPUNode changes.
type nodeBase struct {
	generation int64
	gn         *gpuNode
	// stale marks a base replaced in bases, or dropped from it: its node or GPUNode changed.
	stale bool
	pn    planner.Node
	// room is the device plugin's allocatable less the pods' requests.
	room    int
	holders []hold
	// leaving is how many GPUs pods that terminate hold (see leavingMessage).
	leaving int
}

// hold is one pod's GPUs on a node.
type hold struct {
	pod  *corev1.Pod
	gpus planner.GPUSet
	n    int
}

// base returns the node's cached base, computing it when the snapshot or GPUNode (gn) changed.
func (s *State) base(ni fwk.NodeInfo, gn *gpuNode) *nodeBase {
	node := ni.Node()
	if b := s.bases[node.Name]; b != nil && b.generation == ni.GetGeneration() && b.gn == gn {
		return b
	}
	b := &nodeBase{generation: ni.GetGeneration(), gn: gn}
	pn := planner.Node{Name: node.Name, Zone: node.Labels[s.opts.ZoneLabel], Block: node.Labels[s.opts.BlockLabel],
		Rack: node.Labels[s.opts.RackLabel]}
	pn.CPU, pn.Memory = ni.GetAllocatable().GetMilliCPU(), ni.GetAllocatable().GetMemory()
	alloc := int(ni.GetAllocatable().GetScalarResources()[s.opts.GPUResource])
	b.room = alloc - int(ni.GetRequested().GetScalarResources()[s.opts.GPUResource])
	var free planner.GPUSet
	if gn != nil {
		pn.Indexed, pn.GPUs, pn.Unhealthy, pn.Topology = true, gn.total, gn.unhealthy, gn.topology
		free = gn.healthy
	} else {
		pn.GPUs = min(alloc, planner.MaxGPUsPerNode)
		free = planner.FirstGPUs(pn.GPUs)
	}
	var unknown []int
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		n := GPURequest(p, s.opts.GPUResource)
		if n == 0 {
			continue
		}
		if p.DeletionTimestamp != nil {
			b.leaving += n
		}
		set := s.knownGPUs(p, gn)
		if set == 0 {
			unknown = append(unknown, len(b.holders))
		}
		free &^= set
		b.holders = append(b.holders, hold{pod: p, gpus: set, n: n})
	}
	// Pods whose GPUs are not known hold some of the free ones: the highest, by convention.
	for _, i := range unknown {
		set := highest(free, b.holders[i].n)
		free &^= set
		b.holders[i].gpus = set
	}
	pn.Free = free
	b.pn = pn
	if old := s.bases[node.Name]; old != nil {
		old.stale = true
	}
	s.bases[node.Name] = b
	return b
}

// nodeView is one node for gang g: its base, with the GPUs of g's own pending pods free again (g
// is being planned anew), less the claims of other gangs' plans of g's priority or more, and never
// more than the device plugin's allocatable leaves. With vt it also numbers the pods' victims.
//
// Pods nominated by GangPreemption hold claims through their gang's plan; the scheduling queue's
// nominated pods are not read here: that takes the queue's locks, once per node, and a plan at
// 5,000 nodes took 100-300 ms while binds flooded the queue with events. Nodes' Filter still
// accounts for nominated pods.
func nodeView(b *nodeBase, g *gang, claims []claim, vt *victimTable, lonePods bool) planner.Node {
	pn := b.pn
	free, room := pn.Free, b.room
	if vt != nil || len(g.pendingUIDs) > 0 {
		pn.Holders = make([]planner.Holder, 0, len(b.holders))
		for _, h := range b.holders {
			if g.pendingUIDs[h.pod.UID] {
				free |= h.gpus
				room += h.n
				continue
			}
			v := -1
			if vt != nil {
				if leavingFor(h.pod, g) {
					free |= h.gpus
					room += h.n
					vt.leaving[pn.Name] = append(vt.leaving[pn.Name], h.pod)
					continue
				}
				v = vt.add(h.pod, g, h.n, lonePods)
			}
			pn.Holders = append(pn.Holders, planner.Holder{Victim: v, GPUs: h.gpus})
		}
	}
	for _, c := range claims {
		if pn.Indexed && c.indexed {
			free &^= c.gpus
		} else {
			room -= c.gpus.Len()
		}
	}
	if free.Len() > room {
		free &^= highest(free, free.Len()-max(room, 0))
	}
	pn.Free = free
	return pn
}

// spareForVictims gives pn, a node of a preemption's view whose CPU, memory or pod slots bound the
// gang's pods, what it has spare of them (the pods leaving it counted as gone) and what each pod
// of a victim there holds (planner.Node.Spare, planner.Holder.Uses), victims' pods without GPUs
// added as holders of no GPUs. pn.Holders are nodeView's: b's holders less g's own pending pods
// and the pods leaving; spreadCap is the bound the pods' spread among themselves puts on the
// gang's pods there (interPod.maxPods).
func (s *State) spareForVictims(pn *planner.Node, b *nodeBase, ni fwk.NodeInfo, o viewOptions, vt *victimTable, leaving []*corev1.Pod, spreadCap int) {
	if spreadCap < 0 {
		return
	}
	k, any := 0, false
	for _, h := range b.holders {
		if o.gang.pendingUIDs[h.pod.UID] || leavingFor(h.pod, o.gang) {
			continue
		}
		if pn.Holders[k].Victim >= 0 {
			pn.Holders[k].Uses = o.elig.limits.Uses(h.pod)
			any = true
		}
		k++
	}
	// Pods without GPUs hold CPU and memory too: those of lower priority are victims (a CPU
	// batch job on a GPU node), or leave already.
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if GPURequest(p, s.opts.GPUResource) > 0 || o.gang.pendingUIDs[p.UID] || corev1helpers.PodPriority(p) >= o.gang.priority {
			continue
		}
		if leavingFor(p, o.gang) {
			leaving = append(slices.Clip(leaving), p)
			continue
		}
		if v := vt.add(p, o.gang, 0, o.lonePods); v >= 0 {
			pn.Holders = append(pn.Holders, planner.Holder{Victim: v, Uses: o.elig.limits.Uses(p)})
			any = true
		}
	}
	if any {
		pn.Spare, pn.SpreadCap = o.elig.limits.Spare(ni, leaving), spreadCap
	}
}

// highest returns the n highest GPUs of s.
func highest(s planner.GPUSet, n int) planner.GPUSet {
	var out planner.GPUSet
	for i := planner.MaxGPUsPerNode - 1; i >= 0 && n > 0; i-- {
		if s.Has(i) {
			out |= planner.NewGPUSet(i)
			n--
		}
	}
	return out
}

// knownGPUs returns the GPUs a pod holds, where known: from the node agent's GPUNode, else from
// the scheduler's own reservation or the pod's convoy.dev/gpu-indices annotation. Zero when unknown.
func (s *State) knownGPUs(p *corev1.Pod, gn *gpuNode) planner.GPUSet {
	if gn != nil {
		if set := gn.allocated[p.Namespace+"/"+p.Name]; set != 0 {
			return set
		}
	}
	if r, ok := s.reserved[p.UID]; ok && r.gpus != 0 {
		return r.gpus
	}
	if set, ok := ParseGPUIndices(p.Annotations[AnnotationGPUIndices]); ok {
		return set
	}
	return 0
}

// add records a GPU pod of a victim candidate and returns its victim index, or -1 when it may not
// be evicted: a pod of the preemptor's gang, a terminating or static pod, or a lone pod when lone
// pods are protected.
func (vt *victimTable) add(p *corev1.Pod, g *gang, gpus int, lonePods bool) int {
	key := GangKey(p)
	pg := PodGroupName(p)
	if key == g.key || p.DeletionTimestamp != nil || (pg == "" && !lonePods) {
		return -1
	}
	if _, static := p.Annotations[corev1.MirrorPodAnnotationKey]; static {
		return -1
	}
	started := p.CreationTimestamp.Time
	if p.Status.StartTime != nil {
		started = p.Status.StartTime.Time
	}
	i, ok := vt.index[key]
	if !ok {
		i = len(vt.list)
		vt.index[key] = i
		vt.list = append(vt.list, planner.Victim{Key: key, Priority: corev1helpers.PodPriority(p)})
		m := victimMeta{namespace: p.Namespace, podGroup: pg, jobName: p.Labels[convoy.LabelJobName], started: started}
		if pg == "" {
			m.pod = p.Name
		}
		vt.meta = append(vt.meta, m)
	}
	v := &vt.list[i]
	v.Priority = max(v.Priority, corev1helpers.PodPriority(p))
	v.GPUs += gpus
	if started.Before(vt.meta[i].started) {
		vt.meta[i].started = started
	}
	return i
}
