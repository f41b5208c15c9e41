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
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	toolscache "k8s.io/client-go/tools/cache"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
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

// SliceGPUs is how many GPUs a ResourceSlice publishes for its node: its devices, when NVIDIA's
// DRA driver (gpu.nvidia.com) publishes them for one node.
func SliceGPUs(s *resourcev1.ResourceSlice) (node string, n int) {
	if s.Spec.Driver != convoy.DriverGPU || s.Spec.NodeName == nil {
		return "", 0
	}
	return *s.Spec.NodeName, len(s.Spec.Devices)
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

// draGPUs counts the GPUs pods claim through DRA and nodes publish in ResourceSlices, from the
// scheduler's informers. Its own lock guards the counts by node.
type draGPUs struct {
	templates resourcelisters.ResourceClaimTemplateLister
	claims    resourcelisters.ResourceClaimLister
	classes   resourcelisters.DeviceClassLister

	mu sync.Mutex
	// slices holds each ResourceSlice's node and GPUs; nodes the GPUs by node.
	slices map[string]sliceGPUs
	nodes  map[string]int
}

type sliceGPUs struct {
	node string
	n    int
}

// podGPUs is ClaimedGPUs from the listers: a claim made from a template counts the template's
// request, so that a gang is counted whole before the claims of its pods exist.
func (d *draGPUs) podGPUs(pod *corev1.Pod) int {
	if d == nil || len(pod.Spec.ResourceClaims) == 0 {
		return 0
	}
	return ClaimedGPUs(pod, func(pc corev1.PodResourceClaim) *resourcev1.ResourceClaimSpec {
		if pc.ResourceClaimName != nil {
			if c, err := d.claims.ResourceClaims(pod.Namespace).Get(*pc.ResourceClaimName); err == nil {
				return &c.Spec
			}
		} else if pc.ResourceClaimTemplateName != nil {
			if t, err := d.templates.ResourceClaimTemplates(pod.Namespace).Get(*pc.ResourceClaimTemplateName); err == nil {
				return &t.Spec.Spec
			}
		}
		return nil
	}, func(name string) bool {
		if name == convoy.DriverGPU {
			return true
		}
		c, err := d.classes.Get(name)
		return err == nil && IsGPUClass(c)
	})
}

// nodeGPUs is how many GPUs the node's ResourceSlices publish.
func (d *draGPUs) nodeGPUs(node string) int {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nodes[node]
}

// setSlice records a ResourceSlice (nil: deleted) and returns the nodes whose GPUs changed.
func (d *draGPUs) setSlice(name string, s *resourcev1.ResourceSlice) []string {
	var now sliceGPUs
	if s != nil {
		now.node, now.n = SliceGPUs(s)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.slices[name]
	if old == now {
		return nil
	}
	if now.n > 0 {
		d.slices[name] = now
	} else {
		delete(d.slices, name)
	}
	d.nodes[old.node] -= old.n
	if d.nodes[old.node] <= 0 {
		delete(d.nodes, old.node)
	}
	if now.n > 0 {
		d.nodes[now.node] += now.n
	}
	return []string{old.node, now.node}
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
	nodes := s.dra.setSlice(name, sl)
	if len(nodes) == 0 {
		return
	}
	s.mu.Lock()
	for _, n := range nodes {
		s.nodes.forget(n)
	}
	s.mu.Unlock()
	s.bump()
	s.waiters.moreRoom()
}

// PodGPUs is how many GPUs the pod asks for: its GPU extended resource, else the GPUs its DRA
// claims ask of a GPU DeviceClass.
func (s *State) PodGPUs(pod *corev1.Pod) int {
	return s.nodes.podGPUs(pod)
}
