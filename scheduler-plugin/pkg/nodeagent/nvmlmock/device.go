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
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// Device is one mocked GPU. Its identity (name, index, architecture, compute capability, MIG)
// comes from the profile's shared dgxa100 device; its UUID, load and faults are its own.
type Device struct {
	*dgxa100.Device

	server *Server
	index  int
	uuid   string

	// Guarded by server.mu.
	utilization uint32
	memoryUsed  uint64
	eccErrors   uint64
	remapFailed bool
	lost        bool
}

var _ nvml.Device = (*Device)(nil)

// FaultKind is a kind of GPU failure the mock can simulate.
type FaultKind string

const (
	// FaultXID raises a critical XID error event (XID 79, "GPU has fallen off the bus", unless
	// Fault.XID says otherwise). Nothing else changes: the agent, like the NVIDIA device plugin,
	// keeps the GPU unhealthy until it restarts.
	FaultXID FaultKind = "xid"
	// FaultECC counts an uncorrectable (double-bit) ECC error since the last reset and raises the
	// matching event. Clear resets the counter, as a GPU reset does.
	FaultECC FaultKind = "ecc"
	// FaultRowRemap makes row remapping report a failure and raises a DRAM retirement failure event.
	FaultRowRemap FaultKind = "row-remap"
	// FaultLost makes every query of the GPU fail with ERROR_GPU_IS_LOST and raises a GPU
	// unavailable event.
	FaultLost FaultKind = "lost"
)

// XIDFallenOffTheBus is the XID a FaultXID raises by default.
const XIDFallenOffTheBus = 79

// Fault is one injected failure.
type Fault struct {
	Kind FaultKind
	// XID is the XID of a FaultXID.
	XID uint64
}

// ParseFault reads a fault as the --fault flag and the HTTP endpoint spell it: "xid", "xid:48",
// "ecc", "row-remap" or "lost".
func ParseFault(s string) (Fault, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	f := Fault{Kind: FaultKind(kind)}
	switch f.Kind {
	case FaultXID:
		f.XID = XIDFallenOffTheBus
		if hasArg {
			xid, err := strconv.ParseUint(arg, 10, 32)
			if err != nil {
				return Fault{}, fmt.Errorf("fault %q: XID %q is not a number", s, arg)
			}
			f.XID = xid
		}
		return f, nil
	case FaultECC, FaultRowRemap, FaultLost:
		if hasArg {
			return Fault{}, fmt.Errorf("fault %q: %s takes no argument", s, kind)
		}
		return f, nil
	}
	return Fault{}, fmt.Errorf("unknown fault %q: want xid[:N], ecc, row-remap or lost", s)
}

func (f Fault) String() string {
	if f.Kind == FaultXID {
		return fmt.Sprintf("xid:%d", f.XID)
	}
	return string(f.Kind)
}

// Inject makes GPU gpu fail as f describes and raises the event a real GPU would.
func (s *Server) Inject(gpu int, f Fault) error {
	d, err := s.device(gpu)
	if err != nil {
		return err
	}
	var eventType, data uint64
	s.mu.Lock()
	switch f.Kind {
	case FaultXID:
		eventType, data = nvml.EventTypeXidCriticalError, f.XID
	case FaultECC:
		d.eccErrors++
		eventType = nvml.EventTypeDoubleBitEccError
	case FaultRowRemap:
		if !s.profile.RowRemapping {
			s.mu.Unlock()
			return fmt.Errorf("the %s profile's GPUs have no row remapping", s.profile.Name)
		}
		d.remapFailed = true
		eventType = nvml.EventTypeDramRetirementFailure
	case FaultLost:
		d.lost = true
		eventType = nvml.EventTypeGpuUnavailableError
	default:
		s.mu.Unlock()
		return fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	s.mu.Unlock()
	s.emit(d, eventType, data)
	return nil
}

// Clear ends GPU gpu's ECC, row-remap and lost faults, as replacing or resetting it would.
func (s *Server) Clear(gpu int) error {
	d, err := s.device(gpu)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d.eccErrors, d.remapFailed, d.lost = 0, false, false
	return nil
}

// SetLoad sets what GPU gpu reports as its utilization (percent) and memory in use (bytes).
func (s *Server) SetLoad(gpu int, utilization uint32, memoryUsed uint64) error {
	d, err := s.device(gpu)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d.utilization, d.memoryUsed = min(utilization, 100), min(memoryUsed, s.profile.MemoryBytes)
	return nil
}

func (s *Server) device(gpu int) (*Device, error) {
	if gpu < 0 || gpu >= len(s.devices) {
		return nil, fmt.Errorf("no GPU %d: the %s profile has GPUs 0-%d", gpu, s.profile.Name, len(s.devices)-1)
	}
	return s.devices[gpu], nil
}

func (d *Device) isLost() bool {
	d.server.mu.Lock()
	defer d.server.mu.Unlock()
	return d.lost
}

// GetUUID returns the GPU's UUID, unique to its server's seed.
func (d *Device) GetUUID() (string, nvml.Return) { return d.uuid, nvml.SUCCESS }

// GetPciInfo returns the GPU's PCI location.
func (d *Device) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	return pciInfo(d.server.profile.BusIDs[d.index]), nvml.SUCCESS
}

