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
	"os/exec"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
)

// BenchmarkReadGPUs measures, on the machine's real GPUs, what the agent reads at start (Open:
// identity, PCIe and NVLink topology) and on every poll (Sample: memory, utilization, MIG mode,
// uncorrectable ECC errors, row remapping), next to one nvidia-smi query of the same per-poll
// fields, the way a script or an exec-based exporter would read them.
func BenchmarkReadGPUs(b *testing.B) {
	needGPU(b)
	lib := nvml.New()
	b.Run("agent-open", func(b *testing.B) {
		for b.Loop() {
			r, err := gpuinfo.Open(lib, gpuinfo.Options{NodeName: nodeName, SysfsRoot: "/sys"})
			if err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
	})
	b.Run("agent-sample", func(b *testing.B) {
		r, err := gpuinfo.Open(lib, gpuinfo.Options{NodeName: nodeName, SysfsRoot: "/sys"})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		for b.Loop() {
			r.Sample()
		}
	})
	b.Run("nvidia-smi-query", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command("nvidia-smi", "--format=csv,noheader",
				"--query-gpu=memory.used,utilization.gpu,mig.mode.current,ecc.errors.uncorrected.volatile.total,remapped_rows.pending,remapped_rows.failure").CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
}
