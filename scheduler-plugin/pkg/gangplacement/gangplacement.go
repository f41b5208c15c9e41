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

// Package gangplacement is the GangPlacement scheduler plugin: it places every pod of a gang at
// once, on the best GPUs, in the smallest topology domain. See README.md.
package gangplacement

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config/validation"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/admissioncheck"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/ganggate"
)

// Name is the plugin's name in the registry and in KubeSchedulerConfiguration.
const Name = "GangPlacement"

// PodGroupEvent is the cluster event of PodGroups, in the scheduler's GVK spelling.
const PodGroupEvent = ganggate.PodGroupEvent

// GangPlacement plans a whole gang in PreFilter and makes each pod follow the plan.
type GangPlacement struct {
	handle fwk.Handle
	state  *gangcore.State
	gpu    corev1.ResourceName
	// levels are the topology levels, outer to inner, whose domains Bind records on the pod
	// (convoy.AnnotationTopologyDomains), read from nodes; none when nodes is nil.
	levels []config.TopologyLevel
	nodes  corelisters.NodeLister
	// binds holds a token per pod writing its claims or its Binding (MaxConcurrentBindings).
	binds chan struct{}
}

var (
	_ fwk.QueueSortPlugin   = &GangPlacement{}
	_ fwk.PreFilterPlugin   = &GangPlacement{}
	_ fwk.FilterPlugin      = &GangPlacement{}
	_ fwk.ReservePlugin     = &GangPlacement{}
	_ fwk.PreBindPlugin     = &GangPlacement{}
	_ fwk.BindPlugin        = &GangPlacement{}
	_ fwk.PostBindPlugin    = &GangPlacement{}
	_ fwk.EnqueueExtensions = &GangPlacement{}
	_ io.Closer             = &GangPlacement{}
)

// New makes the plugin from its GangPlacementArgs.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.GangPlacementArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type GangPlacementArgs, got %T", obj)
	}
	if err := validation.ValidateGangPlacementArgs(field.NewPath("args"), args); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Creating the GangPlacement plugin", "args", args)
	st, err := gangcore.Shared(ctx, h, gangcore.Options{
		Levels:          levels(args),
		GPUResource:     corev1.ResourceName(args.GPUResourceName),
		PlanTimeout:     time.Duration(args.PlanTimeoutSeconds) * time.Second,
		PartlyUsedFirst: args.NodePacking == config.NodePackingPartlyUsedFirst,
	})
	if err != nil {
		return nil, err
	}
	if cfg := h.KubeConfig(); cfg != nil {
		ns, name, _ := strings.Cut(args.LeaderElectionLease, "/")
		if err := admissioncheck.Start(ctx, cfg, st, admissioncheck.Options{
			BookingTimeout: time.Duration(args.BookingTimeoutSeconds) * time.Second,
			Lease:          types.NamespacedName{Namespace: ns, Name: name},
			Recheck:        admissioncheck.DefaultRecheck,
		}); err != nil {
			return nil, fmt.Errorf("starting the placement admission check: %w", err)
		}
	}
	pl := &GangPlacement{handle: h, state: st, gpu: corev1.ResourceName(args.GPUResourceName),
		levels: args.Levels(), binds: make(chan struct{}, args.MaxConcurrentBindings)}
	if f := h.SharedInformerFactory(); f != nil {
		pl.nodes = f.Core().V1().Nodes().Lister()
	}
	return pl, nil
}

// Close ends this profile's hold on the scheduler's gangcore.State (gangcore.Release): the
// framework closes its plugins when the scheduler stops, and the State stops with the last.
func (pl *GangPlacement) Close() error {
	gangcore.Release(pl.handle)
	return nil
}

// Name returns the plugin's name.
func (pl *GangPlacement) Name() string { return Name }

// Less orders the scheduling queue: priority, then the oldest PodGroup, with a gang's pods
// together in rank order.
func (pl *GangPlacement) Less(a, b fwk.QueuedPodInfo) bool { return pl.state.Less(a, b) }

