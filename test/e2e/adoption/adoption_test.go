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

// docFiles are the Markdown files whose marked blocks the test runs.
var docFiles = []string{"README.md", "docs/install.md"}

// On real nodes that carry only their provider's and NVIDIA's labels, beside a kwok fleet of EKS
// GPU nodes labelled and tainted as EKS and GPU Feature Discovery do, the docs' blocks run with bash
// as written, REGISTRY set to the local registry: the README's Helm install, checked to serve (its
// Deployments available with the registry's images, its webhook refusing a job whose label and
// spec.scheduling.queue disagree), then docs/install.md's uninstall, checked to leave nothing of
// Convoy or Kueue; then docs/install.md's topology preset (eks) and the README's kustomize install,
// which trains examples/seed/digits.yaml, a manifest written for the seed design (the GPU in
// resources, priority, a root image), to Completed on the real nodes, while a 4-worker job of
// team-a runs on the fleet, inside one layer-3 network domain. Three things are not as on a
// platform team's cluster, because this machine is offline and has no GPU: deploy/kueue takes
// Kueue's release from the pinned module instead of GitHub (realstack.OfflineKueue), the node agent
// reads mock NVML, and the fleet's nodes are kwok's.
func TestInstallFromTheREADMEAndTrainASeedJob(t *testing.T) {
	ctx := t.Context()
	e, err := realstack.StartNodes(ctx, framework.Shared(t), realstack.ProviderLabels(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := startFleet(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	nodes := &corev1.NodeList{}
	if err := e.Cluster.Client.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes.Items {
		for k := range node.Labels {
			if strings.Contains(k, "convoy.dev/") || strings.HasPrefix(k, "karpenter.sh/") {
				t.Fatalf("node %s has label %s: this tier's nodes carry only their provider's and NVIDIA's labels", node.Name, k)
			}
		}
	}
	blocks := map[string]docBlock{}
	for _, file := range docFiles {
		data, err := os.ReadFile(filepath.Join(e.Root, file))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := Blocks(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for name, script := range bs {
			if b, dup := blocks[name]; dup {
				t.Fatalf("block %s is marked in %s and in %s", name, b.file, file)
			}
			blocks[name] = docBlock{file: file, name: name, script: script}
		}
	}
	block := func(name string) docBlock {
		b, ok := blocks[name]
		if !ok {
			t.Fatalf("no file of %v marks a block %s", docFiles, name)
		}
		return b
	}
	clone := cloneRepository(t, e.Root)
	if err := e.OfflineKueue(ctx, filepath.Join(clone, "deploy", "kueue"), e.Image(images.Kueue)); err != nil {
		t.Fatal(err)
	}
	mockNVML(t, clone)
	registry := realstack.Registry + "/ml"

	// The chart's node agent reads mock NVML too.
	helm := block("install-helm").set(t, "REGISTRY", registry)
	helm.script = `helm() { if [ "$1" = install ]; then command helm "$@" --set 'nodeAgent.extraArgs={--nvml=mock:` +
		realstack.Profile + `}'; else command helm "$@"; fi; }` + "\n" + helm.script
	runBlock(t, e, clone, helm)
	checkDeployments(t, e, registry)
	checkQueueWebhook(t, e)
	runBlock(t, e, clone, block("uninstall"))
	checkUninstalled(t, e)

	runBlock(t, e, clone, block("topology-preset").set(t, "PRESET", fleetPreset))
	runBlock(t, e, clone, block("install-kustomize").set(t, "REGISTRY", registry))
	checkDeployments(t, e, registry)
	if err := e.WaitGPUNodes(ctx); err != nil {
		t.Fatal(err)
	}
	submitFleetJob(t, e)
	trainSeedJob(t, e, registry)
	checkFleetJob(t, e, fleet)
}

// docBlock is a marked block of a Markdown file.
type docBlock struct {
	file, name, script string
}

// set returns b with the shell variable name set to value, as a reader sets it.
func (b docBlock) set(t *testing.T, name, value string) docBlock {
	t.Helper()
	script, err := SetVariable(b.script, name, value)
	if err != nil {
		t.Fatalf("%s's block %s: %v", b.file, b.name, err)
	}
	b.script = script
	return b
}

// checkDeployments waits until the operator and the scheduler are available and checks that they
// run the images that `make images` pushed to registry, tagged with the version.
func checkDeployments(t *testing.T, e *realstack.Env, registry string) {
	t.Helper()
	if out, err := e.Kubectl(t.Context(), "wait", "-n", stack.Namespace, "--for=condition=Available", "deployment", "--all", "--timeout=4m"); err != nil {
		pods, _ := e.Kubectl(context.Background(), "get", "pods", "-n", stack.Namespace, "-o", "wide")
		t.Fatalf("Convoy's Deployments never available: %v\n%s\n%s", err, out, pods)
	}
	for _, d := range []string{stack.Operator, stack.Scheduler} {
		var dep appsv1.Deployment
		if err := e.Cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: stack.Namespace, Name: d}, &dep); err != nil {
			t.Fatal(err)
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, registry+"/"+d+":v") {
			t.Errorf("deployment %s runs %s, want the image make images pushed to %s", d, img, registry)
		}
	}
}

// checkQueueWebhook checks that the operator's TrainingJob webhook answers: kubectl is refused a
// job whose queue label and spec.scheduling.queue disagree, with the webhook's message.
func checkQueueWebhook(t *testing.T, e *realstack.Env) {
	t.Helper()
	file := writeTemp(t, []byte(`apiVersion: convoy.dev/v1alpha1
kind: TrainingJob
metadata:
  name: two-queues
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: default}
spec:
  model: resnet18
  dataset: mnist
  numWorkers: 1
  scheduling: {queue: training}
`))
	want := `names LocalQueue "default" but spec.scheduling.queue names "training"`
	var out string
	// The webhook answers once the operator has made its certificate and injected its CA.
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		out, err = e.Kubectl(ctx, "create", "--dry-run=server", "-f", file)
		if err == nil {
			return false, fmt.Errorf("kubectl create admitted a job whose label and spec.scheduling.queue disagree:\n%s", out)
		}
		return strings.Contains(out, want), nil
	})
	if err != nil {
		t.Fatalf("the TrainingJob webhook never refused a job with %q: %v\n%s", want, err, out)
	}
}

