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

package gpuinfo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
)

func open(t *testing.T, profile string) (*gpuinfo.Reader, *nvmlmock.Server) {
	t.Helper()
	srv, err := nvmlmock.New(profile, nvmlmock.Options{Seed: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := gpuinfo.Open(srv, gpuinfo.Options{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, srv
}

// linkSummary counts the pairs of each link type, with their NVLink count and bandwidth.
type linkKind struct {
	Type          convoy.LinkType
	NVLinks       int32
	BandwidthGBps int32
}

func summarize(links []convoy.GPULink) map[linkKind]int {
	m := map[linkKind]int{}
	for _, l := range links {
		m[linkKind{l.Type, l.NVLinks, l.BandwidthGBps}]++
	}
	return m
}

func TestOpenProfiles(t *testing.T) {
	cases := map[string]struct {
		product, arch, cc, cuda, mig string
		memoryMiB                    int64
		numa                         []int32
		links                        map[linkKind]int
		nvlinksPerGPU                int
		domains                      []string
	}{
		nvmlmock.ProfileA100x8: {
			product: "NVIDIA A100-SXM4-80GB", arch: "Ampere", cc: "8.0", cuda: "12.4", mig: "Disabled",
			memoryMiB:     81920,
			numa:          []int32{0, 0, 0, 0, 1, 1, 1, 1},
			links:         map[linkKind]int{{convoy.LinkNVLink, 12, 600}: 28},
			nvlinksPerGPU: 12,
			domains:       repeat("node-a/nvlink-0", 8),
		},
		nvmlmock.ProfileH100x8: {
			product: "NVIDIA H100 80GB HBM3", arch: "Hopper", cc: "9.0", cuda: "12.4", mig: "Disabled",
			memoryMiB:     81559,
			numa:          []int32{0, 0, 0, 0, 1, 1, 1, 1},
			links:         map[linkKind]int{{convoy.LinkNVLink, 18, 900}: 28},
			nvlinksPerGPU: 18,
			domains:       repeat("node-a/nvlink-0", 8),
		},
		nvmlmock.ProfilePCIe4: {
			product: "NVIDIA L40S", arch: "Ada Lovelace", cc: "8.9", cuda: "12.4", mig: "",
			memoryMiB: 46068,
			numa:      []int32{0, 0, 1, 1},
			links:     map[linkKind]int{{Type: convoy.LinkPIX}: 2, {Type: convoy.LinkSYS}: 4},
			domains:   repeat("", 4),
		},
		nvmlmock.ProfileNVLinkPairs8: {
			product: "NVIDIA H100 NVL", arch: "Hopper", cc: "9.0", cuda: "12.4", mig: "Disabled",
			memoryMiB: 95830,
			numa:      []int32{0, 0, 0, 0, 1, 1, 1, 1},
			links: map[linkKind]int{
				{convoy.LinkNVLink, 12, 600}: 4,
				{Type: convoy.LinkNODE}:      8,
				{Type: convoy.LinkSYS}:       16,
			},
			nvlinksPerGPU: 12,
			domains: []string{"node-a/nvlink-0", "node-a/nvlink-0", "node-a/nvlink-1", "node-a/nvlink-1",
				"node-a/nvlink-2", "node-a/nvlink-2", "node-a/nvlink-3", "node-a/nvlink-3"},
		},
		nvmlmock.ProfileGB200x4: {
			product: "NVIDIA GB200", arch: "Blackwell", cc: "10.0", cuda: "12.8", mig: "Disabled",
			memoryMiB:     189471,
			numa:          []int32{0, 0, 1, 1},
			links:         map[linkKind]int{{convoy.LinkNVLink, 18, 1800}: 6},
			nvlinksPerGPU: 18,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, _ := open(t, name)
			st := r.Static()
			if st.CUDAVersion != tc.cuda || st.DriverVersion == "" || st.NVMLVersion == "" {
				t.Errorf("versions: driver %q, CUDA %q, NVML %q; want CUDA %q and the others set", st.DriverVersion, st.CUDAVersion, st.NVMLVersion, tc.cuda)
			}
			var numa []int32
			var domains []string
			samples := r.Sample()
			for i, g := range st.GPUs {
				if g.Index != int32(i) || g.Product != tc.product || g.Architecture != tc.arch || g.ComputeCapability != tc.cc || g.MemoryMiB != tc.memoryMiB {
					t.Errorf("GPU %d: index %d, product %q, architecture %q, compute capability %q, memory %d MiB; want %q %q %q %d MiB",
						i, g.Index, g.Product, g.Architecture, g.ComputeCapability, g.MemoryMiB, tc.product, tc.arch, tc.cc, tc.memoryMiB)
				}
				if g.UUID == "" || g.PCIBusID == "" {
					t.Errorf("GPU %d has no UUID or PCI bus ID: %+v", i, g)
				}
				if len(g.NVLinks) != tc.nvlinksPerGPU {
					t.Errorf("GPU %d has %d NVLinks, want %d", i, len(g.NVLinks), tc.nvlinksPerGPU)
				}
				if g.NUMANode != nil {
					numa = append(numa, *g.NUMANode)
				}
				domains = append(domains, g.NVLinkDomain)
				if samples[i].MIGMode != tc.mig || samples[i].Health != convoy.GPUHealthy {
					t.Errorf("GPU %d sample: MIG %q, health %q; want %q and Healthy", i, samples[i].MIGMode, samples[i].Health, tc.mig)
				}
			}
			if diff := cmp.Diff(tc.numa, numa); diff != "" {
				t.Errorf("NUMA nodes (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.links, summarize(st.Links)); diff != "" {
				t.Errorf("link matrix (-want,+got):\n%s", diff)
			}
			if tc.domains != nil {
				if diff := cmp.Diff(tc.domains, domains); diff != "" {
					t.Errorf("NVLink domains (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestLinkMatrixPCIe(t *testing.T) {
	r, _ := open(t, nvmlmock.ProfilePCIe4)
	want := []convoy.GPULink{
		{A: 0, B: 1, Type: convoy.LinkPIX},
		{A: 0, B: 2, Type: convoy.LinkSYS},
		{A: 0, B: 3, Type: convoy.LinkSYS},
		{A: 1, B: 2, Type: convoy.LinkSYS},
		{A: 1, B: 3, Type: convoy.LinkSYS},
		{A: 2, B: 3, Type: convoy.LinkPIX},
	}
	if diff := cmp.Diff(want, r.Static().Links); diff != "" {
		t.Errorf("link matrix (-want,+got):\n%s", diff)
	}
}

func TestNVLinkPeers(t *testing.T) {
	r, _ := open(t, nvmlmock.ProfileNVLinkPairs8)
	gpus := r.Static().GPUs
	for _, l := range gpus[2].NVLinks {
		if !l.Active || l.PeerIndex == nil || *l.PeerIndex != 3 || l.PeerPCIBusID != gpus[3].PCIBusID {
			t.Fatalf("GPU 2 link %d: %+v; want an active link to GPU 3 (%s)", l.Link, l, gpus[3].PCIBusID)
		}
	}
	r, _ = open(t, nvmlmock.ProfileH100x8)
	for _, l := range r.Static().GPUs[0].NVLinks {
		if !l.Active || l.PeerIndex != nil || l.PeerPCIBusID == "" {
			t.Fatalf("GPU 0 link %d: %+v; want an active link to an NVSwitch (no peer GPU index)", l.Link, l)
		}
	}
}

func TestFabricClique(t *testing.T) {
	domains := map[string]string{}
	for _, node := range []string{"tray-1", "tray-2", "tray-3"} {
		cluster := "rack-a"
		if node == "tray-3" {
			cluster = "rack-b"
		}
		srv, err := nvmlmock.New(nvmlmock.ProfileGB200x4, nvmlmock.Options{Seed: node, FabricCluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		r, err := gpuinfo.Open(srv, gpuinfo.Options{NodeName: node})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range r.Static().GPUs {
			if g.NVLinkDomain != r.Static().GPUs[0].NVLinkDomain {
				t.Errorf("%s: GPU %d in domain %q, GPU 0 in %q", node, g.Index, g.NVLinkDomain, r.Static().GPUs[0].NVLinkDomain)
			}
		}
		domains[node] = r.Static().GPUs[0].NVLinkDomain
		r.Close()
	}
	if domains["tray-1"] != domains["tray-2"] || domains["tray-1"] == domains["tray-3"] || domains["tray-1"] == "" {
		t.Errorf("fabric domains %v: want tray-1 and tray-2 (same rack) to share one, tray-3 another", domains)
	}
}

func TestNoDriver(t *testing.T) {
	// The real library: this test machine has no NVIDIA driver, as a CPU node would not.
	_, err := gpuinfo.Open(nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")), gpuinfo.Options{})
	var ie *gpuinfo.InitError
	if !errors.As(err, &ie) || ie.Reason() != convoy.GPUNodeReasonLibraryNotFound {
		t.Fatalf("Open without a driver: %v; want an InitError with reason %s", err, convoy.GPUNodeReasonLibraryNotFound)
	}
}

func TestNoDevices(t *testing.T) {
	srv, _ := nvmlmock.New(nvmlmock.ProfilePCIe4, nvmlmock.Options{})
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
	_, err := gpuinfo.Open(srv, gpuinfo.Options{})
	var ie *gpuinfo.InitError
	if !errors.As(err, &ie) || ie.Reason() != convoy.GPUNodeReasonNoDevices {
		t.Fatalf("Open with no GPUs: %v; want an InitError with reason %s", err, convoy.GPUNodeReasonNoDevices)
	}
}

func TestDeviceWithoutHandle(t *testing.T) {
	srv, _ := nvmlmock.New(nvmlmock.ProfileH100x8, nvmlmock.Options{})
	byIndex := srv.DeviceGetHandleByIndexFunc
	srv.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 5 {
			return nil, nvml.ERROR_UNKNOWN
		}
		return byIndex(i)
	}
	r, err := gpuinfo.Open(srv, gpuinfo.Options{NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	samples := r.Sample()
	if samples[5].Health != convoy.GPUUnhealthy || samples[5].Reason == "" {
		t.Errorf("GPU 5 without a handle: %+v; want Unhealthy with a reason", samples[5])
	}
	if samples[4].Health != convoy.GPUHealthy {
		t.Errorf("GPU 4: %+v; want Healthy", samples[4])
	}
	for _, l := range r.Static().Links {
		if (l.A == 5 || l.B == 5) && l.Type != convoy.LinkSYS {
			t.Errorf("link %d-%d of the GPU without a handle is %s; want SYS (unknown)", l.A, l.B, l.Type)
		}
	}
}

func TestHealthTransitions(t *testing.T) {
	cases := map[string]struct {
		profile string
		fault   string
		reason  string
	}{
		"uncorrectable ECC": {nvmlmock.ProfileA100x8, "ecc", "1 uncorrectable ECC errors since the last GPU reset"},
		"row remap failure": {nvmlmock.ProfileH100x8, "row-remap", "Row remapping failed: the GPU needs replacing"},
		"lost":              {nvmlmock.ProfilePCIe4, "lost", "GPU is lost: NVML returns ERROR_GPU_IS_LOST (fallen off the bus?)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, srv := open(t, tc.profile)
			f, err := nvmlmock.ParseFault(tc.fault)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Inject(1, f); err != nil {
				t.Fatal(err)
			}
			got := r.Sample()
			if got[1].Health != convoy.GPUUnhealthy || got[1].Reason != tc.reason {
				t.Errorf("after the fault: %s (%q); want Unhealthy (%q)", got[1].Health, got[1].Reason, tc.reason)
			}
			if got[0].Health != convoy.GPUHealthy {
				t.Errorf("GPU 0 turned %s with a fault on GPU 1", got[0].Health)
			}
			if err := srv.Clear(1); err != nil {
				t.Fatal(err)
			}
			if got := r.Sample(); got[1].Health != convoy.GPUHealthy || got[1].Reason != "" {
				t.Errorf("after clearing: %s (%q); want Healthy", got[1].Health, got[1].Reason)
			}
		})
	}
}

func TestUnsupportedFault(t *testing.T) {
	_, srv := open(t, nvmlmock.ProfilePCIe4)
	if err := srv.Inject(0, nvmlmock.Fault{Kind: nvmlmock.FaultRowRemap}); err == nil {
		t.Error("row-remap fault on an L40S without row remapping: no error")
	}
}

func TestWatchEvents(t *testing.T) {
	r, srv := open(t, nvmlmock.ProfileH100x8)
	w, err := r.Watch()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	events := make(chan gpuinfo.Event, 8)
	done := make(chan error)
	go func() { done <- w.Run(ctx, func(e gpuinfo.Event) { events <- e }) }()

	_ = srv.Inject(3, nvmlmock.Fault{Kind: nvmlmock.FaultXID, XID: 79})
	want := gpuinfo.Event{Index: 3, Critical: true, XID: 79, Reason: "XID 79: GPU has fallen off the bus"}
	if diff := cmp.Diff(want, next(t, events)); diff != "" {
		t.Errorf("XID event (-want,+got):\n%s", diff)
	}
	_ = srv.Inject(2, nvmlmock.Fault{Kind: nvmlmock.FaultXID, XID: 13})
	if got := next(t, events); got.Critical || got.Index != 2 {
		t.Errorf("XID 13 (an application error): %+v; want a non-critical event for GPU 2", got)
	}
	_ = srv.Inject(6, nvmlmock.Fault{Kind: nvmlmock.FaultECC})
	if got := next(t, events); got.Critical || got.Index != 6 {
		t.Errorf("ECC event: %+v; want a non-critical event for GPU 6 (the poll decides)", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func next(t *testing.T, events <-chan gpuinfo.Event) gpuinfo.Event {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return gpuinfo.Event{}
}
