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
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

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
		requests: resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), avoid: s.avoid.avoided(g.key, s.now())}
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
	// In one order, whatever the map's: views of gangs that ask the same share nodes (keptView).
	slices.SortFunc(out, func(a, b limit) int { return strings.Compare(string(a.name), string(b.name)) })
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
