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

package adoption

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

func TestMain(m *testing.M) { realstack.Main(m) }

// placeholderRegistry is the registry the README's blocks and examples/seed name, which a reader
// replaces with their own.
const placeholderRegistry = "registry.example.com/ml"

// On real nodes that carry only their provider's and NVIDIA's labels, the README's Helm block and
// its kustomize block run with bash as written, REGISTRY set to the local registry; the kustomize
// install then runs examples/seed/digits.yaml, a manifest written for the seed design (the GPU in
// resources, priority, a root image), to Completed. Two things are not as on a platform team's
// cluster, because this machine is offline and has no GPU: deploy/kueue takes Kueue's release from
// the pinned module instead of GitHub (realstack.OfflineKueue), and the node agent reads mock NVML.
// The Helm block's `helm install` runs with --dry-run=server: the API server validates what the
// chart renders with the README's values, and the cluster keeps the kustomize install.
func TestInstallFromTheREADMEAndTrainASeedJob(t *testing.T) {
	ctx := t.Context()
	e, err := realstack.StartNodes(ctx, framework.Shared(t), realstack.ProviderLabels(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range e.Nodes {
		node, err := e.Cluster.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k := range node.Labels {
			if strings.Contains(k, "convoy.dev/") || strings.HasPrefix(k, "karpenter.sh/") {
				t.Fatalf("node %s has label %s: this tier's nodes carry only their provider's and NVIDIA's labels", n.Name, k)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(e.Root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Blocks(readme)
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	clone := cloneRepository(t, e.Root)
	if err := e.OfflineKueue(ctx, filepath.Join(clone, "deploy", "kueue"), e.Image(images.Kueue)); err != nil {
		t.Fatal(err)
	}
	mockNVML(t, clone)
	registry := realstack.Registry + "/ml"

	for _, block := range []string{"install-helm", "install-kustomize"} {
		script, err := SetVariable(blocks[block], "REGISTRY", registry)
		if err != nil {
			t.Fatalf("README.md's block %s: %v", block, err)
		}
		if block == "install-helm" {
			// What the chart renders is validated by the API server, not printed.
			script = "helm() { command helm \"$@\" --dry-run=server >/dev/null; }\n" + script
		}
		runBlock(t, e, clone, block, script)
	}
	for _, d := range []string{stack.Operator, stack.Scheduler} {
		var dep appsv1.Deployment
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: d}, &dep); err != nil {
			t.Fatal(err)
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, registry+"/"+d+":v") {
			t.Errorf("deployment %s runs %s, want the image make images pushed to %s", d, img, registry)
		}
	}
	if err := e.WaitGPUNodes(ctx); err != nil {
		t.Fatal(err)
	}
	trainSeedJob(t, e, registry)
}

// cloneRepository copies the repository's files (tracked, and untracked but not ignored) into a
// temporary directory, as a fresh clone has them, with bin/ linked to the repository's, which
// holds what `make bin images` built. The blocks edit deploy/images there.
func cloneRepository(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	clone := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(clone, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(clone, f), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "bin"), filepath.Join(clone, "bin")); err != nil {
		t.Fatal(err)
	}
	return clone
}

// mockNVML has the clone's node agent read the simulated GPUs of realstack.Profile: these nodes
// have no NVIDIA driver.
func mockNVML(t *testing.T, clone string) {
	t.Helper()
	file := filepath.Join(clone, "deploy", "node-agent", "kustomization.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("\npatches:")) {
		t.Fatalf("%s has patches already: add the mock NVML patch to them", file)
	}
	data = append(data, fmt.Sprintf(`patches:
- target: {kind: DaemonSet, name: %s}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --nvml=mock:%s
`, stack.NodeAgent, realstack.Profile)...)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runBlock runs script with bash in dir, stopping at the first command that fails, with kubectl
// and helm of bin/ on PATH and the cluster's kubeconfig; REGISTRY_INSECURE=1 because the local
// registry speaks plain HTTP, and CONVOY_BUILT because `make bin images` ran before the test.
func runBlock(t *testing.T, e *realstack.Env, dir, block, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	began := time.Now()
	helmState := t.TempDir()
	cmd := exec.CommandContext(ctx, "bash", "-euxo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+e.Cluster.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+e.Cluster.KubeconfigPath,
		"REGISTRY_INSECURE=1",
		"CONVOY_BUILT=bin,images",
		"HELM_CACHE_HOME="+filepath.Join(helmState, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmState, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmState, "data"))
	out, err := cmd.CombinedOutput()
	t.Logf("README.md's block %s (%.1fs):\n%s", block, time.Since(began).Seconds(), out)
	if err != nil {
		t.Fatalf("README.md's block %s failed: %v", block, err)
	}
}

// trainSeedJob pushes the trainer image with root as its user, as seed images are, creates what a
// queue administrator would for the real nodes (a ResourceFlavor by nvidia.com/gpu.product alone,
// a ClusterQueue and the LocalQueue training, in a namespace without Pod Security enforcement), and
// applies examples/seed/digits.yaml with its image's registry replaced.
func trainSeedJob(t *testing.T, e *realstack.Env, registry string) {
	t.Helper()
	ctx := t.Context()
	img, err := images.LocalImage(e.ImagesDir, images.Trainer)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.User = ""
	rootImg, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(registry+"/pytorch-digits:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, rootImg, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}

	ns := "seed"
	if err := e.NodeQueue(ctx, ns, nil, "l40s", map[string]string{framework.LabelGPUProduct: realstack.GPUProduct}); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(e.Root, "examples", "seed", "digits.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(manifest, []byte(placeholderRegistry+"/")) {
		t.Fatalf("examples/seed/digits.yaml names no image in %s", placeholderRegistry)
	}
	manifest = bytes.ReplaceAll(manifest, []byte(placeholderRegistry+"/"), []byte(registry+"/"))
	if out, err := e.Kubectl(ctx, "apply", "-n", ns, "-f", writeTemp(t, manifest)); err != nil {
		t.Fatalf("kubectl apply -f examples/seed/digits.yaml: %v\n%s", err, out)
	}

	job := &convoy.TrainingJob{}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "digits-seed"}, job); err != nil {
			return false, err
		}
		return job.Status.State == convoy.StateCompleted || job.Status.State == convoy.StateFailed, nil
	})
	if err != nil || job.Status.State != convoy.StateCompleted {
		describe, _ := e.Kubectl(context.Background(), "describe", "tj", "-n", ns, "digits-seed")
		pods, _ := e.Kubectl(context.Background(), "get", "pods,workloads", "-n", ns, "-o", "wide")
		t.Fatalf("the seed job is %s (%v), want Completed\n%s\n%s", job.Status.State, err, describe, pods)
	}
	if job.Status.PodSecurity != convoy.PodSecurityBaseline {
		t.Errorf("status.podSecurity = %q, want baseline: the image runs as root", job.Status.PodSecurity)
	}
	var pods corev1.PodList
	if err := e.Cluster.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("the seed job left no pods")
	}
	for _, p := range pods.Items {
		if sc := p.Spec.SecurityContext; sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot {
			t.Errorf("pod %s has runAsNonRoot, in a namespace that does not enforce restricted", p.Name)
		}
		if p.Spec.NodeName == "" || !strings.HasPrefix(p.Spec.NodeName, "real-") {
			t.Errorf("pod %s ran on %q, want a real node", p.Name, p.Spec.NodeName)
		}
	}
	logs, _ := e.Kubectl(ctx, "logs", "-n", ns, "digits-seed-worker-0")
	final := regexp.MustCompile(`final accuracy=[0-9.]+`).FindString(logs)
	if final == "" {
		t.Errorf("kubectl logs digits-seed-worker-0 has no final accuracy:\n%s", logs)
	}
	t.Logf("examples/seed/digits.yaml: %s, status.podSecurity %s, pods on %v, rank 0's %s", job.Status.State, job.Status.PodSecurity, nodesOf(pods.Items), final)
}

func nodesOf(pods []corev1.Pod) []string {
	var nodes []string
	for _, p := range pods {
		nodes = append(nodes, p.Name+"@"+p.Spec.NodeName)
	}
	return nodes
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}
