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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/monitoring"
	"github.com/convoy-dev/convoy/test/sweepsim"
	"github.com/convoy-dev/convoy/test/util"
)

// EnvRequirePrometheus set (make test-e2e sets it, after installing Debian's prometheus) makes a
// missing prometheus binary a failure instead of a skip.
const EnvRequirePrometheus = "CONVOY_REQUIRE_PROMETHEUS"

// panelsWithoutData are the dashboard queries this scenario cannot give data, and why. Their
// queries must still be valid.
var panelsWithoutData = map[string]string{
	"Plans dropped": "a plan is dropped only when the cluster changes under a planned gang before it binds (a race this scenario does not stage)",
	"Reconcile errors by type": "the operator's reconciles fail only on API errors: conflicts appear at random under load, " +
		"other errors need a broken API server",
}

// TestMonitoringOnARealPrometheus runs deploy/monitoring against a real Prometheus scraping the
// stack: a scrape job per ServiceMonitor and PodMonitor endpoint, with its scheme, path and
// credentials (a token of monitoring/prometheus, bound as rbac.yaml says); the PrometheusRule's
// alerts loaded and evaluated; and every dashboard panel's query answered with series. The jobs it
// runs (one completes, one fails, one restarts and idles its GPUs, one admitted gang fits no rack,
// a GPU reports an XID, a high-priority job makes Kueue preempt) make the alerts that have no `for`
// fire, put the others pending, and give the panels their series.
func TestMonitoringOnARealPrometheus(t *testing.T) {
	promBin := prometheusBinary(t)
	e := setup(t)
	ctx := t.Context()
	groups, err := monitoring.ReadRules(filepath.Join(e.Root, monitoring.Dir, "prometheusrule.yaml"))
	must(t, err)
	panels, err := monitoring.Panels(filepath.Join(e.Root, monitoring.Dir, "dashboards"))
	must(t, err)

	e.queue(64)
	done := e.job("done", 2, 8, "normal")
	done.Spec.Hyperparameters.Epochs = ptr.To[int32](3)
	done.Spec.SuccessPolicy = &convoy.SuccessPolicy{TargetAccuracy: ptr.To(0.9)}
	broken := e.job("broken", 1, 8, "normal")
	broken.Spec.FailurePolicy = &convoy.FailurePolicy{RestartPolicy: convoy.RestartNever}
	steady := e.job("steady", 2, 8, "normal")
	steady.Spec.FailurePolicy = &convoy.FailurePolicy{RestartPolicy: convoy.RestartOnFailure, BackoffLimit: ptr.To[int32](3)}
	for _, j := range []*convoy.TrainingJob{done, broken, steady} {
		e.create(j)
	}
	// A sweep of a 2×2 grid, for the sweep series.
	tuned := e.sweep("tuned", convoy.AlgorithmGrid, sweepsim.Quadratic, 3, 1, 1, doubleParam("x", 0, 0.5, 0.5), doubleParam("y", -0.5, 0, 0.5))
	tuned.Spec.ParallelTrialCount = ptr.To[int32](4)
	e.createSweep(tuned)
	e.waitState("broken", convoy.StateRunning)
	e.exitWorker("broken", "1")
	e.waitState("steady", convoy.StateRunning)
	e.exitWorker("steady", "137")
	e.waitJob("steady", "restarted and running", func(j *convoy.TrainingJob) bool {
		return j.Status.RestartCount >= 1 && j.Status.State == convoy.StateRunning
	})
	e.waitState("broken", convoy.StateFailed)
	e.waitState("done", convoy.StateCompleted)
	tunedDone := e.waitSweep("tuned", "Succeeded", func(s *convoy.TrainingSweep) bool {
		return s.Status.State == convoy.SweepSucceeded || s.Status.State == convoy.SweepFailed
	})
	if tunedDone.Status.State != convoy.SweepSucceeded || tunedDone.Status.BestTrial == nil {
		t.Fatalf("sweep tuned: %+v, want Succeeded with a best trial", sweepStatusOf(tunedDone))
	}
	// 40 GPUs in one rack of 32: Kueue admits it (56 of 64 GPUs), the scheduler finds no room.
	e.create(e.job("too-big", 5, 8, "normal"))
	e.waitJob("too-big", "admitted, its pods created", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && len(e.pods("too-big")) == 5
	})
	xidNode := e.injectXID(ctx)

	prom := e.startPrometheus(t, promBin, groups)

	t.Run("every target is up", func(t *testing.T) { prom.waitTargetsUp(t) })
	t.Run("the operator's and scheduler's metrics refuse a scrape without a token", func(t *testing.T) {
		for _, u := range []string{e.OperatorMetricsURL, e.SchedulerMetricsURL} {
			if status, _, err := framework.ScrapeMetrics(ctx, u, ""); status != http.StatusUnauthorized && status != http.StatusForbidden {
				t.Errorf("GET %s without a token: %d (%v), want 401 or 403", u, status, err)
			}
		}
	})
	t.Run("the sweep's series", func(t *testing.T) {
		want := map[string]float64{
			fmt.Sprintf(`trainingsweep_trials{namespace=%q,sweep="tuned",state="succeeded"}`, e.ns): 4,
			fmt.Sprintf(`trainingsweep_trials{namespace=%q,sweep="tuned",state="running"}`, e.ns):   0,
			fmt.Sprintf(`trainingsweep_best{namespace=%q,sweep="tuned"}`, e.ns):                     tunedDone.Status.BestTrial.Value,
		}
		for query, v := range want {
			prom.poll(t, query, func() (bool, string) {
				var res struct {
					Result []struct {
						Value [2]any `json:"value"`
					} `json:"result"`
				}
				if err := prom.get("/api/v1/query", url.Values{"query": {query}}, &res); err != nil {
					return false, err.Error()
				}
				if len(res.Result) != 1 {
					return false, fmt.Sprintf("%d series", len(res.Result))
				}
				got, _ := res.Result[0].Value[1].(string)
				return parseFloat(got) == v, "value " + got + ", want " + fmt.Sprint(v)
			})
		}
	})
	t.Run("the rules load and evaluate", func(t *testing.T) {
		var got []string
		prom.poll(t, "every rule evaluated without error", func() (bool, string) {
			var res struct {
				Groups []struct {
					Rules []struct {
						Name, Health, LastError, Type string
					} `json:"rules"`
				} `json:"groups"`
			}
			if err := prom.get("/api/v1/rules", nil, &res); err != nil {
				return false, err.Error()
			}
			got = got[:0]
			var bad []string
			for _, g := range res.Groups {
				for _, r := range g.Rules {
					got = append(got, r.Name)
					if r.Health != "ok" {
						bad = append(bad, fmt.Sprintf("%s: %s %s", r.Name, r.Health, r.LastError))
					}
				}
			}
			return len(bad) == 0 && len(got) > 0, strings.Join(bad, "; ")
		})
		want := monitoring.Alerts(groups)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("Prometheus loaded the rules %v, want the PrometheusRule's %v", got, want)
		}
	})
	t.Run("the scenario's alerts", func(t *testing.T) {
		want := []alert{
			{"TrainingJobFailed", "firing", map[string]string{"namespace": e.ns, "reason": convoy.ReasonPodFailed}},
			{"HighGPUIdleTime", "pending", map[string]string{"namespace": e.ns, "training_job": "steady"}},
			{"GangUnschedulableWhileAdmitted", "pending", map[string]string{"job": stack.Scheduler}},
			// Pending, or firing already if a minute has passed since Prometheus started.
			{"GPUUnhealthy", "", map[string]string{"node": xidNode, "gpu": "7"}},
			{"GPUXIDErrors", "firing", map[string]string{"node": xidNode, "gpu": "7", "xid": "79"}},
		}
		prom.poll(t, "the scenario's alerts", func() (bool, string) {
			var res struct {
				Alerts []alert `json:"alerts"`
			}
			if err := prom.get("/api/v1/alerts", nil, &res); err != nil {
				return false, err.Error()
			}
			var missing []string
			for _, w := range want {
				if !slices.ContainsFunc(res.Alerts, w.matches) {
					missing = append(missing, fmt.Sprintf("%s %s %v", w.Name, w.State, w.Labels))
				}
			}
			return len(missing) == 0, fmt.Sprintf("missing %v in %+v", missing, res.Alerts)
		})
	})
	// A high-priority job makes Kueue preempt a normal one, for the queue dashboard's evictions.
	e.create(e.job("urgent", 2, 8, "high"))
	e.waitJob("urgent", "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })

	t.Run("every dashboard panel has data", func(t *testing.T) {
		for _, p := range panels {
			t.Run(p.Dashboard+"/"+p.Title, func(t *testing.T) {
				expr, err := monitoring.Expand(p.Expr, "30s")
				must(t, err)
				why, empty := panelsWithoutData[p.Title]
				var n int
				defer func() {
					if empty {
						t.Logf("%d series; may have none here: %s", n, why)
					}
				}()
				prom.poll(t, "series for "+expr, func() (bool, string) {
					var res struct {
						ResultType string            `json:"resultType"`
						Result     []json.RawMessage `json:"result"`
					}
					if err := prom.get("/api/v1/query", url.Values{"query": {expr}}, &res); err != nil {
						return false, err.Error()
					}
					n = len(res.Result)
					return empty || n > 0, fmt.Sprintf("%s result of %d series", res.ResultType, len(res.Result))
				})
			})
		}
	})
}

