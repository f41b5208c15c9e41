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

// Command chartgen writes the Helm chart deploy/helm/convoy from the kustomize bases in deploy/, so
// the two cannot drift apart: each template is a base rendered by kustomize, with the namespace,
// images, replicas, resources and the scheduler's configuration turned into values whose defaults
// are the bases' own. `make generate` runs it; `make verify` fails when its output is stale.
//
//	go run ./hack/chartgen [-deploy deploy] [-chart deploy/helm/convoy]
//
// With -manifest it writes instead the release's single install manifest, as Kueue ships its
// manifests.yaml: the CRDs, the operator, the scheduler, the node agent and the tenancy policies,
// with the images of -registry at v<VERSION> (`make manifests`).
//
//	go run ./hack/chartgen -manifest bin/release/convoy.yaml [-registry ghcr.io/acme]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Namespace is the namespace the bases install into; the chart installs into the release's.
const Namespace = "convoy-system"

// Registry is where Convoy's released images are; deploy/images names them there, tagged
// v<VERSION>, and the chart's value image.registry defaults to it.
const Registry = "ghcr.io/convoy-dev"

// component is one template of the chart: a kustomize base, or plain files of one.
type component struct {
	// key is the component's key in values.yaml; template is its file under templates/.
	key, template string
	// dir is the kustomize base; files, when set, are the only files of dir to take, as they are.
	dir   string
	files []string
	// optional components are off unless <key>.enabled is set; the others are on unless it is unset.
	optional bool
	about    string
}

var components = []component{
	{key: "operator", template: "operator.yaml", dir: "operator", about: "the operator: TrainingJob controller, progress endpoint, Kueue's job reconciler and the webhooks"},
	{key: "kueueIntegration", template: "kueue-integration.yaml", dir: "kueue",
		files: []string{"kueue_trainingjob_role.yaml", "rbac/role.yaml", "rbac/named_role.yaml", "rbac/role_binding.yaml", "webhook.yaml", "webhook_secret.yaml"},
		about: "the operator's side of Kueue (its webhooks, their Service and certificate Secret, its Kueue RBAC); Kueue itself is installed with its own chart"},
	{key: "scheduler", template: "scheduler.yaml", dir: "scheduler", about: "convoy-scheduler, a second scheduler beside the default one"},
	{key: "nodeAgent", template: "node-agent.yaml", dir: "node-agent", about: "the node agent DaemonSet on GPU nodes"},
	{key: "draDriver", template: "dra-driver.yaml", dir: "dra-driver", optional: true, about: "the DRA driver for simulated GPUs (gpu.nvidia.com devices from the node agent's mock profile) as a DaemonSet on the nodes labelled convoy.dev/gpu-allocation=dra, and DeviceClass gpu.nvidia.com"},
	{key: "tenancy", template: "tenancy.yaml", dir: "tenancy", about: "the convoy-tenant ClusterRole a team is bound to in its namespace, and the admission policies that let a namespace use only the priority classes and ServiceAccounts granted to it, and leave a TrainingJob's pods to the operator and GPUs to the queue"},
	{key: "queues", template: "queues.yaml", dir: "queue", optional: true, about: "sample ResourceFlavors, ClusterQueues, LocalQueues and PriorityClasses to start from"},
	{key: "prices", template: "prices.yaml", dir: "prices", optional: true, about: "a sample price list (ConfigMap convoy-prices) for status.cost and spec.budget: set your own prices"},
	{key: "monitoring", template: "monitoring.yaml", dir: "monitoring", optional: true, about: "ServiceMonitors and the PrometheusRule (needs the Prometheus Operator's CRDs)"},
	{key: "networkPolicies", template: "network-policies.yaml", dir: "network-policies", optional: true, about: "NetworkPolicies that let each component accept only what it serves and call only the API server and DNS"},
}

