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

package e2e

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
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
)

const (
	// draPool labels the nodes whose GPUs are DRA devices, and draFlavor selects them.
	draPool   = "convoy.dev/test-pool"
	draFlavor = "dra-gpus"
	// draProduct is not the fleet's product: no node agent serves the DRA nodes, and no flavor
	// of the fleet's nodes selects them.
	draProduct = "NVIDIA-H200-141GB-HBM3e"
)

// draNodes have 4 H200s each, published as DRA devices of NVIDIA's driver rather than as
// nvidia.com/gpu, in rack draRack.
var draNodes = []framework.NodeSpec{
	{Name: "dra-0", DRAGPUs: 4, GPUProduct: draProduct, DRAGPUMemory: "141Gi", Rack: draRack, Labels: map[string]string{draPool: "dra"}},
	{Name: "dra-1", DRAGPUs: 4, GPUProduct: draProduct, DRAGPUMemory: "141Gi", Rack: draRack, Labels: map[string]string{draPool: "dra"}},
}

const draRack = "dra-rack"

// draJob is a job of workers × gpus DRA GPUs of DeviceClass gpu.nvidia.com.
func (e *env) draJob(name string, workers, gpus int32) *convoy.TrainingJob {
	job := e.job(name, workers, gpus, "normal")
	job.Spec.Scheduling.Topology = nil
	job.Spec.GPU = &convoy.GPUSpec{DeviceClassName: convoy.DriverGPU}
	return job
}

// draQueue is clusterQueue with a quota of gpus in the ResourceFlavor of the DRA nodes.
func (e *env) draQueue(gpus int) {
	e.t.Helper()
	fl := utiltestingapi.MakeResourceFlavor(draFlavor).NodeLabel(draPool, "dra").Obj()
	if err := e.k.Create(e.t.Context(), fl); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	e.clusterQueue(gpus, draFlavor, nil)
}

