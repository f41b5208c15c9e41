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

// Package coscheduling makes scheduler-plugins' Coscheduling plugin, unchanged, except where a
// profile also runs GangPlacement: there its lists of a gang's pods are answered from
// GangPlacement's index of gangs. See README.md.
package coscheduling

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	upstream "sigs.k8s.io/scheduler-plugins/pkg/coscheduling"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangplacement"
)

// Name is upstream's: profiles configure the plugin, and its CoschedulingArgs, as scheduler-plugins
// documents them.
const Name = upstream.Name

// New makes upstream's plugin with a handle whose pod lister answers a list by PodGroup label from
// GangPlacement's index when the profile runs GangPlacement, and from the informer's namespace
// index (upstream's way) otherwise.
//
// Upstream lists the gang's namespace and matches every pod's labels: once per gang in Permit
// (to activate the gang's siblings) and in PostFilter. With a backlog of 15,000 pending pods in
// one namespace that was 29% of the scheduler's CPU in the 5,000-node benchmark.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	p, err := upstream.New(ctx, obj, newHandle(h, func() bool { return runsGangPlacement(h) }))
	if err != nil {
		return nil, err
	}
	cs, ok := p.(*upstream.Coscheduling)
	if !ok {
		return p, nil
	}
	return &Coscheduling{Coscheduling: cs, handle: h}, nil
}

// Coscheduling is upstream's plugin with the events it registers trimmed in a GangPlacement profile.
type Coscheduling struct {
	*upstream.Coscheduling
	handle fwk.Handle
}

// EventsToRegister is upstream's, less "pod added" in a profile that runs GangPlacement. There a
// pod that Coscheduling turned away is one whose gang failed after its plan, and GangPlacement
// activates the whole gang again when it drops the plan; a complete gang is let through by GangGate.
// Upstream's "pod added" matches every bind too, and made the scheduling queue walk every pending
// pod on each one.
func (cs *Coscheduling) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	events, err := cs.Coscheduling.EventsToRegister(ctx)
	if err != nil || !runsGangPlacement(cs.handle) {
		return events, err
	}
	return slices.DeleteFunc(events, func(e fwk.ClusterEventWithHint) bool { return e.Event.Resource == fwk.Pod }), nil
}

// runsGangPlacement reports whether h's profile runs GangPlacement, whose State indexes the
// gangs. It is asked once the profile is built, on the first list.
func runsGangPlacement(h fwk.Handle) bool {
	f, ok := h.(framework.Framework)
	if !ok || gangcore.Lookup(h) == nil {
		return false
	}
	return slices.ContainsFunc(f.ListPlugins().PreFilter.Enabled, func(p schedconfig.Plugin) bool { return p.Name == gangplacement.Name })
}

// handle is the scheduler's, with the pod lister below.
type handle struct {
	fwk.Handle
	factory factory
}

// newHandle wraps h; convoy says whether its profile runs GangPlacement. GangPlacement's lookup of
// a gang's pods is resolved once, on the first list.
func newHandle(h fwk.Handle, convoy func() bool) *handle {
	gangPods := sync.OnceValue(func() func(namespace, name string) []*corev1.Pod {
		if !convoy() {
			return nil
		}
		return gangcore.Lookup(h).PodGroupPods
	})
	return &handle{Handle: h, factory: factory{SharedInformerFactory: h.SharedInformerFactory(), gangPods: gangPods}}
}

func (h *handle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }

// factory, core, v1 and podInformer are the scheduler's informers, less their pod lister.
type factory struct {
	informers.SharedInformerFactory
	// gangPods is GangPlacement's lookup of a gang's pods, or nil outside a GangPlacement profile.
	gangPods func() func(namespace, name string) []*corev1.Pod
}

func (f factory) Core() coreinformers.Interface {
	return core{Interface: f.SharedInformerFactory.Core(), f: f}
}

type core struct {
	coreinformers.Interface
	f factory
}

func (c core) V1() corev1informers.Interface { return v1{Interface: c.Interface.V1(), f: c.f} }

type v1 struct {
	corev1informers.Interface
	f factory
}

func (v v1) Pods() corev1informers.PodInformer {
	return podInformer{PodInformer: v.Interface.Pods(), f: v.f}
}

type podInformer struct {
	corev1informers.PodInformer
	f factory
}

func (p podInformer) Lister() corev1listers.PodLister {
	return podLister{PodLister: p.PodInformer.Lister(), f: p.f}
}

// podLister is the informer's lister, but for a namespace's list by PodGroup label in a
// GangPlacement profile.
type podLister struct {
	corev1listers.PodLister
	f factory
}

func (l podLister) Pods(namespace string) corev1listers.PodNamespaceLister {
	return podNamespaceLister{PodNamespaceLister: l.PodLister.Pods(namespace), namespace: namespace, f: l.f}
}

type podNamespaceLister struct {
	corev1listers.PodNamespaceLister
	namespace string
	f         factory
}

// List returns what the informer's lister would, in no set order.
func (l podNamespaceLister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	pg, ok := selector.RequiresExactMatch(schedv1alpha1.PodGroupLabel)
	gangPods := l.f.gangPods()
	if !ok || gangPods == nil {
		return l.PodNamespaceLister.List(selector)
	}
	var out []*corev1.Pod
	for _, p := range gangPods(l.namespace, pg) {
		if selector.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}
