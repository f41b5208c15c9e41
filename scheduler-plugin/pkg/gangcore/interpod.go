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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// Required inter-pod affinity, anti-affinity, topology spread constraints (whenUnsatisfiable:
// DoNotSchedule) and host ports are not in the planner's model; a plan that broke them would fail
// their Filter on its first node and be made again, the same, forever. A gang's plan honours them
// in two parts:
//
//   - Against pods already placed: kube-scheduler's own InterPodAffinity, PodTopologySpread and
//     NodePorts run their PreFilter and Filter for the gang's pod on every node the plan may use,
//     and a node they reject is excluded. They skip at once for a pod that asks nothing of other
//     pods or ports in a cluster where no pod asks anything of it.
//   - Among the gang's own pods, which are placed together: a term that selects the gang's own
//     pods becomes a bound on the plan. Anti-affinity by kubernetes.io/hostname allows one pod of
//     the gang per node; a spread by kubernetes.io/hostname with maxSkew m allows m matching pods
//     per node (a bound that keeps the skew whatever other nodes hold); affinity by
//     kubernetes.io/hostname or by the zone, block or rack label keeps the gang in one node, zone,
//     block or rack; host ports allow one pod of the gang per node. Any other term among the
//     gang's own pods is refused with a message naming it: placing a gang one pod at a time in the
//     order such a term needs is not something a plan can promise.
//
// Preferred terms and ScheduleAnyway spreads only score nodes; a plan decides the nodes itself.

// interPodPlugins are the upstream plugins that filter nodes for a gang's pod against pods
// already placed.
type interPodPlugins struct {
	plugins  []interPodPlugin
	nsLabels func(ns string) labels.Set
}

type interPodPlugin interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
}

func newInterPodPlugins(ctx context.Context, h fwk.Handle) (*interPodPlugins, error) {
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	var ipaArgs config.InterPodAffinityArgs
	var ptsArgs config.PodTopologySpreadArgs
	if err := UpstreamArgs(&configv1.InterPodAffinityArgs{}, &ipaArgs); err != nil {
		return nil, fmt.Errorf("InterPodAffinity: %w", err)
	}
	if err := UpstreamArgs(&configv1.PodTopologySpreadArgs{}, &ptsArgs); err != nil {
		return nil, fmt.Errorf("PodTopologySpread: %w", err)
	}
	ipa, err := interpodaffinity.New(ctx, &ipaArgs, h, fts)
	if err != nil {
		return nil, fmt.Errorf("InterPodAffinity: %w", err)
	}
	pts, err := podtopologyspread.New(ctx, &ptsArgs, h, fts)
	if err != nil {
		return nil, fmt.Errorf("PodTopologySpread: %w", err)
	}
	ports, err := nodeports.New(ctx, nil, h, fts)
	if err != nil {
		return nil, fmt.Errorf("NodePorts: %w", err)
	}
	nsLister := h.SharedInformerFactory().Core().V1().Namespaces().Lister()
	logger := klog.FromContext(ctx)
	return &interPodPlugins{
		plugins: []interPodPlugin{ipa.(interPodPlugin), pts.(interPodPlugin), ports.(interPodPlugin)},
		nsLabels: func(ns string) labels.Set {
			return interpodaffinity.GetNamespaceLabelsSnapshot(logger, ns, nsLister)
		},
	}, nil
}

// interPod is what a gang's pod asks of other pods' places, for one plan.
type interPod struct {
	pod   *corev1.Pod
	state *framework.CycleState
	// filters are the plugins whose PreFilter did not skip: nodes must pass their Filter.
	filters []interPodPlugin
	// caps bound the gang's pods per node, by the pods on the node they count.
	caps []nodeCap
	// level, when set, is the topology level that affinity among the gang's pods requires.
	level planner.Level
	// held are the gang's own pending pods the scheduler holds, by node: the plan places them
	// anew, so the filters see their nodes without them.
	held map[string][]*corev1.Pod
}

// nodeCap allows at most limit pods matching on a node.
type nodeCap struct {
	limit   int
	matches func(*corev1.Pod) bool
}

