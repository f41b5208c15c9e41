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

package nodeagent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

func TestPublishesGPUNodesAndLabels(t *testing.T) {
	c := cluster(t)
	pubH100 := framework.Unique(t, "pub-h100")
	pubPCIe := framework.Unique(t, "pub-pcie")
	createNodes(t, c, 8, pubH100, pubPCIe)
	h100 := startAgent(t, nil, nvmlmock.ProfileH100x8, nodeagent.Options{Nodes: []string{pubH100}, PollInterval: 200 * time.Millisecond})
	startAgent(t, nil, nvmlmock.ProfilePCIe4, nodeagent.Options{Nodes: []string{pubPCIe}, PollInterval: 200 * time.Millisecond})

	h := waitGPUNode(t, c, pubH100, 20*time.Second, "8 healthy GPUs", published(8, 8))
	st := h.Status
	if st.Product != "NVIDIA H100 80GB HBM3" || st.Free != 8 || st.DriverVersion == "" || st.CUDAVersion != "12.4" {
		t.Errorf("summary: product %q, free %d, driver %q, CUDA %q", st.Product, st.Free, st.DriverVersion, st.CUDAVersion)
	}
	if len(st.Links) != 28 {
		t.Fatalf("%d links, want 28 (one per pair of 8 GPUs)", len(st.Links))
	}
	for _, l := range st.Links {
		if l.Type != convoy.LinkNVLink || l.NVLinks != 18 || l.A >= l.B {
			t.Errorf("link %+v: want NVLink with 18 links (NVSwitch), a < b", l)
		}
	}
	for _, g := range st.GPUs {
		if g.NVLinkDomain != pubH100+"/nvlink-0" || g.NUMANode == nil || g.Architecture != "Hopper" || g.MIGMode != "Disabled" || len(g.NVLinks) != 18 {
			t.Errorf("GPU %d: domain %q, NUMA %v, architecture %q, MIG %q, %d NVLinks", g.Index, g.NVLinkDomain, g.NUMANode, g.Architecture, g.MIGMode, len(g.NVLinks))
		}
	}
	if c := meta(st.Conditions, convoy.GPUNodeNVMLAvailable); c == nil || c.Status != metav1.ConditionTrue || c.Reason != convoy.GPUNodeReasonInitialized {
		t.Errorf("NVMLAvailable condition: %+v", c)
	}
	if len(h.OwnerReferences) != 1 || h.OwnerReferences[0].Kind != "Node" || h.OwnerReferences[0].Name != pubH100 {
		t.Errorf("owner references %+v: want the Node, so that deleting the node deletes its GPUNode", h.OwnerReferences)
	}

	p := waitGPUNode(t, c, pubPCIe, 20*time.Second, "4 healthy GPUs", published(4, 4))
	wantPCIe := []convoy.GPULink{
		{A: 0, B: 1, Type: convoy.LinkPIX}, {A: 0, B: 2, Type: convoy.LinkSYS}, {A: 0, B: 3, Type: convoy.LinkSYS},
		{A: 1, B: 2, Type: convoy.LinkSYS}, {A: 1, B: 3, Type: convoy.LinkSYS}, {A: 2, B: 3, Type: convoy.LinkPIX},
	}
	if !slices.Equal(wantPCIe, p.Status.Links) {
		t.Errorf("PCIe links %+v, want %+v", p.Status.Links, wantPCIe)
	}
	var numa []int32
	for _, g := range p.Status.GPUs {
		numa = append(numa, *g.NUMANode)
		if g.MIGMode != "" || g.NVLinkDomain != "" || len(g.NVLinks) != 0 {
			t.Errorf("L40S GPU %d: MIG %q, domain %q, %d NVLinks; want all empty (not supported)", g.Index, g.MIGMode, g.NVLinkDomain, len(g.NVLinks))
		}
	}
	if !slices.Equal(numa, []int32{0, 0, 1, 1}) {
		t.Errorf("NUMA nodes %v, want [0 0 1 1]", numa)
	}

	// The framework created the nodes with nvidia.com/gpu.product: the agent leaves that label to
	// its owner and adds memory and count.
	// Each node's labels are written by its own agent, after its GPUNode: wait for both.
	util.EventuallyErr(t, 20*time.Millisecond, 10*time.Second, "GPU labels on the nodes", func() (bool, error) {
		p, h := getNode(t, c, pubPCIe), getNode(t, c, pubH100)
		return p.Labels[convoy.LabelGPUCount] == "4" && p.Labels[convoy.LabelGPUMemory] == "46068" &&
			h.Labels[convoy.LabelGPUCount] == "8" && h.Labels[convoy.LabelGPUMemory] == "81559", nil
	})
	for _, name := range []string{pubH100, pubPCIe} {
		n := getNode(t, c, name)
		if n.Labels[convoy.LabelGPUProduct] != h100Product {
			t.Errorf("node %s: product label %q, want the framework's %q untouched", name, n.Labels[convoy.LabelGPUProduct], h100Product)
		}
		for _, mf := range n.ManagedFields {
			if mf.Manager == nodeagent.FieldManager && strings.Contains(mf.FieldsV1.GetRawString(), convoy.LabelGPUProduct) {
				t.Errorf("node %s: the agent co-owns %s, which another manager set", name, convoy.LabelGPUProduct)
			}
		}
	}
	// Publishing a new node takes three writes: create the GPUNode, its status, the labels.
	h100.waitPolls(t, 5)
	for kind, want := range map[string]float64{"create": 1, "status": 1, "labels": 1} {
		if got := h100.metric(t, "convoy_node_agent_publishes_total", map[string]string{"kind": kind}); got != want {
			t.Errorf("%v %s writes, want %v", got, kind, want)
		}
	}
}

