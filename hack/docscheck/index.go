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

package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// names is what the code defines, that the Markdown may name.
type names struct {
	root string
	// targets are the Makefile's targets.
	targets map[string]bool
	// flags are the flags Convoy's commands define, without their dashes.
	flags map[string]bool
	// literals are the string literals of the Go, Python and shell code and the words of the
	// manifests: where an environment variable is set or read.
	literals map[string]bool
	// metrics maps each metric's full name to its labels.
	metrics map[string]map[string]bool
	// fields are the JSON paths (spec.x.y, status.z) of Convoy's CRDs' schemas.
	fields map[string]bool
	// topFields are the first segments of fields below spec and status.
	topFields map[string]bool
	// columns are the printer columns, upper case as kubectl prints them.
	columns map[string]bool
	// formats match what the code can print: its format strings and messages.
	formats []format
	// anchors caches the heading anchors of each Markdown file.
	anchors map[string]map[string]bool
}

// externalFlags are flags of the tools the docs tell users to run (kubectl, helm, go, make,
// kube-apiserver, torchrun, ...), not Convoy's.
var externalFlags = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`server-side force-conflicts dry-run recursive namespace create-namespace skip-crds set
		reuse-values values output selector all-namespaces watch kubeconfig context type patch overwrite from-literal
		from-file clusterrole group serviceaccount user version timeout wait for template show-labels field-selector
		for-each tail follow previous container as as-group insecure registry only root bin-dir run bench benchtime
		count short scenarios trimpath modfile race cpu v p vet tags ldflags nnodes nproc-per-node nproc_per_node
		rdzv-backend rdzv-endpoint rdzv-id rdzv_backend rdzv_endpoint rdzv_id node-rank node_rank master-addr master-port
		standalone max-restarts admission-control-config-file authentication-token-webhook-config-file
		requestheader-client-ca-file proxy-client-cert-file proxy-client-key-file feature-gates config kube-api-qps
		kube-api-burst leader-elect v8 help h i f k n o l pull-policy image no-headers sort-by field-manager
		subresource raw prune cascade grace-period force now ignore-not-found from to dest src check lease-duration
		prefix strict cacert http2-max-streams-per-connection query-gpu break-system-packages no-build-isolation no-deps
		enable-scheme controller-threads use-service-account-credentials net mount unsafe-no-fsync always dirty
		no-install-recommends simulate recurse no-all-versions install root-dir bind make-private propagation all
		runtime-config`) {
		externalFlags[f] = true
	}
}

// externalEnv are variables the docs name that the code neither sets nor reads by name: set by
// torchrun, or made from a job's own additionalParams (an example's).
var externalEnv = map[string]bool{"LOCAL_RANK": true, "WEIGHT_DECAY": true}

// index reads what the code under root defines.
func index(root string) (*names, error) {
	n := &names{root: root, targets: map[string]bool{}, flags: map[string]bool{}, literals: map[string]bool{},
		metrics: map[string]map[string]bool{}, fields: map[string]bool{}, topFields: map[string]bool{},
		columns: map[string]bool{}, anchors: map[string]map[string]bool{}}
	if err := n.readMakefile(); err != nil {
		return nil, err
	}
	if err := n.readCode(); err != nil {
		return nil, err
	}
	if err := n.readCRDs(); err != nil {
		return nil, err
	}
	return n, nil
}

var targetLine = regexp.MustCompile(`^([a-zA-Z0-9][a-zA-Z0-9_.-]*)\s*:([^=]|$)`)

func (n *names) readMakefile() error {
	f, err := os.Open(filepath.Join(n.root, "Makefile"))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := targetLine.FindStringSubmatch(sc.Text()); m != nil {
			n.targets[m[1]] = true
		}
	}
	return sc.Err()
}

