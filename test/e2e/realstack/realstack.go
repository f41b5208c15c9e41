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

// Package realstack runs Convoy on real nodes: two kubelets with containerd, each in a network
// namespace of its own on one bridge, with simulated GPUs advertised through the kubelet's
// device-plugin path, CoreDNS as the cluster's DNS and the images `make images` builds pulled from
// a local registry. Kueue, the operator, the scheduler and the node agents run in the cluster,
// installed from deploy/ with `kubectl apply --server-side -k` as the README says (install.go).
// The real-node e2e suite, `make demo-real` and `make bench-realnode` use it.
package realstack

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

// Registry is where the local registry listens: the host's address on the node bridge, which
// containerd on every real node reaches.
var Registry = framework.NodeGatewayIP + ":5000"

const (
	// Profile is the mock NVML profile of the real nodes' simulated GPUs: 4 L40S on PCIe.
	Profile = "pcie-4"
	// GPUProduct is what Profile imitates, the nodes' nvidia.com/gpu.product.
	GPUProduct = stack.PCIeProduct
	// GPUsPerNode is Profile's GPU count.
	GPUsPerNode = 4
	// LabelNodeKind marks the real nodes, for the ResourceFlavor of their ClusterQueue.
	LabelNodeKind = "convoy.dev/node-kind"
	// NodeKindReal is LabelNodeKind's value on real nodes.
	NodeKindReal = "real"
	// LabelGPUPresent is how the GPU operator and Node Feature Discovery mark GPU nodes.
	LabelGPUPresent = "nvidia.com/gpu.present"
	// DevicePlugin is test/cmd/simdeviceplugin's binary.
	DevicePlugin = "simdeviceplugin"
)

// NodeNames are the real nodes, in one rack.
var NodeNames = []string{"real-1", "real-2"}

// AddToScheme registers the API types the real-node stack's clients use: Convoy's, Kueue's and
// the PodGroup.
var AddToScheme = []func(*runtime.Scheme) error{convoy.AddToScheme, kueue.AddToScheme, schedv1alpha1.AddToScheme}

// Images are the images Start pushes to the registry: what the real nodes run, and Convoy's
// components, which TestConvoyImagesStart starts.
var Images = []string{images.Pause, images.CoreDNS, images.Trainer, images.Operator, images.Scheduler, images.NodeAgent, images.DRADriver, images.Kueue}

// Main runs the tests of a real-node package (m) on one cluster started with real nodes, as
// framework.Main does.
func Main(m *testing.M) {
	args, err := stack.KwokArgs(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	framework.Main(m, framework.Options{RealNodes: true, KwokArgs: args, AddToScheme: AddToScheme})
}

// shared is the package's stack, started by the first test that asks for it (Shared).
var shared *Env

// Shared returns the stack of the test binary's real-node cluster, starting it (Start) for the
// first test: the package's tests share its nodes.
func Shared(t *testing.T) *Env {
	t.Helper()
	if shared == nil {
		var err error
		if shared, err = Start(t.Context(), framework.Shared(t), t.Logf); err != nil {
			t.Fatal(err)
		}
	}
	return shared
}

// Env is a running real-node stack.
type Env struct {
	Cluster *framework.Cluster
	// Root is the repository root.
	Root string
	// Nodes are the real nodes, in NodeNames' order.
	Nodes []*framework.RealNode
	// ImagesDir holds the OCI layouts `make images` wrote.
	ImagesDir string
}

// Image returns the reference pods use for image name.
func (e *Env) Image(name string) string { return images.Ref(Registry, name) }

// Start starts the registry and pushes Images to it, starts the real nodes with their device
// plugins, CoreDNS, and installs Kueue and Convoy in the cluster. c must have been started with
// framework.Options.RealNodes.
func Start(ctx context.Context, c *framework.Cluster, logf func(format string, args ...any)) (*Env, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	e, err := StartNodes(ctx, c, ConvoyLabels(), logf)
	if err != nil {
		return nil, err
	}
	// The trainer's image is the large one: the nodes pull it while Kueue and Convoy install, as a
	// node pool's pre-pulled images would have it, so that the first story does not wait for it.
	var pulled errgroup.Group
	for _, n := range e.Nodes {
		pulled.Go(func() error { return e.Pull(ctx, n, images.Trainer) })
	}
	err = e.install(ctx, logf)
	if perr := pulled.Wait(); err == nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Pull pulls image name from the registry into real node n's containerd, where the kubelet finds it.
func (e *Env) Pull(ctx context.Context, n *framework.RealNode, name string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.ContainerdSocket, "--namespace", "k8s.io",
		"images", "pull", "--plain-http", e.Image(name)).CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("pulling %s on %s: %w: %s", e.Image(name), n.Name, err, strings.Join(lines[max(0, len(lines)-3):], "\n"))
	}
	return nil
}

