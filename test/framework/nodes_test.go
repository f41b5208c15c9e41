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

package framework_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/convoy-dev/convoy/test/framework"
)

func TestFleetNodes(t *testing.T) {
	cases := map[string]struct {
		fleet     framework.Fleet
		wantNodes int
		wantFirst framework.NodeSpec
		wantLast  string
	}{
		"2 zones x 2 blocks x 2 racks x 4 nodes": {
			fleet:     framework.Fleet{Zones: 2, BlocksPerZone: 2, RacksPerBlock: 2, NodesPerRack: 4, GPUsPerNode: 8, Product: h100},
			wantNodes: 32,
			wantFirst: framework.NodeSpec{Name: "gpu-0-0-0-0", GPUs: 8, GPUProduct: h100, Zone: "zone-0", Block: "block-0-0", Rack: "rack-0-0-0"},
			wantLast:  "gpu-1-1-1-3",
		},
		"no nodes per rack": {
			fleet: framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodes := tc.fleet.Nodes()
			if len(nodes) != tc.wantNodes {
				t.Fatalf("got %d nodes, want %d", len(nodes), tc.wantNodes)
			}
			if tc.wantNodes == 0 {
				return
			}
			if diff := cmp.Diff(tc.wantFirst, nodes[0]); diff != "" {
				t.Errorf("first node (-want,+got):\n%s", diff)
			}
			if got := nodes[len(nodes)-1].Name; got != tc.wantLast {
				t.Errorf("last node %q, want %q", got, tc.wantLast)
			}
			racks := map[string]int{}
			for _, n := range nodes {
				racks[n.Rack]++
			}
			if len(racks) != tc.wantNodes/tc.fleet.NodesPerRack {
				t.Errorf("rack labels are not unique across the fleet: %v", racks)
			}
		})
	}
}

func TestNodeSpecNode(t *testing.T) {
	node, err := framework.NodeSpec{Name: "n", GPUs: 4, Labels: map[string]string{"extra": "yes"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}}}.Node()
	if err != nil {
		t.Fatal(err)
	}
	want := map[corev1.ResourceName]string{
		corev1.ResourceCPU:    framework.DefaultNodeCPU,
		corev1.ResourceMemory: framework.DefaultNodeMemory,
		corev1.ResourcePods:   "110",
		framework.ResourceGPU: "4",
	}
	got := map[corev1.ResourceName]string{}
	for name, q := range node.Status.Allocatable {
		got[name] = q.String()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocatable (-want,+got):\n%s", diff)
	}
	if node.Labels["extra"] != "yes" || node.Annotations[framework.KwokNodeAnnotation] != framework.KwokNodeAnnotationValue {
		t.Errorf("labels %v, annotations %v: want the extra label and kwok's annotation", node.Labels, node.Annotations)
	}
	if _, ok := node.Labels[framework.LabelZone]; ok {
		t.Errorf("a node without a zone got the label %s", framework.LabelZone)
	}
	if len(node.Spec.Taints) != 1 {
		t.Errorf("taints %v, want the one given", node.Spec.Taints)
	}
}

func TestNodeSpecRejectsBadQuantities(t *testing.T) {
	if _, err := (framework.NodeSpec{Name: "n", CPU: "lots"}).Node(); err == nil {
		t.Error("a CPU of \"lots\" was accepted")
	}
}

// TestResourceSlice: a node's DRA GPUs are devices of NVIDIA's driver in one pool of one slice,
// with the attributes and capacity its DeviceClass selectors and a job's spec.gpu read; a node
// without them publishes none.
func TestResourceSlice(t *testing.T) {
	slice, err := framework.NodeSpec{Name: "dra-0", DRAGPUs: 2, GPUProduct: h100}.ResourceSlice()
	if err != nil {
		t.Fatal(err)
	}
	device := func(i int64) resourcev1.Device {
		return resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"uuid": {StringValue: ptr.To(fmt.Sprintf("GPU-dra-0-%d", i))}, "index": {IntValue: ptr.To(i)}, "productName": {StringValue: ptr.To(h100)},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
		}
	}
	want := resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: ptr.To("dra-0"),
		Pool: resourcev1.ResourcePool{Name: "dra-0", ResourceSliceCount: 1}, Devices: []resourcev1.Device{device(0), device(1)}}
	if diff := cmp.Diff(want, slice.Spec); diff != "" {
		t.Errorf("ResourceSlice spec (-want,+got):\n%s", diff)
	}
	if slice, err := (framework.NodeSpec{Name: "gpu-0", GPUs: 8}).ResourceSlice(); slice != nil || err != nil {
		t.Errorf("a node of nvidia.com/gpu publishes %v, %v; want no ResourceSlice", slice, err)
	}
}