// constraints reads pod's required inter-pod terms for a plan of g's pending pods, which are
// taken to ask what pod asks. It returns nil when the pod asks nothing of other pods' places and
// nothing placed asks anything of it, and an error naming the term it cannot honour. The caller
// holds s.mu.
func (ip *interPodPlugins) constraints(ctx context.Context, pod *corev1.Pod, g *gang, nodes []fwk.NodeInfo, s *State) (*interPod, error) {
	if ip == nil {
		return nil, nil
	}
	out := &interPod{pod: pod, state: framework.NewCycleState()}
	for _, pl := range ip.plugins {
		_, status := pl.PreFilter(ctx, out.state, pod, nodes)
		switch {
		case status.IsSkip():
		case !status.IsSuccess():
			return nil, fmt.Errorf("%s: %s", pl.Name(), status.Message())
		default:
			out.filters = append(out.filters, pl)
		}
	}
	if err := s.withoutPending(ctx, out, g); err != nil {
		return nil, err
	}
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return nil, err
	}
	nsLabels := ip.nsLabels(pod.Namespace)
	// A term is among the gang's own pods when it selects any of them: the pod, or a sibling of
	// another role (a launcher's term may select the workers).
	members := append([]*corev1.Pod{pod}, g.pending...)
	selectsGang := func(match func(*corev1.Pod) bool) bool { return slices.ContainsFunc(members, match) }
	field := "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
	for i, t := range pi.GetRequiredAntiAffinityTerms() {
		if !selectsGang(func(p *corev1.Pod) bool { return t.Matches(p, nsLabels) }) {
			continue
		}
		if t.TopologyKey != corev1.LabelHostname {
			return nil, fmt.Errorf("pod anti-affinity among its own pods by %q (%s[%d]): Convoy keeps a gang's pods apart by %s only; use that topologyKey",
				t.TopologyKey, field, i, corev1.LabelHostname)
		}
		out.caps = append(out.caps, nodeCap{limit: 1, matches: func(p *corev1.Pod) bool {
			return t.Matches(p, ip.nsLabels(p.Namespace))
		}})
	}
	field = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"
	for i, t := range pi.GetRequiredAffinityTerms() {
		if !selectsGang(func(p *corev1.Pod) bool { return t.Matches(p, nsLabels) }) {
			continue
		}
		l, ok := s.levelOfKey(t.TopologyKey)
		if !ok {
			return nil, fmt.Errorf("pod affinity among its own pods by %q (%s[%d]): Convoy keeps a gang's pods together by %s or its topology levels' node labels (%s) only; use one of those topologyKeys, or the TrainingJob's spec.scheduling.topology",
				t.TopologyKey, field, i, corev1.LabelHostname, strings.Join(s.opts.labels(), ", "))
		}
		if out.level == planner.LevelNone || l < out.level {
			out.level = l
		}
	}
	for i, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		sel, err := spreadSelector(c, pod)
		if err != nil {
			return nil, fmt.Errorf("spec.topologySpreadConstraints[%d].labelSelector: %w", i, err)
		}
		if !selectsGang(func(p *corev1.Pod) bool { return p.Namespace == pod.Namespace && sel.Matches(labels.Set(p.Labels)) }) {
			continue
		}
		if c.TopologyKey != corev1.LabelHostname {
			return nil, fmt.Errorf("a topology spread of its own pods by %q with whenUnsatisfiable DoNotSchedule (spec.topologySpreadConstraints[%d]): Convoy spreads a gang's pods by %s only; use that topologyKey, or whenUnsatisfiable ScheduleAnyway",
				c.TopologyKey, i, corev1.LabelHostname)
		}
		ns := pod.Namespace
		out.caps = append(out.caps, nodeCap{limit: int(c.MaxSkew), matches: func(p *corev1.Pod) bool {
			return p.Namespace == ns && sel.Matches(labels.Set(p.Labels))
		}})
	}
	// Host ports (a hostNetwork pod's container ports among them) are the same for every pod of
	// the gang: one per node. NodePorts' Filter leaves out nodes whose pods use them.
	if len(schedutil.GetHostPorts(pod)) > 0 {
		out.caps = append(out.caps, nodeCap{limit: 1, matches: func(*corev1.Pod) bool { return false }})
	}
	if len(out.filters) == 0 && len(out.caps) == 0 && out.level == planner.LevelNone {
		return nil, nil
	}
	return out, nil
}

// withoutPending takes g's own pending pods that the scheduler holds on nodes (assumed, waiting at
// Permit) out of the filters' PreFilter state, and notes their nodes for the filters that read the
// node itself (NodePorts' used ports): the new plan places them anew, as their GPUs count free (see
// view).
func (s *State) withoutPending(ctx context.Context, c *interPod, g *gang) error {
	for uid := range g.pendingUIDs {
		r, ok := s.book.reserved[uid]
		if !ok {
			continue
		}
		ni, err := s.handle.SnapshotSharedLister().NodeInfos().Get(r.node)
		if err != nil {
			continue
		}
		if pi := podOn(ni, uid); pi != nil {
			if err := c.forget(ctx, c.state, pi, ni); err != nil {
				return err
			}
			if c.held == nil {
				c.held = map[string][]*corev1.Pod{}
			}
			c.held[r.node] = append(c.held[r.node], pi.GetPod())
		}
	}
	return nil
}