var (
	// goString is a Go string literal, interpreted or raw.
	goString = regexp.MustCompile("\"(?:[^\"\\\\\\n]|\\\\.)*\"|`[^`]*`")
	// pyString is a Python string literal on one line.
	pyString = regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'`)
	// flagDef is a flag definition of the flag or pflag package, or cobra's.
	flagDef = regexp.MustCompile(`\.(?:String|Bool|Int|Int32|Int64|Float64|Duration|Var|StringSlice|StringArray|Uint|Func|BoolFunc|TextVar)(?:Var|VarP|P)?\((?:&?[\w.\[\]]+,\s*)?"([a-z0-9][a-z0-9-]*)"`)
	// metricName and metricPrefix are a metric's Name and its Namespace or Subsystem; metricLabels
	// the label names of the vector that follows.
	metricName   = regexp.MustCompile(`\bName:\s*"([a-z_:][a-z0-9_:]*)"`)
	metricPrefix = regexp.MustCompile(`\b(?:Namespace|Subsystem):\s*"?([a-zA-Z_][a-zA-Z0-9_]*)"?`)
	metricLabels = regexp.MustCompile(`\}\s*,\s*\[\]string\{([^}]*)\}`)
	constString  = regexp.MustCompile(`\b([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([a-z0-9_]+)"`)
	// labelVar is a label list kept in a variable; metricHelper a metric made by a helper function
	// of the package, with the helper's labels.
	labelVar     = regexp.MustCompile(`\b([a-zA-Z_][a-zA-Z0-9_]*)\s*:?=\s*\[\]string\{([^}]*)\}`)
	metricHelper = regexp.MustCompile(`\b[a-zA-Z_][a-zA-Z0-9_]*\(\s*"((?:convoy|trainingjob|gpunode)_[a-z0-9_]+)"`)
	vecEnd       = regexp.MustCompile(`^\}\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
	// markerMessage is a kubebuilder marker's message.
	markerMessage = regexp.MustCompile(`message="((?:[^"\\]|\\.)*)"`)
)

// readCode indexes the Go, Python and shell code and the manifests.
func (n *names) readCode() error {
	return filepath.WalkDir(n.root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(n.root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || d.Name() == "node_modules" || rel == "hack/docscheck") {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(path)
		switch ext {
		case ".go", ".py", ".sh", ".yaml", ".yml", ".json", ".txt", ".cfg", ".toml":
		default:
			if d.Name() != "Makefile" && !strings.HasPrefix(d.Name(), "Dockerfile") {
				return nil
			}
		}
		if strings.HasSuffix(path, "_test.go") || strings.HasPrefix(d.Name(), "test_") {
			return nil // what only a test names is not the code's
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		for _, w := range wordRE.FindAllString(src, -1) {
			n.literals[w] = true
		}
		switch ext {
		case ".go":
			n.readGo(src)
		case ".py":
			for _, s := range pyString.FindAllString(src, -1) {
				n.addFormat(s[1 : len(s)-1])
			}
		case ".yaml":
			for _, line := range strings.Split(src, "\n") {
				if i := strings.Index(line, "'"); i >= 0 && strings.Contains(line, "Expression") || strings.HasPrefix(strings.TrimSpace(line), "'") {
					for _, s := range pyString.FindAllString(line, -1) {
						n.addFormat(s[1 : len(s)-1])
					}
				}
			}
		}
		return nil
	})
}

// wordRE is a word of the code: where an environment variable, a label or a key is named.
var wordRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_.\-/]*`)

func (n *names) readGo(src string) {
	for _, m := range flagDef.FindAllStringSubmatch(src, -1) {
		n.flags[m[1]] = true
	}
	for _, m := range markerMessage.FindAllStringSubmatch(src, -1) {
		n.addFormat(strings.ReplaceAll(m[1], `\"`, `"`))
	}
	for _, s := range goString.FindAllString(src, -1) {
		if strings.HasPrefix(s, "`") {
			n.addFormat(s[1 : len(s)-1])
		} else if u, err := strconv.Unquote(s); err == nil {
			n.addFormat(u)
		}
	}
	if !strings.Contains(src, "Opts{") {
		return
	}
	consts := map[string]string{}
	for _, m := range constString.FindAllStringSubmatch(src, -1) {
		consts[m[1]] = m[2]
	}
	labelList := func(list string) map[string]bool {
		labels := map[string]bool{}
		for _, e := range strings.Split(list, ",") {
			e = strings.TrimSpace(e)
			if v, ok := consts[e]; ok {
				labels[v] = true
			} else if strings.HasPrefix(e, `"`) {
				labels[strings.Trim(e, `"`)] = true
			}
		}
		return labels
	}
	vars := map[string]map[string]bool{}
	for _, m := range labelVar.FindAllStringSubmatch(src, -1) {
		vars[m[1]] = labelList(m[2])
	}
	for _, m := range metricHelper.FindAllStringSubmatch(src, -1) {
		if _, ok := n.metrics[m[1]]; !ok {
			n.metrics[m[1]] = map[string]bool{"*": true}
		}
	}
	// Each metric: its Opts literal (Namespace, Subsystem, Name), then its labels.
	for _, block := range strings.Split(src, "Opts{")[1:] {
		// The Opts literal ends at its closing brace.
		end, depth := len(block), 1
		for i, r := range block {
			if r == '{' {
				depth++
			} else if r == '}' {
				if depth--; depth == 0 {
					end = i
					break
				}
			}
		}
		opts := block[:end]
		m := metricName.FindStringSubmatch(opts)
		if m == nil {
			continue
		}
		var parts []string
		for _, p := range metricPrefix.FindAllStringSubmatch(opts, -1) {
			if v, ok := consts[p[1]]; ok {
				parts = append(parts, v)
			} else if !strings.ContainsAny(p[1], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				parts = append(parts, p[1])
			}
		}
		full := strings.Join(append(parts, m[1]), "_")
		labels := map[string]bool{}
		rest := block[end:min(len(block), end+300)]
		if l := metricLabels.FindStringSubmatch(rest); l != nil && strings.Index(rest, l[0]) < 5 {
			labels = labelList(l[1])
		} else if v := vecEnd.FindStringSubmatch(rest); v != nil && vars[v[1]] != nil {
			labels = vars[v[1]]
		}
		n.metrics[full] = labels
		// A metric vector with no label list takes its labels from a variable: accept any.
		if len(labels) == 0 {
			labels["*"] = true
		}
	}
}

