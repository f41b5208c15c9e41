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
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
)

// podResources serves the kubelet's PodResources List with fixed answers.
type podResources struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	pods []*podresourcesv1.PodResources
}

func (s *podResources) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: s.pods}, nil
}

// TestNodeAgentReadsThePluginsDevices checks the other half of the contract: the device IDs the
// plugin hands the kubelet, reported back by the kubelet's PodResources API, are GPUs of the node
// agent's mock NVML for the same node, so its GPUNode shows them held.
func TestNodeAgentReadsThePluginsDevices(t *testing.T) {
	const node, profile = "node-a", nvmlmock.ProfilePCIe4
	gpus, err := GPUs(profile, node)
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet allocates GPUs 1 and 3 to one container of team-a/trainer.
	ids := []string{gpus[3].UUID, gpus[1].UUID}
	if _, err := newIndexOf(gpus).Allocate(&pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}}); err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, &podResources{pods: []*podresourcesv1.PodResources{{
		Namespace: "team-a", Name: "trainer",
		Containers: []*podresourcesv1.ContainerResources{{
			Name:    "worker",
			Devices: []*podresourcesv1.ContainerDevices{{ResourceName: DefaultResourceName, DeviceIds: ids}},
		}},
	}}})
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	fleet, err := nvmlmock.NewFleet(profile)
	if err != nil {
		t.Fatal(err)
	}
	gpuNode := nodeagent.Snapshot(context.Background(), fleet.Server(node, nvmlmock.Options{}), node, "", socket)
	got := map[int]string{}
	for _, g := range gpuNode.Status.GPUs {
		got[int(g.Index)] = g.AllocatedTo
	}
	want := map[int]string{0: "", 1: "team-a/trainer", 2: "", 3: "team-a/trainer"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocatedTo by GPU index (-want +got):\n%s", diff)
	}
	if gpuNode.Status.Free != 2 {
		t.Errorf("free = %d, want 2", gpuNode.Status.Free)
	}
}
