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

// Package chart tests the Helm chart deploy/helm/convoy with the real helm binary (built from
// helm.sh/helm/v4 into bin/) against a real kube-apiserver: it lints clean, it renders exactly the
// objects of the kustomize bases it is generated from (hack/chartgen), and it installs, upgrades
// and uninstalls.
package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{AddToScheme: []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme}})
}

// namespace is where the kustomize bases install; the chart installs into the release's.
const namespace = "convoy-system"

// run runs one of bin/'s tools against the cluster and returns its output.
func run(t *testing.T, c *framework.Cluster, tool string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(c.BinDir, tool), args...)
	cmd.Env = append(c.KubectlEnv(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", tool, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func chartDir(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "deploy", "helm", "convoy")
}

func TestChartLintsClean(t *testing.T) {
	c := framework.Shared(t)
	out, err := run(t, c, "helm", "lint", "--strict", chartDir(t), "--set", "queues.enabled=true")
	if err != nil || !strings.Contains(out, "0 chart(s) failed") {
		t.Errorf("helm lint --strict: %v\n%s", err, out)
	}
}

// objects parses a multi-document YAML stream into objects keyed by kind/namespace/name; the
// scheduler's configuration, a YAML document in a ConfigMap, is parsed too, since the chart
// writes it from a value.
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(stream, "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if len(obj) == 0 || obj["kind"] == "Namespace" {
			continue
		}
		md := obj["metadata"].(map[string]any)
		if data, ok := obj["data"].(map[string]any); ok && md["name"] == "convoy-scheduler-config" {
			cfg := map[string]any{}
			if err := yaml.Unmarshal([]byte(data["config.yaml"].(string)), &cfg); err != nil {
				t.Fatal(err)
			}
			data["config.yaml"] = cfg
		}
		out[fmt.Sprintf("%s/%v/%v", obj["kind"], md["namespace"], md["name"])] = obj
	}
	return out
}

