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

// Package gpuinfo reads a node's GPUs through NVML (github.com/NVIDIA/go-nvml): versions, each
// GPU's identity, memory, PCIe and NUMA placement, NVLinks, the pairwise link matrix, the NVLink
// domain, utilization and health. It works the same over the real library and over a mock
// (package nvmlmock).
package gpuinfo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// InitError is NVML failing to start or to list the GPUs: no driver, no devices, a broken library.
type InitError struct {
	// Op is the NVML call that failed.
	Op string
	// Return is what it returned; SUCCESS for Op "DeviceGetCount" means it found no GPUs.
	Return nvml.Return
}

func (e *InitError) Error() string {
	switch {
	case e.Return == nvml.ERROR_LIBRARY_NOT_FOUND:
		return "NVML library (libnvidia-ml.so.1) not found: the NVIDIA driver is not installed, or the container runtime does not mount it"
	case e.Op == "DeviceGetCount" && e.Return == nvml.SUCCESS:
		return "NVML found no GPUs"
	}
	return fmt.Sprintf("NVML %s: %v", e.Op, e.Return)
}

// Reason is the NVMLAvailable condition reason for the error.
func (e *InitError) Reason() string {
	switch {
	case e.Return == nvml.ERROR_LIBRARY_NOT_FOUND:
		return convoy.GPUNodeReasonLibraryNotFound
	case e.Op == "DeviceGetCount" && e.Return == nvml.SUCCESS:
		return convoy.GPUNodeReasonNoDevices
	}
	return convoy.GPUNodeReasonInitFailed
}

// Options tune a Reader.
type Options struct {
	// NodeName names node-local NVLink domains ("<node>/nvlink-0").
	NodeName string
	// SysfsRoot, when set ("/sys"), is where the NUMA node of a GPU is read when NVML cannot say.
	// Leave it empty for mocks, whose PCI addresses mean nothing on this host.
	SysfsRoot string
}

// Reader reads one node's GPUs. Open reads what does not change while the driver is loaded
// (identity and topology) once; Sample reads load and health on every poll.
type Reader struct {
	lib     nvml.Interface
	opts    Options
	devices []nvml.Device // by index; nil where NVML gave no handle
	static  Static
	uuids   map[string]int
}

// Static is what Open read: versions, the GPUs' identity and topology, and the link matrix.
type Static struct {
	DriverVersion string
	CUDAVersion   string
	NVMLVersion   string
	// GPUs carry every field but the ones Sample reads; Health is Unhealthy, with a reason, for a
	// GPU NVML gave no handle for, and Unknown otherwise.
	GPUs  []convoy.GPUDevice
	Links []convoy.GPULink
}

// Open initialises NVML and reads the node's GPUs. It returns an *InitError when NVML is missing,
// fails to start or lists no GPUs; a GPU that fails on its own is reported in Static, not as an error.
func Open(lib nvml.Interface, opts Options) (*Reader, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, &InitError{Op: "Init", Return: ret}
	}
	r := &Reader{lib: lib, opts: opts, uuids: map[string]int{}}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS || count == 0 {
		_ = lib.Shutdown()
		return nil, &InitError{Op: "DeviceGetCount", Return: ret}
	}
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		r.static.DriverVersion = v
	}
	if v, ret := lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
		r.static.NVMLVersion = v
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS && v > 0 {
		r.static.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}

	devlib := device.New(lib)
	var ends [][]nvlinkEnd
	for i := range count {
		g := convoy.GPUDevice{Index: int32(i), Health: convoy.GPUUnknown}
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			g.Health, g.HealthReason = convoy.GPUUnhealthy, fmt.Sprintf("NVML gives no handle for the GPU: %v", ret)
			r.devices = append(r.devices, nil)
			r.static.GPUs = append(r.static.GPUs, g)
			ends = append(ends, nil)
			continue
		}
		r.devices = append(r.devices, dev)
		r.readIdentity(dev, devlib, &g)
		if g.UUID != "" {
			r.uuids[g.UUID] = i
		}
		g.NVLinkDomain = readFabric(dev)
		ends = append(ends, readNVLinks(dev))
		r.static.GPUs = append(r.static.GPUs, g)
	}
	r.static.Links = linkMatrix(r.static.GPUs, ends, r.pcieLevel, r.nvlinkP2P)
	setNVLinks(r.static.GPUs, ends)
	for p, d := range convoy.NVLinkDomains(opts.NodeName, r.static.GPUs, r.static.Links) {
		r.static.GPUs[p].NVLinkDomain = d
	}
	return r, nil
}

// Close shuts NVML down.
func (r *Reader) Close() { _ = r.lib.Shutdown() }

// Static returns what Open read. The caller must not modify it.
func (r *Reader) Static() *Static { return &r.static }

// Devices returns the NVML handles by GPU index, nil where NVML gave none.
func (r *Reader) Devices() []nvml.Device { return r.devices }

// IndexOfUUID returns the index of the GPU with the given UUID.
func (r *Reader) IndexOfUUID(uuid string) (int, bool) {
	i, ok := r.uuids[uuid]
	return i, ok
}

