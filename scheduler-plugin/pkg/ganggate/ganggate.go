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

// Package ganggate is the GangGate scheduler plugin: the PreEnqueue gate that keeps a gang's pods
// out of the active queue until GangPlacement can place them. See README.md.
package ganggate

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
)

// Name is the plugin's name in the registry and in KubeSchedulerConfiguration.
const Name = "GangGate"

// PodGroupEvent is a PodGroup's cluster event, in the scheduler's GVK spelling.
const PodGroupEvent fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"

// GangGate holds a gang's pods in PreEnqueue while the gang lacks members, and then all but its
// leader until the leader has planned the gang. It is its own plugin, apart from GangPlacement, so
// that the pods it holds are requeued only by the events that can let them through (a sibling
// deleted, their PodGroup changed): the scheduling queue skips a gated pod for any event its gating
// plugin does not register, without running a queueing hint. Room appearing (a node, a GPUNode, a
// bound pod deleted) requeues the leader, which GangPlacement rejected, and the leader's plan lets
// its siblings through.
type GangGate struct {
	handle fwk.Handle
	state  atomic.Pointer[gangcore.State]
}

var (
	_ fwk.PreEnqueuePlugin  = &GangGate{}
	_ fwk.EnqueueExtensions = &GangGate{}
)

// New makes the plugin; it takes no args. It needs GangPlacement in the same scheduler.
func New(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return &GangGate{handle: h}, nil
}

// Name returns the plugin's name.
func (pl *GangGate) Name() string { return Name }

// gangState is GangPlacement's State. The plugins of a profile are made in no set order, so it is
// looked up on first use, when all exist.
func (pl *GangGate) gangState() *gangcore.State {
	if s := pl.state.Load(); s != nil {
		return s
	}
	s := gangcore.Lookup(pl.handle)
	if s != nil {
		pl.state.Store(s)
	}
	return s
}

// PreEnqueue lets a pod into the active queue once its gang is complete and either planned or the
// pod is its leader. Pods of no PodGroup, and pods that ask no GPU, are never held.
func (pl *GangGate) PreEnqueue(_ context.Context, pod *corev1.Pod) *fwk.Status {
	s := pl.gangState()
	if s == nil {
		return fwk.AsStatus(fmt.Errorf("%s needs the GangPlacement plugin in the same scheduler", Name))
	}
	if ok, why := s.Gate(pod); !ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	return nil
}

// EventsToRegister lists what can let a held pod through without Activate: a sibling deleted (the
// gang lacks a member, or has a new leader) and its PodGroup created or changed (minMember). The
// pod that completes a gang, and a gang's plan, let its pods through by Activate.
func (pl *GangGate) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: sibling},
		{Event: fwk.ClusterEvent{Resource: PodGroupEvent, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: OwnPodGroup},
	}, nil
}

// sibling requeues a pod when a pod of its own gang is deleted.
func sibling(_ klog.Logger, pod *corev1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	gone, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if gangcore.SameGang(pod, gone) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// OwnPodGroup requeues a pod when its own PodGroup is added or changed.
func OwnPodGroup(_ klog.Logger, pod *corev1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	pg, ok := newObj.(interface {
		GetNamespace() string
		GetName() string
	})
	if !ok {
		return fwk.Queue, nil
	}
	if pg.GetNamespace() == pod.Namespace && pg.GetName() == gangcore.PodGroupName(pod) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
