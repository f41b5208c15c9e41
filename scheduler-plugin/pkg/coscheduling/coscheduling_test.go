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

package coscheduling

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	upstream "sigs.k8s.io/scheduler-plugins/pkg/coscheduling"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
	configv1 "github.com/convoy-dev/convoy/scheduler-plugin/apis/config/v1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangplacement"
)

// profile builds a framework over pods, with GangPlacement at PreFilter when gang is set, and
// returns it with its informer factory started.
func profile(t *testing.T, gang bool, pods ...*corev1.Pod) framework.Framework {
	t.Helper()
	metrics.Register()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := fake.NewClientset()
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1CreateOptions); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	fns := []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}
	if gang {
		fns = append(fns, tf.RegisterPluginAsExtensions(gangplacement.Name, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			v1args := &configv1.GangPlacementArgs{}
			configv1.SetDefaults_GangPlacementArgs(v1args)
			args := &config.GangPlacementArgs{}
			if err := configv1.Convert_v1_GangPlacementArgs_To_config_GangPlacementArgs(v1args, args, nil); err != nil {
				return nil, err
			}
			return gangplacement.New(ctx, args, h)
		}, "PreFilter", "Filter"))
	}
	fw, err := tf.NewFramework(ctx, fns, "convoy-scheduler",
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(cache.NewEmptySnapshot()),
	)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return fw
}

// TestRunsGangPlacement: only a profile with GangPlacement at PreFilter changes Coscheduling.
func TestRunsGangPlacement(t *testing.T) {
	if runsGangPlacement(profile(t, false)) {
		t.Error("a profile without GangPlacement counts as Convoy's: Coscheduling would lose its upstream behaviour")
	}
	if !runsGangPlacement(profile(t, true)) {
		t.Error("a profile with GangPlacement does not count as Convoy's")
	}
}

// TestPodListerAnswersAsTheInformer: the lister Coscheduling gets returns, for every selector, the
// pods the informer's own lister returns, with or without GangPlacement's index.
func TestPodListerAnswersAsTheInformer(t *testing.T) {
	member := func(ns, gang, name string, rank string) *corev1.Pod {
		return st.MakePod().Namespace(ns).Name(name).UID(ns+"/"+name).Label(schedv1alpha1.PodGroupLabel, gang).Label("rank", rank).Obj()
	}
	pods := []*corev1.Pod{
		member("a", "job", "job-0", "0"), member("a", "job", "job-1", "1"), member("a", "other", "other-0", "0"),
		member("b", "job", "job-0", "0"), st.MakePod().Namespace("a").Name("lone").UID("a/lone").Obj(),
	}
	selectors := []string{
		schedv1alpha1.PodGroupLabel + "=job",
		schedv1alpha1.PodGroupLabel + "=job,rank=1",
		schedv1alpha1.PodGroupLabel + " in (job)",
		schedv1alpha1.PodGroupLabel + "=missing",
		schedv1alpha1.PodGroupLabel + " in (job,other)",
		"rank=0",
		"",
	}
	for _, gang := range []bool{false, true} {
		fw := profile(t, gang, pods...)
		convoy := runsGangPlacement(fw)
		if convoy != gang {
			t.Fatalf("GangPlacement in the profile: %v, runsGangPlacement: %v", gang, convoy)
		}
		ours := newHandle(fw, func() bool { return convoy }).SharedInformerFactory().Core().V1().Pods().Lister()
		theirs := fw.SharedInformerFactory().Core().V1().Pods().Lister()
		for _, ns := range []string{"a", "b", "c"} {
			for _, sel := range selectors {
				selector, err := labels.Parse(sel)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ours.Pods(ns).List(selector)
				if err != nil {
					t.Fatal(err)
				}
				want, err := theirs.Pods(ns).List(selector)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := names(got), names(want); !slices.Equal(g, w) {
					t.Errorf("GangPlacement %v, namespace %s, selector %q: %v, want %v", gang, ns, sel, g, w)
				}
			}
		}
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

var metav1CreateOptions = metav1.CreateOptions{}

// TestEventsToRegister: in a GangPlacement profile Coscheduling does not register "pod added",
// which the scheduling queue hears on every bind; elsewhere its events are upstream's.
func TestEventsToRegister(t *testing.T) {
	for _, gang := range []bool{false, true} {
		cs := &Coscheduling{Coscheduling: &upstream.Coscheduling{}, handle: profile(t, gang)}
		events, err := cs.EventsToRegister(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wakes := slices.ContainsFunc(events, func(e fwk.ClusterEventWithHint) bool {
			return framework.MatchClusterEvents(e.Event, framework.EventAssignedPodAdd)
		})
		if wakes == gang {
			t.Errorf("GangPlacement in the profile: %v, a bind requeues the pods Coscheduling turned away: %v", gang, wakes)
		}
		if !slices.ContainsFunc(events, func(e fwk.ClusterEventWithHint) bool {
			return e.Event.Resource == "podgroups.v1alpha1.scheduling.x-k8s.io"
		}) {
			t.Errorf("GangPlacement in the profile: %v, PodGroup events are not registered: %v", gang, events)
		}
	}
}
