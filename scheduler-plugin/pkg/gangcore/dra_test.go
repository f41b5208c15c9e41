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
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func TestClaimedGPUs(t *testing.T) {
	exact := func(class string, mode resourcev1.DeviceAllocationMode, n int64) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: n}}
	}
	specs := map[string]*resourcev1.ResourceClaimSpec{
		"eight":    {Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exact("gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 8)}}},
		"one":      {Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exact("h100", "", 0)}}},
		"nic":      {Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exact("nic", resourcev1.DeviceAllocationModeExactCount, 2)}}},
		"all":      {Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exact("gpu.nvidia.com", resourcev1.DeviceAllocationModeAll, 0)}}},
		"twoPlus4": {Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exact("gpu.nvidia.com", "", 2), exact("h100", "", 4)}}},
	}
	spec := func(pc corev1.PodResourceClaim) *resourcev1.ResourceClaimSpec {
		return specs[*pc.ResourceClaimTemplateName]
	}
	gpuClass := func(name string) bool { return name == "gpu.nvidia.com" || name == "h100" }
	pod := func(claims ...string) *corev1.Pod {
		p := &corev1.Pod{}
		for _, c := range claims {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimTemplateName: ptr.To(c)})
		}
		return p
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want int
	}{
		"no claims":                         {pod: pod(), want: 0},
		"an exact count of the GPU class":   {pod: pod("eight"), want: 8},
		"a count of zero asks one device":   {pod: pod("one"), want: 1},
		"devices of another class":          {pod: pod("nic"), want: 0},
		"all devices are no count":          {pod: pod("all"), want: 0},
		"requests and claims add up":        {pod: pod("twoPlus4", "eight", "nic"), want: 14},
		"a claim not yet known counts none": {pod: pod("missing", "one"), want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ClaimedGPUs(tc.pod, spec, gpuClass); got != tc.want {
				t.Errorf("ClaimedGPUs = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDRANodeGPUs(t *testing.T) {
	slice := func(name, node, driver string, devices int) *resourcev1.ResourceSlice {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node)}}
		for range devices {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{})
		}
		return s
	}
	d := newDRAGPUs()
	d.setSlice("a", slice("a", "n1", convoy.DriverGPU, 4))
	d.setSlice("b", slice("b", "n1", convoy.DriverGPU, 4))
	d.setSlice("nic", slice("nic", "n1", "nic.example.com", 8))
	d.setSlice("c", slice("c", "n2", convoy.DriverGPU, 8))
	if got := [2]int{d.nodeGPUs("n1"), d.nodeGPUs("n2")}; got != [2]int{8, 8} {
		t.Fatalf("GPUs of n1, n2 = %v, want [8 8]", got)
	}
	d.setSlice("a", slice("a", "n1", convoy.DriverGPU, 2))
	if changed := d.setSlice("c", nil); len(changed) == 0 || changed[0] != "n2" {
		t.Errorf("deleting n2's slice changed nodes %v, want n2", changed)
	}
	if got := [2]int{d.nodeGPUs("n1"), d.nodeGPUs("n2")}; got != [2]int{6, 0} {
		t.Errorf("after an update and a delete, GPUs of n1, n2 = %v, want [6 0]", got)
	}
}

func TestIsGPUClass(t *testing.T) {
	sel := func(expr string) []resourcev1.DeviceSelector {
		return []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
	}
	for _, tc := range []struct {
		class resourcev1.DeviceClass
		want  bool
	}{
		{resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: convoy.DriverGPU}}, true},
		{resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "h100"}, Spec: resourcev1.DeviceClassSpec{Selectors: sel(`device.driver == "gpu.nvidia.com"`)}}, true},
		{resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic"}, Spec: resourcev1.DeviceClassSpec{Selectors: sel(`device.driver == "nic.example.com"`)}}, false},
	} {
		if got := IsGPUClass(&tc.class); got != tc.want {
			t.Errorf("IsGPUClass(%s) = %v, want %v", tc.class.Name, got, tc.want)
		}
	}
}

