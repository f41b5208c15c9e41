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

package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner/synth"
)

// binder binds pods in the order they arrive to the first node with enough free GPUs: no gang,
// topology or fragmentation logic. It is the ceiling of what the API server lets any scheduler
// bind per second on this machine. With events it also records the Scheduled event that
// kube-scheduler records for every pod it binds: the ceiling of any scheduler built on
// kube-scheduler.
type binder struct {
	events bool
	cs     kubernetes.Interface
	// eventsCS is a client of its own, with its own rate limit, as kube-scheduler's events
	// broadcaster has.
	eventsCS kubernetes.Interface
	names    []string
	free     []int
	first    int
	queue    chan *corev1.Pod
}

func newBinder(cfg *rest.Config, f synth.Fleet, events bool) (*binder, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	eventsCS, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	b := &binder{events: events, cs: cs, eventsCS: eventsCS, names: make([]string, f.Nodes), free: make([]int, f.Nodes), queue: make(chan *corev1.Pod, 1<<16)}
	for i := range f.Nodes {
		b.names[i], b.free[i] = f.Node(i).Name, f.GPUsPerNode
	}
	return b, nil
}

func (b *binder) run(ctx context.Context, factory informers.SharedInformerFactory) {
	// The pods that exist already are taken in the order the API lists them (by namespace and
	// name: gang by gang, in the order the gangs were created), as a kube-scheduler starting on a
	// backlog queues them from its first list. The informer would hand them over from its cache in
	// no set order, which spreads every gang's binds over the whole run. A binder with a factory
	// of its own (binder+events+watch) gets them in list order from its first list.
	informer := factory.Core().V1().Pods().Informer()
	// A factory of its own (binder+events+watch) starts here; the benchmark's runs already.
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	pending := func(p *corev1.Pod) bool { return p.Spec.NodeName == "" && p.Spec.SchedulerName == schedulerName }
	backlog := map[types.UID]bool{}
	var first []*corev1.Pod
	for _, obj := range informer.GetStore().List() {
		if p := obj.(*corev1.Pod); pending(p) {
			first = append(first, p)
			backlog[p.UID] = true
		}
	}
	slices.SortFunc(first, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	go func() {
		for _, p := range first {
			b.queue <- p
		}
	}()
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p := obj.(*corev1.Pod); pending(p) && !backlog[p.UID] {
				b.queue <- p
			}
		},
	})
	type bind struct {
		pod  *corev1.Pod
		node string
	}
	binds := make(chan bind, 1024)
	// Events are written apart from the binds, as kube-scheduler's events broadcaster does.
	events := make(chan bind, 1<<16)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := range binds {
				err := b.cs.CoreV1().Pods(x.pod.Namespace).Bind(ctx, &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Namespace: x.pod.Namespace, Name: x.pod.Name, UID: x.pod.UID},
					Target:     corev1.ObjectReference{Kind: "Node", Name: x.node},
				}, metav1.CreateOptions{})
				if err == nil && b.events {
					events <- x
				}
			}
		}()
	}
	var ewg sync.WaitGroup
	for range workers {
		ewg.Add(1)
		go func() {
			defer ewg.Done()
			for x := range events {
				_, _ = b.eventsCS.EventsV1().Events(x.pod.Namespace).Create(ctx, &eventsv1.Event{
					ObjectMeta: metav1.ObjectMeta{Namespace: x.pod.Namespace, GenerateName: x.pod.Name + "."},
					EventTime:  metav1.NowMicro(), ReportingController: "default-scheduler", ReportingInstance: "default-scheduler-bench",
					Action: "Binding", Reason: "Scheduled", Type: corev1.EventTypeNormal,
					Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: x.pod.Namespace, Name: x.pod.Name, UID: x.pod.UID, APIVersion: "v1"},
					Note:      fmt.Sprintf("Successfully assigned %s/%s to %s", x.pod.Namespace, x.pod.Name, x.node),
				}, metav1.CreateOptions{})
			}
		}()
	}
	defer func() { close(binds); wg.Wait(); close(events); ewg.Wait() }()
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-b.queue:
			need := gangcore.GPURequest(p, convoy.ResourceGPU)
			for b.first < len(b.free) && b.free[b.first] == 0 {
				b.first++
			}
			for i := b.first; i < len(b.free); i++ {
				if b.free[i] >= need {
					b.free[i] -= need
					binds <- bind{p, b.names[i]}
					break
				}
			}
		}
	}
}
