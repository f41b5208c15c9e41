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

package framework

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Node labels, annotations and resources of fake GPU nodes. The topology and GPU keys are the
// canonical ones from api/v1alpha1, repeated here so tests need only this package.
const (
	LabelZone       = convoy.LabelTopologyZone
	LabelBlock      = convoy.LabelTopologyBlock
	LabelRack       = convoy.LabelTopologyRack
	LabelHostname   = convoy.LabelHostname
	LabelGPUProduct = convoy.LabelGPUProduct
	// LabelNodeType and NodeTypeKwok mark fake nodes, as kwok's own examples do.
	LabelNodeType = "type"
	NodeTypeKwok  = "kwok"

	// KwokNodeAnnotation with KwokNodeAnnotationValue selects the nodes kwok manages.
	KwokNodeAnnotation      = "kwok.x-k8s.io/node"
	KwokNodeAnnotationValue = "fake"

	ResourceGPU corev1.ResourceName = convoy.ResourceGPU
)

// Defaults of NodeSpec's capacity fields.
const (
	DefaultNodeCPU    = "96"
	DefaultNodeMemory = "1Ti"
	DefaultNodePods   = 110
	// DefaultDRAGPUMemory is the memory of a DRA GPU, an H100's.
	DefaultDRAGPUMemory = "80Gi"
)

// NodeSpec describes a fake node that kwok keeps Ready.
type NodeSpec struct {
	// Name is the node's name and its kubernetes.io/hostname label.
	Name string
	// GPUs is the node's nvidia.com/gpu capacity and allocatable; none when zero.
	GPUs int
	// GPUProduct is the nvidia.com/gpu.product label, e.g. "NVIDIA-H100-80GB-HBM3"; unset when empty.
	GPUProduct string
	// DRAGPUs is the number of GPUs the node publishes as DRA devices of NVIDIA's driver
	// (ResourceSlice), with GPUProduct as their productName and DRAGPUMemory as their memory; none
	// when zero. Use it instead of GPUs: a node's GPUs are either kind.
	DRAGPUs int
	// DRAGPUMemory is the memory capacity of each DRA GPU; DefaultDRAGPUMemory when empty.
	DRAGPUMemory string
	// CPU and Memory are quantities ("96", "1Ti"); DefaultNodeCPU and DefaultNodeMemory when empty.
	CPU    string
	Memory string
	// Pods is the pod capacity; DefaultNodePods when zero.
	Pods int
	// Zone, Block and Rack are the node's topology labels; each is unset when empty.
	Zone  string
	Block string
	Rack  string
	// Labels are added to the node's labels and override the ones above.
	Labels map[string]string
	// Taints are the node's taints.
	Taints []corev1.Taint
}

// Node returns the Node object for s, with its capacity in status as a kubelet would report it.
func (s NodeSpec) Node() (*corev1.Node, error) {
	if s.Name == "" {
		return nil, fmt.Errorf("node spec %+v has no name", s)
	}
	cpu, err := resource.ParseQuantity(cmp.Or(s.CPU, DefaultNodeCPU))
	if err != nil {
		return nil, fmt.Errorf("node %s: cpu: %w", s.Name, err)
	}
	memory, err := resource.ParseQuantity(cmp.Or(s.Memory, DefaultNodeMemory))
	if err != nil {
		return nil, fmt.Errorf("node %s: memory: %w", s.Name, err)
	}
	pods := cmp.Or(s.Pods, DefaultNodePods)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    cpu,
		corev1.ResourceMemory: memory,
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	if s.GPUs > 0 {
		capacity[ResourceGPU] = *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
	}

	labels := map[string]string{
		LabelHostname:          s.Name,
		LabelNodeType:          NodeTypeKwok,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	for key, value := range map[string]string{LabelZone: s.Zone, LabelBlock: s.Block, LabelRack: s.Rack, LabelGPUProduct: s.GPUProduct} {
		if value != "" {
			labels[key] = value
		}
	}
	maps.Copy(labels, s.Labels)

	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: KwokNodeAnnotationValue},
		},
		Spec: corev1.NodeSpec{Taints: s.Taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
		},
	}, nil
}