// TestChartRendersTheKustomizeBases: `helm template` with the default values (and the optional
// components on) gives the very objects `kubectl kustomize` gives for deploy/operator,
// deploy/scheduler, deploy/node-agent, deploy/dra-driver, deploy/tenancy, deploy/queue,
// deploy/prices, deploy/monitoring and deploy/network-policies, and deploy/kueue's Convoy files.
func TestChartRendersTheKustomizeBases(t *testing.T) {
	c := framework.Shared(t)
	root := filepath.Dir(filepath.Dir(chartDir(t)))
	var want strings.Builder
	for _, dir := range []string{"operator", "scheduler", "node-agent", "dra-driver", "tenancy", "queue", "prices", "monitoring", "network-policies"} {
		out, err := run(t, c, "kubectl", "kustomize", filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		want.WriteString("\n---\n" + out)
	}
	for _, f := range []string{"kueue_trainingjob_role.yaml", "rbac/role.yaml", "rbac/named_role.yaml", "rbac/role_binding.yaml", "webhook.yaml", "webhook_secret.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "kueue", f))
		if err != nil {
			t.Fatal(err)
		}
		want.WriteString("\n---\n" + string(b))
	}
	got, err := run(t, c, "helm", "template", "convoy", chartDir(t), "--namespace", namespace,
		"--set", "queues.enabled=true", "--set", "prices.enabled=true", "--set", "monitoring.enabled=true", "--set", "networkPolicies.enabled=true",
		"--set", "draDriver.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(objects(t, want.String()), objects(t, got)); diff != "" {
		t.Errorf("helm template differs from the kustomize bases (-kustomize,+helm):\n%s", diff)
	}
}

// TestChartSpotNodeLabelIsOneValue: the value spotNodeLabel is both the operator's
// --spot-node-label and the label the sample spot flavors select, in place of Karpenter's.
func TestChartSpotNodeLabelIsOneValue(t *testing.T) {
	c := framework.Shared(t)
	out, err := run(t, c, "helm", "template", "convoy", chartDir(t), "--namespace", namespace,
		"--set", "queues.enabled=true", "--set", "spotNodeLabel=cloud.google.com/gke-spot=true")
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	var d appsv1.Deployment
	if b, err := yaml.Marshal(objs["Deployment/"+namespace+"/convoy-operator"]); err != nil || yaml.Unmarshal(b, &d) != nil || len(d.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("no operator Deployment in the chart (%v)", err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--spot-node-label=cloud.google.com/gke-spot=true") {
		t.Errorf("operator args %q, want --spot-node-label=cloud.google.com/gke-spot=true", args)
	}
	for _, name := range []string{"h100-spot", "a100-spot"} {
		spec, _ := objs["ResourceFlavor/<nil>/"+name]["spec"].(map[string]any)
		labels, _ := spec["nodeLabels"].(map[string]any)
		if labels["cloud.google.com/gke-spot"] != "true" || labels["karpenter.sh/capacity-type"] != nil {
			t.Errorf("ResourceFlavor %s nodeLabels = %v, want cloud.google.com/gke-spot: \"true\" in place of Karpenter's", name, labels)
		}
	}
}

// TestChartInstallsUpgradesAndUninstalls: helm installs the chart into a release namespace of its
// own: the CRDs, the operator, scheduler and node agent workloads with the values given, the
// webhooks and the priority-grant policy pointed at the release's namespace; an upgrade changes the replicas; uninstall removes
// the release's objects and keeps the CRDs (and so every TrainingJob), as Helm does.
func TestChartInstallsUpgradesAndUninstalls(t *testing.T) {
	c := framework.Shared(t)
	ctx := context.Background()
	const ns = "gpu-batch"
	if _, err := run(t, c, "helm", "install", "convoy", chartDir(t), "--namespace", ns, "--create-namespace",
		"--set", "image.registry=registry.example/ml", "--set", "operator.image=registry.example/convoy-operator:v1",
		"--set", "scheduler.replicas=1", "--set", "networkPolicies.enabled=true"); err != nil {
		t.Fatal(err)
	}

	crd := &apiextensionsv1.CustomResourceDefinition{}
	for _, name := range []string{"trainingjobs.convoy.dev", "podgroups.scheduling.x-k8s.io"} {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Errorf("the CRD %s: %v", name, err)
		}
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	version, err := images.Version(root)
	if err != nil {
		t.Fatal(err)
	}
	agent := &appsv1.DaemonSet{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "convoy-node-agent"}, agent); err != nil {
		t.Fatalf("the node agent's DaemonSet: %v", err)
	}
	if img, want := agent.Spec.Template.Spec.Containers[0].Image, "registry.example/ml/convoy-node-agent:v"+version; img != want {
		t.Errorf("node agent image %q, want %q: image.registry and the chart's appVersion", img, want)
	}
	op := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "convoy-operator"}, op); err != nil {
		t.Fatalf("the operator's Deployment: %v", err)
	}
	if img := op.Spec.Template.Spec.Containers[0].Image; img != "registry.example/convoy-operator:v1" {
		t.Errorf("operator image %q, want the value given", img)
	}
	if !slices.Contains(op.Spec.Template.Spec.Containers[0].Args, "--progress-url=https://convoy-operator-progress."+ns+".svc:443") {
		t.Errorf("operator args %v: want the progress URL in the release's namespace", op.Spec.Template.Spec.Containers[0].Args)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "convoy-operator"}, &networkingv1.NetworkPolicy{}); err != nil {
		t.Errorf("the operator's NetworkPolicy: %v", err)
	}
	// The operator of this release creates pods at the priority its TrainingJobs were granted, and
	// with their gangs' labels.
	for _, name := range []string{"convoy-priority-pods", "convoy-gang-pods"} {
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, vap); err != nil {
			t.Errorf("policy %s: %v", name, err)
		} else if len(vap.Spec.MatchConditions) != 1 || !strings.Contains(vap.Spec.MatchConditions[0].Expression, "system:serviceaccount:"+ns+":convoy-operator") {
			t.Errorf("policy %s's match conditions %+v: want the operator in %s left out", name, vap.Spec.MatchConditions, ns)
		}
	}
	sched := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "convoy-scheduler"}, sched); err != nil || *sched.Spec.Replicas != 1 {
		t.Errorf("the scheduler's Deployment: %v, want 1 replica as set", err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "convoy-trainingjob-queue"}, vwc); err != nil {
		t.Fatalf("the webhooks: %v", err)
	}
	for _, w := range vwc.Webhooks {
		if w.ClientConfig.Service == nil || w.ClientConfig.Service.Namespace != ns {
			t.Errorf("webhook %s calls %+v, want the Service in %s", w.Name, w.ClientConfig.Service, ns)
		}
	}

	if _, err := run(t, c, "helm", "upgrade", "convoy", chartDir(t), "--namespace", ns, "--reuse-values", "--set", "scheduler.replicas=3"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "convoy-scheduler"}, sched); err != nil || *sched.Spec.Replicas != 3 {
		t.Errorf("after the upgrade the scheduler's Deployment: %v, want 3 replicas", err)
	}

	if _, err := run(t, c, "helm", "uninstall", "convoy", "--namespace", ns); err != nil {
		t.Fatal(err)
	}
	err = c.Client.Get(ctx, client.ObjectKey{Name: "convoy-trainingjob-queue"}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	if err == nil {
		t.Error("the webhooks outlived helm uninstall")
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "trainingjobs.convoy.dev"}, crd); err != nil {
		t.Errorf("the TrainingJob CRD after helm uninstall: %v, want it kept", err)
	}
}
