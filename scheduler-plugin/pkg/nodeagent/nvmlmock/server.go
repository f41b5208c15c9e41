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
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/uuid"
)

// Options tune one mocked server.
type Options struct {
	// Seed makes the GPU UUIDs unique to this server and stable: the same seed gives the same UUIDs.
	// Use the node name.
	Seed string
	// FabricCluster names the NVLink fabric the GPUs of a Fabric profile registered with: servers
	// with the same FabricCluster share a clique. Seed when empty.
	FabricCluster string
}

// Server is one mocked GPU server: an nvml.Interface over a Profile, with fault injection. It is
// safe for concurrent use.
//
// Calls without arguments go through go-nvml's mock (mock.Interface, and dgxa100 devices for the
// GPUs' identity and MIG). Calls with arguments that the agent makes on every poll are methods of
// Server and Device instead: the mock records the arguments of every call, which in a simulator
// running for days grows without bound.
type Server struct {
	mock.Interface
	mock.ExtendedInterface

	profile *Profile
	devices []*Device
	fabric  [16]uint8

	mu      sync.Mutex
	inits   int
	regs    []registration
	pending []nvml.EventData
}

type registration struct {
	device *Device
	mask   uint64
	set    *EventSet
}

// New returns a server of the named profile.
func New(profile string, opts Options) (*Server, error) {
	p, err := Lookup(profile)
	if err != nil {
		return nil, err
	}
	return NewFromProfile(p, opts), nil
}

// NewFromProfile returns a server of p.
func NewFromProfile(p *Profile, opts Options) *Server {
	s := &Server{profile: p}
	cluster := opts.FabricCluster
	if cluster == "" {
		cluster = opts.Seed
	}
	s.fabric = uuid.NewSHA1(uuid.NameSpaceOID, []byte("convoy-fabric/"+cluster))
	shared := boardOf(p)
	for i := range p.GPUs() {
		s.devices = append(s.devices, &Device{
			Device: shared[i],
			server: s,
			index:  i,
			uuid:   "GPU-" + uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "convoy-gpu/%s/%s/%d", p.Name, opts.Seed, i)).String(),
		})
	}
	s.setMockFuncs()
	return s
}

// Profile returns the server's profile.
func (s *Server) Profile() *Profile { return s.profile }

// Devices returns the server's GPUs by index.
func (s *Server) Devices() []*Device { return s.devices }

func (s *Server) setMockFuncs() {
	s.ExtensionsFunc = func() nvml.ExtendedInterface { return s }
	s.LookupSymbolFunc = func(string) error { return nil }
	s.InitFunc = func() nvml.Return {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.inits++
		return nvml.SUCCESS
	}
	s.ShutdownFunc = func() nvml.Return {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.inits == 0 {
			return nvml.ERROR_UNINITIALIZED
		}
		s.inits--
		return nvml.SUCCESS
	}
	s.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return s.profile.DriverVersion, nvml.SUCCESS }
	s.SystemGetNVMLVersionFunc = func() (string, nvml.Return) { return s.profile.NVMLVersion, nvml.SUCCESS }
	s.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return s.profile.CUDADriverVersion, nvml.SUCCESS }
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return len(s.devices), nvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(s.devices) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return s.devices[i], nvml.SUCCESS
	}
	s.DeviceGetHandleByUUIDFunc = func(id string) (nvml.Device, nvml.Return) {
		for _, d := range s.devices {
			if d.uuid == id {
				return d, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	s.DeviceGetHandleByPciBusIdFunc = func(busID string) (nvml.Device, nvml.Return) {
		for i, d := range s.devices {
			if s.profile.BusIDs[i] == busID {
				return d, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &EventSet{server: s, ch: make(chan nvml.EventData, 64)}, nvml.SUCCESS
	}
	s.ErrorStringFunc = func(r nvml.Return) string { return r.Error() }
}

// emit delivers an event to every event set that registered d for its type. An event nobody
// registered for waits for the first registration that wants it, so that a fault injected before
// the agent started (the --fault flag) still reaches it.
func (s *Server) emit(d *Device, eventType, data uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := nvml.EventData{Device: d, EventType: eventType, EventData: data}
	delivered := false
	for _, r := range s.regs {
		if r.device == d && r.mask&eventType != 0 {
			r.set.send(ev)
			delivered = true
		}
	}
	if !delivered && len(s.pending) < maxPending {
		s.pending = append(s.pending, ev)
	}
}

const maxPending = 64

// EventSet is a mocked nvml.EventSet; Wait blocks until an injected fault's event or the timeout.
type EventSet struct {
	server *Server
	ch     chan nvml.EventData
	once   sync.Once
	freed  chan struct{}
}

var _ nvml.EventSet = (*EventSet)(nil)

// Wait returns the next event, or ERROR_TIMEOUT after timeoutms milliseconds.
func (e *EventSet) Wait(timeoutms uint32) (nvml.EventData, nvml.Return) {
	e.once.Do(e.init)
	timer := time.NewTimer(time.Duration(timeoutms) * time.Millisecond)
	defer timer.Stop()
	select {
	case ev := <-e.ch:
		return ev, nvml.SUCCESS
	case <-e.freed:
		return nvml.EventData{}, nvml.ERROR_UNINITIALIZED
	case <-timer.C:
		return nvml.EventData{}, nvml.ERROR_TIMEOUT
	}
}

// Free unregisters the set and wakes a blocked Wait.
func (e *EventSet) Free() nvml.Return {
	e.once.Do(e.init)
	s := e.server
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.regs[:0]
	for _, r := range s.regs {
		if r.set != e {
			kept = append(kept, r)
		}
	}
	s.regs = kept
	select {
	case <-e.freed:
	default:
		close(e.freed)
	}
	return nvml.SUCCESS
}

func (e *EventSet) init() { e.freed = make(chan struct{}) }

func (e *EventSet) send(ev nvml.EventData) {
	select {
	case e.ch <- ev:
	default: // a full set drops events, as NVML's bounded queue does
	}
}

// board is the GPUs shared by every server of a profile: go-nvml's dgxa100 devices reconfigured
// to the profile's identity. They are never written after construction.
var (
	boardsMu sync.Mutex
	boards   = map[*Profile][]*dgxa100.Device{}
)

func boardOf(p *Profile) []*dgxa100.Device {
	boardsMu.Lock()
	defer boardsMu.Unlock()
	if b, ok := boards[p]; ok {
		return b
	}
	b := make([]*dgxa100.Device, p.GPUs())
	for i := range b {
		d := dgxa100.NewDevice(i)
		d.Name = p.Product
		d.Architecture = p.Architecture
		d.CudaComputeCapability = dgxa100.CudaComputeCapability{Major: p.ComputeCapability[0], Minor: p.ComputeCapability[1]}
		d.PciBusID = p.BusIDs[i]
		d.MemoryInfo = nvml.Memory{Total: p.MemoryBytes, Free: p.MemoryBytes}
		b[i] = d
	}
	boards[p] = b
	return b
}
