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
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
)

// ignoreProtoState compares the generated messages by their fields only.
var ignoreProtoState = cmpopts.IgnoreUnexported(
	pluginapi.Device{}, pluginapi.TopologyInfo{}, pluginapi.NUMANode{},
	pluginapi.AllocateResponse{}, pluginapi.ContainerAllocateResponse{},
	pluginapi.PreferredAllocationResponse{}, pluginapi.ContainerPreferredAllocationResponse{},
	pluginapi.RegisterRequest{}, pluginapi.DevicePluginOptions{},
)

func TestParseNVML(t *testing.T) {
	cases := []struct {
		flag    string
		want    string
		wantErr string
	}{
		{flag: "mock:h100-8", want: "h100-8"},
		{flag: "mock:pcie-4", want: "pcie-4"},
		{flag: "real", wantErr: "want mock:<profile>"},
		{flag: "mock:", wantErr: "want mock:<profile>"},
		{flag: "mock:v100-16", wantErr: `unknown mock NVML profile "v100-16"`},
	}
	for _, tc := range cases {
		t.Run(tc.flag, func(t *testing.T) {
			got, err := ParseNVML(tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseNVML(%q) = %q, %v; want an error with %q", tc.flag, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseNVML(%q) = %q, %v; want %q", tc.flag, got, err, tc.want)
			}
		})
	}
}

// TestGPUsMatchTheNodeAgentsMock checks the contract with the node agent: the device IDs are the
// UUIDs the agent's mock NVML gives the same node's GPUs, whatever the agent's fabric options.
func TestGPUsMatchTheNodeAgentsMock(t *testing.T) {
	for _, profile := range nvmlmock.Names() {
		t.Run(profile, func(t *testing.T) {
			fleet, err := nvmlmock.NewFleet(profile)
			if err != nil {
				t.Fatal(err)
			}
			agent := fleet.Server("node-a", nvmlmock.Options{FabricCluster: "rack-1"})
			p, _ := nvmlmock.Lookup(profile)
			var want []GPU
			for i, d := range agent.Devices() {
				uuid, ret := d.GetUUID()
				if ret != nvml.SUCCESS {
					t.Fatalf("GPU %d: %v", i, ret)
				}
				want = append(want, GPU{Index: i, UUID: uuid, NUMA: p.NUMA[i]})
			}
			got, err := GPUs(profile, "node-a")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("GPUs (-agent's mock +plugin):\n%s", diff)
			}
			for _, g := range got {
				if len(g.UUID) > 63 {
					t.Errorf("device ID %q is longer than the 63 characters the kubelet allows", g.UUID)
				}
			}
			other, err := GPUs(profile, "node-b")
			if err != nil {
				t.Fatal(err)
			}
			if other[0].UUID == got[0].UUID {
				t.Errorf("node-a and node-b share UUID %s", got[0].UUID)
			}
		})
	}
}

func TestGPUsErrors(t *testing.T) {
	cases := map[string]struct{ profile, node, wantErr string }{
		"no node name":    {profile: "h100-8", wantErr: "node name is required"},
		"unknown profile": {profile: "v100-16", node: "node-a", wantErr: "unknown mock NVML profile"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := GPUs(tc.profile, tc.node); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("GPUs(%q, %q) error = %v, want one with %q", tc.profile, tc.node, err, tc.wantErr)
			}
		})
	}
}

func TestDevices(t *testing.T) {
	gpus := []GPU{{Index: 0, UUID: "GPU-a", NUMA: 0}, {Index: 1, UUID: "GPU-b", NUMA: 1}}
	numa := func(id int64) *pluginapi.TopologyInfo {
		return &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: id}}}
	}
	cases := []struct {
		name string
		numa bool
		want []*pluginapi.Device
	}{
		{
			name: "with NUMA",
			numa: true,
			want: []*pluginapi.Device{
				{ID: "GPU-a", Health: pluginapi.Healthy, Topology: numa(0)},
				{ID: "GPU-b", Health: pluginapi.Healthy, Topology: numa(1)},
			},
		},
		{
			name: "without NUMA",
			want: []*pluginapi.Device{
				{ID: "GPU-a", Health: pluginapi.Healthy},
				{ID: "GPU-b", Health: pluginapi.Healthy},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Devices(gpus, tc.numa), ignoreProtoState); diff != "" {
				t.Errorf("Devices (-want +got):\n%s", diff)
			}
		})
	}
}