func meta(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func TestFaultPublishedByItsNVMLEvent(t *testing.T) {
	c := cluster(t)
	node := framework.Unique(t, "fault-xid")
	createNodes(t, c, 8, node)
	// An hour between polls: only the NVML event can bring the fault to the API server before the
	// wait ends. How fast it comes is a benchmark figure (make bench-agent), not asserted here.
	run := startAgent(t, nil, nvmlmock.ProfileA100x8, nodeagent.Options{Nodes: []string{node}, PollInterval: time.Hour})
	waitGPUNode(t, c, node, 20*time.Second, "8 healthy GPUs", published(8, 8))

	if err := run.fleet.Inject(node, 3, nvmlmock.Fault{Kind: nvmlmock.FaultXID, XID: 79}); err != nil {
		t.Fatal(err)
	}
	g := waitGPUNode(t, c, node, time.Minute, "GPU 3 unhealthy", func(g *convoy.GPUNode) bool {
		return g.Status.GPUs[3].Health == convoy.GPUUnhealthy
	})
	if g.Status.GPUs[3].HealthReason != "XID 79: GPU has fallen off the bus" || g.Status.Healthy != 7 || g.Status.Free != 7 {
		t.Errorf("after XID 79: reason %q, healthy %d, free %d", g.Status.GPUs[3].HealthReason, g.Status.Healthy, g.Status.Free)
	}
	e := waitEvent(t, c, node, nodeagent.ReasonGPUUnhealthy)
	if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "GPU 3") || !strings.Contains(e.Note, "XID 79") {
		t.Errorf("Event %s %q", e.Type, e.Note)
	}
	if v := run.metric(t, "convoy_gpu_healthy", map[string]string{"node": node, "gpu": "3"}); v != 0 {
		t.Errorf("convoy_gpu_healthy for GPU 3 = %v, want 0", v)
	}
	if v := run.metric(t, "convoy_gpu_xid_errors_total", map[string]string{"node": node, "gpu": "3", "xid": "79"}); v != 1 {
		t.Errorf("convoy_gpu_xid_errors_total for XID 79 = %v, want 1", v)
	}
}