// TestDRAGangRunsOnFreeDevicesAndCountsAgainstTheGPUQuota: a job asking for DRA GPUs is admitted
// by Kueue against the ClusterQueue's nvidia.com/gpu quota (deploy/kueue's deviceClassMappings),
// and its whole gang runs, each worker's claim allocated with devices of the node it is bound to:
// convoy-scheduler planned it from the nodes' ResourceSlices, into the one rack, as Bind's
// convoy.dev/topology-domains on each pod says.
// A second gang for which the devices are taken waits, its status saying what it needs, with no
// pod bound, and runs once the first job is deleted.
func TestDRAGangRunsOnFreeDevicesAndCountsAgainstTheGPUQuota(t *testing.T) {
	e := setup(t)
	e.draQueue(16)

	e.create(e.draJob("first", 2, 4))
	running := e.waitState("first", convoy.StateRunning)
	wl := e.waitWorkloadWhere("the Workload of first", func(wl *kueue.Workload) bool { return metav1.IsControlledBy(wl, running) },
		"admitted", func(wl *kueue.Workload) bool { return wl.Status.Admission != nil })
	if got := wl.Status.Admission.PodSetAssignments[0].ResourceUsage[framework.ResourceGPU]; got.Value() != 8 {
		t.Errorf("the Workload uses %s nvidia.com/gpu of the quota, want 8 (2 workers × 4 DRA GPUs)", got.String())
	}
	tmpl := &resourcev1.ResourceClaimTemplate{}
	must(t, e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "first-gpu"}, tmpl))
	if !metav1.IsControlledBy(tmpl, running) {
		t.Errorf("ResourceClaimTemplate first-gpu is not controlled by the job: %v", tmpl.OwnerReferences)
	}
	nodes := map[string]bool{}
	for _, p := range e.pods("first") {
		if _, ok := p.Spec.Containers[0].Resources.Limits[framework.ResourceGPU]; ok {
			t.Errorf("pod %s asks for nvidia.com/gpu beside its claim", p.Name)
		}
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s is %s, want Running", p.Name, p.Status.Phase)
		}
		nodes[p.Spec.NodeName] = true
		if got, want := p.Annotations[convoy.AnnotationTopologyDomains], "rack="+draRack; got != want {
			t.Errorf("pod %s has topology domains %q, want %q: convoy-scheduler planned the DRA gang", p.Name, got, want)
		}
		if devices := e.allocatedDevices(&p); len(devices) != 4 || strings.Count(strings.Join(devices, ","), p.Spec.NodeName+"/") != 4 {
			t.Errorf("pod %s on %s has devices %v, want 4 of its node's", p.Name, p.Spec.NodeName, devices)
		}
	}
	if len(nodes) != 2 || !nodes["dra-0"] || !nodes["dra-1"] {
		t.Errorf("the workers run on %v, want one on each DRA node", nodes)
	}

	e.create(e.draJob("second", 2, 2))
	waiting := e.waitJob("second", "waiting for devices", func(j *convoy.TrainingJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionInitializing)
		return c != nil && c.Reason == convoy.ReasonUnschedulable && strings.Contains(c.Message, "needs 2 pod(s) × 2 GPU(s)")
	})
	if waiting.Status.Admission == nil {
		t.Errorf("the second job is not admitted: Kueue's quota (16) holds both")
	}
	for _, p := range e.pods("second") {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of the waiting gang is bound to %s", p.Name, p.Spec.NodeName)
		}
	}
	// A waiting worker's claim deleted by hand is made again, or the worker would wait forever.
	lost := &resourcev1.ResourceClaim{}
	must(t, e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: claimNames(&e.pods("second")[0])[0]}, lost))
	must(t, e.k.Delete(t.Context(), lost))
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		again := &resourcev1.ResourceClaim{}
		err := e.k.Get(ctx, client.ObjectKeyFromObject(lost), again)
		return err == nil && again.UID != lost.UID && again.DeletionTimestamp == nil && metav1.IsControlledBy(again, waiting), client.IgnoreNotFound(err)
	}); err != nil {
		t.Errorf("claim %s, deleted while its pod waits, is not made again for the job: %v", lost.Name, err)
	}

	must(t, e.k.Delete(t.Context(), running))
	e.waitState("second", convoy.StateRunning)
	for _, p := range e.pods("second") {
		if devices := e.allocatedDevices(&p); len(devices) != 2 {
			t.Errorf("pod %s has devices %v, want 2", p.Name, devices)
		}
	}
}

// allocatedDevices returns the devices allocated to the pod's GPU claim, as "<pool>/<device>".
func (e *env) allocatedDevices(pod *corev1.Pod) []string {
	e.t.Helper()
	var out []string
	for _, name := range claimNames(pod) {
		claim := &resourcev1.ResourceClaim{}
		must(e.t, e.k.Get(e.t.Context(), client.ObjectKey{Namespace: pod.Namespace, Name: name}, claim))
		if a := claim.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				out = append(out, fmt.Sprintf("%s/%s", r.Pool, r.Device))
			}
		}
	}
	return out
}

// claimNames names the pod's ResourceClaims: those its spec names (a worker's GPU claim, made by
// the operator), and those made for it from templates.
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			out = append(out, *c.ResourceClaimName)
		}
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			out = append(out, *s.ResourceClaimName)
		}
	}
	return out
}