// checkUninstalled checks that nothing of Convoy, of Kueue or of deploy/queue is left: their
// namespaces, CRDs, webhook configurations, API services, cluster roles and bindings,
// PriorityClasses and admission policies.
func checkUninstalled(t *testing.T, e *realstack.Env) {
	t.Helper()
	out, err := e.Kubectl(t.Context(), "get", "-o", "name",
		"namespaces,customresourcedefinitions,mutatingwebhookconfigurations,validatingwebhookconfigurations,"+
			"clusterroles,clusterrolebindings,priorityclasses,validatingadmissionpolicies,validatingadmissionpolicybindings,apiservices")
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, out)
	}
	var left []string
	for _, o := range strings.Fields(out) {
		if regexp.MustCompile(`convoy|kueue|scheduling\.x-k8s\.io|team-[ab]$|priorityclass[^/]*/(low|normal|high)$`).MatchString(o) {
			left = append(left, o)
		}
	}
	if len(left) > 0 {
		t.Errorf("after docs/install.md's uninstall, the cluster still has %v", left)
	}
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

// runBlock runs b's script with bash in dir, stopping at the first command that fails, with kubectl
// and helm of bin/ on PATH and the cluster's kubeconfig; REGISTRY_INSECURE=1 because the local
// registry speaks plain HTTP, and CONVOY_BUILT because `make bin images` ran before the test.
func runBlock(t *testing.T, e *realstack.Env, dir string, b docBlock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	began := time.Now()
	helmState := t.TempDir()
	cmd := exec.CommandContext(ctx, "bash", "-euxo", "pipefail", "-c", b.script)
	cmd.Dir = dir
	cmd.Env = append(e.Cluster.KubectlEnv(),
		"PATH="+e.Cluster.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"REGISTRY_INSECURE=1",
		"CONVOY_BUILT=bin,images",
		"HELM_CACHE_HOME="+filepath.Join(helmState, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmState, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmState, "data"))
	out, err := cmd.CombinedOutput()
	t.Logf("%s's block %s (%.1fs):\n%s", b.file, b.name, time.Since(began).Seconds(), out)
	if err != nil {
		t.Fatalf("%s's block %s failed: %v", b.file, b.name, err)
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
