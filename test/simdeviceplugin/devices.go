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

package simdeviceplugin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
)

// EnvVisibleDevices is the variable Allocate sets in a container: the comma-separated UUIDs of its
// GPUs, as the NVIDIA device plugin sets it for the container toolkit.
const EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"

// GPU is one mocked GPU of a node, as the node agent's mock NVML shows it.
type GPU struct {
	Index int
	// UUID is the GPU's NVML UUID and the device ID the plugin advertises.
	UUID string
	// NUMA is the GPU's NUMA node in the profile.
	NUMA int
}

// ParseNVML reads the --nvml flag, "mock:<profile>", and returns the profile's name.
func ParseNVML(flag string) (string, error) {
	profile, ok := strings.CutPrefix(flag, "mock:")
	if !ok || profile == "" {
		return "", fmt.Errorf("--nvml=%q: want mock:<profile> (%s)", flag, strings.Join(nvmlmock.Names(), ", "))
	}
	if _, err := nvmlmock.Lookup(profile); err != nil {
		return "", err
	}
	return profile, nil
}

// GPUs returns nodeName's GPUs under profile by index, with the UUIDs the node agent's mock NVML
// (--nvml=mock:<profile>, the same node name) gives them: both seed nvmlmock with the node name.
func GPUs(profile, nodeName string) ([]GPU, error) {
	if nodeName == "" {
		return nil, fmt.Errorf("a node name is required: it seeds the mock GPUs' UUIDs")
	}
	srv, err := nvmlmock.New(profile, nvmlmock.Options{Seed: nodeName})
	if err != nil {
		return nil, err
	}
	numa := srv.Profile().NUMA
	gpus := make([]GPU, 0, len(srv.Devices()))
	for i, d := range srv.Devices() {
		uuid, ret := d.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d of mock profile %s: reading its UUID: %v", i, profile, ret)
		}
		gpus = append(gpus, GPU{Index: i, UUID: uuid, NUMA: numa[i]})
	}
	return gpus, nil
}

// Devices is what ListAndWatch sends: one healthy device per GPU, its ID the GPU's UUID, with the
// GPU's NUMA node when numa is set.
func Devices(gpus []GPU, numa bool) []*pluginapi.Device {
	devs := make([]*pluginapi.Device, 0, len(gpus))
	for _, g := range gpus {
		d := &pluginapi.Device{ID: g.UUID, Health: pluginapi.Healthy}
		if numa {
			d.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(g.NUMA)}}}
		}
		devs = append(devs, d)
	}
	return devs
}

// indexOf maps device IDs to GPU indices.
type indexOf map[string]int

func newIndexOf(gpus []GPU) indexOf {
	idx := make(indexOf, len(gpus))
	for _, g := range gpus {
		idx[g.UUID] = g.Index
	}
	return idx
}

// sorted returns ids in GPU index order, failing on an ID that is no GPU of the node.
func (idx indexOf) sorted(ids []string) ([]string, error) {
	for _, id := range ids {
		if _, ok := idx[id]; !ok {
			return nil, status.Errorf(codes.InvalidArgument, "unknown device %q", id)
		}
	}
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b string) int { return idx[a] - idx[b] })
	return slices.Compact(out), nil
}

// Allocate answers the kubelet's Allocate: for each container, NVIDIA_VISIBLE_DEVICES with its
// GPUs' UUIDs in index order, and no device nodes, mounts or CDI devices, since the GPUs are mocked.
// A device that is no GPU of the node fails the request.
func (idx indexOf) Allocate(req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.GetContainerRequests() {
		ids, err := idx.sorted(c.GetDevicesIds())
		if err != nil {
			return nil, err
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{EnvVisibleDevices: strings.Join(ids, ",")},
		})
	}
	return resp, nil
}

// Preferred answers GetPreferredAllocation: for each container, the devices it must include, then
// the available ones, lowest GPU index first, up to its allocation size. A pod asking for one GPU
// on an idle node so gets GPU 0, which keeps the kubelet's choice predictable in tests.
func (idx indexOf) Preferred(req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, c := range req.GetContainerRequests() {
		must, err := idx.sorted(c.GetMustIncludeDeviceIDs())
		if err != nil {
			return nil, err
		}
		avail, err := idx.sorted(c.GetAvailableDeviceIDs())
		if err != nil {
			return nil, err
		}
		ids := slices.Clone(must)
		for _, id := range avail {
			if len(ids) >= int(c.GetAllocationSize()) {
				break
			}
			if !slices.Contains(must, id) {
				ids = append(ids, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}