func TestHealthTransitions(t *testing.T) {
	c := cluster(t)
	node := framework.Unique(t, "fault-ecc")
	createNodes(t, c, 8, node)
	run := startAgent(t, nil, nvmlmock.ProfileH100x8, nodeagent.Options{Nodes: []string{node}, PollInterval: 200 * time.Millisecond})
	waitGPUNode(t, c, node, 20*time.Second, "8 healthy GPUs", published(8, 8))

	for _, fault := range []string{"ecc", "row-remap", "lost"} {
		f, _ := nvmlmock.ParseFault(fault)
		if err := run.fleet.Inject(node, 6, f); err != nil {
			t.Fatal(err)
		}
		g := waitGPUNode(t, c, node, 30*time.Second, fault+": GPU 6 unhealthy", func(g *convoy.GPUNode) bool {
			return g.Status.GPUs[6].Health == convoy.GPUUnhealthy
		})
		t.Logf("%s: %q", fault, g.Status.GPUs[6].HealthReason)
		if err := run.fleet.Clear(node, 6); err != nil {
			t.Fatal(err)
		}
		waitGPUNode(t, c, node, 30*time.Second, fault+" cleared: GPU 6 healthy", published(8, 8))
	}
	unhealthy := nodeEvents(t, c, node, nodeagent.ReasonGPUUnhealthy)
	recovered := waitEvent(t, c, node, nodeagent.ReasonGPURecovered)
	if len(unhealthy) == 0 || recovered.Type != corev1.EventTypeNormal || !strings.Contains(recovered.Note, "GPU 6") {
		t.Errorf("Events: %d GPUUnhealthy, GPURecovered %s %q", len(unhealthy), recovered.Type, recovered.Note)
	}
}

func TestNoWritesWhenNothingChanged(t *testing.T) {
	c := cluster(t)
	node := framework.Unique(t, "quiet")
	createNodes(t, c, 8, node)
	opts := nodeagent.Options{Nodes: []string{node}, PollInterval: 100 * time.Millisecond, Heartbeat: time.Hour}
	run := startAgent(t, nil, nvmlmock.ProfileNVLinkPairs8, opts)
	waitGPUNode(t, c, node, 20*time.Second, "8 healthy GPUs", published(8, 8))
	util.EventuallyErr(t, 20*time.Millisecond, 10*time.Second, "GPU labels", func() (bool, error) {
		return getNode(t, c, node).Labels[convoy.LabelGPUCount] == "8", nil
	})
	run.waitPolls(t, 3)
	gpuNodeRV, nodeRV := mustGPUNode(t, node).ResourceVersion, getNode(t, c, node).ResourceVersion
	writes := run.writes(t)

	// Load changes what the metrics show, not what the GPUNode says.
	srv := run.fleet.Server(node, nvmlmock.Options{})
	if err := srv.SetLoad(0, 80, 10<<30); err != nil {
		t.Fatal(err)
	}
	util.EventuallyErr(t, 20*time.Millisecond, 5*time.Second, "the utilization metric", func() (bool, error) {
		return run.metric(t, "convoy_gpu_utilization_percent", map[string]string{"node": node, "gpu": "0"}) == 80, nil
	})
	run.waitPolls(t, 20)
	if rv := mustGPUNode(t, node).ResourceVersion; rv != gpuNodeRV {
		t.Errorf("GPUNode written while nothing changed: resourceVersion %s -> %s", gpuNodeRV, rv)
	}
	if rv := getNode(t, c, node).ResourceVersion; rv != nodeRV {
		t.Errorf("Node written while nothing changed: resourceVersion %s -> %s", nodeRV, rv)
	}
	if w := run.writes(t); w != writes {
		t.Errorf("the agent counted %v writes over 20 quiet polls", w-writes)
	}

	// A restarted agent finds everything as it would publish it: it writes nothing either.
	run.stop()
	_ = srv.SetLoad(0, 0, 0)
	again := startAgent(t, nil, nvmlmock.ProfileNVLinkPairs8, opts)
	again.waitPolls(t, 10)
	if w := again.writes(t); w != 0 {
		t.Errorf("the restarted agent wrote %v times", w)
	}
	if rv := mustGPUNode(t, node).ResourceVersion; rv != gpuNodeRV {
		t.Errorf("GPUNode written after a restart: resourceVersion %s -> %s", gpuNodeRV, rv)
	}
	if rv := getNode(t, c, node).ResourceVersion; rv != nodeRV {
		t.Errorf("Node written after a restart: resourceVersion %s -> %s", nodeRV, rv)
	}
	again.stop()

	// The heartbeat: an unchanged status is written again once observedTime is older than it.
	before := mustGPUNode(t, node).Status.ObservedTime.Time
	opts.Heartbeat = 2 * time.Second
	beat := startAgent(t, nil, nvmlmock.ProfileNVLinkPairs8, opts)
	g := waitGPUNode(t, c, node, 10*time.Second, "a newer observedTime", func(g *convoy.GPUNode) bool {
		return g.Status.ObservedTime.After(before)
	})
	if g.Status.Healthy != 8 {
		t.Errorf("heartbeat: healthy %d, want 8", g.Status.Healthy)
	}
	// The agent counts a write once the API server has answered it: the test may see the write
	// first.
	util.EventuallyErr(t, 20*time.Millisecond, 5*time.Second, "a heartbeat write counted", func() (bool, error) {
		return beat.metric(t, "convoy_node_agent_publishes_total", map[string]string{"reason": "heartbeat"}) >= 1, nil
	})
}

