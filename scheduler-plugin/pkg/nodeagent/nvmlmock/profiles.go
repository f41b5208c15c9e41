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

package nvmlmock

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Profile is the hardware of one mocked GPU server: its GPUs, how they are wired and what the
// driver reports. Profiles are read-only once registered; every Server of a profile shares it.
type Profile struct {
	// Name is what --nvml=mock:<name> selects.
	Name string
	// Description says which real system the profile imitates.
	Description string

	Product           string
	Architecture      nvml.DeviceArchitecture
	ComputeCapability [2]int
	MemoryBytes       uint64
	// MIGCapable GPUs answer GetMigMode (disabled); the others return ERROR_NOT_SUPPORTED.
	MIGCapable bool
	// RowRemapping GPUs answer GetRemappedRows; the others return ERROR_NOT_SUPPORTED.
	RowRemapping bool

	DriverVersion     string
	NVMLVersion       string
	CUDADriverVersion int

	// BusIDs are the GPUs' PCI bus IDs, one per GPU; their count is the number of GPUs.
	BusIDs []string
	// NUMA is each GPU's NUMA node.
	NUMA []int
	// PCIe is the common-ancestor level of each pair of GPUs, as GetTopologyCommonAncestor reports it.
	PCIe [][]nvml.GpuTopologyLevel

	// NVLinkVersion is the NVLink generation; 0 when the GPUs have no NVLink.
	NVLinkVersion uint32
	// NVLinks lists, per GPU, the far end of each of its links.
	NVLinks [][]LinkEnd
	// SwitchBusIDs are the NVSwitches' PCI bus IDs, indexed by LinkEnd.Switch.
	SwitchBusIDs []string

	// Fabric GPUs report a completed GPU fabric registration (multi-node NVLink) whose cluster UUID
	// comes from Options.FabricCluster.
	Fabric bool
}

// LinkEnd is the far end of one NVLink: a GPU of the same server or an NVSwitch.
type LinkEnd struct {
	GPU    int // the peer GPU's index, or -1
	Switch int // the NVSwitch's index, or -1
}

// GPUs returns the number of GPUs.
func (p *Profile) GPUs() int { return len(p.BusIDs) }

var profiles = map[string]*Profile{}

// Register adds a profile, for tests that need hardware the built-in profiles do not describe.
func Register(p *Profile) error {
	if err := p.validate(); err != nil {
		return err
	}
	if _, ok := profiles[p.Name]; ok {
		return fmt.Errorf("mock NVML profile %q is already registered", p.Name)
	}
	profiles[p.Name] = p
	return nil
}

// Lookup returns the profile named name.
func Lookup(name string) (*Profile, error) {
	p, ok := profiles[name]
	if !ok {
		return nil, fmt.Errorf("unknown mock NVML profile %q; known: %s", name, strings.Join(Names(), ", "))
	}
	return p, nil
}