// podOn returns the PodInfo of the pod with uid on the node, nil when it is not there.
func podOn(ni fwk.NodeInfo, uid types.UID) fwk.PodInfo {
	for _, pi := range ni.GetPods() {
		if pi.GetPod().UID == uid {
			return pi
		}
	}
	return nil
}

// forget takes pi, on ni, out of the filters' PreFilter state st, as if it were gone: what
// preemption asks of PreFilterExtensions.
func (c *interPod) forget(ctx context.Context, st fwk.CycleState, pi fwk.PodInfo, ni fwk.NodeInfo) error {
	for _, pl := range c.filters {
		if ext := pl.PreFilterExtensions(); ext != nil {
			if status := ext.RemovePod(ctx, st, c.pod, pi, ni); !status.IsSuccess() {
				return fmt.Errorf("%s: %s", pl.Name(), status.Message())
			}
		}
	}
	return nil
}

// spreadSelector is the constraint's selector with its matchLabelKeys taken from pod, as
// PodTopologySpread reads it.
func spreadSelector(c corev1.TopologySpreadConstraint, pod *corev1.Pod) (labels.Selector, error) {
	ls := c.LabelSelector
	if len(c.MatchLabelKeys) > 0 {
		ls = ls.DeepCopy()
		if ls == nil {
			ls = &metav1.LabelSelector{}
		}
		for _, k := range c.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
					Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// levelOfKey maps a topology key to the planner's level.
func (s *State) levelOfKey(key string) (planner.Level, bool) {
	if key == corev1.LabelHostname {
		return planner.LevelNode, true
	}
	for i, l := range s.opts.Levels {
		if key == l.NodeLabel {
			return planner.TopologyLevel(i, len(s.opts.Levels)), true
		}
	}
	return planner.LevelNone, false
}

// requiredLevel is the level affinity among the gang's pods requires, LevelNone when none.
func (c *interPod) requiredLevel() planner.Level {
	if c == nil {
		return planner.LevelNone
	}
	return c.level
}

// excludes reports whether the node fails the upstream plugins' Filter for the gang's pod, the
// gang's own held pods taken off it.
func (c *interPod) excludes(ctx context.Context, ni fwk.NodeInfo) bool {
	if c == nil {
		return false
	}
	if own := c.held[ni.Node().Name]; len(own) > 0 {
		var ok bool
		if ni, ok = without(ctx, ni, own); !ok {
			return true
		}
	}
	return !c.passes(ctx, c.state, ni)
}

// passes reports whether the node passes every filter for the gang's pod, with PreFilter state st.
func (c *interPod) passes(ctx context.Context, st fwk.CycleState, ni fwk.NodeInfo) bool {
	for _, f := range c.filters {
		if !f.Filter(ctx, st, c.pod, ni).IsSuccess() {
			return false
		}
	}
	return true
}

// without is a copy of the node with pods taken off it; false when one cannot be.
func without(ctx context.Context, ni fwk.NodeInfo, pods []*corev1.Pod) (fwk.NodeInfo, bool) {
	n := ni.Snapshot()
	for _, p := range pods {
		if podOn(n, p.UID) != nil && n.RemovePod(klog.FromContext(ctx), p) != nil {
			return nil, false
		}
	}
	return n, true
}

// passesWithout reports whether the node would pass the upstream plugins' Filter for the gang's
// pod once pods are gone from it: preemption's question about its victims.
func (c *interPod) passesWithout(ctx context.Context, ni fwk.NodeInfo, pods []*corev1.Pod) bool {
	st := c.state.Clone()
	for _, p := range pods {
		if pi := podOn(ni, p.UID); pi != nil && c.forget(ctx, st, pi, ni) != nil {
			return false
		}
	}
	n, ok := without(ctx, ni, pods)
	return ok && c.passes(ctx, st, n)
}

// maxPods is how many of the gang's pods the node may take by the caps (0: no cap, -1: none),
// counting the pods on it that are not the gang's own pending ones.
func (c *interPod) maxPods(ni fwk.NodeInfo, pending map[types.UID]bool) int {
	if c == nil || len(c.caps) == 0 {
		return 0
	}
	limit := -1
	for _, cp := range c.caps {
		n := cp.limit
		for _, pi := range ni.GetPods() {
			if p := pi.GetPod(); !pending[p.UID] && cp.matches(p) {
				n--
			}
		}
		if limit < 0 || n < limit {
			limit = n
		}
	}
	if limit <= 0 {
		return -1
	}
	return limit
}
