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

// Package gangpreemption is the GangPreemption scheduler plugin: when a gang cannot be placed it
// evicts the cheapest set of whole lower-priority gangs that makes room; a pod without GPUs
// preempts as upstream DefaultPreemption does, among pods of no gang. See README.md.
package gangpreemption

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	kubeschedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config/validation"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangplacement"
)

// Name is the plugin's name in the registry and in KubeSchedulerConfiguration.
const Name = "GangPreemption"

// GangPreemption preempts whole gangs in PostFilter. It needs GangPlacement in the same profile.
type GangPreemption struct {
	handle   fwk.Handle
	opts     gangcore.PreemptOptions
	executor *preemption.Executor
	// podByPod is upstream DefaultPreemption, for pods without GPUs: its victims are pods of no
	// gang, so that no gang is ever left broken.
	podByPod fwk.PostFilterPlugin
	// podGroups annotates the PodGroups of victims that checkpoint before they stop; nil without
	// a cluster.
	podGroups dynamic.NamespaceableResourceInterface
}

var _ fwk.PostFilterPlugin = &GangPreemption{}

// New makes the plugin from its GangPreemptionArgs.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.GangPreemptionArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type GangPreemptionArgs, got %T", obj)
	}
	if err := validation.ValidateGangPreemptionArgs(field.NewPath("args"), args); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Creating the GangPreemption plugin", "args", args)
	podByPod, err := newPodByPod(ctx, h)
	if err != nil {
		return nil, err
	}
	var podGroups dynamic.NamespaceableResourceInterface
	if cfg := h.KubeConfig(); cfg != nil {
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		podGroups = dc.Resource(schedv1alpha1.SchemeGroupVersion.WithResource("podgroups"))
	}
	return &GangPreemption{
		handle:    h,
		podGroups: podGroups,
		opts:      gangcore.PreemptOptions{LonePods: args.PreemptLonePods, Wait: time.Duration(args.VictimTerminationSeconds) * time.Second},
		// Only its PreemptPod is used: the eviction path of DefaultPreemption (reject a waiting
		// victim, else set DisruptionTarget and delete it, and record an event).
		executor: preemption.NewExecutor(h, plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)),
		podByPod: podByPod,
	}, nil
}

// newPodByPod makes upstream DefaultPreemption with its default args and the scheduler's feature
// gates, restricted to victims of no gang (no pod-group label). It evicts in PostFilter, as
// GangPreemption does: asynchronous preemption relies on DefaultPreemption's PreEnqueue, which is
// not in the profile, to keep the preemptor out of the queue while its victims are evicted.
func newPodByPod(ctx context.Context, h fwk.Handle) (*defaultpreemption.DefaultPreemption, error) {
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	fts.EnableAsyncPreemption = false
	var args kubeschedconfig.DefaultPreemptionArgs
	if err := gangcore.UpstreamArgs(&configv1.DefaultPreemptionArgs{}, &args); err != nil {
		return nil, err
	}
	dp, err := defaultpreemption.New(ctx, &args, h, fts)
	if err != nil {
		return nil, err
	}
	dp.IsEligiblePod = func(_ fwk.NodeInfo, victim fwk.PodInfo, _ *corev1.Pod) bool { return eligibleOneByOne(victim.GetPod()) }
	return dp, nil
}

// eligibleOneByOne reports whether a pod may be the victim of a pod without GPUs, which preempts
// pod by pod: only if it belongs to no gang.
func eligibleOneByOne(victim *corev1.Pod) bool { return gangcore.PodGroupName(victim) == "" }

// Name returns the plugin's name.
func (pl *GangPreemption) Name() string { return Name }

// podPreemptor is the preempting pod as upstream's preemption executor names it in events and logs.
type podPreemptor struct{ *corev1.Pod }

func (p podPreemptor) UID() types.UID               { return p.Pod.UID }
func (p podPreemptor) SchedulerName() string        { return p.Spec.SchedulerName }
func (p podPreemptor) Obj() runtime.Object          { return p.Pod }
func (p podPreemptor) Pods() map[string]*corev1.Pod { return map[string]*corev1.Pod{p.Name: p.Pod} }
func (p podPreemptor) Priority() int32              { return corev1helpers.PodPriority(p.Pod) }
func (p podPreemptor) Type() string                 { return "pod" }

// victimsOn is the preemption candidate of one victim pod: its own node.
type victimsOn struct {
	node    string
	victims *extenderv1.Victims
}

func (c *victimsOn) Victims() *extenderv1.Victims { return c.victims }
func (c *victimsOn) Name() string                 { return c.node }