// TestDRAGangIsPlannedOnItsNodesDevices: a pod that claims GPUs through a ResourceClaimTemplate is
// planned on the node whose ResourceSlice publishes GPUs, less those a bound pod claims there, and
// never on a node of nvidia.com/gpu; a pod of nvidia.com/gpu never on the DRA node. (Each plan
// books its GPUs: the plans are made in the order that shows each.)
func TestDRAGangIsPlannedOnItsNodesDevices(t *testing.T) {
	claimed := func(w *st.PodWrapper, template string) *st.PodWrapper {
		return w.PodResourceClaims(corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)})
	}
	// dra has 8 DRA GPUs, 4 of them claimed by busy: it is the best fit for 4 GPUs of either kind.
	// Its node agent's GPUNode describes the same 8 devices, which count once, as DRA's.
	nodes := []*corev1.Node{fakeNode("ext", "r1", 8), fakeNode("dra", "r2", 0)}
	busy := claimed(member("ns", "busy", 0, 0), "four").Node("dra").Obj()
	draPod := claimed(member("ns", "job", 0, 0), "four").Obj()
	draBig := claimed(member("ns", "big", 0, 0), "eight").Obj()
	extPod := member("ns", "ext", 0, 4).Obj()
	h := newHarness(t, nodes, []*corev1.Pod{busy, draPod, draBig, extPod}, inventory("ext", 8), inventory("dra", 8))
	ctx := context.Background()
	for name, n := range map[string]int64{"four": 4, "eight": 8} {
		tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: convoy.DriverGPU, Count: n}}}}}}}
		if _, err := h.cs.ResourceV1().ResourceClaimTemplates("ns").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-gpus"},
		Spec: resourcev1.ResourceSliceSpec{Driver: convoy.DriverGPU, NodeName: ptr.To("dra"), Devices: make([]resourcev1.Device, 8)}}
	if _, err := h.cs.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return h.state.PodGPUs(draBig) == 8 && h.state.dra.nodeGPUs("dra") == 8, nil
	}); err != nil {
		t.Fatalf("the State never counted the template's and the slice's GPUs: %d, %d", h.state.PodGPUs(draBig), h.state.dra.nodeGPUs("dra"))
	}

	if _, status := h.state.PlanFor(ctx, draBig, h.nodeInfos()); status.IsSuccess() {
		t.Errorf("a DRA pod of 8 GPUs was planned (%v): ext's 8 are nvidia.com/gpu, dra has 4 free", status)
	}
	cs, status := h.state.PlanFor(ctx, extPod, h.nodeInfos())
	if got := slotOf(t, cs, status); !strings.HasPrefix(got, "ext:") {
		t.Errorf("the nvidia.com/gpu pod's slot = %s, want on ext", got)
	}
	cs, status = h.state.PlanFor(ctx, draPod, h.nodeInfos())
	if got := slotOf(t, cs, status); got != "dra:0,1,2,3" {
		t.Errorf("the DRA pod's slot = %s, want dra:0,1,2,3 (the 4 GPUs busy does not claim)", got)
	}
}