// PreFilter checks that the pod's gang is complete (as Coscheduling's PreFilter would, from an
// index instead of a list of the namespace), gives the pod its slot in the gang's plan, planning
// the whole gang when it has none, and narrows the nodes to that slot's. A gang that does not fit is rejected here, for all its
// pods, before anything is reserved. Pods without GPUs are left to the other plugins.
func (pl *GangPlacement) PreFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if why := pl.state.Incomplete(pod); why != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	if pl.state.PodGPUs(pod) == 0 {
		// A pod without GPUs runs where the other plugins put it, inside the domain of its
		// gang's GPU pods when the gang requires a topology level.
		anchor := pl.state.AnchorFor(pod)
		if anchor == "" {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		cs.Write(gangcore.StateKey, &gangcore.CycleState{Gang: gangcore.GangKey(pod), Anchor: anchor})
		return nil, nil
	}
	st, status := pl.state.PlanFor(ctx, pod, nodes)
	cs.Write(gangcore.StateKey, st)
	if !status.IsSuccess() {
		return nil, status
	}
	// A pod's DRA claims get the slot's devices here, before DynamicResources would allocate them;
	// in a profile that runs DynamicResources' PreFilter first (its state is there), it allocates.
	if _, err := cs.Read(dynamicResourcesState); err != nil {
		if status := pl.state.AllocateClaims(ctx, pod, st.Slot); !status.IsSuccess() {
			return nil, status
		}
	}
	return &fwk.PreFilterResult{NodeNames: sets.New(st.Slot.Node)}, nil
}

// dynamicResourcesState is the CycleState key of DynamicResources' PreFilter.
const dynamicResourcesState fwk.StateKey = "DynamicResources"

// PreFilterExtensions returns nil: the plan does not change with the pods preemption dry-runs.
func (pl *GangPlacement) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter admits only the node of the pod's slot. PreFilter already narrowed the nodes to it; this
// also holds when the scheduler first tries a pod's nominated node. A pod without GPUs whose gang
// requires a topology level is admitted on the nodes of its gang's domain, where it leaves the
// gang's GPU pods planned there their room.
func (pl *GangPlacement) Filter(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	st, err := gangcore.ReadCycleState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if st.Anchor != "" {
		anchor, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(st.Anchor)
		if err != nil || anchor.Node() == nil {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node %s of gang %s's GPU pods is gone", st.Anchor, st.Gang))
		}
		if !pl.state.InDomain(pod, anchor.Node(), ni.Node()) {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s requires one %s: its GPU pods run on node %s", st.Gang, pl.state.LevelName(pod), st.Anchor))
		}
		if !pl.state.LeavesRoomForPlan(pod, ni) {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node %s keeps its room for the GPU pods gang %s plans there", ni.Node().Name, st.Gang))
		}
		return nil
	}
	if !st.Placed {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, st.Unplaceable)
	}
	if ni.Node().Name != st.Slot.Node {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("the plan of gang %s puts the pod on node %s", st.Gang, st.Slot.Node))
	}
	return nil
}

// Reserve holds the slot's GPUs for the pod.
func (pl *GangPlacement) Reserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	pl.state.Reserve(pod, nodeName)
	return nil
}

// Unreserve releases them, takes back the claims' allocations not written, and drops the gang's
// plan.
func (pl *GangPlacement) Unreserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	pl.state.RestoreClaims(pod)
	pl.state.Unreserve(pod)
}

