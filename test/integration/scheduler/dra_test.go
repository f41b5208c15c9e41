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

package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// holdGate is the scheduling gate that keeps a gang's second pod back, and with it the first at
// Coscheduling's Permit, after the gang's plan chose and assumed the first pod's devices.
const holdGate = "convoy.dev/test-hold"

// TestDRAClaimWrittenByAnotherBeforePreBind: between the plan that allocates a worker's claim (in
// PreFilter) and PreBind's write of it, another writer changes the claim. The first worker of
// each gang waits at Permit for its gated sibling while the test writes its claim: a label (a
// benign write, as a user's or a controller's), or the claim deleted and made again. PreBind's
// write conflicts; the benign change is read again and the write retried, the pod bound at its
// first attempt with the label kept; the claim made again fails the write, and the pod is
// planned and allocated again. Every worker ends bound with its own devices of its node, and no
// device is allocated to two claims.
func TestDRAClaimWrittenByAnotherBeforePreBind(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.nodes(t, []framework.NodeSpec{
		{Name: "claims-a", DRAGPUs: 4, GPUProduct: "NVIDIA-H100-80GB-HBM3", Rack: "r1"},
		{Name: "claims-b", DRAGPUs: 4, GPUProduct: "NVIDIA-H100-80GB-HBM3", Rack: "r1"},
	})
	t.Cleanup(func() {
		for _, n := range []string{"claims-a", "claims-b"} {
			_ = e.c.Client.Delete(context.Background(), &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{
				Name: n + "-" + strings.ReplaceAll(convoy.DriverGPU, ".", "-")}})
		}
	})
	var all []string
	for name, change := range map[string]func(t *testing.T, claim *resourcev1.ResourceClaim){
		"labelled": func(t *testing.T, claim *resourcev1.ResourceClaim) {
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"convoy.dev/other-writer":"was-here"}}}`))
			must(t, e.c.Client.Patch(t.Context(), claim, patch))
		},
		"remade": func(t *testing.T, claim *resourcev1.ResourceClaim) {
			must(t, e.c.Client.Delete(t.Context(), claim))
			must(t, e.c.Client.Create(t.Context(), gpuClaim(ns, claim.Name)))
		},
	} {
		gang := makeGang(ns, name, 2, 0)
		for i, p := range gang.pods {
			claimGPUs(p, p.Name+"-gpu")
			must(t, e.c.Client.Create(t.Context(), gpuClaim(ns, p.Name+"-gpu")))
			all = append(all, p.Name+"-gpu")
			if i == 1 {
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: holdGate}}
			}
		}
		planned := func() float64 {
			return e.metrics(t).value("convoy_scheduler_gang_plans_total", map[string]string{"result": "planned"})
		}
		before := planned()
		// The gated worker first: the first, its gang's leader, is then let through at once.
		must(t, e.c.Client.Create(t.Context(), gang.pg))
		must(t, e.c.Client.Create(t.Context(), gang.pods[1]))
		must(t, e.c.Client.Create(t.Context(), gang.pods[0]))
		// The plan allocated the first worker's claim in the scheduler's claim cache; the gated
		// second holds it at Permit, before its PreBind.
		util.Eventually(t, 200*time.Millisecond, bindTimeout, "the gang "+name+" to be planned", func() (bool, string) {
			return planned() > before, "no new plan"
		})
		first := &resourcev1.ResourceClaim{}
		must(t, e.c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: gang.pods[0].Name + "-gpu"}, first))
		if first.Status.Allocation != nil || first.Status.ReservedFor != nil {
			t.Fatalf("claim %s is written before its pod's PreBind: %+v", first.Name, first.Status)
		}
		change(t, first)
		second := gang.pods[1]
		must(t, e.c.Client.Patch(t.Context(), second, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`))))
		pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
		for _, p := range pods {
			claim := &resourcev1.ResourceClaim{}
			must(t, e.c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: p.Name + "-gpu"}, claim))
			a := claim.Status.Allocation
			if a == nil || len(a.Devices.Results) != 2 || len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != p.UID {
				t.Errorf("%s: claim %s is %+v, want 2 devices, reserved for pod %s", name, claim.Name, claim.Status, p.Name)
				continue
			}
			for _, r := range a.Devices.Results {
				if r.Pool != p.Spec.NodeName {
					t.Errorf("%s: claim %s has device %s/%s, want one of its pod's node %s", name, claim.Name, r.Pool, r.Device, p.Spec.NodeName)
				}
			}
			if name == "labelled" && p.Name == gang.pods[0].Name && claim.Labels["convoy.dev/other-writer"] != "was-here" {
				t.Errorf("claim %s lost the other writer's label: %v", claim.Name, claim.Labels)
			}
		}
		failed := e.failedScheduling(t, ns, gang.pods[0].Name, "writing the allocation of claim")
		switch {
		case name == "labelled" && failed != "":
			t.Errorf("pod %s failed an attempt on a benign change to its claim: %s", gang.pods[0].Name, failed)
		case name == "remade" && failed == "":
			t.Errorf("pod %s has no FailedScheduling Event for its claim made again: it was bound without a new allocation", gang.pods[0].Name)
		}
	}
	owner := map[string]string{}
	for _, name := range all {
		claim := &resourcev1.ResourceClaim{}
		must(t, e.c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, claim))
		for _, r := range claim.Status.Allocation.Devices.Results {
			d := r.Pool + "/" + r.Device
			if other, ok := owner[d]; ok {
				t.Errorf("device %s is allocated to claims %s and %s", d, other, name)
			}
			owner[d] = name
		}
	}
}