var testGPUs = []GPU{{0, "GPU-0", 0}, {1, "GPU-1", 0}, {2, "GPU-2", 1}, {3, "GPU-3", 1}}

func TestAllocate(t *testing.T) {
	env := func(v string) *pluginapi.ContainerAllocateResponse {
		return &pluginapi.ContainerAllocateResponse{Envs: map[string]string{EnvVisibleDevices: v}}
	}
	containers := func(ids ...[]string) *pluginapi.AllocateRequest {
		req := &pluginapi.AllocateRequest{}
		for _, c := range ids {
			req.ContainerRequests = append(req.ContainerRequests, &pluginapi.ContainerAllocateRequest{DevicesIds: c})
		}
		return req
	}
	cases := []struct {
		name     string
		req      *pluginapi.AllocateRequest
		want     *pluginapi.AllocateResponse
		wantCode codes.Code
	}{
		{
			name: "one GPU",
			req:  containers([]string{"GPU-2"}),
			want: &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{env("GPU-2")}},
		},
		{
			name: "GPUs in index order",
			req:  containers([]string{"GPU-3", "GPU-0", "GPU-1"}),
			want: &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{env("GPU-0,GPU-1,GPU-3")}},
		},
		{
			name: "one answer per container",
			req:  containers([]string{"GPU-1"}, []string{"GPU-0"}),
			want: &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{env("GPU-1"), env("GPU-0")}},
		},
		{
			name: "no containers",
			req:  containers(),
			want: &pluginapi.AllocateResponse{},
		},
		{
			name:     "unknown device",
			req:      containers([]string{"GPU-0", "GPU-9"}),
			wantCode: codes.InvalidArgument,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newIndexOf(testGPUs).Allocate(tc.req)
			if code := status.Code(err); code != tc.wantCode {
				t.Fatalf("Allocate error = %v, want code %v", err, tc.wantCode)
			}
			if diff := cmp.Diff(tc.want, got, ignoreProtoState); diff != "" {
				t.Errorf("Allocate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPreferred(t *testing.T) {
	cases := []struct {
		name        string
		available   []string
		mustInclude []string
		size        int32
		want        []string
		wantCode    codes.Code
	}{
		{name: "lowest index", available: []string{"GPU-3", "GPU-1", "GPU-2"}, size: 1, want: []string{"GPU-1"}},
		{name: "lowest indices", available: []string{"GPU-3", "GPU-1", "GPU-2", "GPU-0"}, size: 3, want: []string{"GPU-0", "GPU-1", "GPU-2"}},
		{name: "must include first", available: []string{"GPU-0", "GPU-1", "GPU-3"}, mustInclude: []string{"GPU-3"}, size: 2, want: []string{"GPU-3", "GPU-0"}},
		{name: "fewer available than asked", available: []string{"GPU-2"}, size: 2, want: []string{"GPU-2"}},
		{name: "unknown device", available: []string{"GPU-7"}, size: 1, wantCode: codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: tc.available, MustIncludeDeviceIDs: tc.mustInclude, AllocationSize: tc.size,
			}}}
			got, err := newIndexOf(testGPUs).Preferred(req)
			if code := status.Code(err); code != tc.wantCode {
				t.Fatalf("Preferred error = %v, want code %v", err, tc.wantCode)
			}
			if err != nil {
				return
			}
			want := &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: tc.want}}}
			if diff := cmp.Diff(want, got, ignoreProtoState); diff != "" {
				t.Errorf("Preferred (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	want := []string{"--device-plugin-dir=/run/kubelet/device-plugins", "--node-name=node-a", "--nvml=mock:h100-8"}
	if diff := cmp.Diff(want, Args("/run/kubelet/device-plugins", "node-a", "h100-8")); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
	want = []string{"--node-name=node-a", "--nvml=mock:h100-8", "--pod-resources-socket=/run/kubelet/pod-resources/kubelet.sock"}
	if diff := cmp.Diff(want, NodeAgentArgs("node-a", "h100-8", "/run/kubelet/pod-resources/kubelet.sock")); diff != "" {
		t.Errorf("NodeAgentArgs (-want +got):\n%s", diff)
	}
}