// ResourceSlice returns the ResourceSlice in which NVIDIA's DRA driver would publish the node's
// DRAGPUs: devices gpu-0, gpu-1, ... with the attributes uuid, index and productName and the
// capacity memory. Nil for a node without DRA GPUs.
func (s NodeSpec) ResourceSlice() (*resourcev1.ResourceSlice, error) {
	if s.DRAGPUs == 0 {
		return nil, nil
	}
	memory, err := resource.ParseQuantity(cmp.Or(s.DRAGPUMemory, DefaultDRAGPUMemory))
	if err != nil {
		return nil, fmt.Errorf("node %s: DRA GPU memory: %w", s.Name, err)
	}
	devices := make([]resourcev1.Device, s.DRAGPUs)
	for i := range devices {
		devices[i] = resourcev1.Device{
			Name: "gpu-" + strconv.Itoa(i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"uuid":        {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", s.Name, i))},
				"index":       {IntValue: ptr.To(int64(i))},
				"productName": {StringValue: ptr.To(s.GPUProduct)},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: memory}},
		}
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-" + strings.ReplaceAll(convoy.DriverGPU, ".", "-")},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   convoy.DriverGPU,
			NodeName: ptr.To(s.Name),
			Pool:     resourcev1.ResourcePool{Name: s.Name, ResourceSliceCount: 1},
			Devices:  devices,
		},
	}, nil
}

// GPUDeviceClass is the DeviceClass gpu.nvidia.com of NVIDIA's DRA driver: every device it
// publishes.
func GPUDeviceClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: convoy.DriverGPU},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", convoy.DriverGPU)},
		}}},
	}
}

// CreateNodes creates a fake node for each spec and waits until every one is ready for pods: kwok
// reports it Ready and the node lifecycle controller has lifted the node.kubernetes.io/not-ready
// taint that every new node starts with.
func (c *Cluster) CreateNodes(ctx context.Context, specs ...NodeSpec) error {
	pending := map[string]bool{}
	for _, s := range specs {
		node, err := s.Node()
		if err != nil {
			return err
		}
		if err := c.Client.Create(ctx, node); err != nil {
			return fmt.Errorf("creating node %s: %w", s.Name, err)
		}
		if slice, err := s.ResourceSlice(); err != nil {
			return err
		} else if slice != nil {
			if err := c.Client.Create(ctx, GPUDeviceClass()); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating DeviceClass %s: %w", convoy.DriverGPU, err)
			}
			if err := c.Client.Create(ctx, slice); err != nil {
				return fmt.Errorf("creating the ResourceSlice of node %s: %w", s.Name, err)
			}
		}
		pending[s.Name] = true
	}
	err := c.poll(ctx, Kwok, func() (bool, error) {
		nodes := &corev1.NodeList{}
		if err := c.Client.List(ctx, nodes); err != nil {
			return false, err
		}
		for i := range nodes.Items {
			if pending[nodes.Items[i].Name] && nodeSchedulable(&nodes.Items[i]) {
				delete(pending, nodes.Items[i].Name)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		names := slices.Sorted(maps.Keys(pending))
		if len(names) > 5 {
			names = append(names[:5], "...")
		}
		return fmt.Errorf("waiting for %d nodes to become Ready (%s): %w", len(pending), strings.Join(names, ", "), err)
	}
	return nil
}

func nodeSchedulable(node *corev1.Node) bool {
	for _, taint := range node.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Fleet describes a regular GPU fleet: Zones × BlocksPerZone × RacksPerBlock × NodesPerRack nodes
// with GPUsPerNode GPUs each. Names encode the position: zone "zone-0", block "block-0-1", rack
// "rack-0-1-2", node "gpu-0-1-2-3" (zone, block, rack, node index), so block and rack values are
// unique across the fleet.
type Fleet struct {
	Zones         int
	BlocksPerZone int
	RacksPerBlock int
	NodesPerRack  int
	GPUsPerNode   int
	// Product is every node's nvidia.com/gpu.product label.
	Product string
	// CPU, Memory, Labels and Taints are copied into every NodeSpec.
	CPU    string
	Memory string
	Labels map[string]string
	Taints []corev1.Taint
}

// Nodes returns the fleet's node specs, zone by zone, block by block, rack by rack.
func (f Fleet) Nodes() []NodeSpec {
	var specs []NodeSpec
	for z := range f.Zones {
		for b := range f.BlocksPerZone {
			for r := range f.RacksPerBlock {
				for n := range f.NodesPerRack {
					specs = append(specs, NodeSpec{
						Name:       "gpu-" + join(z, b, r, n),
						GPUs:       f.GPUsPerNode,
						GPUProduct: f.Product,
						CPU:        f.CPU,
						Memory:     f.Memory,
						Zone:       "zone-" + join(z),
						Block:      "block-" + join(z, b),
						Rack:       "rack-" + join(z, b, r),
						Labels:     maps.Clone(f.Labels),
						Taints:     f.Taints,
					})
				}
			}
		}
	}
	return specs
}

func join(indexes ...int) string {
	parts := make([]string, len(indexes))
	for i, n := range indexes {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, "-")
}
