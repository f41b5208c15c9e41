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

package gpuinfo

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Sample is what a poll reads of one GPU.
type Sample struct {
	// Utilization and MemoryUsedMiB are nil when NVML cannot say.
	Utilization   *int32
	MemoryUsedMiB *int64
	// MIGMode is Enabled or Disabled, empty where the GPU has no MIG.
	MIGMode string
	// Health is Healthy or Unhealthy, with Reason saying why.
	Health convoy.GPUHealth
	Reason string
}

// Sample reads every GPU's load and health, by index. The health checks are level-based: the GPU
// is lost (every query fails with ERROR_GPU_IS_LOST), it counts uncorrectable ECC errors since its
// last reset, or row remapping failed or waits for a reset. XID errors arrive as events: see Watch.
func (r *Reader) Sample() []Sample {
	samples := make([]Sample, len(r.devices))
	for i, dev := range r.devices {
		if dev == nil {
			samples[i] = Sample{Health: convoy.GPUUnhealthy, Reason: r.static.GPUs[i].HealthReason}
			continue
		}
		samples[i] = sample(dev)
	}
	return samples
}

func sample(dev nvml.Device) Sample {
	s := Sample{Health: convoy.GPUHealthy}
	mem, ret := dev.GetMemoryInfo()
	if ret == nvml.ERROR_GPU_IS_LOST {
		return Sample{Health: convoy.GPUUnhealthy, Reason: "GPU is lost: NVML returns ERROR_GPU_IS_LOST (fallen off the bus?)"}
	}
	if ret == nvml.SUCCESS {
		s.MemoryUsedMiB = ptr(int64(mem.Used >> 20))
	}
	if u, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
		s.Utilization = ptr(int32(min(u.Gpu, 100)))
	}
	if current, _, ret := dev.GetMigMode(); ret == nvml.SUCCESS {
		s.MIGMode = "Disabled"
		if current == nvml.DEVICE_MIG_ENABLE {
			s.MIGMode = "Enabled"
		}
	}
	if n, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS && n > 0 {
		s.Health, s.Reason = convoy.GPUUnhealthy, fmt.Sprintf("%d uncorrectable ECC errors since the last GPU reset", n)
		return s
	}
	if _, _, pending, failed, ret := dev.GetRemappedRows(); ret == nvml.SUCCESS {
		switch {
		case failed:
			s.Health, s.Reason = convoy.GPUUnhealthy, "Row remapping failed: the GPU needs replacing"
		case pending:
			s.Health, s.Reason = convoy.GPUUnhealthy, "Row remapping pending: the GPU needs a reset"
		}
	}
	return s
}

// Event is an NVML event about a GPU.
type Event struct {
	// Index is the GPU's index; -1 when NVML did not say which GPU (it concerns them all).
	Index int
	// Critical events make the GPU unhealthy until the agent restarts; the others only ask for a
	// new poll, whose level-based checks decide.
	Critical bool
	// XID is the XID of an XID event; 0 otherwise.
	XID uint64
	// Reason describes the event, for example "XID 79: GPU has fallen off the bus".
	Reason string
}

// watchedEvents are registered when the driver supports them all; xidOnly otherwise.
const (
	watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError |
		nvml.EventTypeDramRetirementFailure | nvml.EventTypeGpuUnavailableError
	xidOnly = nvml.EventTypeXidCriticalError
)

// applicationXIDs are XIDs a user's program causes, not the GPU; the NVIDIA device plugin skips the
// same ones.
var applicationXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

// xidNames describe the XIDs that most often take a GPU out of service.
var xidNames = map[uint64]string{
	48:  "double-bit ECC error",
	63:  "ECC page retirement or row remapping recording event",
	64:  "ECC page retirement or row remapper recording failure",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	119: "GSP RPC timeout",
	120: "GSP error",
	140: "unrecovered ECC error",
}

// Watcher delivers NVML events about a node's GPUs.
type Watcher struct {
	r   *Reader
	set nvml.EventSet
}

// Watch registers every GPU for XID, ECC, row-remapping and GPU-unavailable events (only XIDs
// where the driver refuses the others). It fails when no GPU accepts any registration.
func (r *Reader) Watch() (*Watcher, error) {
	set, ret := r.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML EventSetCreate: %v", ret)
	}
	registered := 0
	for _, dev := range r.devices {
		if dev == nil {
			continue
		}
		if dev.RegisterEvents(watchedEvents, set) == nvml.SUCCESS || dev.RegisterEvents(xidOnly, set) == nvml.SUCCESS {
			registered++
		}
	}
	if registered == 0 {
		_ = set.Free() // the registration failure is what to report
		return nil, fmt.Errorf("no GPU accepts NVML event registration")
	}
	return &Watcher{r: r, set: set}, nil
}

// Run calls onEvent for each event until ctx ends, then frees the event set.
func (w *Watcher) Run(ctx context.Context, onEvent func(Event)) error {
	defer func() { _ = w.set.Free() }() // nothing to do about a set that does not free
	for ctx.Err() == nil {
		data, ret := w.set.Wait(1000)
		if ret == nvml.ERROR_TIMEOUT {
			continue
		}
		if ret != nvml.SUCCESS {
			return fmt.Errorf("NVML EventSetWait: %v", ret)
		}
		onEvent(w.r.event(data))
	}
	return nil
}

func (r *Reader) event(data nvml.EventData) Event {
	ev := Event{Index: -1}
	if data.Device != nil {
		if uuid, ret := data.Device.GetUUID(); ret == nvml.SUCCESS {
			if i, ok := r.uuids[uuid]; ok {
				ev.Index = i
			}
		}
	}
	switch data.EventType {
	case nvml.EventTypeXidCriticalError:
		ev.XID = data.EventData
		ev.Critical = !applicationXIDs[ev.XID]
		ev.Reason = fmt.Sprintf("XID %d", ev.XID)
		if name, ok := xidNames[ev.XID]; ok {
			ev.Reason += ": " + name
		}
	case nvml.EventTypeDoubleBitEccError:
		ev.Reason = "double-bit ECC error event"
	case nvml.EventTypeDramRetirementFailure:
		ev.Reason = "DRAM retirement failure event"
	case nvml.EventTypeGpuUnavailableError:
		ev.Reason = "GPU unavailable event"
	default:
		ev.Reason = fmt.Sprintf("NVML event type %#x", data.EventType)
	}
	return ev
}