// TestDRAGPUSelectorsPickTheProductAndMemory: outside a queue, spec.gpu's product and minMemory
// become CEL selectors that the scheduler evaluates against the devices' attributes and capacity
// as NVIDIA's driver publishes them: a job asking for the DRA nodes' product and less memory than
// theirs runs; one asking for another product, or more memory, waits, its status and first
// Unschedulable Event naming the selector that rules out the devices (no node was tried first).
func TestDRAGPUSelectorsPickTheProductAndMemory(t *testing.T) {
	e := setup(t)
	e.namespace()
	t.Cleanup(func() { _ = e.k.DeleteAllOf(context.Background(), &convoy.TrainingJob{}, client.InNamespace(e.ns)) })
	job := func(name, product, memory string) *convoy.TrainingJob {
		j := e.draJob(name, 1, 2)
		j.Spec.Scheduling.Queue = ""
		j.Spec.GPU.Product, j.Spec.GPU.MinMemory = product, ptr.To(resource.MustParse(memory))
		return j
	}
	e.create(job("h200", draProduct, "100Gi"))
	e.create(job("b200", "NVIDIA-B200", "100Gi"))
	e.create(job("more-memory", draProduct, "160Gi"))
	e.waitState("h200", convoy.StateRunning)
	for name, selector := range map[string]string{"b200": `productName == "NVIDIA-B200"`, "more-memory": `quantity("160Gi")`} {
		want := "the GPU claims' selectors match 0 of the 8 DRA devices: request gpu/gpu's selector `"
		e.waitJob(name, "waiting for a device that matches", func(j *convoy.TrainingJob) bool {
			c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionInitializing)
			return c != nil && c.Reason == convoy.ReasonUnschedulable && strings.Contains(c.Message, want) && strings.Contains(c.Message, selector)
		})
		var note string
		if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			events := &eventsv1.EventList{}
			if err := e.k.List(ctx, events, client.InNamespace(e.ns)); err != nil {
				return false, err
			}
			for _, ev := range events.Items {
				if ev.Regarding.Name == name && ev.Reason == convoy.ReasonUnschedulable {
					note = ev.Note
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("job %s has no %s Event: %v", name, convoy.ReasonUnschedulable, err)
		}
		if !strings.Contains(note, want) || !strings.Contains(note, selector) {
			t.Errorf("job %s's first %s Event says %q, want the selector %s named", name, convoy.ReasonUnschedulable, note, selector)
		}
	}
	for _, p := range e.pods("h200") {
		for _, d := range e.allocatedDevices(&p) {
			if !strings.HasPrefix(d, "dra-") {
				t.Errorf("pod %s got device %s, want one of a DRA node", p.Name, d)
			}
		}
	}
}

