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

package gangcore

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	toolscache "k8s.io/client-go/tools/cache"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// ClaimedGPUs is how many GPUs the pod claims through DRA: for each of its spec.resourceClaims,
// the devices its exact-count requests ask of a GPU DeviceClass (gpuClass). spec returns a claim's
// spec, from its ResourceClaim or ResourceClaimTemplate, or nil while it is unknown.
func ClaimedGPUs(pod *corev1.Pod, spec func(corev1.PodResourceClaim) *resourcev1.ResourceClaimSpec, gpuClass func(string) bool) int {
	n := 0
	for _, pc := range pod.Spec.ResourceClaims {
		s := spec(pc)
		if s == nil {
			continue
		}
		for _, r := range s.Devices.Requests {
			e := r.Exactly
			if e == nil || !gpuClass(e.DeviceClassName) ||
				e.AllocationMode != "" && e.AllocationMode != resourcev1.DeviceAllocationModeExactCount {
				continue
			}
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// IsGPUClass reports whether a DeviceClass hands out GPUs: it is gpu.nvidia.com, or one of its
// selectors asks for that driver's devices.
func IsGPUClass(c *resourcev1.DeviceClass) bool {
	if c.Name == convoy.DriverGPU {
		return true
	}
	for _, s := range c.Spec.Selectors {
		if s.CEL != nil && strings.Contains(s.CEL.Expression, `"`+convoy.DriverGPU+`"`) {
			return true
		}
	}
	return false
}

// draGPUs knows the GPUs pods claim through DRA and nodes publish in ResourceSlices, and which
// devices claims hold, from the scheduler's informers. Its own lock guards the maps.
type draGPUs struct {
	templates resourcelisters.ResourceClaimTemplateLister
	claims    resourcelisters.ResourceClaimLister
	classes   resourcelisters.DeviceClassLister

	mu sync.Mutex
	// slices holds the gpu.nvidia.com ResourceSlices of one node each, by node and name; nodes
	// their devices by node, pools the node of each pool.
	slices map[string]map[string]*resourcev1.ResourceSlice
	nodes  map[string][]draDevice
	pools  map[string]string
	// allocated holds the claim ("namespace/name") each allocated GPU device ("pool/device") is
	// allocated to, and held the devices of each claim.
	allocated map[string]string
	held      map[string][]string
}

func newDRAGPUs() *draGPUs {
	return &draGPUs{slices: map[string]map[string]*resourcev1.ResourceSlice{}, nodes: map[string][]draDevice{},
		pools: map[string]string{}, allocated: map[string]string{}, held: map[string][]string{}}
}

// draDevice is a GPU a ResourceSlice publishes: its pool and name, its uuid attribute and its
// index attribute (-1 without), and the device as published, for selectors.
type draDevice struct {
	pool, name, uuid string
	index            int64
	dev              *resourcev1.Device
}

func (d draDevice) key() string { return d.pool + "/" + d.name }

// podGPUs is ClaimedGPUs from the listers: a claim made from a template counts the template's
// request, so that a gang is counted whole before the claims of its pods exist.
func (d *draGPUs) podGPUs(pod *corev1.Pod) int {
	if d == nil || len(pod.Spec.ResourceClaims) == 0 {
		return 0
	}
	return ClaimedGPUs(pod, func(pc corev1.PodResourceClaim) *resourcev1.ResourceClaimSpec {
		return d.claimSpec(pod.Namespace, pc)
	}, d.gpuClass)
}

// gpuClass reports whether the DeviceClass hands out GPUs (IsGPUClass).
func (d *draGPUs) gpuClass(name string) bool {
	if name == convoy.DriverGPU {
		return true
	}
	c, err := d.classes.Get(name)
	return err == nil && IsGPUClass(c)
}

// nodeGPUs is how many GPUs the node's ResourceSlices publish.
func (d *draGPUs) nodeGPUs(node string) int {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.nodes[node])
}

// nodeSlices returns the node's gpu.nvidia.com ResourceSlices.
func (d *draGPUs) nodeSlices(node string) []*resourcev1.ResourceSlice {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*resourcev1.ResourceSlice, 0, len(d.slices[node]))
	for _, s := range d.slices[node] {
		out = append(out, s)
	}
	return out
}

// draNode is a node's DRA GPUs numbered for the planner.
type draNode struct {
	// devices holds the devices by index; a hole has no name.
	devices   []draDevice
	healthy   planner.GPUSet
	unhealthy int
	topology  *planner.GPUTopology
	// claimed holds the devices each claim ("namespace/name") is allocated.
	claimed map[string]planner.GPUSet
}

// node numbers the node's devices. Where every device's uuid names a GPU of the node's GPUNode
// (gn), a device takes that GPU's index, health and NVLink links and island; else the devices are
// numbered in the order of their index attribute, then name, all healthy, without topology.
func (d *draGPUs) node(name string, gn *gpuNode) draNode {
	d.mu.Lock()
	defer d.mu.Unlock()
	devs := d.nodes[name]
	var out draNode
	if gn != nil && len(gn.uuids) > 0 {
		byIndex := make([]draDevice, planner.MaxGPUsPerNode)
		n := 0
		for _, dev := range devs {
			i, ok := gn.uuids[dev.uuid]
			if !ok || byIndex[i].name != "" {
				n = -1
				break
			}
			byIndex[i] = dev
			out.healthy |= planner.NewGPUSet(i)
			n = max(n, i+1)
		}
		if n > 0 {
			out.devices = byIndex[:n]
			out.unhealthy = out.healthy.Len() - (out.healthy & gn.healthy).Len()
			out.healthy &= gn.healthy
			out.topology = gn.topology
		} else {
			out.healthy = 0
		}
	}
	if out.devices == nil {
		out.devices = slices.Clone(devs[:min(len(devs), planner.MaxGPUsPerNode)])
		out.healthy = planner.FirstGPUs(len(out.devices))
	}
	for i, dev := range out.devices {
		if c := d.allocated[dev.key()]; c != "" && dev.name != "" {
			if out.claimed == nil {
				out.claimed = map[string]planner.GPUSet{}
			}
			out.claimed[c] |= planner.NewGPUSet(i)
		}
	}
	return out
}

// setSlice records a ResourceSlice (nil: deleted) and returns the nodes whose GPUs changed.
func (d *draGPUs) setSlice(name string, s *resourcev1.ResourceSlice) []string {
	node := ""
	if s != nil && s.Spec.Driver == convoy.DriverGPU && s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var changed []string
	for n, m := range d.slices {
		if _, ok := m[name]; ok && n != node {
			delete(m, name)
			changed = append(changed, n)
		}
	}
	if node != "" {
		if d.slices[node] == nil {
			d.slices[node] = map[string]*resourcev1.ResourceSlice{}
		}
		d.slices[node][name] = s
		changed = append(changed, node)
	}
	var out []string
	for _, n := range changed {
		devs := devicesOf(d.slices[n])
		if len(d.slices[n]) == 0 {
			delete(d.slices, n)
		}
		if slices.Equal(devs, d.nodes[n]) {
			continue
		}
		if len(devs) > 0 {
			d.nodes[n] = devs
		} else {
			delete(d.nodes, n)
		}
		for _, dev := range devs {
			d.pools[dev.pool] = n
		}
		out = append(out, n)
	}
	return out
}

// devicesOf lists the GPUs of a node's slices in the order of their index attribute, then name.
func devicesOf(m map[string]*resourcev1.ResourceSlice) []draDevice {
	var devs []draDevice
	for _, s := range m {
		for j, dv := range s.Spec.Devices {
			dev := draDevice{pool: s.Spec.Pool.Name, name: dv.Name, index: -1, dev: &s.Spec.Devices[j]}
			if a, ok := dv.Attributes["uuid"]; ok && a.StringValue != nil {
				dev.uuid = *a.StringValue
			}
			if a, ok := dv.Attributes["index"]; ok && a.IntValue != nil {
				dev.index = *a.IntValue
			}
			devs = append(devs, dev)
		}
	}
	slices.SortFunc(devs, func(a, b draDevice) int {
		if a.index != b.index {
			return cmp.Compare(a.index, b.index)
		}
		return cmp.Or(cmp.Compare(len(a.name), len(b.name)), cmp.Compare(a.name, b.name), cmp.Compare(a.pool, b.pool))
	})
	return devs
}

// setClaim records the GPU devices a ResourceClaim (nil: deleted) is allocated and returns the
// nodes whose devices it takes or frees, and whether it frees any.
func (d *draGPUs) setClaim(key string, c *resourcev1.ResourceClaim) (nodes []string, freed bool) {
	var now []string
	if c != nil && c.Status.Allocation != nil {
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == convoy.DriverGPU {
				now = append(now, r.Pool+"/"+r.Device)
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.held[key]
	if slices.Equal(old, now) {
		return nil, false
	}
	for _, k := range old {
		if d.allocated[k] == key {
			delete(d.allocated, k)
			freed = true
		}
		if n := d.pools[poolOf(k)]; n != "" {
			nodes = append(nodes, n)
		}
	}
	for _, k := range now {
		d.allocated[k] = key
		if n := d.pools[poolOf(k)]; n != "" {
			nodes = append(nodes, n)
		}
	}
	if len(now) > 0 {
		d.held[key] = now
	} else {
		delete(d.held, key)
	}
	return nodes, freed
}

func poolOf(key string) string {
	pool, _, _ := strings.Cut(key, "/")
	return pool
}

// podClaims names the pod's ResourceClaims ("namespace/name"): those it names, those made for it
// from templates as its status records them, and the one DynamicResources made for its extended
// resources backed by a DeviceClass (extendedResourceClaimStatus).
func podClaims(pod *corev1.Pod) []string {
	var out []string
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil {
			out = append(out, pod.Namespace+"/"+*pc.ResourceClaimName)
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil {
			out = append(out, pod.Namespace+"/"+*st.ResourceClaimName)
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil && st.ResourceClaimName != "" {
		out = append(out, pod.Namespace+"/"+st.ResourceClaimName)
	}
	return out
}

// onSlice is the ResourceSlice informer's handler: a node whose GPUs changed has its base made
// anew, and the pods whose gang found no room are woken.
func (s *State) onSlice(obj any) {
	if sl, ok := obj.(*resourcev1.ResourceSlice); ok {
		s.sliceChanged(sl.Name, sl)
	}
}

func (s *State) onSliceDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if sl, ok := obj.(*resourcev1.ResourceSlice); ok {
		s.sliceChanged(sl.Name, nil)
	}
}

func (s *State) sliceChanged(name string, sl *resourcev1.ResourceSlice) {
	s.draNodesChanged(s.dra.setSlice(name, sl), true)
}

// onClaim is the ResourceClaim informer's handler: the nodes whose devices a claim takes or frees
// have their bases made anew, and where it frees some the pods whose gang found no room are woken.
func (s *State) onClaim(obj any) {
	if c, ok := obj.(*resourcev1.ResourceClaim); ok {
		s.draNodesChanged(s.dra.setClaim(c.Namespace+"/"+c.Name, c))
	}
}

func (s *State) onClaimDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if c, ok := obj.(*resourcev1.ResourceClaim); ok {
		s.draNodesChanged(s.dra.setClaim(c.Namespace+"/"+c.Name, nil))
	}
}

// onDeviceClass is the DeviceClass informer's handler: a class that backs the GPU extended
// resource with DRA devices (spec.extendedResourceName), made, changed or gone, changes which
// nodes are room for the gangs of that resource (extendedClass), so their verdicts no longer hold
// and the pods that found no room are woken. It reports whether the class backs the resource.
func (s *State) onDeviceClass(obj any) bool {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	c, ok := obj.(*resourcev1.DeviceClass)
	if !ok || c.Spec.ExtendedResourceName == nil || corev1.ResourceName(*c.Spec.ExtendedResourceName) != s.opts.GPUResource {
		return false
	}
	s.bump()
	s.waiters.moreRoom()
	return true
}

func (s *State) draNodesChanged(nodes []string, moreRoom bool) {
	if len(nodes) == 0 {
		return
	}
	s.mu.Lock()
	for _, n := range nodes {
		s.nodes.forget(n)
	}
	s.mu.Unlock()
	s.inventory.touched(nodes)
	if moreRoom {
		s.bump()
		s.waiters.moreRoom()
	}
}

// DRANode reports whether the node's GPUs are DRA devices: its pods' devices are what their claims
// are allocated, whatever GPUs a plan counted.
func (s *State) DRANode(node string) bool { return s != nil && s.dra.nodeGPUs(node) > 0 }

// PodGPUs is how many GPUs the pod asks for: its GPU extended resource, else the GPUs its DRA
// claims ask of a GPU DeviceClass.
func (s *State) PodGPUs(pod *corev1.Pod) int {
	return s.nodes.podGPUs(pod)
}