// ProviderLabels are the labels a GPU node has from its provider and NVIDIA's operators alone: its
// zone (the cloud provider's), nvidia.com/gpu.product (GPU Feature Discovery's) and
// nvidia.com/gpu.present (the GPU operator's); no convoy.dev/* and no karpenter.sh/* label.
func ProviderLabels() map[string]string {
	return map[string]string{
		framework.LabelZone:       "zone-real",
		framework.LabelGPUProduct: GPUProduct,
		LabelGPUPresent:           "true",
	}
}

// ConvoyLabels are ProviderLabels with Convoy's topology labels (block, rack), LabelNodeKind
// and Karpenter's capacity type: what the real-node suite's queues and placements select.
func ConvoyLabels() map[string]string {
	labels := ProviderLabels()
	labels[framework.LabelBlock] = "block-real"
	labels[framework.LabelRack] = "rack-real"
	labels[LabelNodeKind] = NodeKindReal
	labels[stack.LabelCapacityType] = "on-demand"
	return labels
}

// StartNodes starts the registry and pushes Images to it, starts the real nodes, labelled with
// labels, with their device plugins, and CoreDNS; it installs neither Kueue nor Convoy. c must have
// been started with framework.Options.RealNodes.
func StartNodes(ctx context.Context, c *framework.Cluster, labels map[string]string, logf func(format string, args ...any)) (*Env, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := framework.CheckBinaries(c.BinDir, DevicePlugin, "registry"); err != nil {
		return nil, err
	}
	e := &Env{Cluster: c, Root: root, ImagesDir: filepath.Join(root, "bin", "images")}
	began := time.Now()
	if _, err := c.StartRegistry(ctx, Registry); err != nil {
		return nil, err
	}
	if _, err := images.Push(ctx, e.ImagesDir, Registry, Images); err != nil {
		return nil, fmt.Errorf("%w (`make images` builds them)", err)
	}
	logf("Registry at %s holds %v (%.1fs)", Registry, Images, time.Since(began).Seconds())

	for i, name := range NodeNames {
		n, err := e.startNode(ctx, name, i+1, labels, false)
		if err != nil {
			return nil, err
		}
		e.Nodes = append(e.Nodes, n)
		logf("Real node %s Ready at %s, pods in %s (%.1fs)", name, n.IP, n.PodCIDR, time.Since(began).Seconds())
	}
	if err := waitGPUs(ctx, c, e.Nodes); err != nil {
		return nil, err
	}
	logf("The kubelets advertise %d nvidia.com/gpu each from the device plugin (%.1fs)", GPUsPerNode, time.Since(began).Seconds())
	if err := c.InstallCoreDNS(ctx, e.Image(images.CoreDNS), NodeNames[0]); err != nil {
		return nil, err
	}
	logf("CoreDNS ready on %s (%.1fs)", NodeNames[0], time.Since(began).Seconds())
	return e, nil
}

