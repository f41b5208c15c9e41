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

package realstack

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
)

// A node's simulated GPUs are advertised once: by the device plugin (NodeNames) or, on the nodes
// labelled LabelGPUAllocation=GPUAllocationDRA, by deploy/dra-driver's DaemonSet as DRA devices,
// never both.
const (
	// LabelGPUAllocation is the label deploy/dra-driver's DaemonSet selects.
	LabelGPUAllocation = "convoy.dev/gpu-allocation"
	GPUAllocationDRA   = "dra"
	// NodeKindDRA is LabelNodeKind's value on the DRA nodes, for their own ResourceFlavor.
	NodeKindDRA = "real-dra"
	// draRack is the DRA nodes' rack.
	draRack = "rack-dra"
	// draNodeIndex numbers the first DRA node, above NodeNames' and the chaos tests' spare node.
	draNodeIndex = 4
)

// DRANodeNames are the nodes whose GPUs are DRA devices.
var DRANodeNames = []string{"real-dra-1", "real-dra-2"}

// DRALabels are ConvoyLabels with LabelGPUAllocation, LabelNodeKind NodeKindDRA and a rack of
// their own, without LabelGPUPresent: no node agent runs there, since convoy-scheduler counts a
// node that has a GPUNode by its nvidia.com/gpu allocatable (gangcore's nodeCache.base), none on
// a DRA node.
func DRALabels() map[string]string {
	labels := ConvoyLabels()
	delete(labels, LabelGPUPresent)
	labels[LabelGPUAllocation] = GPUAllocationDRA
	labels[LabelNodeKind] = NodeKindDRA
	labels[framework.LabelRack] = draRack
	return labels
}

// StartDRANodes starts, once, the DRANodeNames: real nodes with containerd 2, whose containers get
// CDI devices, and no device plugin. The DRA driver's DaemonSet, which Start installed, runs on
// them; StartDRANodes waits until each node's ResourceSlice publishes its GPUsPerNode GPUs.
func (e *Env) StartDRANodes(ctx context.Context) error {
	if e.Node(DRANodeNames[0]) != nil {
		return nil
	}
	if err := framework.CheckBinaries(e.Cluster.BinDir, filepath.Join(framework.Containerd2Dir, "containerd")); err != nil {
		return err
	}
	for i, name := range DRANodeNames {
		n, err := e.startNode(ctx, name, draNodeIndex+i, DRALabels(), true)
		if err != nil {
			return err
		}
		e.Nodes = append(e.Nodes, n)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, name := range DRANodeNames {
		if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			devices, err := e.sliceDevices(ctx, name)
			return err == nil && len(devices) == GPUsPerNode, nil
		}); err != nil {
			logs, _ := e.Kubectl(context.Background(), "logs", "-n", stack.Namespace, "daemonset/convoy-dra-driver", "--tail=40")
			pods, _ := e.Kubectl(context.Background(), "get", "pods", "-n", stack.Namespace, "-o", "wide")
			return fmt.Errorf("node %s never published %d %s devices: %w\npods:\n%s\nDRA driver log:\n%s", name, GPUsPerNode, convoy.DriverGPU, err, pods, logs)
		}
	}
	return nil
}

// sliceDevices returns the devices the node's ResourceSlices of gpu.nvidia.com publish, by name.
func (e *Env) sliceDevices(ctx context.Context, node string) (map[string]resourcev1.Device, error) {
	slices := &resourcev1.ResourceSliceList{}
	if err := e.Cluster.Client.List(ctx, slices); err != nil {
		return nil, err
	}
	devices := map[string]resourcev1.Device{}
	for _, s := range slices.Items {
		if s.Spec.Driver == convoy.DriverGPU && s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			for _, d := range s.Spec.Devices {
				devices[d.Name] = d
			}
		}
	}
	return devices, nil
}

// DRAWorker is one worker of the DRA story as a user sees it.
type DRAWorker struct {
	Pod, Node string
	// Claim is the worker's ResourceClaim, made from the job's template.
	Claim string
	// Devices are the claim's allocated devices, "<pool>/<device>", and UUIDs their uuid attributes
	// in the node's ResourceSlice.
	Devices, UUIDs []string
	// Visible is the container's NVIDIA_VISIBLE_DEVICES.
	Visible string
	// Log is the worker's log at the end.
	Log string
}

// DRAStory is what RunDRAStory saw.
type DRAStory struct {
	Workers []DRAWorker
	// QuotaGPUs is the nvidia.com/gpu of the quota Kueue's admission of the job uses.
	QuotaGPUs int64
	Final     *convoy.TrainingJob
}

const (
	draJob    = "digits-dra"
	draEpochs = 3
)