func (r *Reader) readIdentity(dev nvml.Device, devlib device.Interface, g *convoy.GPUDevice) {
	if v, ret := dev.GetUUID(); ret == nvml.SUCCESS {
		g.UUID = v
	}
	if v, ret := dev.GetName(); ret == nvml.SUCCESS {
		g.Product = v
	}
	if d, err := devlib.NewDevice(dev); err == nil {
		if arch, err := d.GetArchitectureAsString(); err == nil && arch != "Unknown" {
			g.Architecture = arch
		}
	}
	if major, minor, ret := dev.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.MemoryMiB = int64(mem.Total >> 20)
	}
	if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		g.PCIBusID = busID(pci)
	}
	if numa, ret := dev.GetNumaNodeId(); ret == nvml.SUCCESS && numa >= 0 {
		g.NUMANode = ptr(int32(numa))
	} else if numa, ok := sysfsNUMANode(r.opts.SysfsRoot, g.PCIBusID); ok {
		g.NUMANode = ptr(numa)
	}
}

// pcieLevel is the nvidia-smi topo level between two GPUs.
func (r *Reader) pcieLevel(a, b int) (convoy.LinkType, bool) {
	da, db := r.devices[a], r.devices[b]
	if da == nil || db == nil {
		return "", false
	}
	level, ret := da.GetTopologyCommonAncestor(db)
	if ret != nvml.SUCCESS {
		return "", false
	}
	switch level {
	case nvml.TOPOLOGY_INTERNAL, nvml.TOPOLOGY_SINGLE:
		return convoy.LinkPIX, true
	case nvml.TOPOLOGY_MULTIPLE:
		return convoy.LinkPXB, true
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return convoy.LinkPHB, true
	case nvml.TOPOLOGY_NODE:
		return convoy.LinkNODE, true
	}
	return convoy.LinkSYS, true
}

// nvlinkP2P says whether NVML reports NVLink peer-to-peer between two GPUs; ok is false when it
// cannot say.
func (r *Reader) nvlinkP2P(a, b int) (supported, ok bool) {
	da, db := r.devices[a], r.devices[b]
	if da == nil || db == nil {
		return false, false
	}
	status, ret := da.GetP2PStatus(db, nvml.P2P_CAPS_INDEX_NVLINK)
	if ret != nvml.SUCCESS {
		return false, false
	}
	return status == nvml.P2P_STATUS_OK, true
}

// nvlinkEnd is one NVLink of a GPU as NVML reports it.
type nvlinkEnd struct {
	link     int
	active   bool
	peerBus  string // as NVML spells it; empty when the link is down
	toSwitch bool
	version  uint32
}

func readNVLinks(dev nvml.Device) []nvlinkEnd {
	var ends []nvlinkEnd
	for link := range nvml.NVLINK_MAX_LINKS {
		state, ret := dev.GetNvLinkState(link)
		if ret == nvml.ERROR_NOT_SUPPORTED && link == 0 {
			return nil // no NVLink on this GPU
		}
		if ret != nvml.SUCCESS {
			continue
		}
		e := nvlinkEnd{link: link, active: state == nvml.FEATURE_ENABLED}
		if e.active {
			if pci, ret := dev.GetNvLinkRemotePciInfo(link); ret == nvml.SUCCESS {
				e.peerBus = busID(pci)
			}
			if t, ret := dev.GetNvLinkRemoteDeviceType(link); ret == nvml.SUCCESS {
				e.toSwitch = t == nvml.NVLINK_DEVICE_TYPE_SWITCH
			}
			if v, ret := dev.GetNvLinkVersion(link); ret == nvml.SUCCESS {
				e.version = v
			}
		}
		ends = append(ends, e)
	}
	return ends
}

// readFabric returns the GPU's multi-node NVLink clique, "<cluster UUID>/<clique ID>", when the GPU
// completed its fabric registration.
func readFabric(dev nvml.Device) string {
	info, ret := dev.GetGpuFabricInfo()
	if ret != nvml.SUCCESS || info.State != nvml.GPU_FABRIC_STATE_COMPLETED || nvml.Return(info.Status) != nvml.SUCCESS || info.ClusterUuid == [16]uint8{} {
		return ""
	}
	u := info.ClusterUuid
	return fmt.Sprintf("%x-%x-%x-%x-%x/%d", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16], info.CliqueId)
}

// busID returns NVML's bus ID string ("00000000:18:00.0").
func busID(pci nvml.PciInfo) string {
	b := pci.BusId[:]
	if n := indexByte(b, 0); n >= 0 {
		b = b[:n]
	}
	return string(b)
}

func indexByte(b []uint8, c uint8) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// NormBusID makes NVML's bus IDs comparable: lower case, four-digit domain, as in sysfs.
func NormBusID(id string) string {
	id = strings.ToLower(id)
	if domain, rest, ok := strings.Cut(id, ":"); ok && len(domain) > 4 {
		id = domain[len(domain)-4:] + ":" + rest
	}
	return id
}

func sysfsNUMANode(root, bus string) (int32, bool) {
	if root == "" || bus == "" {
		return 0, false
	}
	data, err := os.ReadFile(filepath.Join(root, "bus", "pci", "devices", NormBusID(bus), "numa_node"))
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

func ptr[T any](v T) *T { return &v }

// IsInitError reports whether err is an *InitError.
func IsInitError(err error) bool {
	var ie *InitError
	return errors.As(err, &ie)
}