// AddNode starts one more real node, number index (from 1, above the NodeNames'), labelled with
// ConvoyLabels, with its device plugin, and waits until it advertises its GPUs.
func (e *Env) AddNode(ctx context.Context, name string, index int) (*framework.RealNode, error) {
	n, err := e.startNode(ctx, name, index, ConvoyLabels(), false)
	if err != nil {
		return nil, err
	}
	e.Nodes = append(e.Nodes, n)
	return n, waitGPUs(ctx, e.Cluster, []*framework.RealNode{n})
}

// startNode starts real node name, number index, and its device plugin; with dra, containerd 2
// with CDI and no device plugin: the DRA driver's DaemonSet advertises its GPUs.
func (e *Env) startNode(ctx context.Context, name string, index int, labels map[string]string, dra bool) (*framework.RealNode, error) {
	n, err := e.Cluster.StartRealNode(ctx, framework.RealNodeSpec{
		Name:         name,
		Index:        index,
		Labels:       maps.Clone(labels),
		SandboxImage: e.Image(images.Pause),
		Registry:     Registry,
		CDI:          dra,
	})
	if err != nil || dra {
		return n, err
	}
	return n, e.Cluster.StartProcess(DevicePlugin+"-"+name, DevicePlugin, []string{
		"--device-plugin-dir=" + n.DevicePluginDir,
		"--node-name=" + name,
		"--nvml=mock:" + Profile,
	}, nil)
}

// Node returns the running real node called name, nil when there is none.
func (e *Env) Node(name string) *framework.RealNode {
	for _, n := range e.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Kubectl runs bin/kubectl as the cluster's administrator and returns its combined output.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	return e.kubectlStdin(ctx, "", args...)
}

func (e *Env) path(rel string) string { return filepath.Join(e.Root, filepath.FromSlash(rel)) }

// RestartKubelet starts again the kubelet of the real node that a test stopped, and waits until
// the node is Ready again and advertises its GPUs.
func (e *Env) RestartKubelet(ctx context.Context, node string) error {
	restarted := time.Now().Add(-time.Second)
	if err := e.Cluster.RestartProcess(framework.Kubelet + "-" + node); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := e.Cluster.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue && c.LastHeartbeatTime.After(restarted), nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s Ready again after its kubelet's restart: %w", node, err)
	}
	if n := e.Node(node); n != nil {
		return waitGPUs(ctx, e.Cluster, []*framework.RealNode{n})
	}
	return nil
}

// waitGPUs waits until every node's allocatable shows the device plugin's GPUs.
func waitGPUs(ctx context.Context, c *framework.Cluster, nodes []*framework.RealNode) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, n := range nodes {
		for {
			node, err := c.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if q, ok := node.Status.Allocatable[framework.ResourceGPU]; ok && q.Value() == GPUsPerNode {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %s never advertised %d %s (device plugin log: %s)", n.Name, GPUsPerNode,
					framework.ResourceGPU, filepath.Join(c.StateDir, "logs", DevicePlugin+"-"+n.Name+".log"))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// CheckpointVolumeDir is the host directory of CheckpointVolume's volume.
func CheckpointVolumeDir(c *framework.Cluster, namespace, name string) string {
	return filepath.Join(c.StateDir, "volumes", namespace+"-"+name)
}

// CheckpointVolume creates, once, a PersistentVolume on a host directory that both real nodes
// mount (they share the machine's file system, as nodes share an NFS export) and a claim
// namespace/name bound to it, for checkpoints.
func CheckpointVolume(ctx context.Context, c *framework.Cluster, namespace, name string) error {
	dir := CheckpointVolumeDir(c, namespace, name)
	// A state directory kept from an earlier run (make demo-real's) must not hand its checkpoints
	// to this run's jobs.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	// The trainer runs as a non-root user; a hostPath volume keeps the directory's own mode.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	return createVolume(ctx, c, namespace, name, dir)
}