// TestDRAPodTurnedAwayBindsWhenAClaimFreesItsDevice: a pod whose claim DynamicResources allocates
// (a NIC, no GPU: GangPlacement leaves it alone) finds the node's one NIC taken and is turned
// away. The pod that held it is deleted and its claim deallocated, as kube-controller-manager
// does: the waiting pod binds at once, though the shipped profile's DynamicResources registers
// no claim update with the scheduling queue, not at the queue's 5-minute flush.
func TestDRAPodTurnedAwayBindsWhenAClaimFreesItsDevice(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	const driver = "nic.example.com"
	e.nodes(t, []framework.NodeSpec{{Name: "nic-a"}})
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "nic-a-nics"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: driver, NodeName: ptr.To("nic-a"), Pool: resourcev1.ResourcePool{Name: "nic-a", ResourceSliceCount: 1},
		Devices: []resourcev1.Device{{Name: "nic-0"}}}}
	for _, o := range []client.Object{class, slice} {
		must(t, e.c.Client.Create(t.Context(), o))
		t.Cleanup(func() { _ = e.c.Client.Delete(context.Background(), o) })
	}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"holder", "waiter"} {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-nic"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "nic",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: driver}}}}}}
		must(t, e.c.Client.Create(t.Context(), claim))
		p := makePod(ns, name, 0)
		delete(p.Spec.Containers[0].Resources.Requests, framework.ResourceGPU)
		p.Spec.Containers[0].Resources.Limits = nil
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "nic", ResourceClaimName: &claim.Name}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "nic"}}
		pods[name] = p
	}
	must(t, e.c.Client.Create(t.Context(), pods["holder"]))
	waitBound(t, e.c.Client, ns, []string{"holder"}, bindTimeout)
	must(t, e.c.Client.Create(t.Context(), pods["waiter"]))
	waitUnschedulable(t, e.c.Client, ns, []string{"waiter"}, "cannot allocate all claims")
	must(t, e.c.Client.Delete(t.Context(), pods["holder"], client.GracePeriodSeconds(0)))
	util.Eventually(t, 200*time.Millisecond, bindTimeout, "the holder's claim to be deallocated", func() (bool, string) {
		claim := &resourcev1.ResourceClaim{}
		must(t, e.c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "holder-nic"}, claim))
		if claim.Status.Allocation == nil {
			return true, ""
		}
		claim.Status = resourcev1.ResourceClaimStatus{}
		err := e.c.Client.Status().Update(t.Context(), claim)
		return err == nil, fmt.Sprint(err)
	})
	waitBound(t, e.c.Client, ns, []string{"waiter"}, 20*time.Second)
}