// TestDRAWorkerGetsDevicesInsideOneNVLinkIsland: a DRA node's devices are numbered by their GPUs
// in its GPUNode, joined by uuid, so a worker of 2 GPUs gets two devices of one NVLink island even
// where the slice lists each island's devices apart (first fit would take gpu-0 and gpu-1, two
// islands); devices a claim is allocated are taken.
func TestDRAWorkerGetsDevicesInsideOneNVLinkIsland(t *testing.T) {
	claimed := func(w *st.PodWrapper) *st.PodWrapper {
		return w.PodResourceClaims(corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("two")})
	}
	// GPUs 2i and 2i+1 share island i; device gpu-k is GPU perm[k].
	gn := &convoy.GPUNode{}
	gn.Name = "dra"
	for i := range 8 {
		gn.Status.GPUs = append(gn.Status.GPUs, convoy.GPUDevice{Index: int32(i), UUID: "GPU-" + itoa(i), Health: convoy.GPUHealthy,
			NVLinkDomain: "dra/island-" + itoa(i/2)})
	}
	perm := []int{0, 2, 4, 6, 1, 3, 5, 7}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-gpus"},
		Spec: resourcev1.ResourceSliceSpec{Driver: convoy.DriverGPU, NodeName: ptr.To("dra"), Pool: resourcev1.ResourcePool{Name: "dra"}}}
	for k, g := range perm {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: "gpu-" + itoa(k), Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"uuid": {StringValue: ptr.To("GPU-" + itoa(g))}, "index": {IntValue: ptr.To(int64(k))}}})
	}
	first := claimed(member("ns", "a", 0, 0)).Obj()
	second := claimed(member("ns", "b", 0, 0)).Obj()
	h := newHarness(t, []*corev1.Node{fakeNode("dra", "r1", 0)}, []*corev1.Pod{first, second}, gn)
	ctx := context.Background()
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: convoy.DriverGPU, Count: 2}}}}}}}
	if _, err := h.cs.ResourceV1().ResourceClaimTemplates("ns").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cs.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return h.state.PodGPUs(first) == 2 && h.state.dra.nodeGPUs("dra") == 8, nil
	}); err != nil {
		t.Fatal("the State never counted the template's and the slice's GPUs")
	}
	devices := func(sl Slot) string {
		b := h.state.nodes.bases["dra"]
		var out []string
		for _, i := range sl.GPUs.Indices() {
			out = append(out, b.devices[i].name)
		}
		return strings.Join(out, ",")
	}
	cs, status := h.state.PlanFor(ctx, first, h.nodeInfos())
	if got := slotOf(t, cs, status); got != "dra:0,1" {
		t.Fatalf("the first worker's slot = %s, want dra:0,1 (island 0)", got)
	}
	if got := devices(cs.Slot); got != "gpu-0,gpu-4" {
		t.Errorf("the first worker's devices = %s, want gpu-0,gpu-4 (GPUs 0 and 1, island 0)", got)
	}

	// A claim allocated gpu-1 (GPU 2): island 1 is broken, and the next worker (island 0 is the
	// first's plan) takes island 2.
	busy := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "busy"},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: convoy.DriverGPU, Pool: "dra", Device: "gpu-1"}}}}}}
	if _, err := h.cs.ResourceV1().ResourceClaims("ns").Create(ctx, busy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		h.state.dra.mu.Lock()
		defer h.state.dra.mu.Unlock()
		return h.state.dra.allocated["dra/gpu-1"] == "ns/busy", nil
	}); err != nil {
		t.Fatal("the State never saw the claim's allocation")
	}
	cs, status = h.state.PlanFor(ctx, second, h.nodeInfos())
	if got := slotOf(t, cs, status); got != "dra:4,5" {
		t.Fatalf("the second worker's slot = %s, want dra:4,5 (island 2)", got)
	}
	if got := devices(cs.Slot); got != "gpu-2,gpu-6" {
		t.Errorf("the second worker's devices = %s, want gpu-2,gpu-6", got)
	}
}

// TestDRADevicesWithoutGPUNodeAreNumberedByIndexThenName: without a GPUNode a node's devices are
// numbered by their index attribute, then by name as a person counts (gpu-2 before gpu-10).
func TestDRADevicesWithoutGPUNodeAreNumberedByIndexThenName(t *testing.T) {
	d := newDRAGPUs()
	dev := func(name string, index ...int64) resourcev1.Device {
		dv := resourcev1.Device{Name: name}
		if len(index) > 0 {
			dv.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"index": {IntValue: ptr.To(index[0])}}
		}
		return dv
	}
	for name, tc := range map[string]struct {
		devices []resourcev1.Device
		want    string
	}{
		"by name":  {devices: []resourcev1.Device{dev("gpu-10"), dev("gpu-2"), dev("gpu-1")}, want: "gpu-1,gpu-2,gpu-10"},
		"by index": {devices: []resourcev1.Device{dev("a", 2), dev("b", 0), dev("c", 1)}, want: "b,c,a"},
	} {
		t.Run(name, func(t *testing.T) {
			d.setSlice("s", &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"},
				Spec: resourcev1.ResourceSliceSpec{Driver: convoy.DriverGPU, NodeName: ptr.To("n"), Devices: tc.devices}})
			var got []string
			for _, dv := range d.node("n", nil).devices {
				got = append(got, dv.name)
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("devices numbered %v, want %s", got, tc.want)
			}
		})
	}
}

