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

package realgpu

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

const (
	agentProcess = "convoy-node-agent"
	nodeName     = "gpu-machine"
	gib          = 1 << 30
)

// TestAgentPublishesTheMachinesGPUs runs the convoy-node-agent binary as the DaemonSet would run
// it (--nvml=real, no kubelet PodResources socket here) and checks the GPUNode and node labels it
// publishes against nvidia-smi; then loads GPU 0 with PyTorch and checks that the agent's metrics
// show the memory and utilization while the GPUNode costs no writes.
func TestAgentPublishesTheMachinesGPUs(t *testing.T) {
	needGPU(t)
	c := framework.Shared(t)
	ctx := context.Background()
	want := nvidiaSMI(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(ctx, filepath.Join(root, "deploy", "crd", "bases")); err != nil {
		t.Fatal(err)
	}
	// The Node as a kubelet would register it, with no GPU labels: the agent sets them.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{corev1.LabelHostname: nodeName}}}
	if err := c.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	ports, err := framework.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])
	if err := c.StartProcess(agentProcess, agentProcess, []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--nvml=real",
		"--node-name=" + nodeName,
		"--poll-interval=500ms",
		"--heartbeat=10m",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]),
	}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StopProcess(agentProcess) })

	g := &convoy.GPUNode{}
	util.EventuallyErr(t, 100*time.Millisecond, 60*time.Second, "the agent's GPUNode with NVMLAvailable=True", func() (bool, error) {
		if err := c.CheckProcesses(); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: nodeName}, g); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(g.Status.Conditions, convoy.GPUNodeNVMLAvailable)
		return cond != nil && cond.Status == metav1.ConditionTrue, fmt.Errorf("conditions %+v", g.Status.Conditions)
	})
	st := g.Status
	n := int32(len(want))
	checkGPUs(t, st.GPUs, want)
	checkLinks(t, st.Links, smiTopology(t, len(want)))
	if st.DriverVersion != want[0].DriverVersion || st.CUDAVersion != smiCUDAVersion(t) || st.Product != want[0].Name {
		t.Errorf("driver %q, CUDA %q, product %q; nvidia-smi: driver %q, CUDA %q, product %q",
			st.DriverVersion, st.CUDAVersion, st.Product, want[0].DriverVersion, smiCUDAVersion(t), want[0].Name)
	}
	if st.Capacity != n || st.Healthy != n || st.Free != n {
		t.Errorf("capacity %d, healthy %d, free %d: want %d each (no pod holds a GPU)", st.Capacity, st.Healthy, st.Free, n)
	}
	for _, gpu := range st.GPUs {
		if gpu.Health != convoy.GPUHealthy || gpu.AllocatedTo != "" {
			t.Errorf("GPU %d: health %s (%s), held by %q", gpu.Index, gpu.Health, gpu.HealthReason, gpu.AllocatedTo)
		}
	}
	if len(g.OwnerReferences) != 1 || g.OwnerReferences[0].Kind != "Node" || g.OwnerReferences[0].Name != nodeName {
		t.Errorf("owner references %+v: want the Node", g.OwnerReferences)
	}
	wantLabels := map[string]string{
		convoy.LabelGPUProduct: strings.ReplaceAll(want[0].Name, " ", "-"),
		convoy.LabelGPUCount:   strconv.Itoa(len(want)),
		convoy.LabelGPUMemory:  strconv.FormatInt(want[0].MemoryMiB, 10),
	}
	util.EventuallyErr(t, 100*time.Millisecond, 10*time.Second, "the GPU labels on the Node", func() (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			return false, err
		}
		for k, v := range wantLabels {
			if node.Labels[k] != v {
				return false, fmt.Errorf("labels %v, want %v", node.Labels, wantLabels)
			}
		}
		return true, nil
	})
	log := agentLog(t, c)
	if !strings.Contains(log, "Reading GPUs through NVML") || strings.Contains(log, "No NVML events") || strings.Contains(log, "Watching NVML events stopped") {
		t.Errorf("the agent's log does not show NVML read with events watched:\n%s", log)
	}

	t.Run("pod holds a GPU", func(t *testing.T) { podHoldsAGPU(t, c, n) })
	t.Run("busy GPU", func(t *testing.T) { busyGPU(t, metricsURL, want[0]) })
}

