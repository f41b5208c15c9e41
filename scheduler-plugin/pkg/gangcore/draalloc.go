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
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// A DRA gang's pods get the devices of their slots from the plan, not from DynamicResources: the
// pod's PreFilter (before DynamicResources') asks upstream's structured allocator for the claim's
// allocation from the slot's devices alone, and puts the claim, allocated and reserved for the pod,
// in the scheduler's claim cache (SharedDRAManager). DynamicResources then finds the claim
// allocated: its PreFilter builds no allocator, its Filter checks the allocation's node, and its
// PreBind writes nothing. The pod's PreBind writes the claim: the finalizer DynamicResources
// would add, then the allocation and reservation in its status. A write that fails unreserves
// the pod, and the gang is planned again.

// pluginDRAAllocation names the allocation of the slot's devices in a gang's avoided nodes.
const pluginDRAAllocation = "GangPlacement"

// claimWrite is a claim of a pod that its PreBind writes: the claim as the informer had it, and
// the allocation to give it (nil: the claim keeps its own); clear removes the claim's allocation
// of other devices first.
type claimWrite struct {
	claim      *resourcev1.ResourceClaim
	allocation *resourcev1.AllocationResult
	clear      bool
}

// AllocateClaims allocates the pod's GPU claims the devices of its slot, in the scheduler's claim
// cache (see above). A pod of no DRA node, without claims, or whose claims are not all there or
// are reserved for other pods is left to DynamicResources. Where the slot's devices do not satisfy
// a claim (its selectors), the node is left out of the gang's plans as a Filter's rejection would
// be, and the pod is Unschedulable.
func (s *State) AllocateClaims(ctx context.Context, pod *corev1.Pod, sl Slot) *fwk.Status {
	s.RestoreClaims(pod)
	dm := s.handle.SharedDRAManager()
	if dm == nil || len(pod.Spec.ResourceClaims) == 0 || s.dra == nil {
		return nil
	}
	ni, err := s.handle.SnapshotSharedLister().NodeInfos().Get(sl.Node)
	if err != nil || ni.Node() == nil {
		return nil
	}
	s.mu.Lock()
	b := s.nodes.base(ni, s.inventory.get(sl.Node), s.book)
	s.mu.Unlock()
	if !b.dra {
		return nil
	}
	chosen := sets.New[string]()
	for _, i := range sl.GPUs.Indices() {
		if i < len(b.devices) && b.devices[i].name != "" {
			chosen.Insert(b.devices[i].key())
		}
	}
	var writes []claimWrite
	var toAllocate []*resourcev1.ResourceClaim
	for _, key := range podClaims(pod) {
		ns, name, _ := strings.Cut(key, "/")
		c, err := dm.ResourceClaims().Get(ns, name)
		if err != nil || !s.dra.gpuClaim(c) {
			klog.FromContext(ctx).V(4).Info("Leaving a claim to DynamicResources", "pod", klog.KObj(pod), "claim", key, "err", err)
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if r.UID != pod.UID {
				klog.FromContext(ctx).V(2).Info("Leaving the pod's claims to DynamicResources: a claim is reserved for another", "pod", klog.KObj(pod), "claim", key, "for", r.Name)
				return nil
			}
		}
		w := claimWrite{claim: c}
		if held := allocatedGPUs(c); c.Status.Allocation != nil {
			if len(held) > 0 && chosen.HasAll(held...) {
				chosen.Delete(held...)
				writes = append(writes, w)
				continue
			}
			w.clear = true
		}
		writes = append(writes, w)
		free := c.DeepCopy()
		free.Status = resourcev1.ResourceClaimStatus{}
		toAllocate = append(toAllocate, free)
	}
	if len(writes) == 0 {
		return nil
	}
	if len(toAllocate) > 0 {
		taken := sets.New[structured.DeviceID]()
		for _, d := range b.devices {
			if d.name != "" && !chosen.Has(d.key()) {
				taken.Insert(structured.MakeDeviceID(convoy.DriverGPU, d.pool, d.name))
			}
		}
		a, err := structured.NewAllocator(ctx, structured.Features{}, structured.AllocatedState{AllocatedDevices: taken},
			dm.DeviceClasses(), s.dra.nodeSlices(sl.Node), s.celCache)
		if err != nil {
			return fwk.AsStatus(err)
		}
		results, err := a.Allocate(ctx, ni.Node(), toAllocate)
		if err != nil || len(results) != len(toAllocate) {
			why := fmt.Sprintf("devices %s planned for pod %s do not satisfy its claims", strings.Join(sets.List(chosen), ", "), klog.KObj(pod))
			if err != nil {
				why = fmt.Sprintf("allocating the claims of pod %s: %v", klog.KObj(pod), err)
			}
			s.Rejected(ctx, pod, sl.Node, pluginDRAAllocation, why)
			return fwk.NewStatus(fwk.Unschedulable, why)
		}
		j := 0
		for i := range writes {
			if writes[i].claim.Status.Allocation == nil || writes[i].clear {
				writes[i].allocation = &results[j]
				j++
			}
		}
	}
	for i, w := range writes {
		if err := dm.ResourceClaims().AssumeClaimAfterAPICall(w.assumed(pod)); err != nil {
			klog.FromContext(ctx).V(2).Info("Leaving the pod's claims to DynamicResources", "pod", klog.KObj(pod), "claim", klog.KObj(w.claim), "err", err)
			for _, done := range writes[:i] {
				dm.ResourceClaims().AssumedClaimRestore(done.claim.Namespace, done.claim.Name)
			}
			s.ClaimsRestored()
			return nil
		}
	}
	s.claimMu.Lock()
	s.claimWrites[pod.UID] = writes
	s.claimMu.Unlock()
	klog.FromContext(ctx).V(4).Info("Allocated the pod's claims from its slot", "pod", klog.KObj(pod), "node", sl.Node, "claims", len(writes))
	return nil
}