// RunDRAStory applies a 2-worker PyTorch job asking for its GPUs through spec.gpu in namespace,
// against a ClusterQueue of the DRA nodes, and follows it to the end: Kueue admits it, convoy-
// scheduler places it, the scheduler allocates each worker's claim on its node, the kubelet has
// the DRA driver prepare it, and the workers train. StartDRANodes must have run.
func (e *Env) RunDRAStory(ctx context.Context, namespace string, w io.Writer) (*DRAStory, error) {
	ctx, cancel := context.WithTimeout(ctx, storyTimeout)
	defer cancel()
	began := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(w, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := e.NodeQueue(ctx, namespace, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
		"real-dra-l40s", map[string]string{LabelNodeKind: NodeKindDRA}); err != nil {
		return nil, err
	}
	if err := CheckpointVolume(ctx, e.Cluster, namespace, "checkpoints"); err != nil {
		return nil, err
	}
	// The story's job (one worker per node), its GPUs asked for through spec.gpu.
	job := &convoy.TrainingJob{}
	if err := yaml.Unmarshal([]byte(e.trainingJob(namespace, draJob, draEpochs, "2", PVCStorage, "")), job); err != nil {
		return nil, err
	}
	job.Spec.GPU = &convoy.GPUSpec{DeviceClassName: convoy.DriverGPU}
	manifest, err := yaml.Marshal(job)
	if err != nil {
		return nil, err
	}
	if err := e.Apply(ctx, string(manifest)); err != nil {
		return nil, err
	}
	say("kubectl apply: TrainingJob %s (2 workers × 1 GPU through spec.gpu, DeviceClass %s)", draJob, convoy.DriverGPU)

	if _, err := e.waitJobNamed(ctx, namespace, draJob, "Running", func(j *convoy.TrainingJob) bool { return j.Status.State == convoy.StateRunning }); err != nil {
		return nil, err
	}
	pods, err := e.podsOf(ctx, namespace, draJob)
	if err != nil {
		return nil, err
	}
	say("Admitted by Kueue, placed by convoy-scheduler, Running: %s", describePods(pods))
	res := &DRAStory{}
	for _, p := range pods {
		wk, err := e.draWorker(ctx, &p)
		if err != nil {
			return nil, err
		}
		res.Workers = append(res.Workers, wk)
		say("%s on %s: claim %s allocated %v (uuid %v); the container sees NVIDIA_VISIBLE_DEVICES=%s", wk.Pod, wk.Node, wk.Claim, wk.Devices, wk.UUIDs, wk.Visible)
	}

	if res.Final, err = e.waitJobNamed(ctx, namespace, draJob, "Completed", func(j *convoy.TrainingJob) bool { return j.Status.State == convoy.StateCompleted }); err != nil {
		return nil, err
	}
	workloads := &kueue.WorkloadList{}
	if err := e.Cluster.Client.List(ctx, workloads, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for _, wl := range workloads.Items {
		if metav1.IsControlledBy(&wl, res.Final) && wl.Status.Admission != nil {
			q := wl.Status.Admission.PodSetAssignments[0].ResourceUsage[framework.ResourceGPU]
			res.QuotaGPUs = q.Value()
		}
	}
	for i := range res.Workers {
		res.Workers[i].Log, _ = e.Kubectl(ctx, "logs", "-n", namespace, res.Workers[i].Pod)
	}
	say("kubectl get tj: %s", strings.Join(strings.Fields(e.mustKubectl(ctx, "get", "tj", "-n", namespace, draJob, "--no-headers")), " "))
	return res, nil
}

// draWorker reads a running worker's claim (the one the operator made, which the pod's spec names,
// or one made from a template, which its status names), its allocation and what its container sees.
func (e *Env) draWorker(ctx context.Context, p *corev1.Pod) (DRAWorker, error) {
	wk := DRAWorker{Pod: p.Name, Node: p.Spec.NodeName}
	for _, c := range p.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			wk.Claim = *c.ResourceClaimName
		}
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			wk.Claim = *s.ResourceClaimName
		}
	}
	if wk.Claim == "" {
		return wk, fmt.Errorf("pod %s names no ResourceClaim in its spec or status: %+v, %+v", p.Name, p.Spec.ResourceClaims, p.Status.ResourceClaimStatuses)
	}
	claim := &resourcev1.ResourceClaim{}
	if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: wk.Claim}, claim); err != nil {
		return wk, err
	}
	devices, err := e.sliceDevices(ctx, p.Spec.NodeName)
	if err != nil {
		return wk, err
	}
	if claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			wk.Devices = append(wk.Devices, r.Pool+"/"+r.Device)
			if d, ok := devices[r.Device]; ok && r.Pool == p.Spec.NodeName {
				if u := d.Attributes["uuid"].StringValue; u != nil {
					wk.UUIDs = append(wk.UUIDs, *u)
				}
			}
		}
	}
	slices.Sort(wk.UUIDs)
	// The trainer image has Python, not coreutils.
	out, err := e.Kubectl(ctx, "exec", "-n", p.Namespace, p.Name, "--", "python3", "-c", "import os; print(os.environ.get('NVIDIA_VISIBLE_DEVICES', ''))")
	if err != nil {
		return wk, err
	}
	wk.Visible = strings.TrimSpace(out)
	return wk, nil
}

func (e *Env) mustKubectl(ctx context.Context, args ...string) string {
	out, err := e.Kubectl(ctx, args...)
	if err != nil {
		return err.Error()
	}
	return out
}