// TestDRADevicesReleasedAreSeenByTheNextPlan: a claim released on a DRA node changes neither the
// node's NodeInfo nor its GPUNode, yet the next plan, on the view kept from the last, sees the
// devices free: a whole-node worker that fit nowhere fits there.
func TestDRADevicesReleasedAreSeenByTheNextPlan(t *testing.T) {
	big := member("ns", "big", 0, 0).PodResourceClaims(corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("eight")}).Obj()
	h := newHarness(t, []*corev1.Node{fakeNode("a", "r1", 0), fakeNode("b", "r2", 0)}, []*corev1.Pod{big})
	ctx := context.Background()
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "eight"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: convoy.DriverGPU, Count: 8}}}}}}}
	if _, err := h.cs.ResourceV1().ResourceClaimTemplates("ns").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"a", "b"} {
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
			Spec: resourcev1.ResourceSliceSpec{Driver: convoy.DriverGPU, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node}}}
		for k := range 8 {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: "gpu-" + itoa(k)})
		}
		if _, err := h.cs.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		busy := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "busy-" + node},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: convoy.DriverGPU, Pool: node, Device: "gpu-3"}}}}}}
		if _, err := h.cs.ResourceV1().ResourceClaims("ns").Create(ctx, busy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	allocated := func(n int) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			h.state.dra.mu.Lock()
			defer h.state.dra.mu.Unlock()
			return h.state.PodGPUs(big) == 8 && len(h.state.dra.allocated) == n, nil
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, allocated(2)); err != nil {
		t.Fatal("the State never saw the template and both claims")
	}
	if _, status := h.state.PlanFor(ctx, big, h.nodeInfos()); status.IsSuccess() {
		t.Fatalf("an 8-GPU worker was planned (%v) where each node has 7 devices free", status)
	}
	if err := h.cs.ResourceV1().ResourceClaims("ns").Delete(ctx, "busy-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, allocated(1)); err != nil {
		t.Fatal("the State never saw busy-b released")
	}
	cs, status := h.state.PlanFor(ctx, big, h.nodeInfos())
	if got := slotOf(t, cs, status); !strings.HasPrefix(got, "b:") {
		t.Errorf("the 8-GPU worker's slot = %s, want on b, whose devices busy-b released", got)
	}
}

