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

// Package monitoring reads deploy/monitoring for the tests that run it against promtool and a real
// Prometheus: the PrometheusRule's rule groups as the plain rule file Prometheus loads, the
// monitors, and the Grafana dashboards' panel queries. One source, so the tests cannot drift from
// what a cluster installs.
package monitoring

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Dir is deploy/monitoring relative to the repository root.
const Dir = "deploy/monitoring"

// RuleGroup is one group of a PrometheusRule's spec.groups.
type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`
}

// Rule is one alerting or recording rule.
type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// object is what the monitoring.coreos.com objects share: kind and metadata.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
}

type prometheusRule struct {
	object
	Spec struct {
		Groups []RuleGroup `json:"groups"`
	} `json:"spec"`
}

// ReadRules returns the rule groups of the PrometheusRule in file. Unknown fields are an error:
// a misspelt key would otherwise drop a rule's setting silently.
func ReadRules(file string) ([]RuleGroup, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s: a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", file, pr.APIVersion, pr.Kind)
	}
	if len(pr.Spec.Groups) == 0 {
		return nil, fmt.Errorf("%s: no rule groups", file)
	}
	return pr.Spec.Groups, nil
}

// RuleFile returns the groups as a Prometheus rule file (`groups:` at the top).
func RuleFile(groups []RuleGroup) ([]byte, error) {
	return yaml.Marshal(map[string]any{"groups": groups})
}

// Alerts returns the names of the alerting rules in groups, in order.
func Alerts(groups []RuleGroup) []string {
	var names []string
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

// UntestedAlerts returns the alerts that no promtool test in dir expects to fire (an exp_alerts
// entry with a non-empty list under that alertname).
func UntestedAlerts(alerts []string, dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no promtool tests in %s", dir)
	}
	fired := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var suite struct {
			Tests []struct {
				AlertRuleTests []struct {
					AlertName string           `json:"alertname"`
					ExpAlerts []map[string]any `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(data, &suite); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, t := range suite.Tests {
			for _, a := range t.AlertRuleTests {
				if len(a.ExpAlerts) > 0 {
					fired[a.AlertName] = true
				}
			}
		}
	}
	var missing []string
	for _, a := range alerts {
		if !fired[a] {
			missing = append(missing, a)
		}
	}
	return missing, nil
}

// Panel is one query of a dashboard panel.
type Panel struct {
	Dashboard, Title, Expr string
}

type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// Panels returns every query of every panel of the dashboards (*.json) in dir.
func Panels(dir string) ([]Panel, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboards in %s", dir)
	}
	var panels []Panel
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d dashboard
		if err := yaml.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if d.UID == "" || d.Title == "" {
			return nil, fmt.Errorf("%s: a dashboard needs a uid and a title", f)
		}
		for _, p := range d.Panels {
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if len(p.Targets) == 0 {
				return nil, fmt.Errorf("%s: panel %q has no query", f, p.Title)
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return nil, fmt.Errorf("%s: panel %q has an empty query", f, p.Title)
				}
				panels = append(panels, Panel{Dashboard: d.Title, Title: p.Title, Expr: t.Expr})
			}
		}
	}
	return panels, nil
}

// Expand replaces the dashboards' template variables with what selects every value, as a
// dashboard opened with "All" does, and the rate window with window. It fails on a variable it
// does not know, which Prometheus would refuse.
func Expand(expr, window string) (string, error) {
	r := strings.NewReplacer("$__rate_interval", window, "$__interval", window, "$namespace", ".+", "$training_job", ".+",
		"$cluster_queue", ".+", "$node", ".+")
	out := r.Replace(expr)
	if i := strings.Index(out, "$"); i >= 0 {
		return "", fmt.Errorf("query %q uses an unknown variable at %q", expr, out[i:])
	}
	return out, nil
}

// Monitor is one endpoint of a ServiceMonitor or PodMonitor.
type Monitor struct {
	Kind, Name, Namespace string
	// JobLabel is the Service's or pod's label whose value becomes the job label.
	JobLabel        string
	Selector        map[string]string
	Port            string
	Path            string
	Scheme          string
	BearerTokenFile string
	InsecureTLS     bool
}

type monitorEndpoint struct {
	Port            string `json:"port"`
	Path            string `json:"path"`
	Scheme          string `json:"scheme"`
	Interval        string `json:"interval,omitempty"`
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	TLSConfig       *struct {
		InsecureSkipVerify bool `json:"insecureSkipVerify"`
	} `json:"tlsConfig,omitempty"`
}

type monitorObject struct {
	object
	Spec struct {
		JobLabel string `json:"jobLabel"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints           []monitorEndpoint `json:"endpoints,omitempty"`
		PodMetricsEndpoints []monitorEndpoint `json:"podMetricsEndpoints,omitempty"`
	} `json:"spec"`
}

// ReadMonitors returns the endpoints of the ServiceMonitors and PodMonitors in file.
func ReadMonitors(file string) ([]Monitor, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var monitors []Monitor
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var m monitorObject
		if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if m.APIVersion != "monitoring.coreos.com/v1" || !slices.Contains([]string{"ServiceMonitor", "PodMonitor"}, m.Kind) {
			return nil, fmt.Errorf("%s: %s %s is not a monitoring.coreos.com/v1 ServiceMonitor or PodMonitor", file, m.APIVersion, m.Kind)
		}
		for _, e := range append(m.Spec.Endpoints, m.Spec.PodMetricsEndpoints...) {
			monitors = append(monitors, Monitor{
				Kind: m.Kind, Name: m.Metadata.Name, Namespace: m.Metadata.Namespace, JobLabel: m.Spec.JobLabel,
				Selector: m.Spec.Selector.MatchLabels, Port: e.Port, Path: e.Path, Scheme: e.Scheme,
				BearerTokenFile: e.BearerTokenFile, InsecureTLS: e.TLSConfig != nil && e.TLSConfig.InsecureSkipVerify,
			})
		}
	}
	if len(monitors) == 0 {
		return nil, errors.New(file + ": no monitors")
	}
	return monitors, nil
}