// TestDRAWorkersGetDevicesInsideOneNVLinkIsland: convoy-scheduler allocates a DRA gang's devices
// itself. The DRA nodes' GPUNodes (as their node agents would publish them) join NVLink islands to
// the devices by uuid: islands {gpu-0, gpu-2} and {gpu-1, gpu-3}, where first fit in the slice's
// order would split each worker across two. Every worker's claim is allocated two devices of one
// island, with what the kubelet checks: a node selector naming the pod's node, results of that
// node's pool and driver, and the claim reserved for the pod, which holds the claim's finalizer.
func TestDRAWorkersGetDevicesInsideOneNVLinkIsland(t *testing.T) {
	e := setup(t)
	e.namespace()
	t.Cleanup(func() { _ = e.k.DeleteAllOf(context.Background(), &convoy.TrainingJob{}, client.InNamespace(e.ns)) })
	islands := map[string]int{}
	for _, n := range draNodes {
		g := &convoy.GPUNode{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		must(t, e.k.Create(t.Context(), g))
		t.Cleanup(func() { _ = e.k.Delete(context.Background(), g) })
		// GPU j is device gpu-dev[j]; GPUs 0, 1 and 2, 3 share an island.
		for j, dev := range []int{0, 2, 1, 3} {
			g.Status.GPUs = append(g.Status.GPUs, convoy.GPUDevice{Index: int32(j), UUID: fmt.Sprintf("GPU-%s-%d", n.Name, dev),
				Health: convoy.GPUHealthy, NVLinkDomain: fmt.Sprintf("%s/island-%d", n.Name, j/2)})
			islands[fmt.Sprintf("%s/gpu-%d", n.Name, dev)] = j / 2
		}
		must(t, e.k.Status().Update(t.Context(), g))
	}
	job := e.draJob("islands", 2, 2)
	job.Spec.Scheduling.Queue = ""
	e.create(job)
	e.waitState("islands", convoy.StateRunning)
	for _, p := range e.pods("islands") {
		devices := e.allocatedDevices(&p)
		if len(devices) != 2 || islands[devices[0]] != islands[devices[1]] || !strings.HasPrefix(devices[0], p.Spec.NodeName+"/") {
			t.Errorf("pod %s on %s has devices %v, want 2 of its node's in one NVLink island (%v)", p.Name, p.Spec.NodeName, devices, islands)
		}
		names := claimNames(&p)
		if len(names) != 1 {
			t.Errorf("pod %s has claims %v, want its GPU claim", p.Name, names)
		}
		for _, name := range names {
			claim := &resourcev1.ResourceClaim{}
			must(t, e.k.Get(t.Context(), client.ObjectKey{Namespace: p.Namespace, Name: name}, claim))
			a := claim.Status.Allocation
			if a == nil || a.NodeSelector == nil || len(a.NodeSelector.NodeSelectorTerms) != 1 ||
				!strings.Contains(a.NodeSelector.String(), `Values:[`+p.Spec.NodeName+`]`) {
				t.Errorf("claim %s's allocation does not select node %s: %v", claim.Name, p.Spec.NodeName, a)
				continue
			}
			for _, r := range a.Devices.Results {
				if r.Driver != convoy.DriverGPU || r.Pool != p.Spec.NodeName || r.Request != builder.GPUClaimName {
					t.Errorf("claim %s has result %+v, want driver %s, pool %s, request %s", claim.Name, r, convoy.DriverGPU, p.Spec.NodeName, builder.GPUClaimName)
				}
			}
			if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != p.UID {
				t.Errorf("claim %s is reserved for %v, want pod %s", claim.Name, claim.Status.ReservedFor, p.Name)
			}
			if !slices.Contains(claim.Finalizers, resourcev1.Finalizer) {
				t.Errorf("claim %s has finalizers %v, want %s", claim.Name, claim.Finalizers, resourcev1.Finalizer)
			}
		}
	}
}

// TestDRAWorkersRestartWithFreshClaims: each worker claims its GPUs from a ResourceClaim of its
// own that the operator makes before the pod, controlled by the job and carrying the finalizer the
// scheduler would otherwise write. A worker killed restarts the gang: the new pods get claims of
// their own, allocated on their nodes, and the first attempt's claims are deleted.
func TestDRAWorkersRestartWithFreshClaims(t *testing.T) {
	e := setup(t)
	e.namespace()
	t.Cleanup(func() { _ = e.k.DeleteAllOf(context.Background(), &convoy.TrainingJob{}, client.InNamespace(e.ns)) })
	job := e.draJob("restart", 2, 2)
	job.Spec.Scheduling.Queue = ""
	job.Spec.FailurePolicy = &convoy.FailurePolicy{RestartPolicy: convoy.RestartOnFailure, BackoffLimit: ptr.To[int32](3)}
	e.create(job)
	running := e.waitState("restart", convoy.StateRunning)
	first := e.pods("restart")
	var firstClaims []string
	for _, p := range first {
		names := claimNames(&p)
		if want := []string{p.Name + "-gpu"}; !slices.Equal(names, want) {
			t.Errorf("pod %s claims %v, want %v", p.Name, names, want)
		}
		for _, name := range names {
			claim := &resourcev1.ResourceClaim{}
			must(t, e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, claim))
			if !metav1.IsControlledBy(claim, running) || !slices.Contains(claim.Finalizers, resourcev1.Finalizer) {
				t.Errorf("claim %s has owners %v and finalizers %v, want job %s's and %s", name, claim.OwnerReferences, claim.Finalizers, running.Name, resourcev1.Finalizer)
			}
		}
		firstClaims = append(firstClaims, names...)
	}
	if len(first) == 0 {
		t.Fatal("the job runs without pods")
	}
	if _, err := e.Kubectl(t.Context(), "annotate", "pod", "-n", e.ns, first[len(first)-1].Name, stack.AnnotationSimExitCode+"=137"); err != nil {
		t.Fatal(err)
	}
	e.waitJob("restart", "restarted and running", func(j *convoy.TrainingJob) bool {
		return j.Status.RestartCount >= 1 && j.Status.State == convoy.StateRunning
	})
	for _, p := range e.pods("restart") {
		if p.DeletionTimestamp != nil || slices.ContainsFunc(first, func(f corev1.Pod) bool { return f.UID == p.UID }) {
			continue
		}
		if names := claimNames(&p); len(names) != 1 || slices.Contains(firstClaims, names[0]) {
			t.Errorf("restarted pod %s claims %v, want a claim of its own, none of %v", p.Name, names, firstClaims)
		}
		if devices := e.allocatedDevices(&p); len(devices) != 2 || !strings.HasPrefix(devices[0], p.Spec.NodeName+"/") {
			t.Errorf("restarted pod %s on %s has devices %v, want 2 of its node's", p.Name, p.Spec.NodeName, devices)
		}
	}
	for _, name := range firstClaims {
		if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			err := e.k.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &resourcev1.ResourceClaim{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}); err != nil {
			t.Errorf("the first attempt's claim %s is not deleted: %v", name, err)
		}
	}
}