func mustGPUNode(t *testing.T, name string) *convoy.GPUNode {
	t.Helper()
	g, err := getGPUNode(t, cluster(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGPUNodeRecreatedAfterDeletion(t *testing.T) {
	c := cluster(t)
	node := framework.Unique(t, "recreate")
	createNodes(t, c, 8, node)
	startAgent(t, nil, nvmlmock.ProfileA100x8, nodeagent.Options{Nodes: []string{node}, PollInterval: time.Hour})
	g := waitGPUNode(t, c, node, 20*time.Second, "8 healthy GPUs", published(8, 8))
	if err := c.Client.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	waitGPUNode(t, c, node, 10*time.Second, "recreated", func(n *convoy.GPUNode) bool {
		return n.UID != g.UID && n.Status.Capacity == 8
	})
}

// gpuPod is a pod bound to node that asks for n GPUs, with the scheduler's indices when set.
func gpuPod(ns, name, node string, n int, indices string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "train", Image: "registry.example/train:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					convoy.ResourceGPU: *resource.NewQuantity(int64(n), resource.DecimalSI),
				}},
			}},
		},
	}
	if indices != "" {
		p.Annotations = map[string]string{convoy.AnnotationGPUIndices: indices}
	}
	return p
}

func holders(g *convoy.GPUNode) map[string][]int32 {
	m := map[string][]int32{}
	for _, d := range g.Status.GPUs {
		if d.AllocatedTo != "" {
			m[d.AllocatedTo] = append(m[d.AllocatedTo], d.Index)
		}
	}
	return m
}

