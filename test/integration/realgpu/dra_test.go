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

package realgpu

import (
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/dradriver"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
)

// TestDRADevicesOfTheMachinesGPUs turns the machine's GPUs, read through real NVML as the node
// agent reads them, into the DRA devices Convoy's driver publishes for simulated GPUs, and checks
// each attribute against nvidia-smi in the form NVIDIA's DRA driver publishes it: what the mock
// profiles feed the driver in the real-node tier has the shape of a real machine's. A claim of
// the first GPU prepares to a CDI device that shows the container that GPU's UUID.
func TestDRADevicesOfTheMachinesGPUs(t *testing.T) {
	needGPU(t)
	want := nvidiaSMI(t)
	r, err := gpuinfo.Open(nvml.New(), gpuinfo.Options{NodeName: "gpu-machine", SysfsRoot: "/sys"})
	if err != nil {
		t.Fatalf("opening NVML: %v", err)
	}
	defer r.Close()
	gpus, err := dradriver.Devices(r.Static())
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != len(want) {
		t.Fatalf("%d devices, nvidia-smi lists %d GPUs", len(gpus), len(want))
	}
	for i, g := range gpus {
		w := want[i]
		d := g.Device
		t.Logf("%s: %s", d.Name, describeDevice(d))
		str := func(name resourcev1.QualifiedName) string {
			if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
				return *a.StringValue
			}
			return ""
		}
		version := func(name resourcev1.QualifiedName) string {
			if a, ok := d.Attributes[name]; ok && a.VersionValue != nil {
				return *a.VersionValue
			}
			return ""
		}
		checks := []struct{ what, got, want string }{
			{"name", d.Name, "gpu-" + strconv.Itoa(w.Index)},
			{"uuid", str("uuid"), w.UUID},
			{"productName", str("productName"), w.Name},
			{"type", str("type"), "gpu"},
			{"cudaComputeCapability", version("cudaComputeCapability"), semverOf(w.ComputeCapability)},
			{"driverVersion", version("driverVersion"), semverOf(w.DriverVersion)},
			{string(deviceattribute.StandardDeviceAttributePCIBusID), str(deviceattribute.StandardDeviceAttributePCIBusID), gpuinfo.NormBusID(w.BusID)},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: %s %q, nvidia-smi says %q", d.Name, c.what, c.got, c.want)
			}
		}
		if str("architecture") == "" {
			t.Errorf("%s: no architecture attribute", d.Name)
		}
		if got, want := d.Capacity["memory"].Value, *resource.NewQuantity(w.MemoryMiB<<20, resource.BinarySI); got.Cmp(want) != 0 {
			t.Errorf("%s: memory capacity %s, nvidia-smi says %s", d.Name, got.String(), want.String())
		}
	}

	claim := &resourcev1.ResourceClaim{}
	claim.Namespace, claim.Name, claim.UID = "team-a", "llm-worker-0-gpu", types.UID("claim-uid")
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: dradriver.DriverName, Pool: "gpu-machine", Device: gpus[0].Device.Name}},
	}}
	p, err := dradriver.Prepare(claim, "gpu-machine", gpus)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Devices) != 1 || strings.Join(p.Spec.Devices[0].ContainerEdits.Env, " ") != dradriver.EnvVisibleDevices+"="+want[0].UUID {
		t.Errorf("the prepared claim's CDI devices %+v, want one that sets %s=%s", p.Spec.Devices, dradriver.EnvVisibleDevices, want[0].UUID)
	}
}

// semverOf is nvidia-smi's version (570.133.20, 9.0) as NVIDIA's DRA driver publishes it: three
// numeric parts.
func semverOf(v string) string {
	parts := strings.Split(v, ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	for i, p := range parts {
		if trimmed := strings.TrimLeft(p, "0"); trimmed != "" {
			parts[i] = trimmed
		} else {
			parts[i] = "0"
		}
	}
	return strings.Join(parts, ".")
}

func describeDevice(d resourcev1.Device) string {
	var b strings.Builder
	for name, a := range d.Attributes {
		switch {
		case a.StringValue != nil:
			b.WriteString(string(name) + "=" + *a.StringValue + " ")
		case a.VersionValue != nil:
			b.WriteString(string(name) + "=" + *a.VersionValue + " ")
		case a.IntValue != nil:
			b.WriteString(string(name) + "=" + strconv.FormatInt(*a.IntValue, 10) + " ")
		}
	}
	m := d.Capacity["memory"].Value
	return b.String() + "memory=" + m.String()
}
