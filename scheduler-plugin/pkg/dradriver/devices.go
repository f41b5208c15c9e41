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

// Package dradriver is a DRA driver for simulated GPUs: it publishes a node's mock GPUs (the node
// agent's mock NVML profiles) as devices of NVIDIA's driver, gpu.nvidia.com, with the attributes
// NVIDIA's driver publishes, and prepares a claim by writing a CDI spec that gives the containers
// the claim's GPUs as NVIDIA_VISIBLE_DEVICES, as the device plugin's Allocate does.
package dradriver

import (
	"fmt"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
)

// DriverName is the driver the devices belong to: NVIDIA's, so that DeviceClass gpu.nvidia.com,
// Kueue's deviceClassMappings and convoy-scheduler treat them as GPUs.
const DriverName = convoy.DriverGPU

// GPU is one GPU of the node: the device it is published as and its UUID.
type GPU struct {
	Device resourcev1.Device
	UUID   string
}

// MockGPUs reads nodeName's GPUs under mock NVML profile, with the UUIDs the node agent and the
// simulated device plugin give them (both seed the mock with the node name).
func MockGPUs(profile, nodeName string) ([]GPU, error) {
	if nodeName == "" {
		return nil, fmt.Errorf("a node name is required: it seeds the mock GPUs' UUIDs")
	}
	srv, err := nvmlmock.New(profile, nvmlmock.Options{Seed: nodeName})
	if err != nil {
		return nil, err
	}
	r, err := gpuinfo.Open(srv, gpuinfo.Options{NodeName: nodeName})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return Devices(r.Static())
}

// Devices turns what the node agent's reader saw into the devices NVIDIA's driver publishes:
// gpu-<index>, with type, uuid, productName, architecture, cudaComputeCapability, driverVersion,
// cudaDriverVersion, index, minor and resource.kubernetes.io/pciBusID, and the capacity memory.
// numaNode (Convoy's addition) is the GPU's NUMA node where known.
func Devices(s *gpuinfo.Static) ([]GPU, error) {
	gpus := make([]GPU, 0, len(s.GPUs))
	for _, g := range s.GPUs {
		if g.UUID == "" {
			return nil, fmt.Errorf("GPU %d has no UUID", g.Index)
		}
		attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type":        {StringValue: ptr.To("gpu")},
			"uuid":        {StringValue: ptr.To(g.UUID)},
			"productName": {StringValue: ptr.To(g.Product)},
			"index":       {IntValue: ptr.To(int64(g.Index))},
			"minor":       {IntValue: ptr.To(int64(g.Index))},
		}
		if g.Architecture != "" {
			attrs["architecture"] = resourcev1.DeviceAttribute{StringValue: ptr.To(g.Architecture)}
		}
		for name, v := range map[resourcev1.QualifiedName]string{
			"cudaComputeCapability": g.ComputeCapability,
			"driverVersion":         s.DriverVersion,
			"cudaDriverVersion":     s.CUDAVersion,
		} {
			if v, ok := semver(v); ok {
				attrs[name] = resourcev1.DeviceAttribute{VersionValue: ptr.To(v)}
			}
		}
		if g.NUMANode != nil {
			attrs["numaNode"] = resourcev1.DeviceAttribute{IntValue: ptr.To(int64(*g.NUMANode))}
		}
		if a, err := deviceattribute.GetPCIBusIDAttribute(gpuinfo.NormBusID(g.PCIBusID)); err == nil {
			attrs[a.Name] = a.Value
		}
		gpus = append(gpus, GPU{UUID: g.UUID, Device: resourcev1.Device{
			Name:       "gpu-" + strconv.Itoa(int(g.Index)),
			Attributes: attrs,
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(g.MemoryMiB<<20, resource.BinarySI)},
			},
		}})
	}
	return gpus, nil
}

// semver makes a version such as NVML's "550.90.07" or "8.9" a semantic version, as NVIDIA's
// driver does: at most three numeric parts, missing ones zero, leading zeros dropped.
func semver(v string) (string, bool) {
	parts := strings.Split(v, ".")
	if v == "" || len(parts) > 3 {
		return "", false
	}
	out := []string{"0", "0", "0"}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return "", false
		}
		out[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(out, "."), true
}
