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

package podgpus

import (
	"fmt"
	"slices"

	"github.com/NVIDIA/go-gpuallocator/gpuallocator"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"
)

// Simulator assigns GPUs to the pods bound to a node that has no device plugin (a fake node),
// as the NVIDIA device plugin's GetPreferredAllocation would: go-gpuallocator's best-effort
// policy, which picks the set of GPUs with the best NVLink and PCIe connections. Pods keep their
// GPUs until they end. Not safe for concurrent use.
type Simulator struct {
	policy  gpuallocator.Policy
	devices []*gpuallocator.Device // by GPU index
	held    map[types.UID]held
}

type held struct {
	key     string
	indices []int
}

// NewSimulator reads the node's GPUs and their links through lib, as the device plugin does.
// indexOf maps a GPU UUID to its index.
func NewSimulator(lib nvml.Interface, indexOf func(uuid string) (int, bool)) (*Simulator, error) {
	list, err := gpuallocator.NewDevices(gpuallocator.WithNvmlLib(lib))
	if err != nil {
		return nil, fmt.Errorf("reading GPU links for the allocation policy: %w", err)
	}
	s := &Simulator{policy: gpuallocator.NewBestEffortPolicy(), held: map[types.UID]held{}}
	s.devices = make([]*gpuallocator.Device, len(list))
	for _, d := range list {
		i, ok := indexOf(d.UUID)
		if !ok || i >= len(s.devices) {
			return nil, fmt.Errorf("the allocation policy sees GPU %s, which NVML did not list", d.UUID)
		}
		s.devices[i] = d
	}
	return s, nil
}

// Result is one round of assignment.
type Result struct {
	Holders Holders
	// Unplaced are the pods that asked for more GPUs than were free and healthy; they hold none.
	Unplaced []string
	// Ignored are pods whose convoy.dev/gpu-indices could not be honoured, with the reason; they
	// got GPUs from the policy instead.
	Ignored map[string]string
}

// Assign gives each pod its GPUs: the ones it already holds; else the ones its
// convoy.dev/gpu-indices annotation names when they are free and usable; else the policy's
// choice among the free usable GPUs. usable reports whether a GPU may be given out (it is healthy).
func (s *Simulator) Assign(pods []Pod, usable func(index int) bool) Result {
	live := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		live[p.UID] = true
	}
	for uid := range s.held {
		if !live[uid] {
			delete(s.held, uid)
		}
	}
	res := Result{Holders: Holders{}}
	for _, h := range s.held {
		for _, i := range h.indices {
			res.Holders[i] = h.key
		}
	}
	pending := slices.DeleteFunc(slices.Clone(pods), func(p Pod) bool {
		_, ok := s.held[p.UID]
		return ok
	})
	sortPods(pending)
	for _, p := range pending {
		indices, why := s.requested(p, res.Holders, usable)
		if indices == nil {
			if why != "" {
				if res.Ignored == nil {
					res.Ignored = map[string]string{}
				}
				res.Ignored[p.Key] = why
			}
			indices = s.allocate(p.GPUs, res.Holders, usable)
		}
		if indices == nil {
			res.Unplaced = append(res.Unplaced, p.Key)
			continue
		}
		s.held[p.UID] = held{key: p.Key, indices: indices}
		for _, i := range indices {
			res.Holders[i] = p.Key
		}
	}
	return res
}

// requested returns the pod's annotated GPUs when they can be given, else nil and why not (empty
// when the pod has no annotation).
func (s *Simulator) requested(p Pod, taken Holders, usable func(int) bool) ([]int, string) {
	if p.Indices == nil {
		return nil, ""
	}
	if len(p.Indices) != p.GPUs {
		return nil, fmt.Sprintf("it names %d GPUs for a request of %d", len(p.Indices), p.GPUs)
	}
	seen := map[int]bool{}
	for _, i := range p.Indices {
		switch {
		case i >= len(s.devices):
			return nil, fmt.Sprintf("GPU %d does not exist", i)
		case seen[i]:
			return nil, fmt.Sprintf("GPU %d is named twice", i)
		case taken[i] != "":
			return nil, fmt.Sprintf("GPU %d is held by %s", i, taken[i])
		case !usable(i):
			return nil, fmt.Sprintf("GPU %d is unhealthy", i)
		}
		seen[i] = true
	}
	return slices.Clone(p.Indices), ""
}

func (s *Simulator) allocate(n int, taken Holders, usable func(int) bool) []int {
	var available []*gpuallocator.Device
	for i, d := range s.devices {
		if taken[i] == "" && usable(i) {
			available = append(available, d)
		}
	}
	if len(available) < n {
		return nil
	}
	chosen := s.policy.Allocate(available, nil, n)
	if len(chosen) != n {
		return nil
	}
	indices := make([]int, 0, n)
	for _, d := range chosen {
		indices = append(indices, slices.Index(s.devices, d))
	}
	slices.Sort(indices)
	return indices
}