// TestDRAPlannerWeighsTheClaimSelectors: a view leaves out the devices that the selectors of a
// gang's GPU request, and of its DeviceClass, do not select. A worker asking for H200s is planned
// on the H200 node though the H100 node comes first; a worker asking an H200 class, or more memory
// than the H100s have, likewise; a worker asking for a product no node has, and a gang of two
// whole H200 nodes, are told at once that no plan fits, the selector and what it rules out named.
func TestDRAPlannerWeighsTheClaimSelectors(t *testing.T) {
	claimed := func(w *st.PodWrapper, template string) *corev1.Pod {
		return w.PodResourceClaims(corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}).Obj()
	}
	h200 := claimed(member("ns", "h200", 0, 0), "h200")
	class := claimed(member("ns", "class", 0, 0), "class")
	memory := claimed(member("ns", "memory", 0, 0), "memory")
	b200 := claimed(member("ns", "b200", 0, 0), "b200")
	pair := []*corev1.Pod{claimed(member("ns", "pair", 0, 0), "four-h200"), claimed(member("ns", "pair", 1, 0), "four-h200")}
	h := newHarness(t, []*corev1.Node{fakeNode("a-h100", "r1", 0), fakeNode("b-h200", "r1", 0)}, append([]*corev1.Pod{h200, class, memory, b200}, pair...))
	ctx := context.Background()
	sel := func(expr string) []resourcev1.DeviceSelector {
		return []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
	}
	product := func(p string) string { return `device.attributes["gpu.nvidia.com"].productName == "` + p + `"` }
	for _, c := range []*resourcev1.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: convoy.DriverGPU}, Spec: resourcev1.DeviceClassSpec{Selectors: sel(`device.driver == "gpu.nvidia.com"`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "h200"}, Spec: resourcev1.DeviceClassSpec{Selectors: sel(`device.driver == "gpu.nvidia.com" && ` + product("NVIDIA-H200"))}},
	} {
		if _, err := h.cs.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, r := range map[string]resourcev1.ExactDeviceRequest{
		"h200":      {DeviceClassName: convoy.DriverGPU, Count: 2, Selectors: sel(product("NVIDIA-H200"))},
		"class":     {DeviceClassName: "h200", Count: 2},
		"memory":    {DeviceClassName: convoy.DriverGPU, Count: 2, Selectors: sel(`device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("100Gi")) >= 0`)},
		"b200":      {DeviceClassName: convoy.DriverGPU, Count: 2, Selectors: sel(product("NVIDIA-B200"))},
		"four-h200": {DeviceClassName: convoy.DriverGPU, Count: 4, Selectors: sel(product("NVIDIA-H200"))},
	} {
		tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu", Exactly: &r}}}}}}
		if _, err := h.cs.ResourceV1().ResourceClaimTemplates("ns").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for node, p := range map[string]struct{ product, memory string }{"a-h100": {"NVIDIA-H100", "80Gi"}, "b-h200": {"NVIDIA-H200", "141Gi"}} {
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
			Spec: resourcev1.ResourceSliceSpec{Driver: convoy.DriverGPU, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node}}}
		for k := range 4 {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: "gpu-" + itoa(k),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: ptr.To(p.product)}},
				Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(p.memory)}}})
		}
		if _, err := h.cs.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, err := h.state.dra.classes.Get("h200")
		return err == nil && h.state.PodGPUs(pair[1]) == 4 && h.state.PodGPUs(class) == 2 &&
			h.state.dra.nodeGPUs("a-h100") == 4 && h.state.dra.nodeGPUs("b-h200") == 4, nil
	}); err != nil {
		t.Fatal("the State never saw the classes, templates and slices")
	}
	for _, p := range []*corev1.Pod{h200, class, memory} {
		cs, status := h.state.PlanFor(ctx, p, h.nodeInfos())
		if got := slotOf(t, cs, status); !strings.HasPrefix(got, "b-h200:") {
			t.Errorf("%s's slot = %s, want on b-h200, the node whose devices its claim selects", p.Name, got)
		}
		h.state.mu.Lock()
		h.state.dropPlanLocked(GangKey(p), dropRescheduled, "the test plans the next worker")
		h.state.mu.Unlock()
	}
	for p, want := range map[*corev1.Pod]string{
		b200:    "the GPU claims' selectors match 0 of the 8 DRA devices: request gpu/gpu's selector `" + product("NVIDIA-B200") + "` rules out 8",
		pair[0]: "the GPU claims' selectors match 4 of the 8 DRA devices: request gpu/gpu's selector `" + product("NVIDIA-H200") + "` rules out 4",
	} {
		if _, status := h.state.PlanFor(ctx, p, h.nodeInfos()); status.IsSuccess() || !strings.Contains(status.Message(), want) {
			t.Errorf("PlanFor(%s) = %v, want Unschedulable saying %q", p.Name, status, want)
		}
	}
}

