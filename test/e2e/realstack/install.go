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
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

// kueueReleaseURL is the resource deploy/kueue/kustomization.yaml takes Kueue's release from.
var kueueReleaseURL = "https://github.com/kubernetes-sigs/kueue/releases/download/" + framework.KueueVersion + "/manifests.yaml"

// kueueReleaseImage is the image of Kueue's release manifests, and the repository of
// config/default's image, which the release replaces with it.
const (
	kueueReleaseImage = "registry.k8s.io/kueue/kueue"
	kueueConfigImage  = "us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue:main"
)

// The images deploy/ names, which the overlays point at the local registry.
var deployImages = map[string]string{
	"ghcr.io/convoy-dev/convoy-operator":   images.Operator,
	"ghcr.io/convoy-dev/convoy-scheduler":  images.Scheduler,
	"ghcr.io/convoy-dev/convoy-node-agent": images.NodeAgent,
	"ghcr.io/convoy-dev/convoy-dra-driver": images.DRADriver,
	kueueReleaseImage:                      images.Kueue,
}

// install installs Kueue and Convoy in the cluster as the README's installation does: `kubectl
// apply --server-side -k deploy/kueue` through a kustomize overlay that only points the images at
// the local registry, then `helm install` of the chart deploy/helm/convoy (generated from
// deploy/operator, deploy/scheduler and deploy/node-agent, and checked to render the same objects)
// with the images' values pointing there too, then `kubectl apply -k deploy/queue`. Two things
// differ, because this machine is offline and has no GPU: deploy/kueue's Kueue release comes from
// the pinned Kueue module (config/default rendered with the release's image, which is what the
// release's manifests.yaml is) instead of GitHub, and the node agents read the simulated GPUs
// through mock NVML (--nvml=mock:Profile) instead of a driver.
func (e *Env) install(ctx context.Context, logf func(string, ...any)) error {
	began := time.Now()
	c := e.Cluster
	if _, err := e.Kubectl(ctx, "apply", "--server-side", "-k", e.path("deploy/crd")); err != nil {
		return err
	}
	kueueOverlay, err := e.writeOverlay(ctx, filepath.Join(c.StateDir, "install"), "kueue")
	if err != nil {
		return fmt.Errorf("the overlay of deploy/kueue: %w", err)
	}
	if _, err := e.Kubectl(ctx, "apply", "--server-side", "-k", kueueOverlay); err != nil {
		return err
	}
	if err := e.rollout(ctx, framework.KueueNamespace, "deployment/kueue-controller-manager"); err != nil {
		return err
	}
	logf("Kueue %s running in the cluster from deploy/kueue (%.1fs)", framework.KueueVersion, time.Since(began).Seconds())
	if err := e.helmInstall(ctx); err != nil {
		return err
	}
	// Kueue's webhooks validate the queues: until its webhook server has its certificate, an apply
	// is refused, and a platform team applies again.
	var out string
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		out, err = e.Kubectl(ctx, "apply", "--server-side", "-k", e.path("deploy/queue"))
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("kubectl apply -k deploy/queue never succeeded: %w\n%s", err, out)
	}
	for _, workload := range []string{"deployment/" + stack.Operator, "deployment/" + stack.Scheduler, "daemonset/" + stack.NodeAgent} {
		if err := e.rollout(ctx, stack.Namespace, workload); err != nil {
			return err
		}
	}
	if err := e.WaitGPUNodes(ctx); err != nil {
		return err
	}
	logf("Operator, scheduler (2 replicas each, leader election on) and node agents running in the cluster from the Helm chart (%.1fs)", time.Since(began).Seconds())
	return nil
}

// helmInstall installs the chart as the README's Helm path does, with the images of the local
// registry (image.registry and image.tag), which publish pods push to over plain HTTP as the
// nodes' containerd pulls from it, and the DRA driver for simulated GPUs, which runs on the nodes
// StartDRANodes labels for it: deploy/kueue brought Convoy's side of the Kueue integration
// already, and deploy/crd the CRDs.
func (e *Env) helmInstall(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, filepath.Join(e.Cluster.BinDir, "helm"), "install", "convoy", e.path("deploy/helm/convoy"),
		"--namespace", stack.Namespace, "--create-namespace", "--skip-crds",
		"--set", "kueueIntegration.enabled=false",
		"--set", "image.registry="+images.Repository(Registry), "--set", "image.tag="+images.Tag,
		"--set", "operator.extraArgs={--plain-http-registries="+Registry+"}",
		"--set", "nodeAgent.extraArgs={--nvml=mock:"+Profile+"}",
		"--set", "draDriver.enabled=true", "--set", "draDriver.extraArgs={--nvml=mock:"+Profile+"}")
	state := filepath.Join(e.Cluster.StateDir, "helm")
	cmd.Env = append(e.Cluster.KubectlEnv(),
		"HELM_CACHE_HOME="+filepath.Join(state, "cache"), "HELM_CONFIG_HOME="+filepath.Join(state, "config"), "HELM_DATA_HOME="+filepath.Join(state, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm install of deploy/helm/convoy: %w\n%s", err, out)
	}
	return nil
}