// PostFilter runs when the pod could not be scheduled. When GangPlacement found no room for the
// pod's gang, it chooses whole victims of strictly lower priority, evicts every pod of each, and
// nominates the pod to its node in the plan the gang gets once they are gone. A pod without GPUs
// preempts as upstream DefaultPreemption does, with victims among the pods of no gang.
func (pl *GangPreemption) PostFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	if pl.podByPod != nil {
		if state := gangcore.Lookup(pl.handle); state != nil && state.PodGPUs(pod) == 0 {
			// GangPlacement skipped the pod: it asks no GPUs.
			return pl.podByPod.PostFilter(ctx, cs, pod, m)
		}
	}
	st, err := gangcore.ReadCycleState(cs)
	if err != nil {
		// Another plugin rejected the pod: GPUs are not what it lacks.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if st.Placed {
		// A filter failed on the planned node: the gang is planned again without it.
		if status := filterStatus(m, st.Slot.Node); status != nil && status.Plugin() != gangplacement.Name {
			if state := gangcore.Lookup(pl.handle); state != nil {
				state.Rejected(ctx, pod, st.Slot.Node, status.Plugin(), status.Message())
			}
		}
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if msg := preemptsNever(pod); msg != "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	state := gangcore.Lookup(pl.handle)
	if state == nil {
		return nil, fwk.AsStatus(fmt.Errorf("%s needs the GangPlacement plugin in the same scheduler", Name))
	}
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	v, status := state.PreemptFor(ctx, pod, nodes, pl.opts)
	if !status.IsSuccess() {
		return nil, status
	}
	if err := pl.askToCheckpoint(ctx, v.Checkpointing); err != nil {
		return nil, fwk.AsStatus(err)
	}
	if len(v.Pods) > 0 {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errCh := parallelize.NewResultChannel[error]()
		pl.handle.Parallelizer().Until(ctx, len(v.Pods), func(i int) {
			victim := v.Pods[i]
			c := &victimsOn{node: victim.Spec.NodeName, victims: &extenderv1.Victims{Pods: []*corev1.Pod{victim}}}
			if err := pl.executor.PreemptPod(ctx, c, podPreemptor{pod}, victim, Name); err != nil {
				errCh.SendWithCancel(err, cancel)
			}
		}, Name)
		if err := errCh.Receive(); err != nil {
			return nil, fwk.AsStatus(err)
		}
	}
	if len(v.Pods) > 0 || len(v.Checkpointing) > 0 {
		gangcore.RecordPreemption(v)
		logger.V(2).Info("Preempted whole gangs", "pod", klog.KObj(pod), "gang", st.Gang,
			"victims", strings.Join(v.Gangs, ","), "pods", len(v.Pods), "checkpointing", len(v.Checkpointing), "nominatedNode", v.Node)
	}
	// The message joins the pods' PodScheduled condition at once: the next attempt, which says it
	// too, may come only when a victim is gone.
	return framework.NewPostFilterResultWithNominatedNode(v.Node), fwk.NewStatus(fwk.Success, v.Message)
}

// preemptsNever says why the pod may not preempt, or "" when it may. The API server's Priority
// admission copies the PriorityClass's preemptionPolicy into the pod's spec (and the class's policy
// cannot change), so a gang of a class with preemptionPolicy Never waits for free GPUs, as
// upstream's DefaultPreemption has such a pod wait.
func preemptsNever(pod *corev1.Pod) string {
	if pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != corev1.PreemptNever {
		return ""
	}
	if pod.Spec.PriorityClassName != "" {
		return fmt.Sprintf("priority class %s has preemptionPolicy Never: the gang waits for free GPUs and preempts nothing", pod.Spec.PriorityClassName)
	}
	return "the pod's preemptionPolicy is Never: the gang waits for free GPUs and preempts nothing"
}

// filterStatus is the status a Filter plugin gave the node, nil when none did: a PreFilter
// rejection, or a PreFilter result that left the node out, gives it the status of absent nodes.
func filterStatus(m fwk.NodeToStatusReader, node string) *fwk.Status {
	if m == nil {
		return nil
	}
	s := m.Get(node)
	if nts, ok := m.(*framework.NodeToStatus); ok && s == nts.AbsentNodesStatus() {
		return nil
	}
	if s == nil || s.IsSuccess() || s.Plugin() == "" {
		return nil
	}
	return s
}

// askToCheckpoint annotates the PodGroup of each victim that checkpoints before it stops with the
// attempt preempted: the operator asks that gang for a checkpoint and stops it within its grace.
func (pl *GangPreemption) askToCheckpoint(ctx context.Context, victims []gangcore.CheckpointingVictim) error {
	for _, v := range victims {
		if pl.podGroups == nil {
			return fmt.Errorf("cannot ask PodGroup %s to checkpoint: no cluster", v.PodGroup)
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			convoy.AnnotationPreemptAttempt: v.Attempt}}})
		if err != nil {
			return err
		}
		if _, err := pl.podGroups.Namespace(v.PodGroup.Namespace).Patch(ctx, v.PodGroup.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("asking PodGroup %s to checkpoint before it stops: %w", v.PodGroup, err)
		}
	}
	return nil
}