// TestExtendedResourceGangTakesTheDevicesItsDeviceClassBacks: nodes whose GPUs are only DRA
// devices are no room for a pod that asks nvidia.com/gpu until a DeviceClass backs that resource
// (spec.extendedResourceName); then the pod is planned on the devices of the class DynamicResources
// would pick, the newest of those that name it: here the H200s, not the H100s an older class takes.
func TestExtendedResourceGangTakesTheDevicesItsDeviceClassBacks(t *testing.T) {
	pod := member("ns", "ext", 0, 4).Obj()
	h := newHarness(t, []*corev1.Node{fakeNode("a-h100", "r1", 0), fakeNode("b-h200", "r1", 0)}, []*corev1.Pod{pod})
	ctx := context.Background()
	for node, product := range map[string]string{"a-h100": "NVIDIA-H100", "b-h200": "NVIDIA-H200"} {
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
			Spec: resourcev1.ResourceSliceSpec{Driver: convoy.DriverGPU, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node}}}
		for k := range 4 {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: "gpu-" + itoa(k),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: ptr.To(product)}}})
		}
		if _, err := h.cs.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return h.state.dra.nodeGPUs("a-h100") == 4 && h.state.dra.nodeGPUs("b-h200") == 4, nil
	}); err != nil {
		t.Fatal("the State never saw the slices")
	}
	if _, status := h.state.PlanFor(ctx, pod, h.nodeInfos()); status.IsSuccess() {
		t.Fatalf("a pod of nvidia.com/gpu was planned on DRA devices no DeviceClass backs it with: %v", status)
	}

	backs := func(name, product string, created time.Time) *resourcev1.DeviceClass {
		return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
			Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To(string(convoy.ResourceGPU)), Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].productName == "` + product + `"`}}}}}
	}
	now := time.Now()
	for _, c := range []*resourcev1.DeviceClass{backs("h100s", "NVIDIA-H100", now.Add(-time.Hour)), backs("h200s", "NVIDIA-H200", now)} {
		if _, err := h.cs.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		c := h.state.extendedClass()
		return c != nil && c.Name == "h200s", nil
	}); err != nil {
		t.Fatalf("extendedClass() = %v, want h200s, the newest class that backs nvidia.com/gpu", h.state.extendedClass())
	}
	cs, status := h.state.PlanFor(ctx, pod, h.nodeInfos())
	if got := slotOf(t, cs, status); got != "b-h200:0,1,2,3" {
		t.Errorf("the pod's slot = %s, want b-h200:0,1,2,3, the devices of the class that backs nvidia.com/gpu", got)
	}
}

func TestWriteClaim(t *testing.T) {
	pod := st.MakePod().Namespace("ns").Name("w-0").UID("p").Obj()
	allocation := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: convoy.DriverGPU, Pool: "n1", Device: "gpu-0"},
	}}}
	claim := func(finalizers ...string) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-0-gpu", UID: "c", Finalizers: finalizers}}
	}
	cases := map[string]struct {
		claim *resourcev1.ResourceClaim
		fail  error
		// wantWrites are the claim's writes: the finalizer, then the status.
		wantWrites []string
		wantErr    error
	}{
		"the finalizer, then the allocation": {claim: claim(), wantWrites: []string{"", "status"}},
		"a claim made with the finalizer gets the allocation alone": {
			claim: claim(resourcev1.Finalizer), wantWrites: []string{"status"},
		},
		"a request that times out is an error": {
			claim: claim(), fail: context.DeadlineExceeded, wantWrites: []string{""}, wantErr: context.DeadlineExceeded,
		},
		"the scheduler stopping is an error": {
			claim: claim(resourcev1.Finalizer), fail: context.Canceled, wantWrites: []string{"status"}, wantErr: context.Canceled,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(tc.claim)
			if tc.fail != nil {
				cs.PrependReactor("update", "resourceclaims", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.fail
				})
			}
			got, err := writeClaim(context.Background(), cs.ResourceV1().ResourceClaims("ns"), pod, claimWrite{claim: tc.claim, allocation: allocation})
			var writes []string
			for _, a := range cs.Actions() {
				if a.GetVerb() == "update" {
					writes = append(writes, a.GetSubresource())
				}
			}
			if diff := cmp.Diff(tc.wantWrites, writes); diff != "" {
				t.Errorf("writes (-want,+got):\n%s", diff)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || got != nil {
					t.Fatalf("writeClaim = %v, %v; want no claim and %v", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(got.Finalizers, resourcev1.Finalizer) || got.Status.Allocation == nil ||
				len(got.Status.ReservedFor) != 1 || got.Status.ReservedFor[0].UID != pod.UID {
				t.Errorf("claim written: finalizers %v, allocation %v, reserved for %v; want %s, allocated, reserved for the pod",
					got.Finalizers, got.Status.Allocation, got.Status.ReservedFor, resourcev1.Finalizer)
			}
		})
	}
}