// GetNumaNodeId returns the GPU's NUMA node.
func (d *Device) GetNumaNodeId() (int, nvml.Return) {
	return d.server.profile.NUMA[d.index], nvml.SUCCESS
}

// GetMemoryInfo returns the GPU's memory and what SetLoad put in use.
func (d *Device) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	s := d.server
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.lost {
		return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
	}
	total := s.profile.MemoryBytes
	return nvml.Memory{Total: total, Used: d.memoryUsed, Free: total - d.memoryUsed}, nvml.SUCCESS
}

// GetUtilizationRates returns what SetLoad set.
func (d *Device) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	s := d.server
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.lost {
		return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
	}
	return nvml.Utilization{Gpu: d.utilization, Memory: d.utilization / 2}, nvml.SUCCESS
}

// GetMigMode reports MIG disabled on MIG-capable profiles.
func (d *Device) GetMigMode() (int, int, nvml.Return) {
	if !d.server.profile.MIGCapable {
		return 0, 0, nvml.ERROR_NOT_SUPPORTED
	}
	if d.isLost() {
		return 0, 0, nvml.ERROR_GPU_IS_LOST
	}
	return d.Device.GetMigMode()
}

// GetTotalEccErrors returns the injected uncorrectable errors for the volatile counter.
func (d *Device) GetTotalEccErrors(errorType nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
	s := d.server
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.lost {
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	if errorType == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && counter == nvml.VOLATILE_ECC {
		return d.eccErrors, nvml.SUCCESS
	}
	return 0, nvml.SUCCESS
}

// GetRemappedRows reports a row remapping failure after FaultRowRemap.
func (d *Device) GetRemappedRows() (int, int, bool, bool, nvml.Return) {
	s := d.server
	if !s.profile.RowRemapping {
		return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.lost {
		return 0, 0, false, false, nvml.ERROR_GPU_IS_LOST
	}
	if d.remapFailed {
		return 0, 1, false, true, nvml.SUCCESS
	}
	return 0, 0, false, false, nvml.SUCCESS
}

// GetGpuFabricInfo reports a completed fabric registration on Fabric profiles.
func (d *Device) GetGpuFabricInfo() (nvml.GpuFabricInfo, nvml.Return) {
	s := d.server
	if !s.profile.Fabric {
		return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.GpuFabricInfo{ClusterUuid: s.fabric, CliqueId: 1, State: nvml.GPU_FABRIC_STATE_COMPLETED}, nvml.SUCCESS
}

// GetNvLinkState reports every wired link up; links past the GPU's last return ERROR_INVALID_ARGUMENT.
func (d *Device) GetNvLinkState(link int) (nvml.EnableState, nvml.Return) {
	if _, ret := d.linkEnd(link); ret != nvml.SUCCESS {
		return nvml.FEATURE_DISABLED, ret
	}
	return nvml.FEATURE_ENABLED, nvml.SUCCESS
}

// GetNvLinkRemotePciInfo returns the PCI location of the link's far end: a GPU or an NVSwitch.
func (d *Device) GetNvLinkRemotePciInfo(link int) (nvml.PciInfo, nvml.Return) {
	end, ret := d.linkEnd(link)
	if ret != nvml.SUCCESS {
		return nvml.PciInfo{}, ret
	}
	p := d.server.profile
	if end.GPU >= 0 {
		return pciInfo(p.BusIDs[end.GPU]), nvml.SUCCESS
	}
	return pciInfo(p.SwitchBusIDs[end.Switch]), nvml.SUCCESS
}

// GetNvLinkRemoteDeviceType says whether the link's far end is a GPU or an NVSwitch.
func (d *Device) GetNvLinkRemoteDeviceType(link int) (nvml.IntNvLinkDeviceType, nvml.Return) {
	end, ret := d.linkEnd(link)
	if ret != nvml.SUCCESS {
		return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, ret
	}
	if end.GPU >= 0 {
		return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
	}
	return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
}

// GetNvLinkVersion returns the profile's NVLink generation.
func (d *Device) GetNvLinkVersion(link int) (uint32, nvml.Return) {
	if _, ret := d.linkEnd(link); ret != nvml.SUCCESS {
		return 0, ret
	}
	return d.server.profile.NVLinkVersion, nvml.SUCCESS
}

func (d *Device) linkEnd(link int) (LinkEnd, nvml.Return) {
	p := d.server.profile
	switch {
	case p.NVLinks == nil:
		return LinkEnd{}, nvml.ERROR_NOT_SUPPORTED
	case link < 0 || link >= len(p.NVLinks[d.index]):
		return LinkEnd{}, nvml.ERROR_INVALID_ARGUMENT
	case d.isLost():
		return LinkEnd{}, nvml.ERROR_GPU_IS_LOST
	}
	return p.NVLinks[d.index][link], nvml.SUCCESS
}

// GetTopologyCommonAncestor returns the profile's PCIe level between the two GPUs.
func (d *Device) GetTopologyCommonAncestor(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
	j, ret := d.peerIndex(other)
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return d.server.profile.PCIe[d.index][j], nvml.SUCCESS
}

// GetP2PStatus reports NVLink peer-to-peer as supported exactly between GPUs that share an NVLink
// or an NVSwitch; every other capability as supported.
func (d *Device) GetP2PStatus(other nvml.Device, caps nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
	j, ret := d.peerIndex(other)
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	if caps != nvml.P2P_CAPS_INDEX_NVLINK {
		return nvml.P2P_STATUS_OK, nvml.SUCCESS
	}
	if nvlinked(d.server.profile, d.index, j) {
		return nvml.P2P_STATUS_OK, nvml.SUCCESS
	}
	return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
}

// RegisterEvents registers the GPU's events of the types in mask with set.
func (d *Device) RegisterEvents(mask uint64, set nvml.EventSet) nvml.Return {
	es, ok := set.(*EventSet)
	if !ok || es.server != d.server {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	s := d.server
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs = append(s.regs, registration{device: d, mask: mask, set: es})
	kept := s.pending[:0]
	for _, ev := range s.pending {
		if ev.Device == d && ev.EventType&mask != 0 {
			es.send(ev)
		} else {
			kept = append(kept, ev)
		}
	}
	s.pending = kept
	return nvml.SUCCESS
}

// peerIndex finds other among the server's GPUs through its UUID, whatever wraps it.
func (d *Device) peerIndex(other nvml.Device) (int, nvml.Return) {
	if other == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	id, ret := other.GetUUID()
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	for j, peer := range d.server.devices {
		if peer.uuid == id {
			return j, nvml.SUCCESS
		}
	}
	return 0, nvml.ERROR_INVALID_ARGUMENT
}

func nvlinked(p *Profile, a, b int) bool {
	if p.NVLinks == nil {
		return false
	}
	switchesA := map[int]bool{}
	for _, end := range p.NVLinks[a] {
		if end.GPU == b {
			return true
		}
		if end.Switch >= 0 {
			switchesA[end.Switch] = true
		}
	}
	for _, end := range p.NVLinks[b] {
		if end.Switch >= 0 && switchesA[end.Switch] {
			return true
		}
	}
	return false
}

func pciInfo(busID string) nvml.PciInfo {
	var info nvml.PciInfo
	copy(info.BusId[:], busID)
	copy(info.BusIdLegacy[:], busID[4:])
	var domain, bus, dev, fn uint32
	if _, err := fmt.Sscanf(busID, "%x:%x:%x.%x", &domain, &bus, &dev, &fn); err == nil {
		info.Domain, info.Bus, info.Device = domain, bus, dev
	}
	info.PciDeviceId = 0x233010DE
	return info
}