// writeOverlay writes the kustomization of deploy/<name> for this cluster into dir/<name> and
// returns its directory.
func (e *Env) writeOverlay(ctx context.Context, dir, name string) (string, error) {
	overlay := filepath.Join(dir, name)
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		return "", err
	}
	var imageList []map[string]string
	for _, deployed := range slices.Sorted(maps.Keys(deployImages)) {
		ref := e.Image(deployImages[deployed])
		i := strings.LastIndex(ref, ":")
		imageList = append(imageList, map[string]string{"name": deployed, "newName": ref[:i], "newTag": ref[i+1:]})
	}
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"images":     imageList,
	}
	switch name {
	case "kueue":
		resources, err := e.kueueBase(ctx, overlay)
		if err != nil {
			return "", err
		}
		k["resources"] = resources
	default:
		base, err := filepath.Rel(overlay, e.path("deploy/"+name))
		if err != nil {
			return "", err
		}
		k["resources"] = []string{base}
	}
	data, err := yaml.Marshal(k)
	if err != nil {
		return "", err
	}
	return overlay, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), data, 0o644)
}

// kueueBase makes deploy/kueue usable offline: it copies the folder into overlay/base with its
// Kueue release resource replaced by the same release rendered from the pinned Kueue module, and
// returns the overlay's resources.
func (e *Env) kueueBase(ctx context.Context, overlay string) ([]string, error) {
	base := filepath.Join(overlay, "base")
	if err := os.RemoveAll(base); err != nil {
		return nil, err
	}
	if err := os.CopyFS(base, os.DirFS(e.path("deploy/kueue"))); err != nil {
		return nil, err
	}
	if err := e.OfflineKueue(ctx, base, kueueReleaseImage+":"+framework.KueueVersion); err != nil {
		return nil, err
	}
	return []string{"base"}, nil
}

// OfflineKueue makes the deploy/kueue folder dir (a copy of it) take Kueue's release from the
// pinned Kueue module instead of GitHub: config/default rendered with image, which is what the
// release's manifests.yaml is with Kueue's image.
func (e *Env) OfflineKueue(ctx context.Context, dir, image string) error {
	moduleDir, err := framework.ModuleDir(ctx, e.Root, framework.KueueModule)
	if err != nil {
		return err
	}
	release, err := exec.CommandContext(ctx, filepath.Join(e.Cluster.BinDir, "kubectl"), "kustomize", filepath.Join(moduleDir, "config", "default")).Output()
	if err != nil {
		return fmt.Errorf("rendering Kueue's config/default: %w", err)
	}
	release = []byte(strings.ReplaceAll(string(release), kueueConfigImage, image))
	if err := os.WriteFile(filepath.Join(dir, "kueue-release.yaml"), release, 0o644); err != nil {
		return err
	}
	file := filepath.Join(dir, "kustomization.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !strings.Contains(string(data), kueueReleaseURL) {
		return fmt.Errorf("deploy/kueue/kustomization.yaml does not take Kueue's release from %s", kueueReleaseURL)
	}
	data = []byte(strings.ReplaceAll(string(data), kueueReleaseURL, "kueue-release.yaml"))
	return os.WriteFile(file, data, 0o644)
}

// rollout waits for `kubectl rollout status` of workload; on failure the error carries its pods'
// state and logs.
func (e *Env) rollout(ctx context.Context, namespace, workload string) error {
	_, err := e.Kubectl(ctx, "rollout", "status", "-n", namespace, workload, "--timeout=4m")
	if err == nil {
		return nil
	}
	pods, _ := e.Kubectl(ctx, "get", "pods", "-n", namespace, "-o", "wide")
	events, _ := e.Kubectl(ctx, "get", "events", "-n", namespace, "--sort-by=.lastTimestamp")
	logs, _ := e.Kubectl(ctx, "logs", "-n", namespace, workload, "--all-containers", "--tail=40")
	return fmt.Errorf("%w\npods:\n%s\nevents:\n%s\nlogs:\n%s", err, pods, events, logs)
}

// WaitGPUNodes waits until the node agents have written each real node's GPUNode with its GPUs.
func (e *Env) WaitGPUNodes(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, n := range e.Nodes {
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			node := &convoy.GPUNode{}
			if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return len(node.Status.GPUs) == GPUsPerNode, nil
		})
		if err != nil {
			logs, _ := e.Kubectl(context.Background(), "logs", "-n", stack.Namespace, "daemonset/"+stack.NodeAgent, "--tail=40")
			return fmt.Errorf("GPUNode %s never showed %d GPUs: %w\nnode agent log:\n%s", n.Name, GPUsPerNode, err, logs)
		}
	}
	return nil
}