func main() {
	deployDir := flag.String("deploy", "deploy", "the kustomize bases")
	chartDir := flag.String("chart", "deploy/helm/convoy", "the chart to write")
	versionFile := flag.String("version-file", "VERSION", "the release's version, x.y.z")
	manifest := flag.String("manifest", "", "write the release's single install manifest to this file instead of the chart")
	registry := flag.String("registry", Registry, "with -manifest: where the images are, a registry and a path")
	flag.Parse()
	b, err := os.ReadFile(*versionFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
	version := strings.TrimSpace(string(b))
	if *manifest != "" {
		err = writeManifest(*deployDir, *manifest, *registry, version)
	} else {
		err = generate(*deployDir, *chartDir, version)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
}

func generate(deployDir, chartDir, version string) error {
	values := map[string]any{"image": map[string]any{"registry": Registry, "tag": ""}}
	order := []string{"image"}
	for _, c := range components {
		if _, err := os.Stat(filepath.Join(deployDir, c.dir, "kustomization.yaml")); os.IsNotExist(err) {
			continue // a base not written yet
		}
		objs, err := render(deployDir, c)
		if err != nil {
			return fmt.Errorf("%s: %w", c.key, err)
		}
		v := map[string]any{"enabled": !c.optional}
		tmpl, err := template(c, objs, v, "v"+version)
		if err != nil {
			return fmt.Errorf("%s: %w", c.key, err)
		}
		values[c.key] = v
		order = append(order, c.key)
		if err := os.MkdirAll(filepath.Join(chartDir, "templates"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(chartDir, "templates", c.template), tmpl, 0o644); err != nil {
			return err
		}
	}
	if spotNodeLabel != "" {
		values["spotNodeLabel"] = spotNodeLabel
		order = slices.Insert(order, 1, "spotNodeLabel")
	}
	if err := writeValues(filepath.Join(chartDir, "values.yaml"), values, order); err != nil {
		return err
	}
	if err := writeChartVersion(filepath.Join(chartDir, "Chart.yaml"), version); err != nil {
		return err
	}
	if err := copyCRDs(filepath.Join(deployDir, "crd", "scheduler-plugins"), filepath.Join(chartDir, "crds")); err != nil {
		return err
	}
	return copyCRDs(filepath.Join(deployDir, "crd", "bases"), filepath.Join(chartDir, "crds"))
}

// render runs kustomize over the component's base, or reads its listed files, and returns its
// objects, Namespaces left out (the release's namespace is created by Helm).
func render(deployDir string, c component) ([]map[string]any, error) {
	var docs [][]byte
	if c.files != nil {
		for _, f := range c.files {
			b, err := os.ReadFile(filepath.Join(deployDir, c.dir, f))
			if err != nil {
				return nil, err
			}
			docs = append(docs, splitYAML(b)...)
		}
	} else {
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(deployDir, c.dir))
		if err != nil {
			return nil, err
		}
		for _, r := range m.Resources() {
			b, err := r.AsYAML()
			if err != nil {
				return nil, err
			}
			docs = append(docs, b)
		}
	}
	var out []map[string]any
	for _, d := range docs {
		obj := map[string]any{}
		if err := yaml.Unmarshal(d, &obj); err != nil {
			return nil, err
		}
		if len(obj) == 0 || obj["kind"] == "Namespace" {
			continue
		}
		out = append(out, obj)
	}
	return out, nil
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

func splitYAML(b []byte) [][]byte {
	var out [][]byte
	for _, d := range docSeparator.Split(string(b), -1) {
		if strings.TrimSpace(d) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

// Placeholders stand in the marshalled YAML where template expressions go.
const (
	phReplicas  = "__CHARTGEN_REPLICAS__"
	phImage     = "__CHARTGEN_IMAGE__"
	phResources = "__CHARTGEN_RESOURCES__"
	phConfig    = "__CHARTGEN_SCHEDULER_CONFIG__"
	phExtraArgs = "__CHARTGEN_EXTRA_ARGS__"
	phSpotArg   = "__CHARTGEN_SPOT_NODE_LABEL__"
	phSpotKey   = "__CHARTGEN_SPOT_KEY__"
)

// spotNodeLabelFlag is the operator's flag whose value, key=value, is the chart's value
// spotNodeLabel: the label of spot nodes, which the sample spot flavors select too.
const spotNodeLabelFlag = "--spot-node-label="

// spotNodeLabel is the operator's --spot-node-label in deploy/operator, the value's default;
// the operator's base is rendered before deploy/queue's.
var spotNodeLabel string

// template turns the objects into the component's template, recording the defaults of what it
// makes values of in v.
func template(c component, objs []map[string]any, v map[string]any, tag string) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Generated by hack/chartgen from deploy/%s: %s. Do not edit; edit deploy/%s and run make generate.\n", c.dir, c.about, c.dir)
	guard := fmt.Sprintf("{{- if .Values.%s.enabled }}\n", c.key)
	buf.WriteString(guard)
	for _, obj := range objs {
		if err := parameterize(obj, v, tag); err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		// Text that Helm would read as a template (a PrometheusRule's {{ $labels.x }}) is
		// printed as it is.
		s := strings.ReplaceAll(string(b), "{{", "{{`{{`}}")
		s = strings.ReplaceAll(s, Namespace, "{{ .Release.Namespace }}")
		s = expand(s, c.key)
		buf.WriteString("---\n" + s)
	}
	buf.WriteString("{{- end }}\n")
	return buf.Bytes(), nil
}

// parameterize replaces, in a workload, the first container's image and resources and the
// replicas with placeholders and makes room for extra arguments after its own, and the
// scheduler's configuration, keeping their values as defaults. A Convoy image must be
// Registry/<name>:tag; its value is empty, and the template builds it from image.registry and
// image.tag.
func parameterize(obj map[string]any, v map[string]any, tag string) error {
	kind := obj["kind"]
	if kind == "ConfigMap" && name(obj) == "convoy-scheduler-config" {
		data, _ := obj["data"].(map[string]any)
		text, _ := data["config.yaml"].(string)
		cfg := map[string]any{}
		if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
			return fmt.Errorf("the scheduler's config.yaml: %w", err)
		}
		v["config"] = cfg
		data["config.yaml"] = phConfig
		return nil
	}
	if kind == "ResourceFlavor" && spotNodeLabel != "" {
		key, value, _ := strings.Cut(spotNodeLabel, "=")
		spec, _ := obj["spec"].(map[string]any)
		labels, _ := spec["nodeLabels"].(map[string]any)
		if labels[key] == value {
			delete(labels, key)
			labels[phSpotKey] = ""
		}
		return nil
	}
	if kind != "Deployment" && kind != "DaemonSet" {
		return nil
	}
	spec := obj["spec"].(map[string]any)
	if r, ok := spec["replicas"]; ok {
		v["replicas"] = r
		spec["replicas"] = phReplicas
	}
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	ctr := pod["containers"].([]any)[0].(map[string]any)
	img, _ := ctr["image"].(string)
	if rest, ok := strings.CutPrefix(img, Registry+"/"); ok {
		name, got, _ := strings.Cut(rest, ":")
		if got != tag {
			return fmt.Errorf("%s is tagged %q, but VERSION makes the release %s: set newTag in deploy/images/kustomization.yaml", img, got, tag)
		}
		v["image"] = ""
		ctr["image"] = phImage + name
	} else {
		v["image"] = img
		ctr["image"] = phImage
	}
	if r, ok := ctr["resources"]; ok {
		v["resources"] = r
		ctr["resources"] = phResources
	}
	if args, ok := ctr["args"].([]any); ok {
		for i, a := range args {
			if l, ok := strings.CutPrefix(fmt.Sprint(a), spotNodeLabelFlag); ok {
				spotNodeLabel = l
				args[i] = phSpotArg
			}
		}
		v["extraArgs"] = []any{}
		ctr["args"] = append(args, phExtraArgs)
	}
	return nil
}

var (
	convoyImageLine = regexp.MustCompile(`image: ` + phImage + `([a-z0-9-]+)`)
	resourcesLine   = regexp.MustCompile(`(?m)^(\s*)resources: ` + phResources + `$`)
	configLine      = regexp.MustCompile(`(?m)^(\s*)config.yaml: ` + phConfig + `$`)
	extraArgsLine   = regexp.MustCompile(`(?m)^(\s*)- ` + phExtraArgs + `$`)
	spotKeyLine     = regexp.MustCompile(phSpotKey + `: ""`)
)

// expand puts the template expressions in the placeholders' places.
func expand(s, key string) string {
	s = strings.ReplaceAll(s, "replicas: "+phReplicas, fmt.Sprintf("replicas: {{ .Values.%s.replicas }}", key))
	s = convoyImageLine.ReplaceAllString(s, fmt.Sprintf(`image: {{ .Values.%s.image | default (printf "%%s/%%s:%%s" .Values.image.registry "$1" (.Values.image.tag | default .Chart.AppVersion)) | quote }}`, key))
	s = strings.ReplaceAll(s, "image: "+phImage, fmt.Sprintf("image: {{ .Values.%s.image | quote }}", key))
	s = strings.ReplaceAll(s, phSpotArg, spotNodeLabelFlag+"{{ .Values.spotNodeLabel }}")
	s = spotKeyLine.ReplaceAllLiteralString(s, `{{ (splitn "=" 2 .Values.spotNodeLabel)._0 }}: {{ (splitn "=" 2 .Values.spotNodeLabel)._1 | quote }}`)
	s = resourcesLine.ReplaceAllStringFunc(s, func(line string) string {
		indent := len(resourcesLine.FindStringSubmatch(line)[1])
		return fmt.Sprintf("%sresources:\n%s  {{- toYaml .Values.%s.resources | nindent %d }}", strings.Repeat(" ", indent), strings.Repeat(" ", indent), key, indent+2)
	})
	s = extraArgsLine.ReplaceAllStringFunc(s, func(line string) string {
		indent := extraArgsLine.FindStringSubmatch(line)[1]
		return fmt.Sprintf("%s{{- with .Values.%s.extraArgs }}\n%s{{- toYaml . | nindent %d }}\n%s{{- end }}", indent, key, indent, len(indent), indent)
	})
	return configLine.ReplaceAllStringFunc(s, func(line string) string {
		indent := len(configLine.FindStringSubmatch(line)[1])
		return fmt.Sprintf("%sconfig.yaml: |\n%s  {{- toYaml .Values.%s.config | nindent %d }}", strings.Repeat(" ", indent), strings.Repeat(" ", indent), key, indent+2)
	})
}

func name(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

// writeValues writes values.yaml, one commented section per component in the chart's order.
func writeValues(path string, values map[string]any, order []string) error {
	var buf bytes.Buffer
	buf.WriteString("# Generated by hack/chartgen: every default is the kustomize base's own (deploy/).\n")
	for _, key := range order {
		about := "Convoy's images: <registry>/<name>:<tag>, the tag the chart's appVersion (v<VERSION>) when empty; <component>.image, when set, overrides one"
		if i := slices.IndexFunc(components, func(c component) bool { return c.key == key }); i >= 0 {
			about = components[i].about
		}
		if key == "spotNodeLabel" {
			about = "the node label key=value of spot nodes: the operator's --spot-node-label, and the label the sample spot flavors (queues) select"
		}
		b, err := yaml.Marshal(map[string]any{key: values[key]})
		if err != nil {
			return err
		}
		fmt.Fprintf(&buf, "\n# %s\n%s", about, b)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

var chartVersionLine = regexp.MustCompile(`(?m)^(version|appVersion): .*$`)

// writeChartVersion sets Chart.yaml's version to version and its appVersion to v<version>.
func writeChartVersion(path, version string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	b = chartVersionLine.ReplaceAllFunc(b, func(line []byte) []byte {
		if bytes.HasPrefix(line, []byte("appVersion:")) {
			return []byte("appVersion: v" + version)
		}
		return []byte("version: " + version)
	})
	return os.WriteFile(path, b, 0o644)
}

// copyCRDs puts the CRDs in the chart's crds/, which Helm installs before the templates.
func copyCRDs(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(from, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// releaseImage matches a release image in rendered YAML: its name and tag.
var releaseImage = regexp.MustCompile(`image: ` + regexp.QuoteMeta(Registry) + `/([a-z0-9-]+):(\S+)`)

// manifestDirs are the bases of the install manifest, in the order they apply: Kueue (deploy/kueue,
// with Convoy's side of its integration) is installed before it.
var manifestDirs = []string{"crd", "operator", "scheduler", "node-agent", "tenancy"}

// writeManifest renders manifestDirs into one file, the convoy-system Namespace once and Convoy's
// images at registry.
func writeManifest(deployDir, path, registry, version string) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Convoy v%s: kubectl apply --server-side -f %s, after Kueue (kubectl apply --server-side -k deploy/kueue).\n", version, filepath.Base(path))
	namespaced := false
	for _, dir := range manifestDirs {
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(deployDir, dir))
		if err != nil {
			return fmt.Errorf("deploy/%s: %w", dir, err)
		}
		for _, r := range m.Resources() {
			if r.GetKind() == "Namespace" {
				if namespaced {
					continue
				}
				namespaced = true
			}
			b, err := r.AsYAML()
			if err != nil {
				return err
			}
			for _, m := range releaseImage.FindAllStringSubmatch(string(b), -1) {
				if m[2] != "v"+version {
					return fmt.Errorf("deploy/%s: %s is tagged %s, but VERSION makes the release v%s: set newTag in deploy/images/kustomization.yaml", dir, m[1], m[2], version)
				}
			}
			buf.WriteString("---\n" + strings.ReplaceAll(string(b), "image: "+Registry+"/", "image: "+registry+"/"))
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
