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

// Package realgpu tests the node agent on the machine it runs on, over the NVIDIA driver's real
// NVML library, against a real kube-apiserver: what it reads must match what nvidia-smi says, and
// a busy GPU must show in its metrics without costing API writes.
//
// It needs an NVIDIA GPU and driver, so it runs only with CONVOY_TEST_REAL_NVML=1 (`make
// test-gpu`); elsewhere, CI included, every test skips and no control plane starts. The control
// plane is etcd and kube-apiserver alone (no kwok, no controller manager), and the agent runs as
// the convoy-node-agent binary from bin/ with the admin's kubeconfig: the DaemonSet's RBAC and
// admission policies are tested with mock NVML in test/integration/nodeagent.
package realgpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
)

// EnvRealNVML, set to 1, runs the tests.
const EnvRealNVML = "CONVOY_TEST_REAL_NVML"

func TestMain(m *testing.M) {
	if os.Getenv(EnvRealNVML) != "1" {
		// Every test skips (needGPU): no control plane is needed.
		os.Exit(m.Run())
	}
	ctrllog.SetLogger(klog.NewKlogr())
	framework.Main(m, framework.Options{
		AddToScheme:              []func(*runtime.Scheme) error{convoy.AddToScheme},
		WithoutKwok:              true,
		WithoutControllerManager: true,
	})
}

func needGPU(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvRealNVML) != "1" {
		t.Skipf("needs an NVIDIA GPU and driver: run with %s=1 (make test-gpu) on a GPU machine", EnvRealNVML)
	}
}

// smiGPU is one GPU as nvidia-smi reports it.
type smiGPU struct {
	Index             int
	UUID, Name        string
	MemoryMiB         int64
	BusID             string
	ComputeCapability string
	DriverVersion     string
	// MIGMode is Enabled or Disabled, empty where nvidia-smi says [N/A].
	MIGMode string
}

var smiFields = []string{"index", "uuid", "name", "memory.total", "pci.bus_id", "compute_cap", "driver_version", "mig.mode.current"}

// nvidiaSMI lists the machine's GPUs with nvidia-smi, the driver's own tool: the reference the
// agent is checked against.
func nvidiaSMI(t *testing.T) []smiGPU {
	t.Helper()
	out := run(t, "nvidia-smi", "--query-gpu="+strings.Join(smiFields, ","), "--format=csv,noheader,nounits")
	var gpus []smiGPU
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Split(line, ", ")
		if len(f) != len(smiFields) {
			t.Fatalf("nvidia-smi line %q: want %d fields %v", line, len(smiFields), smiFields)
		}
		g := smiGPU{UUID: f[1], Name: f[2], BusID: f[4], ComputeCapability: f[5], DriverVersion: f[6]}
		var err error
		if g.Index, err = strconv.Atoi(f[0]); err != nil {
			t.Fatalf("nvidia-smi index %q: %v", f[0], err)
		}
		if g.MemoryMiB, err = strconv.ParseInt(f[3], 10, 64); err != nil {
			t.Fatalf("nvidia-smi memory.total %q: %v", f[3], err)
		}
		if f[7] == "Enabled" || f[7] == "Disabled" {
			g.MIGMode = f[7]
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		t.Fatal("nvidia-smi lists no GPU")
	}
	return gpus
}

var cudaVersionRE = regexp.MustCompile(`CUDA Version:\s*([0-9]+\.[0-9]+)`)

// smiCUDAVersion is the CUDA version nvidia-smi's banner gives for the driver.
func smiCUDAVersion(t *testing.T) string {
	t.Helper()
	m := cudaVersionRE.FindSubmatch(run(t, "nvidia-smi"))
	if m == nil {
		t.Fatal("nvidia-smi's banner gives no CUDA version")
	}
	return string(m[1])
}

// smiTopology is `nvidia-smi topo -m` as GPU links, one per pair a < b; nil for one GPU.
func smiTopology(t *testing.T, n int) []convoy.GPULink {
	t.Helper()
	if n < 2 {
		return nil
	}
	matrix := map[int][]string{}
	sc := bufio.NewScanner(bytes.NewReader(run(t, "nvidia-smi", "topo", "-m")))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < n+1 || !strings.HasPrefix(f[0], "GPU") {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(f[0], "GPU"))
		if err != nil || i >= n {
			continue // the header row, or a NIC
		}
		matrix[i] = f[1 : n+1]
	}
	var links []convoy.GPULink
	for a := range n {
		for b := a + 1; b < n; b++ {
			if len(matrix[a]) != n {
				t.Fatalf("nvidia-smi topo -m has no row for GPU%d", a)
			}
			cell := matrix[a][b]
			l := convoy.GPULink{A: int32(a), B: int32(b), Type: convoy.LinkType(cell)}
			if k, ok := strings.CutPrefix(cell, "NV"); ok {
				nv, err := strconv.Atoi(k)
				if err != nil {
					t.Fatalf("nvidia-smi topo -m cell %q for GPU%d-GPU%d", cell, a, b)
				}
				l.Type, l.NVLinks = convoy.LinkNVLink, int32(nv)
			}
			links = append(links, l)
		}
	}
	return links
}

// sysfsNUMANode is the NUMA node the kernel gives the GPU's PCI function; nil where it says -1
// (one NUMA node, or a virtual machine that does not tell).
func sysfsNUMANode(t *testing.T, busID string) *int32 {
	t.Helper()
	id := strings.ToLower(busID)
	if domain, rest, ok := strings.Cut(id, ":"); ok && len(domain) > 4 {
		id = domain[len(domain)-4:] + ":" + rest
	}
	data, err := os.ReadFile("/sys/bus/pci/devices/" + id + "/numa_node")
	if err != nil {
		t.Logf("no NUMA node in sysfs for %s: %v", busID, err)
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 0 {
		return nil
	}
	v := int32(n)
	return &v
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	return out
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}