// PreBindPreFlight skips PreBind for a pod without claims PreFilter allocated.
func (pl *GangPlacement) PreBindPreFlight(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if !pl.state.WritesClaims(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreBind writes the allocations of the pod's claims that PreFilter chose from its slot's
// devices; a write that fails unreserves the pod, and the gang is planned again. The writes take
// a turn of MaxConcurrentBindings, as Bind does: a released gang's claim writes would open new
// connections as its Bindings would.
func (pl *GangPlacement) PreBind(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	done, status := pl.turn(ctx)
	if status != nil {
		return status
	}
	defer done()
	return pl.state.WriteClaims(ctx, pod)
}

// turn waits for one of the MaxConcurrentBindings turns to write to the API server, and returns
// the function that ends it; an error where the binding cycle ends first.
func (pl *GangPlacement) turn(ctx context.Context) (func(), *fwk.Status) {
	select {
	case pl.binds <- struct{}{}:
		return func() { <-pl.binds }, nil
	case <-ctx.Done():
		return nil, fwk.AsStatus(ctx.Err())
	}
}

// Bind binds the pod with its GPU indices in the convoy.dev/gpu-indices annotation (not on a node
// whose GPUs are DRA devices: its claims' allocations say which are the pod's) and its node's
// topology domains in convoy.dev/topology-domains, in the one Binding call (the API server copies a
// Binding's annotations onto the pod). With neither (a node known by GPU count only, with none of
// the levels' labels) it leaves binding to DefaultBinder. At most MaxConcurrentBindings are in
// flight; the others wait their turn, in the binding cycle, so that a released gang neither makes
// the client open new connections nor queues every Binding behind all the others.
func (pl *GangPlacement) Bind(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	st, err := gangcore.ReadCycleState(cs)
	if err != nil || !st.Placed || st.Slot.Node != nodeName {
		return fwk.NewStatus(fwk.Skip)
	}
	annotations := map[string]string{}
	if st.Slot.Indexed && (len(pod.Spec.ResourceClaims) == 0 || gangcore.GPURequest(pod, pl.gpu) > 0) && !pl.state.DRANode(nodeName) {
		annotations[gangcore.AnnotationGPUIndices] = gangcore.FormatGPUIndices(st.Slot.GPUs)
	}
	if d := pl.domains(nodeName); d != "" {
		annotations[convoy.AnnotationTopologyDomains] = d
	}
	if len(annotations) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: annotations},
		Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	done, status := pl.turn(ctx)
	if status != nil {
		return status
	}
	defer done()
	klog.FromContext(ctx).V(3).Info("Binding", "pod", klog.KObj(pod), "node", nodeName, "gpus", annotations[gangcore.AnnotationGPUIndices],
		"domains", annotations[convoy.AnnotationTopologyDomains])
	if err := pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}

// domains is the node's convoy.AnnotationTopologyDomains: level=domain for each level that labels
// it, outer to inner; "" when the node is not known.
func (pl *GangPlacement) domains(nodeName string) string {
	if pl.nodes == nil {
		return ""
	}
	node, err := pl.nodes.Get(nodeName)
	if err != nil {
		return ""
	}
	var out []string
	for _, l := range pl.levels {
		if v := node.Labels[l.NodeLabel]; v != "" {
			out = append(out, l.Name+"="+v)
		}
	}
	return strings.Join(out, ",")
}

// PostBind forgets the gang's plan once all its pods are bound.
func (pl *GangPlacement) PostBind(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	pl.state.Bound(pod)
}

// EventsToRegister lists, for the pods GangPlacement rejected (a gang's leader, or a pod that
// failed on its planned node), what can make room for a gang: a pod that held GPUs deleted, a node
// added or its allocatable, labels or taints changed; and what changes the gang: its PodGroup
// created or changed, a sibling deleted. The siblings held for a plan are GangGate's, requeued by
// its own events. GPUNodes are not registered: the State activates the pods that wait for room
// when a GPUNode reports more GPUs, where the scheduling queue would walk every pending pod on
// every GPUNode update.
func (pl *GangPlacement) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: pl.freesGPUsOrSibling},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}},
		{Event: fwk.ClusterEvent{Resource: PodGroupEvent, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: ganggate.OwnPodGroup},
	}, nil
}

// The hints run for every pod this plugin rejected on every such event, under the scheduling
// queue's lock: they must be cheap, and skip what cannot help.

// freesGPUsOrSibling requeues a pod when a bound pod that held GPUs or DRA claims, or a pod of its
// own gang (its leader may change), is deleted.
func (pl *GangPlacement) freesGPUsOrSibling(_ klog.Logger, pod *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	gone, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if gangcore.SameGang(pod, gone) || gone.Spec.NodeName != "" &&
		(gangcore.GPURequest(gone, pl.gpu) > 0 || len(gone.Spec.ResourceClaims) > 0) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// levels are the args' topology levels for gangcore.
func levels(args *config.GangPlacementArgs) []gangcore.TopologyLevel {
	var out []gangcore.TopologyLevel
	for _, l := range args.Levels() {
		out = append(out, gangcore.TopologyLevel{Name: l.Name, NodeLabel: l.NodeLabel})
	}
	return out
}