// TestDRAElasticGangShrinkLetsGoOfItsClaims: an elastic DRA job (2 workers × 4 GPUs, minWorkers
// 1) fills the DRA nodes in a ClusterQueue of 8 GPUs that does not preempt. A job of priority
// high for 4 GPUs waits there; the operator shrinks the elastic job to 1 worker instead of Kueue
// stopping it, and deletes the claim of the worker it let go: its devices go, with the pod, to
// the high-priority job, which runs on them. Worker 0 and its claim stay. Kueue admits job high
// into the quota the shrink frees because its Workload was made only once its
// ResourceClaimTemplate existed: one Kueue first saw without it would stay out of Kueue's queue.
func TestDRAElasticGangShrinkLetsGoOfItsClaims(t *testing.T) {
	e := setup(t)
	e.draQueue(8)
	cq := &kueue.ClusterQueue{}
	must(t, e.k.Get(t.Context(), client.ObjectKey{Name: e.ns}, cq))
	patch := client.MergeFrom(cq.DeepCopy())
	cq.Spec.Preemption.WithinClusterQueue = kueue.PreemptionPolicyNever
	must(t, e.k.Patch(t.Context(), cq, patch))

	llm := e.draJob("llm", 2, 4)
	llm.Spec.Scheduling.PriorityClassName = "low"
	llm.Spec.MinWorkers = ptr.To[int32](1)
	llm.Spec.Elastic = &convoy.ElasticSpec{ResizeCooldownSeconds: ptr.To[int32](30)}
	e.create(llm)
	e.waitState("llm", convoy.StateRunning)
	pods := e.requireWholeGang("llm", 2)
	worker0, let := pods[0], pods[1]
	kept, gone := claimNames(&worker0)[0], claimNames(&let)[0]

	e.create(e.draJob("high", 1, 4))
	e.waitJob("high", "job high running", func(j *convoy.TrainingJob) bool { return j.Status.State == convoy.StateRunning })
	shrunk := e.waitJob("llm", "shrunk to 1 worker", func(j *convoy.TrainingJob) bool {
		return j.Status.Elastic != nil && j.Status.Elastic.CurrentWorkers == 1
	})
	if shrunk.Status.RestartCount != 0 || shrunk.Status.State != convoy.StateRunning {
		t.Errorf("llm has restartCount %d and state %s, want 0 and Running: the gang shrank without stopping", shrunk.Status.RestartCount, shrunk.Status.State)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := e.k.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: gone}, &resourcev1.ResourceClaim{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		t.Errorf("claim %s of the worker the shrink let go is not deleted: %v", gone, err)
	}
	if devices := e.allocatedDevices(&worker0); len(devices) != 4 {
		t.Errorf("worker 0's claim %s has devices %v, want its 4", kept, devices)
	}
	if now := e.pods("llm"); len(now) != 1 || now[0].UID != worker0.UID {
		t.Errorf("llm has pods %v, want worker 0 (%s) alone, not restarted", podNames(now), worker0.Name)
	}
	high := e.pods("high")
	if len(high) != 1 || high[0].Spec.NodeName != let.Spec.NodeName || len(e.allocatedDevices(&high[0])) != 4 {
		t.Errorf("job high's pods %v, want one on %s, the node the shrink freed, with its 4 devices", podNames(high), let.Spec.NodeName)
	}
}