// Names lists the registered profiles, sorted.
func Names() []string {
	names := make([]string, 0, len(profiles))
	for name := range profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (p *Profile) validate() error {
	n := p.GPUs()
	switch {
	case p.Name == "":
		return fmt.Errorf("mock NVML profile has no name")
	case n == 0:
		return fmt.Errorf("mock NVML profile %s has no GPUs", p.Name)
	case len(p.NUMA) != n || len(p.PCIe) != n:
		return fmt.Errorf("mock NVML profile %s: NUMA and PCIe need one entry per GPU", p.Name)
	case p.NVLinks != nil && len(p.NVLinks) != n:
		return fmt.Errorf("mock NVML profile %s: NVLinks needs one entry per GPU", p.Name)
	}
	for a, links := range p.NVLinks {
		for _, end := range links {
			if end.GPU >= n || end.Switch >= len(p.SwitchBusIDs) || (end.GPU < 0) == (end.Switch < 0) {
				return fmt.Errorf("mock NVML profile %s: GPU %d has an invalid NVLink end %+v", p.Name, a, end)
			}
		}
	}
	return nil
}

// The built-in profiles.
const (
	ProfileA100x8       = "a100-8"
	ProfileH100x8       = "h100-8"
	ProfilePCIe4        = "pcie-4"
	ProfileNVLinkPairs8 = "nvlink-pairs-8"
	ProfileGB200x4      = "gb200-4"
)

func init() {
	for _, p := range []*Profile{a100x8(), h100x8(), pcie4(), nvlinkPairs8(), gb200x4()} {
		if err := Register(p); err != nil {
			panic(err)
		}
	}
}

// a100x8 is a DGX A100: eight SXM4 GPUs, each with 12 NVLink 3 links into six NVSwitches (two
// links per switch), so every pair talks over NVLink; two CPU sockets with four GPUs each.
func a100x8() *Profile {
	return &Profile{
		Name:              ProfileA100x8,
		Description:       "DGX A100: 8x A100-SXM4-80GB, NVSwitch (all-to-all NVLink 3), 2 NUMA nodes",
		Product:           "NVIDIA A100-SXM4-80GB",
		Architecture:      nvml.DEVICE_ARCH_AMPERE,
		ComputeCapability: [2]int{8, 0},
		MemoryBytes:       81920 << 20,
		MIGCapable:        true,
		RowRemapping:      true,
		DriverVersion:     "550.54.15",
		NVMLVersion:       "12.550.54.15",
		CUDADriverVersion: 12040,
		BusIDs:            busIDs(0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd),
		NUMA:              []int{0, 0, 0, 0, 1, 1, 1, 1},
		PCIe:              socketPCIe(8, 4, true),
		NVLinkVersion:     3,
		NVLinks:           switchLinks(8, []int{2, 2, 2, 2, 2, 2}),
		SwitchBusIDs:      busIDs(0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6),
	}
}

// h100x8 is a DGX H100: eight SXM5 GPUs, each with 18 NVLink 4 links into four NVSwitches
// (5, 4, 4 and 5 links), two CPU sockets.
func h100x8() *Profile {
	return &Profile{
		Name:              ProfileH100x8,
		Description:       "DGX H100: 8x H100 80GB HBM3, NVSwitch (all-to-all NVLink 4), 2 NUMA nodes",
		Product:           "NVIDIA H100 80GB HBM3",
		Architecture:      nvml.DEVICE_ARCH_HOPPER,
		ComputeCapability: [2]int{9, 0},
		MemoryBytes:       81559 << 20,
		MIGCapable:        true,
		RowRemapping:      true,
		DriverVersion:     "550.90.07",
		NVMLVersion:       "12.550.90.07",
		CUDADriverVersion: 12040,
		BusIDs:            busIDs(0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb),
		NUMA:              []int{0, 0, 0, 0, 1, 1, 1, 1},
		PCIe:              socketPCIe(8, 4, true),
		NVLinkVersion:     4,
		NVLinks:           switchLinks(8, []int{5, 4, 4, 5}),
		SwitchBusIDs:      busIDs(0x05, 0x06, 0x07, 0x08),
	}
}

// pcie4 is a PCIe server with four L40S: two per CPU socket, each pair behind one PCIe switch, no
// NVLink, no MIG, no row remapping.
func pcie4() *Profile {
	pcie := socketPCIe(4, 2, false)
	pcie[0][1], pcie[1][0], pcie[2][3], pcie[3][2] = nvml.TOPOLOGY_SINGLE, nvml.TOPOLOGY_SINGLE, nvml.TOPOLOGY_SINGLE, nvml.TOPOLOGY_SINGLE
	return &Profile{
		Name:              ProfilePCIe4,
		Description:       "PCIe server: 4x L40S, two per NUMA node behind a PCIe switch, no NVLink",
		Product:           "NVIDIA L40S",
		Architecture:      nvml.DEVICE_ARCH_ADA,
		ComputeCapability: [2]int{8, 9},
		MemoryBytes:       46068 << 20,
		DriverVersion:     "550.90.07",
		NVMLVersion:       "12.550.90.07",
		CUDADriverVersion: 12040,
		BusIDs:            busIDs(0x17, 0x31, 0xb1, 0xca),
		NUMA:              []int{0, 0, 1, 1},
		PCIe:              pcie,
	}
}

// nvlinkPairs8 is a PCIe server with eight H100 NVL joined in pairs by NVLink bridges (12 NVLink 4
// links per pair), four per CPU socket.
func nvlinkPairs8() *Profile {
	links := make([][]LinkEnd, 8)
	for g := range links {
		for range 12 {
			links[g] = append(links[g], LinkEnd{GPU: g ^ 1, Switch: -1})
		}
	}
	return &Profile{
		Name:              ProfileNVLinkPairs8,
		Description:       "PCIe server: 8x H100 NVL in NVLink-bridged pairs (0-1, 2-3, 4-5, 6-7), 2 NUMA nodes",
		Product:           "NVIDIA H100 NVL",
		Architecture:      nvml.DEVICE_ARCH_HOPPER,
		ComputeCapability: [2]int{9, 0},
		MemoryBytes:       95830 << 20,
		MIGCapable:        true,
		RowRemapping:      true,
		DriverVersion:     "550.90.07",
		NVMLVersion:       "12.550.90.07",
		CUDADriverVersion: 12040,
		BusIDs:            busIDs(0x1b, 0x1c, 0x3d, 0x3e, 0x9c, 0x9d, 0xbc, 0xbd),
		NUMA:              []int{0, 0, 0, 0, 1, 1, 1, 1},
		PCIe:              socketPCIe(8, 4, false),
		NVLinkVersion:     4,
		NVLinks:           links,
	}
}

// gb200x4 is one compute tray of a GB200 NVL72 rack: four Blackwell GPUs, each with 18 NVLink 5
// links into the rack's NVSwitch trays, registered with the NVLink fabric, so the GPU fabric clique
// spans every tray of the rack.
func gb200x4() *Profile {
	return &Profile{
		Name:              ProfileGB200x4,
		Description:       "GB200 NVL72 compute tray: 4x GB200, multi-node NVLink 5 fabric (clique per rack), 2 NUMA nodes",
		Product:           "NVIDIA GB200",
		Architecture:      nvml.DEVICE_ARCH_BLACKWELL,
		ComputeCapability: [2]int{10, 0},
		MemoryBytes:       189471 << 20,
		MIGCapable:        true,
		RowRemapping:      true,
		DriverVersion:     "570.124.06",
		NVMLVersion:       "12.570.124.06",
		CUDADriverVersion: 12080,
		BusIDs:            busIDs(0x01, 0x02, 0x03, 0x04),
		NUMA:              []int{0, 0, 1, 1},
		PCIe:              socketPCIe(4, 2, false),
		NVLinkVersion:     5,
		NVLinks:           switchLinks(4, []int{2, 2, 2, 2, 2, 2, 2, 2, 2}),
		SwitchBusIDs:      busIDs(0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9),
		Fabric:            true,
	}
}

func busIDs(buses ...int) []string {
	ids := make([]string, len(buses))
	for i, b := range buses {
		ids[i] = fmt.Sprintf("00000000:%02X:00.0", b)
	}
	return ids
}

// socketPCIe is the PCIe matrix of n GPUs split evenly over two sockets of perSocket GPUs:
// SYS across sockets, NODE inside one; with pairedSwitches, GPUs 2k and 2k+1 share a PCIe switch
// tree (PXB), as on DGX systems.
func socketPCIe(n, perSocket int, pairedSwitches bool) [][]nvml.GpuTopologyLevel {
	m := make([][]nvml.GpuTopologyLevel, n)
	for a := range m {
		m[a] = make([]nvml.GpuTopologyLevel, n)
		for b := range m[a] {
			switch {
			case a == b:
				m[a][b] = nvml.TOPOLOGY_INTERNAL
			case a/perSocket != b/perSocket:
				m[a][b] = nvml.TOPOLOGY_SYSTEM
			case pairedSwitches && a/2 == b/2:
				m[a][b] = nvml.TOPOLOGY_MULTIPLE
			default:
				m[a][b] = nvml.TOPOLOGY_NODE
			}
		}
	}
	return m
}

// switchLinks wires each of n GPUs into NVSwitches: perSwitch[s] links into switch s.
func switchLinks(n int, perSwitch []int) [][]LinkEnd {
	var one []LinkEnd
	for s, count := range perSwitch {
		for range count {
			one = append(one, LinkEnd{GPU: -1, Switch: s})
		}
	}
	links := make([][]LinkEnd, n)
	for g := range links {
		links[g] = slices.Clone(one)
	}
	return links
}
