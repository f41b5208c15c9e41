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

// Package bindquiet makes kube-scheduler's InterPodAffinity, PodTopologySpread and
// DynamicResources plugins, unchanged but for the events they register: a pod added (a bind among
// them), or a claim's allocation written for a bind, does not make the scheduling queue look at
// the pods they turned away. See README.md.
package bindquiet

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
)

// The plugins' names in the registry and in KubeSchedulerConfiguration.
const (
	InterPodAffinityName  = "BindQuietInterPodAffinity"
	PodTopologySpreadName = "BindQuietPodTopologySpread"
	DynamicResourcesName  = "BindQuietDynamicResources"
)

// InterPodAffinity is upstream's InterPodAffinity under its own name.
type InterPodAffinity struct {
	*interpodaffinity.InterPodAffinity
}

// PodTopologySpread is upstream's PodTopologySpread under its own name.
type PodTopologySpread struct {
	*podtopologyspread.PodTopologySpread
}

// DynamicResources is upstream's DynamicResources under its own name. With GangPlacement in the
// scheduler it registers no ResourceClaim update: GangPlacement's State brings back the pods it
// may have turned away when a claim changes (gangcore's claimwait.go).
type DynamicResources struct {
	*dynamicresources.DynamicResources
	handle fwk.Handle
	state  atomic.Pointer[gangcore.State]
}

var (
	_ fwk.PreFilterPlugin   = &DynamicResources{}
	_ fwk.ReservePlugin     = &DynamicResources{}
	_ fwk.PostBindPlugin    = &DynamicResources{}
	_ fwk.EnqueueExtensions = &DynamicResources{}
	_ fwk.FilterPlugin      = &InterPodAffinity{}
	_ fwk.ScorePlugin       = &InterPodAffinity{}
	_ fwk.EnqueueExtensions = &InterPodAffinity{}
	_ fwk.FilterPlugin      = &PodTopologySpread{}
	_ fwk.ScorePlugin       = &PodTopologySpread{}
	_ fwk.EnqueueExtensions = &PodTopologySpread{}
)

// NewInterPodAffinity makes upstream's InterPodAffinity with its default args; it takes no args.
func NewInterPodAffinity(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	if obj != nil {
		return nil, fmt.Errorf("%s takes no args: it runs InterPodAffinity's defaults", InterPodAffinityName)
	}
	var args config.InterPodAffinityArgs
	if err := gangcore.UpstreamArgs(&configv1.InterPodAffinityArgs{}, &args); err != nil {
		return nil, err
	}
	p, err := interpodaffinity.New(ctx, &args, h, features())
	if err != nil {
		return nil, err
	}
	return &InterPodAffinity{InterPodAffinity: p.(*interpodaffinity.InterPodAffinity)}, nil
}

// NewPodTopologySpread makes upstream's PodTopologySpread with its default args (the system
// default constraints); it takes no args.
func NewPodTopologySpread(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	if obj != nil {
		return nil, fmt.Errorf("%s takes no args: it runs PodTopologySpread's defaults", PodTopologySpreadName)
	}
	var args config.PodTopologySpreadArgs
	if err := gangcore.UpstreamArgs(&configv1.PodTopologySpreadArgs{}, &args); err != nil {
		return nil, err
	}
	p, err := podtopologyspread.New(ctx, &args, h, features())
	if err != nil {
		return nil, err
	}
	return &PodTopologySpread{PodTopologySpread: p.(*podtopologyspread.PodTopologySpread)}, nil
}

// NewDynamicResources makes upstream's DynamicResources with its default args; it takes no args.
func NewDynamicResources(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	if obj != nil {
		return nil, fmt.Errorf("%s takes no args: it runs DynamicResources' defaults", DynamicResourcesName)
	}
	var args config.DynamicResourcesArgs
	if err := gangcore.UpstreamArgs(&configv1.DynamicResourcesArgs{}, &args); err != nil {
		return nil, err
	}
	p, err := dynamicresources.New(ctx, &args, h, features())
	if err != nil {
		return nil, err
	}
	return &DynamicResources{DynamicResources: p.(*dynamicresources.DynamicResources), handle: h}, nil
}

