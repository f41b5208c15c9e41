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

// Package bindquiet makes kube-scheduler's InterPodAffinity and PodTopologySpread plugins,
// unchanged but for the events they register: a pod added (a bind among them) does not make the
// scheduling queue look at the pods they turned away. See README.md.
package bindquiet

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
)

// The plugins' names in the registry and in KubeSchedulerConfiguration.
const (
	InterPodAffinityName  = "BindQuietInterPodAffinity"
	PodTopologySpreadName = "BindQuietPodTopologySpread"
)

// InterPodAffinity is upstream's InterPodAffinity under its own name.
type InterPodAffinity struct {
	*interpodaffinity.InterPodAffinity
}

// PodTopologySpread is upstream's PodTopologySpread under its own name.
type PodTopologySpread struct {
	*podtopologyspread.PodTopologySpread
}

var (
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

func features() plfeature.Features {
	return plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
}

// Name returns the plugin's name.
func (pl *InterPodAffinity) Name() string { return InterPodAffinityName }

// Name returns the plugin's name.
func (pl *PodTopologySpread) Name() string { return PodTopologySpreadName }

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
	out := slices.Clone(events)
	for i := range out {
		if out[i].Event.Resource == fwk.Pod {
			out[i].Event.ActionType &^= fwk.Add
		}
	}
	return slices.DeleteFunc(out, func(e fwk.ClusterEventWithHint) bool { return e.Event.ActionType == 0 }), nil
}