// prometheusBinary returns Debian's prometheus, or skips the test where it is missing and not
// required.
func prometheusBinary(t *testing.T) string {
	path, err := exec.LookPath("prometheus")
	if err == nil {
		return path
	}
	if os.Getenv(EnvRequirePrometheus) != "" || os.Getenv("CI") != "" {
		t.Fatalf("prometheus is not installed: make monitoring-deps installs it (Debian package prometheus)")
	}
	t.Skipf("prometheus is not installed (apt-get install prometheus, or make monitoring-deps); %s=1 makes this a failure", EnvRequirePrometheus)
	return ""
}

// exitWorker makes the last worker of a job exit with code.
func (e *env) exitWorker(job, code string) {
	e.t.Helper()
	pods := e.pods(job)
	if _, err := e.Kubectl(e.t.Context(), "annotate", "pod", "-n", e.ns, pods[len(pods)-1].Name, stack.AnnotationSimExitCode+"="+code); err != nil {
		e.t.Fatal(err)
	}
}

// injectXID makes GPU 7 of a node no job uses report XID 79 (fallen off the bus), which makes it
// unhealthy, and returns the node. The agent keeps a critical XID until it restarts, as a GPU keeps
// one until it is reset: cleanup restarts the fleet's agent and waits until the GPU is healthy.
func (e *env) injectXID(ctx context.Context) string {
	e.t.Helper()
	nodes := &corev1.NodeList{}
	must(e.t, e.k.List(ctx, nodes))
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	node := names[len(names)-1]
	fault := fmt.Sprintf("%s/faults?node=%s&gpu=7", e.AgentURLs[0], node)
	e.agentFault(http.MethodPost, fault+"&fault=xid:79")
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err := e.Cluster.StopProcess(fleetAgent)
		if err == nil {
			err = e.Cluster.RestartProcess(fleetAgent)
		}
		if err == nil {
			err = e.Cluster.WaitHealthy(ctx, fleetAgent, e.AgentURLs[0]+"/healthz")
		}
		if err == nil {
			err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				g := &convoy.GPUNode{}
				return e.k.Get(ctx, client.ObjectKey{Name: node}, g) == nil && g.Status.Healthy == g.Status.Capacity, nil
			})
		}
		if err != nil {
			e.t.Errorf("GPU 7 of %s healthy again after its agent's restart: %v", node, err)
		}
	})
	return node
}