// assumed is the claim as PreBind will have written it: allocated and reserved for the pod.
func (w claimWrite) assumed(pod *corev1.Pod) *resourcev1.ResourceClaim {
	c := w.claim.DeepCopy()
	if w.allocation != nil {
		c.Status.Allocation = w.allocation
		c.Status.Devices = nil
		c.Status.ReservedFor = nil
	}
	if !slices.ContainsFunc(c.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }) {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
	}
	return c
}

// allocatedGPUs lists the GPU devices ("pool/device") the claim is allocated.
func allocatedGPUs(c *resourcev1.ResourceClaim) []string {
	if c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == convoy.DriverGPU {
			out = append(out, r.Pool+"/"+r.Device)
		}
	}
	return out
}

// gpuClaim reports whether every request of the claim asks an exact count of a GPU DeviceClass.
func (d *draGPUs) gpuClaim(c *resourcev1.ResourceClaim) bool {
	rs := c.Spec.Devices.Requests
	for _, r := range rs {
		e := r.Exactly
		if e == nil || !d.gpuClass(e.DeviceClassName) || e.AllocationMode != "" && e.AllocationMode != resourcev1.DeviceAllocationModeExactCount {
			return false
		}
	}
	return len(rs) > 0 && len(c.Spec.Devices.Constraints) == 0
}

// WriteClaims writes the claims AllocateClaims allocated the pod: the finalizer, then the
// allocation and the pod's reservation. It returns an error when a write fails (a conflict: the
// claim changed since), and the scheduler unreserves the pod.
func (s *State) WriteClaims(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	s.claimMu.Lock()
	writes := s.claimWrites[pod.UID]
	delete(s.claimWrites, pod.UID)
	s.claimMu.Unlock()
	dm := s.handle.SharedDRAManager()
	for i, w := range writes {
		c, err := writeClaim(ctx, s.handle.ClientSet().ResourceV1().ResourceClaims(w.claim.Namespace), pod, w)
		if err != nil {
			for _, rest := range writes[i:] {
				dm.ResourceClaims().AssumedClaimRestore(rest.claim.Namespace, rest.claim.Name)
			}
			s.ClaimsRestored()
			return fwk.AsStatus(fmt.Errorf("writing the allocation of claim %s: %w", klog.KObj(w.claim), err))
		}
		if err := dm.ResourceClaims().AssumeClaimAfterAPICall(c); err != nil {
			klog.FromContext(ctx).V(5).Info("Claim not kept in the claim cache", "claim", klog.KObj(c), "err", err)
		}
	}
	return nil
}

// writeClaim writes one claim. On a conflict (a benign change since the informer had it, as
// DynamicResources meets too) it reads the claim again and retries while the claim holds no other
// allocation and no other pod.
func writeClaim(ctx context.Context, api resourceclient.ResourceClaimInterface, pod *corev1.Pod, w claimWrite) (*resourcev1.ResourceClaim, error) {
	c := w.claim.DeepCopy()
	var out *resourcev1.ResourceClaim
	first := true
	attempt := func() error {
		var err error
		if !first {
			if c, err = api.Get(ctx, w.claim.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			if c.UID != w.claim.UID || c.DeletionTimestamp != nil {
				return fmt.Errorf("the claim was deleted")
			}
		}
		first = false
		for _, r := range c.Status.ReservedFor {
			if r.UID != pod.UID {
				return fmt.Errorf("the claim is reserved for %s %s", r.Resource, r.Name)
			}
		}
		if w.allocation != nil && c.Status.Allocation != nil && !equality.Semantic.DeepEqual(c.Status.Allocation.Devices, w.allocation.Devices) {
			if !w.clear {
				return fmt.Errorf("the claim was allocated other devices")
			}
			c.Status = resourcev1.ResourceClaimStatus{}
			if c, err = api.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		if w.allocation != nil && !slices.Contains(c.Finalizers, resourcev1.Finalizer) {
			c.Finalizers = append(c.Finalizers, resourcev1.Finalizer)
			if c, err = api.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		want := claimWrite{claim: c, allocation: w.allocation}.assumed(pod)
		if want.Status.Allocation == nil {
			return fmt.Errorf("the claim was deallocated")
		}
		if equality.Semantic.DeepEqual(want.Status, c.Status) {
			out = c
			return nil
		}
		out, err = api.UpdateStatus(ctx, want, metav1.UpdateOptions{})
		return err
	}
	// RetryOnConflict returns nil for an attempt that fails with a context's error (a request
	// timed out, the scheduler stopping) when no conflict came before it: keep the attempt's.
	var last error
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		last = attempt()
		return last
	})
	if err == nil {
		err = last
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WritesClaims reports whether the pod has claims for WriteClaims.
func (s *State) WritesClaims(pod *corev1.Pod) bool {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	return len(s.claimWrites[pod.UID]) > 0
}

// RestoreClaims takes back the allocations AllocateClaims put in the claim cache for the pod and
// that were not written: the pod was not bound.
func (s *State) RestoreClaims(pod *corev1.Pod) {
	s.claimMu.Lock()
	writes := s.claimWrites[pod.UID]
	delete(s.claimWrites, pod.UID)
	s.claimMu.Unlock()
	if len(writes) == 0 {
		return
	}
	dm := s.handle.SharedDRAManager()
	for _, w := range writes {
		dm.ResourceClaims().AssumedClaimRestore(w.claim.Namespace, w.claim.Name)
	}
	s.ClaimsRestored()
}
