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

package monitoring

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
)

// PrometheusProcess is the process name StartPrometheus runs Prometheus under.
const PrometheusProcess = "prometheus"

// StartPrometheus runs binary (Debian's prometheus) on s's cluster with a scrape job for every
// endpoint of deploy/monitoring's monitors, pointed at the stack's processes with the scheme, path
// and credentials the monitor gives (a token of monitoring/prometheus, bound as rbac.yaml says, as
// the Prometheus Operator mounts in Prometheus's pod), evaluating groups, and returns its URL once
// it is ready. dir holds its configuration and data.
func StartPrometheus(ctx context.Context, s *stack.Stack, binary, dir string, groups []RuleGroup) (string, error) {
	monitors, err := ReadMonitors(filepath.Join(s.Root, Dir, "monitors.yaml"))
	if err != nil {
		return "", err
	}
	token, err := prometheusToken(ctx, s)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return "", err
	}

	// In a cluster each monitor selects these components' Services or pods by app.kubernetes.io/name.
	targets := map[string][]string{
		stack.Operator:  {s.OperatorMetricsURL},
		stack.Scheduler: {s.SchedulerMetricsURL},
		"kueue":         {s.Kueue.MetricsURL},
	}
	for _, a := range s.AgentURLs {
		targets[stack.NodeAgent] = append(targets[stack.NodeAgent], a+"/metrics")
	}
	var jobs []map[string]any
	for _, m := range monitors {
		job := m.Selector[m.JobLabel]
		urls := targets[job]
		if len(urls) == 0 {
			return "", fmt.Errorf("%s %s/%s selects %s=%q, which the stack does not run", m.Kind, m.Namespace, m.Name, m.JobLabel, job)
		}
		var hosts []string
		for _, raw := range urls {
			u, err := url.Parse(raw)
			if err != nil {
				return "", err
			}
			if u.Scheme != m.Scheme || u.Path != m.Path {
				return "", fmt.Errorf("%s %s scrapes %s://…%s, but %s serves %s", m.Kind, m.Name, m.Scheme, m.Path, job, raw)
			}
			hosts = append(hosts, u.Host)
		}
		sc := map[string]any{"job_name": job, "scheme": m.Scheme, "metrics_path": m.Path,
			"static_configs": []any{map[string]any{"targets": hosts}}}
		if m.BearerTokenFile != "" {
			sc["authorization"] = map[string]any{"type": "Bearer", "credentials_file": tokenFile}
		}
		if m.InsecureTLS {
			sc["tls_config"] = map[string]any{"insecure_skip_verify": true}
		}
		jobs = append(jobs, sc)
	}
	rules, err := RuleFile(groups)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		return "", err
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files":     []string{filepath.Join(dir, "rules.yaml")},
		"scrape_configs": jobs,
	})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o644); err != nil {
		return "", err
	}

	ports, err := framework.FreePorts(1)
	if err != nil {
		return "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	c := s.Cluster
	if err := c.StartProcess(PrometheusProcess, binary, []string{"--config.file=" + filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addr, "--log.level=warn"}, nil); err != nil {
		return "", err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitHealthy(wctx, PrometheusProcess, "http://"+addr+"/-/ready"); err != nil {
		return "", err
	}
	return "http://" + addr, nil
}

// prometheusToken creates monitoring/prometheus, applies deploy/monitoring/rbac.yaml and returns
// a token of that ServiceAccount.
func prometheusToken(ctx context.Context, s *stack.Stack) (string, error) {
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: "prometheus"}},
	} {
		if err := s.Cluster.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	if out, err := s.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(s.Root, Dir, "rbac.yaml")); err != nil {
		return "", fmt.Errorf("%w\n%s", err, strings.TrimSpace(out))
	}
	tr, err := s.Cluster.Clientset.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, "prometheus",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}