// podHoldsAGPU binds a pod asking one GPU to the node. With no kubelet here to ask, the agent
// gives it the GPU the NVIDIA device plugin's allocator would, over the real NVML: exactly one GPU
// shows the pod as its holder until the pod is deleted.
func podHoldsAGPU(t *testing.T, c *framework.Cluster, n int32) {
	ctx := context.Background()
	const ns, name = "team-a", "trainer"
	// No controller manager runs to create the namespace's default ServiceAccount.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
	} {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	gpu := corev1.ResourceList{framework.ResourceGPU: resource.MustParse("1")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "train", Image: "registry.example/train:1", Resources: corev1.ResourceRequirements{Limits: gpu, Requests: gpu}}},
		},
	}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	held := func(want int32) func() (bool, error) {
		return func() (bool, error) {
			g := &convoy.GPUNode{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: nodeName}, g); err != nil {
				return false, err
			}
			var holders []string
			count := int32(0)
			for _, gpu := range g.Status.GPUs {
				holders = append(holders, gpu.AllocatedTo)
				if gpu.AllocatedTo == ns+"/"+name {
					count++
				}
			}
			return count == want && g.Status.Free == n-want, fmt.Errorf("holders %q, free %d", holders, g.Status.Free)
		}
	}
	util.EventuallyErr(t, 100*time.Millisecond, 15*time.Second, "one GPU held by the pod", held(1))
	if err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	util.EventuallyErr(t, 100*time.Millisecond, 15*time.Second, "the GPU free again", held(0))
}

// busyGPU loads GPU 0 with PyTorch: memory held and matrix products, for a few seconds.
func busyGPU(t *testing.T, metricsURL string, gpu smiGPU) {
	if out, err := exec.Command("python3", "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)").CombinedOutput(); err != nil {
		t.Skipf("no python3 with a CUDA PyTorch here to load the GPU: %v\n%s", err, out)
	}
	gpuLabel := map[string]string{"gpu": strconv.Itoa(gpu.Index)}
	statusWrites := func() float64 {
		return util.Scraped(t, metricsURL, "convoy_node_agent_publishes_total", map[string]string{"kind": "status"})
	}
	idle := util.Scraped(t, metricsURL, "convoy_gpu_memory_used_bytes", gpuLabel)
	writesBefore := statusWrites()

	const holdGiB = 8
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	load := exec.CommandContext(ctx, "python3", "-u", "-c", `
import sys, time, torch
held = torch.empty(int(sys.argv[1]) << 30, dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("loaded", flush=True)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    for _ in range(10):
        b = a @ a
    torch.cuda.synchronize()
`, strconv.Itoa(holdGiB), "20")
	// CUDA numbers GPUs fastest first unless told to follow the PCI order, as NVML does.
	load.Env = append(os.Environ(), "CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES="+strconv.Itoa(gpu.Index))
	load.Stderr = os.Stderr
	stdout, err := load.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "loaded\n" {
		t.Fatalf("the PyTorch load did not start: %q, %v", line, err)
	}
	var used, utilization float64
	util.EventuallyErr(t, 100*time.Millisecond, 15*time.Second, "the load in the agent's metrics", func() (bool, error) {
		used = util.Scraped(t, metricsURL, "convoy_gpu_memory_used_bytes", gpuLabel)
		utilization = max(utilization, util.Scraped(t, metricsURL, "convoy_gpu_utilization_percent", gpuLabel))
		return used >= idle+holdGiB*gib && utilization > 0, fmt.Errorf("memory in use %.2f GiB (idle %.2f GiB), utilization %.0f%%", used/gib, idle/gib, utilization)
	})
	t.Logf("GPU %d busy: %.2f GiB in use (idle %.2f GiB), utilization %.0f%%", gpu.Index, used/gib, idle/gib, utilization)
	cancel()
	_ = load.Wait()
	util.EventuallyErr(t, 100*time.Millisecond, 15*time.Second, "the memory freed in the agent's metrics", func() (bool, error) {
		used = util.Scraped(t, metricsURL, "convoy_gpu_memory_used_bytes", gpuLabel)
		return used < idle+gib, fmt.Errorf("memory in use %.2f GiB, idle was %.2f GiB", used/gib, idle/gib)
	})
	if w := statusWrites(); w != writesBefore {
		t.Errorf("%v GPUNode status writes while the GPU was busy: utilization and memory in use are sampled, not changes", w-writesBefore)
	}
}

func agentLog(t *testing.T, c *framework.Cluster) string {
	t.Helper()
	for _, p := range c.Processes() {
		if p.Name == agentProcess {
			data, err := os.ReadFile(p.LogFile)
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
	}
	t.Fatalf("no %s process", agentProcess)
	return ""
}