// addFormat records what the code can print: a format string, with its verbs as wildcards.
func (n *names) addFormat(s string) {
	if len(s) < 12 || !strings.Contains(s, " ") {
		return
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+1 < len(s) {
			if s[i+1] == '%' {
				b.WriteString("%")
				i++
				continue
			}
			j := i + 1
			for j < len(s) && strings.IndexByte("+-# 0123456789.*[]", s[j]) >= 0 {
				j++
			}
			if j < len(s) {
				b.WriteString("[^;]+?")
				i = j
				continue
			}
		}
		b.WriteString(regexp.QuoteMeta(s[i : i+1]))
	}
	b.WriteString("$")
	if re, err := regexp.Compile(b.String()); err == nil {
		n.formats = append(n.formats, format{re: re, literal: len(s) - strings.Count(s, "%")*2})
	}
}

// format is a format string of the code as a regular expression, and how many of its characters
// are text rather than verbs.
type format struct {
	re      *regexp.Regexp
	literal int
}

// readCRDs indexes the fields and printer columns of Convoy's CRDs.
func (n *names) readCRDs() error {
	files, err := filepath.Glob(filepath.Join(n.root, "deploy", "crd", "bases", "convoy.dev_*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			return err
		}
		for _, v := range crd.Spec.Versions {
			for _, c := range v.AdditionalPrinterColumns {
				n.columns[strings.ToUpper(c.Name)] = true
			}
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				for _, top := range []string{"spec", "status"} {
					if p, ok := v.Schema.OpenAPIV3Schema.Properties[top]; ok {
						n.walk(top, &p, 0)
					}
				}
			}
		}
	}
	return nil
}

func (n *names) walk(path string, s *apiextensionsv1.JSONSchemaProps, depth int) {
	n.fields[path] = true
	if depth > 12 {
		return
	}
	if depth == 1 {
		n.topFields[path[strings.Index(path, ".")+1:]] = true
	}
	for k, p := range s.Properties {
		n.walk(path+"."+k, &p, depth+1)
	}
	if s.Items != nil && s.Items.Schema != nil {
		n.walk(path, s.Items.Schema, depth)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		n.walk(path+".*", s.AdditionalProperties.Schema, depth+1)
	}
	if s.XEmbeddedResource || s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		n.fields[path+".**"] = true
	}
}
