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

package dradriver

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/test/simdeviceplugin"
)

// The devices are NVIDIA's driver's for the profile's GPUs, with the UUIDs the simulated device
// plugin advertises for the same node.
func TestMockGPUsArePublishedAsNVIDIAsDriverPublishesThem(t *testing.T) {
	gpus, err := MockGPUs(nvmlmock.ProfilePCIe4, "real-1")
	if err != nil {
		t.Fatal(err)
	}
	plugin, err := simdeviceplugin.GPUs(nvmlmock.ProfilePCIe4, "real-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 4 {
		t.Fatalf("%d GPUs, want the profile's 4", len(gpus))
	}
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	num := func(n int64) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{IntValue: &n} }
	ver := func(v string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{VersionValue: &v} }
	want := resourcev1.Device{
		Name: "gpu-2",
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type":                            str("gpu"),
			"uuid":                            str(plugin[2].UUID),
			"productName":                     str("NVIDIA L40S"),
			"architecture":                    str("Ada Lovelace"),
			"cudaComputeCapability":           ver("8.9.0"),
			"driverVersion":                   ver("550.90.7"),
			"cudaDriverVersion":               ver("12.4.0"),
			"index":                           num(2),
			"minor":                           num(2),
			"numaNode":                        num(1),
			"resource.kubernetes.io/pciBusID": str("0000:b1:00.0"),
		},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resourceQuantity(t, "46068Mi")}},
	}
	if diff := cmp.Diff(want, gpus[2].Device); diff != "" {
		t.Errorf("GPU 2 (-want,+got):\n%s", diff)
	}
	for i, g := range gpus {
		if g.UUID != plugin[i].UUID {
			t.Errorf("GPU %d has UUID %s; the device plugin advertises %s for it", i, g.UUID, plugin[i].UUID)
		}
	}
}

func TestSemver(t *testing.T) {
	cases := map[string]struct {
		in, want string
		ok       bool
	}{
		"driver":       {"550.90.07", "550.90.7", true},
		"two parts":    {"8.9", "8.9.0", true},
		"empty":        {"", "", false},
		"four parts":   {"1.2.3.4", "", false},
		"not a number": {"12.x", "", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got, ok := semver(tc.in); got != tc.want || ok != tc.ok {
				t.Errorf("semver(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	gpus, err := MockGPUs(nvmlmock.ProfilePCIe4, "real-1")
	if err != nil {
		t.Fatal(err)
	}
	result := func(request, pool, device string) resourcev1.DeviceRequestAllocationResult {
		return resourcev1.DeviceRequestAllocationResult{Request: request, Driver: DriverName, Pool: pool, Device: device}
	}
	claim := func(results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-worker-0-gpu", UID: "uid-1"},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: results},
			}},
		}
	}
	other := result("gpus", "real-1", "gpu-0")
	other.Driver = "net.example.com"
	cases := map[string]struct {
		claim   *resourcev1.ResourceClaim
		want    *Prepared
		wantErr string
	}{
		"two GPUs of one request, in index order": {
			claim: claim(result("gpus", "real-1", "gpu-3"), result("gpus", "real-1", "gpu-1"), other),
			want: &Prepared{
				Spec: cdispec.Spec{Version: "0.3.0", Kind: CDIKind, Devices: []cdispec.Device{{
					Name:           "uid-1-gpus",
					ContainerEdits: cdispec.ContainerEdits{Env: []string{EnvVisibleDevices + "=" + gpus[1].UUID + "," + gpus[3].UUID}},
				}}},
				Devices: []kubeletplugin.Device{
					{Requests: []string{"gpus"}, PoolName: "real-1", DeviceName: "gpu-3", CDIDeviceIDs: []string{CDIKind + "=uid-1-gpus"}},
					{Requests: []string{"gpus"}, PoolName: "real-1", DeviceName: "gpu-1"},
				},
			},
		},
		"a request each": {
			claim: claim(result("a", "real-1", "gpu-0"), result("b/fast", "real-1", "gpu-2")),
			want: &Prepared{
				Spec: cdispec.Spec{Version: "0.3.0", Kind: CDIKind, Devices: []cdispec.Device{
					{Name: "uid-1-a", ContainerEdits: cdispec.ContainerEdits{Env: []string{EnvVisibleDevices + "=" + gpus[0].UUID}}},
					{Name: "uid-1-b_fast", ContainerEdits: cdispec.ContainerEdits{Env: []string{EnvVisibleDevices + "=" + gpus[2].UUID}}},
				}},
				Devices: []kubeletplugin.Device{
					{Requests: []string{"a"}, PoolName: "real-1", DeviceName: "gpu-0", CDIDeviceIDs: []string{CDIKind + "=uid-1-a"}},
					{Requests: []string{"b/fast"}, PoolName: "real-1", DeviceName: "gpu-2", CDIDeviceIDs: []string{CDIKind + "=uid-1-b_fast"}},
				},
			},
		},
		"another node's devices are not this driver's": {
			claim: claim(result("gpus", "real-2", "gpu-0")),
			want:  &Prepared{Spec: cdispec.Spec{Version: "0.3.0", Kind: CDIKind}},
		},
		"no such GPU":   {claim: claim(result("gpus", "real-1", "gpu-9")), wantErr: "ResourceClaim ns/job-worker-0-gpu: device gpu-9 of pool real-1 is no GPU of this node"},
		"not allocated": {claim: &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}, wantErr: "ResourceClaim ns/c is not allocated"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Prepare(tc.claim, "real-1", gpus)
			if err != nil || tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// A prepared claim's spec is in the CDI directory until the claim is unprepared, twice or not.
func TestSpecFileLifecycle(t *testing.T) {
	dir := t.TempDir()
	spec := &cdispec.Spec{Version: "0.3.0", Kind: CDIKind, Devices: []cdispec.Device{{Name: "uid-1-gpus",
		ContainerEdits: cdispec.ContainerEdits{Env: []string{EnvVisibleDevices + "=GPU-a"}}}}}
	if err := WriteSpec(dir, "uid-1", spec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(SpecPath(dir, "uid-1"))
	if err != nil {
		t.Fatal(err)
	}
	var got cdispec.Spec
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*spec, got); diff != "" {
		t.Errorf("the spec on disk (-want,+got):\n%s", diff)
	}
	for range 2 {
		if err := RemoveSpec(dir, "uid-1"); err != nil {
			t.Fatal(err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the CDI directory holds %v after unprepare", entries)
	}
}

func resourceQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
