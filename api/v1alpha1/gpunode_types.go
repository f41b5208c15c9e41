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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUHealth is a GPU's health as the node agent judged it.
// +kubebuilder:validation:Enum=Healthy;Unhealthy;Unknown
type GPUHealth string

const (
	GPUHealthy   GPUHealth = "Healthy"
	GPUUnhealthy GPUHealth = "Unhealthy"
	GPUUnknown   GPUHealth = "Unknown"
)

// LinkType is how two GPUs of a node reach each other, best first. The PCIe levels are those of
// `nvidia-smi topo -m`.
// +kubebuilder:validation:Enum=NVLink;PIX;PXB;PHB;NODE;SYS
type LinkType string

const (
	// LinkNVLink is one or more direct NVLinks or an NVSwitch.
	LinkNVLink LinkType = "NVLink"
	// LinkPIX is a single PCIe switch.
	LinkPIX LinkType = "PIX"
	// LinkPXB is several PCIe switches, without the host bridge.
	LinkPXB LinkType = "PXB"
	// LinkPHB is a PCIe host bridge (one CPU).
	LinkPHB LinkType = "PHB"
	// LinkNODE is across host bridges inside one NUMA node.
	LinkNODE LinkType = "NODE"
	// LinkSYS crosses the inter-socket link (SMP interconnect between NUMA nodes).
	LinkSYS LinkType = "SYS"
)

// GPUDevice is one physical GPU.
type GPUDevice struct {
	// index is the NVML device index (the nvidia-smi index).
	// +required
	// +kubebuilder:validation:Minimum=0
	Index int32 `json:"index"`

	// uuid is the GPU's UUID, as the device plugin names devices.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	UUID string `json:"uuid,omitempty"`

	// product is the product name, for example "NVIDIA H100 80GB HBM3".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Product string `json:"product,omitempty"`

	// architecture is the GPU architecture, for example Hopper.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Architecture string `json:"architecture,omitempty"`

	// computeCapability is the CUDA compute capability, for example "9.0".
	// +optional
	// +kubebuilder:validation:MaxLength=8
	ComputeCapability string `json:"computeCapability,omitempty"`

	// memoryMiB is the total device memory in MiB.
	// +optional
	MemoryMiB int64 `json:"memoryMiB,omitempty"`

	// memoryUsedMiB is the device memory in use, in MiB.
	// +optional
	MemoryUsedMiB *int64 `json:"memoryUsedMiB,omitempty"`

	// utilization is the GPU's compute utilization in percent over the last sample period.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Utilization *int32 `json:"utilization,omitempty"`

	// pciBusID is the PCI bus ID, for example "00000000:18:00.0".
	// +optional
	// +kubebuilder:validation:MaxLength=32
	PCIBusID string `json:"pciBusID,omitempty"`

	// numaNode is the NUMA node the GPU is attached to, where known.
	// +optional
	NUMANode *int32 `json:"numaNode,omitempty"`

	// migMode is Enabled or Disabled where the GPU supports MIG, empty otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	MIGMode string `json:"migMode,omitempty"`

	// nvlinkDomain names the NVLink domain the GPU belongs to: the GPU fabric clique where NVML
	// reports one (multi-node NVLink), else the node's NVSwitch or NVLink island.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	NVLinkDomain string `json:"nvlinkDomain,omitempty"`

	// health is Healthy, Unhealthy or Unknown. Unhealthy GPUs are never scheduled.
	// +required
	Health GPUHealth `json:"health"`

	// healthReason says why the GPU is unhealthy, for example "XID 79: GPU fell off the bus".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	HealthReason string `json:"healthReason,omitempty"`

	// allocatedTo is the pod holding the GPU, as namespace/name; empty when free.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	AllocatedTo string `json:"allocatedTo,omitempty"`

	// nvlinks are the GPU's NVLinks as NVML lists them, up or down (see active).
	// +optional
	// +listType=map
	// +listMapKey=link
	// +kubebuilder:validation:MaxItems=32
	NVLinks []NVLink `json:"nvlinks,omitempty"`
}

// NVLink is one NVLink of a GPU.
type NVLink struct {
	// link is the NVLink index on the GPU.
	// +required
	Link int32 `json:"link"`
	// active reports whether the link is up.
	// +optional
	Active bool `json:"active,omitempty"`
	// peerPCIBusID is the PCI bus ID at the other end: a GPU or an NVSwitch.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	PeerPCIBusID string `json:"peerPCIBusID,omitempty"`
	// peerIndex is the GPU index at the other end, when the peer is a GPU of this node.
	// +optional
	PeerIndex *int32 `json:"peerIndex,omitempty"`
}