func features() plfeature.Features {
	return plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
}

// Name returns the plugin's name.
func (pl *InterPodAffinity) Name() string { return InterPodAffinityName }

// Name returns the plugin's name.
func (pl *PodTopologySpread) Name() string { return PodTopologySpreadName }

// Name returns the plugin's name.
func (pl *DynamicResources) Name() string { return DynamicResourcesName }

// EventsToRegister is upstream's, less "pod added".
func (pl *InterPodAffinity) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	return withoutPodAdd(pl.InterPodAffinity.EventsToRegister(ctx))
}

// EventsToRegister is upstream's, less "pod added".
func (pl *PodTopologySpread) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	return withoutPodAdd(pl.PodTopologySpread.EventsToRegister(ctx))
}

// withoutPodAdd drops Add from the pod events: the scheduling queue hears every bind as a pod
// added, and for an event any plugin registers it walks every pending pod, gated or not.
func withoutPodAdd(events []fwk.ClusterEventWithHint, err error) ([]fwk.ClusterEventWithHint, error) {
	if err != nil {
		return nil, err
	}
	return without(events, fwk.Pod, fwk.Add), nil
}

// without drops the action from the resource's events.
func without(events []fwk.ClusterEventWithHint, resource fwk.EventResource, action fwk.ActionType) []fwk.ClusterEventWithHint {
	out := slices.Clone(events)
	for i := range out {
		if out[i].Event.Resource == resource {
			out[i].Event.ActionType &^= action
		}
	}
	return slices.DeleteFunc(out, func(e fwk.ClusterEventWithHint) bool { return e.Event.ActionType == 0 })
}

// gangState is GangPlacement's State, nil without GangPlacement. The plugins are made in no set
// order: it is looked up on first use, when all exist.
func (pl *DynamicResources) gangState() *gangcore.State {
	if s := pl.state.Load(); s != nil {
		return s
	}
	s := gangcore.Lookup(pl.handle)
	if s != nil {
		pl.state.Store(s)
	}
	return s
}

// EventsToRegister is upstream's, less "claim updated" where GangPlacement's State stands in for
// it. The scheduling queue would walk every pending pod on each: GangPlacement's PreFilter
// assumes a DRA pod's allocation in the claim cache and its PreBind writes it, so every DRA pod
// bound updates its claim twice. A claim created, which a pod held in PreEnqueue for its claim
// waits for, stays.
func (pl *DynamicResources) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	events, err := pl.DynamicResources.EventsToRegister(ctx)
	if err != nil || pl.gangState() == nil {
		return events, err
	}
	return without(events, fwk.ResourceClaim, fwk.Update), nil
}

// PreFilter is upstream's, with the pod recorded first as one that may wait for a claim to change
// (State.AwaitClaims), and forgotten where DynamicResources has nothing to do with it.
func (pl *DynamicResources) PreFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	s := pl.gangState()
	if s != nil {
		s.AwaitClaims(pod)
	}
	res, status := pl.DynamicResources.PreFilter(ctx, cs, pod, nodes)
	if s != nil && status.IsSkip() {
		s.ClaimsSettled(pod)
	}
	return res, status
}

// Unreserve is upstream's: the allocations it assumed for the pod are taken back, and their
// devices are free for the pods it turned away.
func (pl *DynamicResources) Unreserve(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) {
	pl.DynamicResources.Unreserve(ctx, cs, pod, nodeName)
	if s := pl.gangState(); s != nil {
		s.ClaimsRestored()
	}
}

// PostBind forgets the pod bound.
func (pl *DynamicResources) PostBind(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	if s := pl.gangState(); s != nil {
		s.ClaimsSettled(pod)
	}
}