func TestWhichPodHoldsWhichGPU(t *testing.T) {
	c := cluster(t)
	alloc := framework.Unique(t, "alloc")
	ctx := context.Background()
	createNodes(t, c, 8, alloc)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: alloc}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	startAgent(t, nil, nvmlmock.ProfileNVLinkPairs8, nodeagent.Options{Nodes: []string{alloc}, PollInterval: 200 * time.Millisecond})
	waitGPUNode(t, c, alloc, 20*time.Second, "8 healthy GPUs", published(8, 8))

	// The scheduler chose GPUs 6 and 7 for one pod; another comes without a choice.
	for _, p := range []*corev1.Pod{gpuPod(alloc, "chosen", alloc, 2, "6,7"), gpuPod(alloc, "free", alloc, 2, "")} {
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	g := waitGPUNode(t, c, alloc, 10*time.Second, "both pods holding GPUs", func(g *convoy.GPUNode) bool {
		h := holders(g)
		return len(h[alloc+"/chosen"]) == 2 && len(h[alloc+"/free"]) == 2
	})
	h := holders(g)
	if !slices.Equal(h[alloc+"/chosen"], []int32{6, 7}) {
		t.Errorf("alloc/chosen holds %v, want the scheduler's 6,7", h[alloc+"/chosen"])
	}
	free := h[alloc+"/free"]
	for _, l := range g.Status.Links {
		if l.A == free[0] && l.B == free[1] && l.Type != convoy.LinkNVLink {
			t.Errorf("alloc/free holds GPUs %v, joined by %s: want an NVLink-bridged pair", free, l.Type)
		}
	}
	if g.Status.Free != 4 {
		t.Errorf("free = %d, want 4", g.Status.Free)
	}

	// The pods keep their GPUs across polls; when one ends, its GPUs are free again.
	time.Sleep(time.Second)
	if again := mustGPUNode(t, alloc); !mapsEqual(holders(again), h) {
		t.Errorf("assignment changed between polls: %v -> %v", h, holders(again))
	}
	if err := c.Client.Delete(ctx, gpuPod(alloc, "chosen", alloc, 2, ""), client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	g = waitGPUNode(t, c, alloc, 10*time.Second, "GPUs 6 and 7 free again", func(g *convoy.GPUNode) bool {
		return g.Status.GPUs[6].AllocatedTo == "" && g.Status.GPUs[7].AllocatedTo == ""
	})
	if g.Status.Free != 6 || !slices.Equal(holders(g)[alloc+"/free"], free) {
		t.Errorf("after alloc/chosen ended: free %d, holders %v", g.Status.Free, holders(g))
	}
}

func mapsEqual(a, b map[string][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestNoDriverNoCrash(t *testing.T) {
	c := cluster(t)
	node := framework.Unique(t, "no-driver")
	createNodes(t, c, 8, node)
	run := startAgent(t, nil, nvmlmock.ProfileA100x8, nodeagent.Options{
		Nodes: []string{node}, PollInterval: 200 * time.Millisecond, RetryInterval: 200 * time.Millisecond,
		// The real library, pointed where no driver is: NVML answers ERROR_LIBRARY_NOT_FOUND.
		NVML: func(*corev1.Node) (nvml.Interface, error) {
			return nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")), nil
		},
	})
	g := waitGPUNode(t, c, node, 20*time.Second, "NVMLAvailable=False", func(g *convoy.GPUNode) bool {
		cond := meta(g.Status.Conditions, convoy.GPUNodeNVMLAvailable)
		return cond != nil && cond.Status == metav1.ConditionFalse
	})
	cond := meta(g.Status.Conditions, convoy.GPUNodeNVMLAvailable)
	if cond.Reason != convoy.GPUNodeReasonLibraryNotFound || !strings.Contains(cond.Message, "libnvidia-ml.so.1") || g.Status.Capacity != 0 {
		t.Errorf("condition %+v, capacity %d", cond, g.Status.Capacity)
	}
	e := waitEvent(t, c, node, nodeagent.ReasonNVMLUnavailable)
	if e.Type != corev1.EventTypeWarning {
		t.Errorf("Event type %s", e.Type)
	}
	// It keeps serving: polling, retrying NVML, and writing nothing new.
	writes := run.writes(t)
	run.waitPolls(t, 5)
	if w := run.writes(t); w != writes {
		t.Errorf("%v writes while NVML stayed missing", w-writes)
	}
	if n := getNode(t, c, node); n.Labels[convoy.LabelGPUCount] != "" {
		t.Errorf("GPU count label %q on a node without NVML", n.Labels[convoy.LabelGPUCount])
	}
}