// TestDRAExtendedResourceGangGetsTheDevicesItsDeviceClassBacks: a gang that asks nvidia.com/gpu
// waits on nodes whose GPUs are only DRA devices until a DeviceClass backs nvidia.com/gpu with
// them (spec.extendedResourceName); then, at once, it is planned there: each worker gets 4 devices of
// its own node in the claim DynamicResources makes for it (status.extendedResourceClaimStatus), no
// device twice, and no convoy.dev/gpu-indices, which would name GPUs its claim does not hold. The
// devices are then taken: a gang of one GPU more waits, and binds once a worker is gone and its
// claim with it.
func TestDRAExtendedResourceGangGetsTheDevicesItsDeviceClassBacks(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	pool := map[string]string{"convoy.dev/test-pool": "extended"}
	e.nodes(t, []framework.NodeSpec{
		{Name: "extended-a", DRAGPUs: 4, GPUProduct: "NVIDIA-H100-80GB-HBM3", Rack: "r1", Labels: pool},
		{Name: "extended-b", DRAGPUs: 4, GPUProduct: "NVIDIA-H100-80GB-HBM3", Rack: "r1", Labels: pool},
	})
	t.Cleanup(func() {
		for _, n := range []string{"extended-a", "extended-b"} {
			_ = e.c.Client.Delete(context.Background(), &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{
				Name: n + "-" + strings.ReplaceAll(convoy.DriverGPU, ".", "-")}})
		}
	})
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "convoy-test-extended-gpu"}, Spec: resourcev1.DeviceClassSpec{
		Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + convoy.DriverGPU + `"`}}},
		ExtendedResourceName: ptr.To(string(framework.ResourceGPU))}}
	onPool := func(g *gangWrapper) *gangWrapper {
		for _, p := range g.pods {
			p.Spec.NodeSelector = pool
		}
		return g
	}

	gang := onPool(makeGang(ns, "extended", 2, 4)).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, gang.names(), ns+"/extended needs 2 pod(s) × 4 GPU(s)")
	must(t, e.c.Client.Create(t.Context(), class))
	t.Cleanup(func() { _ = e.c.Client.Delete(context.Background(), class) })
	pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
	owner := map[string]string{}
	claims := map[string]string{}
	for _, p := range pods {
		if v, ok := p.Annotations[convoy.AnnotationGPUIndices]; ok {
			t.Errorf("pod %s has %s %q on a node of DRA GPUs", p.Name, convoy.AnnotationGPUIndices, v)
		}
		st := p.Status.ExtendedResourceClaimStatus
		if st == nil || st.ResourceClaimName == "" {
			t.Errorf("pod %s has no extendedResourceClaimStatus: %+v", p.Name, p.Status)
			continue
		}
		claims[p.Name] = st.ResourceClaimName
		claim := &resourcev1.ResourceClaim{}
		must(t, e.c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: st.ResourceClaimName}, claim))
		a := claim.Status.Allocation
		if a == nil || len(a.Devices.Results) != 4 || len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != p.UID {
			t.Errorf("pod %s: claim %s is %+v, want 4 devices, reserved for the pod", p.Name, claim.Name, claim.Status)
			continue
		}
		for _, r := range a.Devices.Results {
			d := r.Pool + "/" + r.Device
			if r.Driver != convoy.DriverGPU || r.Pool != p.Spec.NodeName {
				t.Errorf("pod %s on %s has device %s of driver %s", p.Name, p.Spec.NodeName, d, r.Driver)
			}
			if other, ok := owner[d]; ok {
				t.Errorf("device %s is allocated to pods %s and %s", d, other, p.Name)
			}
			owner[d] = p.Name
		}
	}
	if t.Failed() {
		return
	}

	late := onPool(makeGang(ns, "late", 1, 1)).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, late.names(), ns+"/late needs 1 pod(s) × 1 GPU(s)")
	gone := pods[0]
	must(t, e.c.Client.Delete(t.Context(), gone, client.GracePeriodSeconds(0)))
	// The claim of the pod that is gone is deallocated and deleted, as kube-controller-manager's
	// resourceclaim controller does.
	util.Eventually(t, 200*time.Millisecond, bindTimeout, "the gone worker's claim to be deleted", func() (bool, string) {
		claim := &resourcev1.ResourceClaim{}
		err := e.c.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: claims[gone.Name]}, claim)
		switch {
		case apierrors.IsNotFound(err):
			return true, ""
		case err != nil:
			return false, err.Error()
		case claim.Status.Allocation != nil || len(claim.Status.ReservedFor) > 0:
			claim.Status = resourcev1.ResourceClaimStatus{}
			return false, fmt.Sprint("deallocating: ", e.c.Client.Status().Update(t.Context(), claim))
		case len(claim.Finalizers) > 0:
			claim.Finalizers = nil
			return false, fmt.Sprint("removing the finalizers: ", e.c.Client.Update(t.Context(), claim))
		}
		return false, fmt.Sprint("deleting: ", e.c.Client.Delete(t.Context(), claim))
	})
	if got := waitBound(t, e.c.Client, ns, late.names(), bindTimeout)[0].Spec.NodeName; got != gone.Spec.NodeName {
		t.Errorf("pod %s is on %s, want %s, where the gone worker's devices are free", late.pods[0].Name, got, gone.Spec.NodeName)
	}
}

// gpuClaim is a ResourceClaim of 2 devices of DeviceClass gpu.nvidia.com.
func gpuClaim(ns, name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: convoy.DriverGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2}}}}}}
}

// claimGPUs makes the pod's worker take its GPUs from the named claim instead of nvidia.com/gpu.
func claimGPUs(p *corev1.Pod, claim string) {
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	c := &p.Spec.Containers[0]
	delete(c.Resources.Requests, framework.ResourceGPU)
	delete(c.Resources.Limits, framework.ResourceGPU)
	c.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
}

// failedScheduling returns the note of a FailedScheduling Event of the pod that contains want,
// waiting a little for the Event to be written; "" when there is none.
func (e *env) failedScheduling(t *testing.T, ns, pod, want string) string {
	t.Helper()
	var note string
	deadline := time.Now().Add(2 * time.Second)
	for note == "" && time.Now().Before(deadline) {
		events := &eventsv1.EventList{}
		must(t, e.c.Client.List(t.Context(), events, client.InNamespace(ns)))
		i := slices.IndexFunc(events.Items, func(ev eventsv1.Event) bool {
			return ev.Regarding.Name == pod && ev.Reason == "FailedScheduling" && strings.Contains(ev.Note, want)
		})
		if i >= 0 {
			note = events.Items[i].Note
		}
		time.Sleep(200 * time.Millisecond)
	}
	return note
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
