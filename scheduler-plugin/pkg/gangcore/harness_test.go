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
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// harness is a State over a fake framework handle whose snapshot a test can replace.
type harness struct {
	t         testing.TB
	state     *State
	snap      *snapshot
	activated *activator
	cs        *fake.Clientset
	factory   informers.SharedInformerFactory
	nodes     []*corev1.Node
}

// snapshot is a SharedLister whose snapshot a test can swap, as the scheduler takes a new one
// every cycle.
type snapshot struct{ cur *cache.Snapshot }

func (s *snapshot) NodeInfos() fwk.NodeInfoLister       { return s.cur.NodeInfos() }
func (s *snapshot) StorageInfos() fwk.StorageInfoLister { return s.cur.StorageInfos() }
func (s *snapshot) PodGroupStates() fwk.PodGroupStateLister {
	return s.cur.PodGroupStates()
}

// nominator has no nominated pods.
type nominator struct{}

func (nominator) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (nominator) DeleteNominatedPodIfExists(*corev1.Pod)                        {}
func (nominator) UpdateNominatedPod(klog.Logger, *corev1.Pod, fwk.PodInfo)      {}
func (nominator) NominatedPodsForNode(string) []fwk.PodInfo                     { return nil }

// activator records the pods activated.
type activator struct {
	mu   sync.Mutex
	pods []string
}

func (a *activator) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.pods)
}

func (a *activator) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range pods {
		a.pods = append(a.pods, k)
	}
}

func newHarness(t testing.TB, nodes []*corev1.Node, pods []*corev1.Pod, gpuNodes ...*convoy.GPUNode) *harness {
	t.Helper()
	// The framework's parallelizer, which InterPodAffinity uses, records metrics.
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
	h := &harness{t: t, cs: cs, factory: factory, nodes: nodes, activated: &activator{},
		snap: &snapshot{cur: cache.NewSnapshot(bound(pods), nodes)}}
	fw := profile(ctx, t, "convoy-scheduler", cs, factory, h.snap, h.activated)
	var err error
	h.state, err = New(ctx, fw, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	for _, g := range gpuNodes {
		h.state.SetGPUNode(g)
	}
	return h
}

// profile is a scheduler profile's framework over cs and factory, with snap for its snapshot and
// act recording its activations, running until ctx ends.
func profile(ctx context.Context, t testing.TB, name string, cs kubernetes.Interface, factory informers.SharedInformerFactory,
	snap fwk.SharedLister, act *activator) fwk.Handle {
	t.Helper()
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, name,
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snap),
		frameworkruntime.WithPodNominator(nominator{}),
		frameworkruntime.WithPodActivator(act),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
	)
	if err != nil {
		t.Fatal(err)
	}
	return fw
}

// testLevels are the convoy preset's topology levels.
var testLevels = []TopologyLevel{{"zone", convoy.LabelTopologyZone}, {"block", convoy.LabelTopologyBlock},
	{"rack", convoy.LabelTopologyRack}, {"clique", "nvidia.com/gpu.clique"}}

// testOptions are the State's options in the tests: the convoy preset's levels and the default
// GPU resource.
func testOptions() Options {
	return Options{Levels: testLevels, GPUResource: convoy.ResourceGPU, PlanTimeout: time.Minute}
}

// deletePod deletes the pod from the API and waits until the State's informer no longer has it.
func (h *harness) deletePod(p *corev1.Pod) {
	h.t.Helper()
	ctx := context.Background()
	if err := h.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, err := h.factory.Core().V1().Pods().Lister().Pods(p.Namespace).Get(p.Name)
		return err != nil, nil
	}); err != nil {
		h.t.Fatalf("the informer still has pod %s", p.Name)
	}
}

// setPods replaces the pods of the snapshot, as a new scheduling cycle would see them.
func (h *harness) setPods(pods ...*corev1.Pod) {
	h.snap.cur = cache.NewSnapshot(bound(pods), h.nodes)
}

// liveSnapshot gives the harness a scheduler cache of its nodes and the bound pods, and a snapshot
// that infos updates in place from it, as the scheduler does before each cycle.
func (h *harness) liveSnapshot(pods []*corev1.Pod) (sc cache.Cache, infos func() []fwk.NodeInfo) {
	h.t.Helper()
	logger := klog.Background()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	sc = cache.New(ctx, nil, false)
	for _, node := range h.nodes {
		sc.AddNode(logger, node)
	}
	for _, p := range bound(pods) {
		if err := sc.AddPod(logger, p); err != nil {
			h.t.Fatal(err)
		}
	}
	snap := cache.NewEmptySnapshot()
	h.snap.cur = snap
	return sc, func() []fwk.NodeInfo {
		if err := sc.UpdateSnapshot(logger, snap); err != nil {
			h.t.Fatal(err)
		}
		list, err := snap.NodeInfos().List()
		if err != nil {
			h.t.Fatal(err)
		}
		return list
	}
}

func (h *harness) nodeInfos() []fwk.NodeInfo {
	list, err := h.snap.NodeInfos().List()
	if err != nil {
		h.t.Fatal(err)
	}
	return list
}

func bound(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			out = append(out, p)
		}
	}
	return out
}

// fakeNode is a node with gpus GPUs in rack.
func fakeNode(name, rack string, gpus int) *corev1.Node {
	return st.MakeNode().Name(name).Label(corev1.LabelHostname, name).Label(convoy.LabelTopologyZone, "z").Label(convoy.LabelTopologyBlock, "b").
		Label(convoy.LabelTopologyRack, rack).Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: "96", corev1.ResourceMemory: "1Ti", corev1.ResourcePods: "110", convoy.ResourceGPU: itoa(gpus)}).Obj()
}

// inventory is a GPUNode of n healthy GPUs, all in one NVLink domain.
func inventory(name string, n int) *convoy.GPUNode {
	g := &convoy.GPUNode{}
	g.Name = name
	for i := range n {
		g.Status.GPUs = append(g.Status.GPUs, convoy.GPUDevice{Index: int32(i), Health: convoy.GPUHealthy, NVLinkDomain: name + "/nvswitch"})
	}
	return g
}

// member is pod rank of gang in ns, asking gpus GPUs.
func member(ns, gang string, rank, gpus int) *st.PodWrapper {
	return st.MakePod().Namespace(ns).Name(gang+"-"+itoa(rank)).UID(ns+"-"+gang+"-"+itoa(rank)).
		SchedulerName("convoy-scheduler").Label(schedv1alpha1.PodGroupLabel, gang).
		Label(convoy.LabelReplicaRank, itoa(rank)).Req(map[corev1.ResourceName]string{convoy.ResourceGPU: itoa(gpus)})
}

// lone is a pod of no gang.
func lone(ns, name string, gpus int) *st.PodWrapper {
	return st.MakePod().Namespace(ns).Name(name).UID(ns + "-" + name).SchedulerName("convoy-scheduler").
		Req(map[corev1.ResourceName]string{convoy.ResourceGPU: itoa(gpus)})
}