// alert is an alert as /api/v1/alerts lists it, or as the test wants it: Name, and State empty
// for pending or firing.
type alert struct {
	Name   string            `json:"-"`
	State  string            `json:"state"`
	Labels map[string]string `json:"labels"`
}

func (w alert) matches(a alert) bool {
	if a.Labels["alertname"] != w.Name || w.State != "" && a.State != w.State {
		return false
	}
	for k, v := range w.Labels {
		if a.Labels[k] != v {
			return false
		}
	}
	return true
}

// prometheus is a running Prometheus server.
type prometheus struct {
	url string
	hc  *http.Client
}

// startPrometheus runs Prometheus on the stack (monitoring.StartPrometheus) for the test.
func (e *env) startPrometheus(t *testing.T, binary string, groups []monitoring.RuleGroup) *prometheus {
	url, err := monitoring.StartPrometheus(t.Context(), e.Stack, binary, t.TempDir(), groups)
	must(t, err)
	t.Cleanup(func() { _ = e.Cluster.StopProcess(monitoring.PrometheusProcess) })
	return &prometheus{url: url, hc: &http.Client{Timeout: 10 * time.Second}}
}

// get reads a Prometheus API answer's data into out.
func (p *prometheus) get(path string, query url.Values, out any) error {
	u := p.url + path
	if query != nil {
		u += "?" + query.Encode()
	}
	resp, err := p.hc.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("GET %s: %s: %.200s", path, resp.Status, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("GET %s: %s", u, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

// poll waits up to a minute until cond holds, failing with its last word otherwise.
func (p *prometheus) poll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	util.Eventually(t, 500*time.Millisecond, time.Minute, what, cond)
}

// waitTargetsUp waits until Prometheus has scraped every target successfully.
func (p *prometheus) waitTargetsUp(t *testing.T) {
	p.poll(t, "every target up", func() (bool, string) {
		var res struct {
			ActiveTargets []struct {
				ScrapeURL, Health, LastError string
			} `json:"activeTargets"`
		}
		if err := p.get("/api/v1/targets", nil, &res); err != nil {
			return false, err.Error()
		}
		var bad []string
		for _, tg := range res.ActiveTargets {
			if tg.Health != "up" {
				bad = append(bad, fmt.Sprintf("%s: %s %s", tg.ScrapeURL, tg.Health, tg.LastError))
			}
		}
		return len(bad) == 0 && len(res.ActiveTargets) > 0, strings.Join(bad, "; ")
	})
}

func parseFloat(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}
