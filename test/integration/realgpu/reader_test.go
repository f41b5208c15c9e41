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
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
)

// TestReaderMatchesNvidiaSMI reads the machine's GPUs as the agent does and checks each field
// against nvidia-smi, then checks that the driver accepts the agent's NVML event registration:
// without it XID errors would reach the agent only as the level-based checks of its next poll.
func TestReaderMatchesNvidiaSMI(t *testing.T) {
	needGPU(t)
	want := nvidiaSMI(t)
	r, err := gpuinfo.Open(nvml.New(), gpuinfo.Options{NodeName: "gpu-machine", SysfsRoot: "/sys"})
	if err != nil {
		t.Fatalf("opening NVML: %v", err)
	}
	defer r.Close()
	st := r.Static()
	t.Logf("NVML %s, driver %s, CUDA %s, %d GPUs", st.NVMLVersion, st.DriverVersion, st.CUDAVersion, len(st.GPUs))

	samples := r.Sample()
	gpus := slices.Clone(st.GPUs)
	for i := range gpus {
		gpus[i].MIGMode = samples[i].MIGMode
	}
	checkGPUs(t, gpus, want)
	if st.DriverVersion != want[0].DriverVersion {
		t.Errorf("driver version %q, nvidia-smi says %q", st.DriverVersion, want[0].DriverVersion)
	}
	if cuda := smiCUDAVersion(t); st.CUDAVersion != cuda {
		t.Errorf("CUDA version %q, nvidia-smi says %q", st.CUDAVersion, cuda)
	}
	checkLinks(t, st.Links, smiTopology(t, len(want)))

	for i, s := range samples {
		if s.Health != convoy.GPUHealthy {
			t.Errorf("GPU %d: health %s (%s) on a machine whose GPUs nvidia-smi lists", i, s.Health, s.Reason)
		}
		if s.MemoryUsedMiB == nil || *s.MemoryUsedMiB > st.GPUs[i].MemoryMiB {
			t.Errorf("GPU %d: memory in use %s MiB of %d", i, ptrString(s.MemoryUsedMiB), st.GPUs[i].MemoryMiB)
		}
		if s.Utilization == nil {
			t.Errorf("GPU %d: NVML gives no utilization", i)
		}
	}

	w, err := r.Watch()
	if err != nil {
		t.Fatalf("NVML event registration: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var events []gpuinfo.Event
	if err := w.Run(ctx, func(e gpuinfo.Event) { events = append(events, e) }); err != nil {
		t.Errorf("waiting for NVML events: %v", err)
	}
	for _, e := range events {
		if e.Critical {
			t.Errorf("critical NVML event on an idle machine: GPU %d: %s", e.Index, e.Reason)
		}
	}
}

// checkGPUs compares what the agent read with what nvidia-smi lists.
func checkGPUs(t *testing.T, got []convoy.GPUDevice, want []smiGPU) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d GPUs, nvidia-smi lists %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if int(g.Index) != w.Index || g.UUID != w.UUID || g.Product != w.Name || g.MemoryMiB != w.MemoryMiB ||
			!strings.EqualFold(g.PCIBusID, w.BusID) || g.ComputeCapability != w.ComputeCapability || g.MIGMode != w.MIGMode {
			t.Errorf("GPU %d: index %d, UUID %s, product %q, %d MiB, bus %s, compute capability %s, MIG %q;\n nvidia-smi: %+v",
				i, g.Index, g.UUID, g.Product, g.MemoryMiB, g.PCIBusID, g.ComputeCapability, g.MIGMode, w)
		}
		if g.Architecture == "" || strings.HasPrefix(w.ComputeCapability, "9.") && g.Architecture != "Hopper" {
			t.Errorf("GPU %d: architecture %q for compute capability %s", i, g.Architecture, w.ComputeCapability)
		}
		switch numa := sysfsNUMANode(t, w.BusID); {
		case numa != nil && (g.NUMANode == nil || *g.NUMANode != *numa):
			t.Errorf("GPU %d: NUMA node %s, sysfs says %d", i, ptrString(g.NUMANode), *numa)
		case numa == nil:
			t.Logf("GPU %d: sysfs gives no NUMA node; the agent says %s", i, ptrString(g.NUMANode))
		}
	}
}

// checkLinks compares the agent's link matrix with nvidia-smi's: the same type for each pair,
// and the same number of NVLinks where they are NVLinks.
func checkLinks(t *testing.T, got, want []convoy.GPULink) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d GPU pairs in the link matrix, nvidia-smi topo -m has %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.A != w.A || g.B != w.B || g.Type != w.Type || w.Type == convoy.LinkNVLink && g.NVLinks != w.NVLinks {
			t.Errorf("GPU%d-GPU%d: %s with %d NVLinks, nvidia-smi topo -m says %s with %d", g.A, g.B, g.Type, g.NVLinks, w.Type, w.NVLinks)
		}
	}
}