// GPULink is how one pair of GPUs of the node is connected.
type GPULink struct {
	// a is the lower GPU index of the pair.
	// +required
	A int32 `json:"a"`
	// b is the higher GPU index of the pair.
	// +required
	B int32 `json:"b"`
	// type is NVLink, or the PCIe level the pair shares: PIX, PXB, PHB, NODE or SYS.
	// +required
	Type LinkType `json:"type"`
	// nvlinks is the number of NVLinks joining the pair (for NVSwitch systems, the links of each GPU
	// into the switch fabric).
	// +optional
	NVLinks int32 `json:"nvlinks,omitempty"`
	// bandwidthGBps is the pair's NVLink bandwidth in GB/s where known.
	// +optional
	BandwidthGBps int32 `json:"bandwidthGBps,omitempty"`
}

// GPUNodeStatus is what the node agent read through NVML and the kubelet.
type GPUNodeStatus struct {
	// driverVersion is the NVIDIA driver version.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	DriverVersion string `json:"driverVersion,omitempty"`
	// cudaVersion is the CUDA driver API version, for example "12.4".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	CUDAVersion string `json:"cudaVersion,omitempty"`
	// nvmlVersion is the NVML library version.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	NVMLVersion string `json:"nvmlVersion,omitempty"`

	// product is the product of the node's GPUs (the first GPU's when they differ).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Product string `json:"product,omitempty"`
	// capacity is the number of GPUs on the node.
	// +optional
	Capacity int32 `json:"capacity,omitempty"`
	// healthy is the number of healthy GPUs.
	// +optional
	Healthy int32 `json:"healthy,omitempty"`
	// free is the number of healthy GPUs no pod holds.
	// +optional
	Free int32 `json:"free,omitempty"`

	// gpus are the node's GPUs.
	// +optional
	// +listType=map
	// +listMapKey=index
	// +kubebuilder:validation:MaxItems=64
	GPUs []GPUDevice `json:"gpus,omitempty"`

	// links is the pairwise link matrix: one entry per pair of GPUs (a < b).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2016
	Links []GPULink `json:"links,omitempty"`

	// conditions are the agent's conditions, for example NVMLAvailable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedTime is when the agent last confirmed this status (its heartbeat).
	// +optional
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`
}

// GPUNode is one node's GPU inventory and topology, published by the node agent. Its name is the
// node's name.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gpun,categories=convoy
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.status.capacity`
// +kubebuilder:printcolumn:name="Product",type=string,JSONPath=`.status.product`
// +kubebuilder:printcolumn:name="Healthy",type=integer,JSONPath=`.status.healthy`
// +kubebuilder:printcolumn:name="Free",type=integer,JSONPath=`.status.free`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GPUNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// status is the node's GPUs as last observed.
	// +optional
	Status GPUNodeStatus `json:"status,omitempty"`
}

// GPUNodeList is a list of GPUNodes.
// +kubebuilder:object:root=true
type GPUNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GPUNode `json:"items"`
}

// GPUNode condition types.
const (
	// GPUNodeNVMLAvailable is true when NVML initialised and listed the devices.
	GPUNodeNVMLAvailable = "NVMLAvailable"
)

// Reasons of the NVMLAvailable condition.
const (
	// GPUNodeReasonInitialized: NVML started and listed the GPUs.
	GPUNodeReasonInitialized = "Initialized"
	// GPUNodeReasonLibraryNotFound: libnvidia-ml.so.1 is missing (no driver, or not mounted).
	GPUNodeReasonLibraryNotFound = "LibraryNotFound"
	// GPUNodeReasonNoDevices: NVML started but lists no GPU.
	GPUNodeReasonNoDevices = "NoDevices"
	// GPUNodeReasonInitFailed: NVML failed to start or to count the GPUs.
	GPUNodeReasonInitFailed = "InitFailed"
)

// Summarize sets product, capacity, healthy and free from the GPU list. It is the one place these
// printer-column fields are derived.
func (s *GPUNodeStatus) Summarize() {
	s.Capacity, s.Healthy, s.Free, s.Product = int32(len(s.GPUs)), 0, 0, ""
	for i := range s.GPUs {
		g := &s.GPUs[i]
		if s.Product == "" {
			s.Product = g.Product
		}
		if g.Health != GPUHealthy {
			continue
		}
		s.Healthy++
		if g.AllocatedTo == "" {
			s.Free++
		}
	}
}

func init() {
	register(&GPUNode{}, &GPUNodeList{})
}
