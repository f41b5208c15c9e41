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

package bindquiet

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
)

// TestEventsToRegister: neither plugin asks the queue to look at the pods it turned away when a
// pod is added (every bind is one); a pod deleted or relabelled still does, as upstream.
func TestEventsToRegister(t *testing.T) {
	cases := map[string]func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error){
		InterPodAffinityName:  NewInterPodAffinity,
		PodTopologySpreadName: NewPodTopologySpread,
	}
	for name, newPlugin := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := newPlugin(context.Background(), nil, handle(t))
			if err != nil {
				t.Fatal(err)
			}
			if p.Name() != name {
				t.Errorf("Name() = %q, want %q", p.Name(), name)
			}
			events, err := p.(fwk.EnqueueExtensions).EventsToRegister(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if matches(events, framework.EventAssignedPodAdd) || matches(events, framework.EventUnscheduledPodAdd) {
				t.Errorf("a pod added requeues the pods %s turned away: %v", name, events)
			}
			if !matches(events, framework.EventAssignedPodDelete) {
				t.Errorf("a bound pod deleted does not requeue the pods %s turned away: %v", name, events)
			}
			if !matches(events, fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.UpdatePodLabel}) {
				t.Errorf("a pod relabelled does not requeue the pods %s turned away: %v", name, events)
			}
		})
	}
}

// TestDynamicResourcesEventsToRegister: with GangPlacement in the scheduler, a claim updated (every
// DRA bind writes one) does not make the queue look at the pods DynamicResources turned away,
// GangPlacement's State does; a claim created (a pod held in PreEnqueue for it) and a
// ResourceSlice added still do. Without GangPlacement the events are upstream's.
func TestDynamicResourcesEventsToRegister(t *testing.T) {
	claimUpdated := fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update}
	for name, withState := range map[string]bool{"with GangPlacement": true, "alone": false} {
		t.Run(name, func(t *testing.T) {
			h := handle(t)
			if withState {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				if _, err := gangcore.Shared(ctx, h, gangcore.Options{GPUResource: "nvidia.com/gpu"}); err != nil {
					t.Fatal(err)
				}
			}
			p, err := NewDynamicResources(context.Background(), nil, h)
			if err != nil {
				t.Fatal(err)
			}
			if p.Name() != DynamicResourcesName || !gangcore.IsDynamicResources(p.Name()) {
				t.Errorf("Name() = %q, want %q, which GangPlacement knows as DynamicResources", p.Name(), DynamicResourcesName)
			}
			events, err := p.(fwk.EnqueueExtensions).EventsToRegister(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := matches(events, claimUpdated); got == withState {
				t.Errorf("a claim updated requeues the pods DynamicResources turned away: %t, want %t (%v)", got, !withState, events)
			}
			for _, ev := range []fwk.ClusterEvent{{Resource: fwk.ResourceClaim, ActionType: fwk.Add}, {Resource: fwk.ResourceSlice, ActionType: fwk.Add}} {
				if !matches(events, ev) {
					t.Errorf("%s does not requeue the pods DynamicResources turned away: %v", ev.Label(), events)
				}
			}
		})
	}
}

func matches(events []fwk.ClusterEventWithHint, ev fwk.ClusterEvent) bool {
	return slices.ContainsFunc(events, func(e fwk.ClusterEventWithHint) bool { return framework.MatchClusterEvents(e.Event, ev) })
}

// TestArgsRefused: the plugins run upstream's default args and say so when given any.
func TestArgsRefused(t *testing.T) {
	if _, err := NewInterPodAffinity(context.Background(), &configv1.InterPodAffinityArgs{}, handle(t)); err == nil {
		t.Error("InterPodAffinity args were accepted and ignored")
	}
	if _, err := NewPodTopologySpread(context.Background(), &configv1.PodTopologySpreadArgs{}, handle(t)); err == nil {
		t.Error("PodTopologySpread args were accepted and ignored")
	}
	if _, err := NewDynamicResources(context.Background(), &configv1.DynamicResourcesArgs{}, handle(t)); err == nil {
		t.Error("DynamicResources args were accepted and ignored")
	}
}

func handle(t *testing.T) fwk.Handle {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := fake.NewClientset()
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "convoy-scheduler",
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(cs, 0)),
		frameworkruntime.WithSnapshotSharedLister(cache.NewEmptySnapshot()),
	)
	if err != nil {
		t.Fatal(err)
	}
	return fw
}
