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

package scheduler

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// scrape is one reading of the scheduler's /metrics.
type scrape map[string]*dto.MetricFamily

// value sums the named family's series whose labels include labels: a counter's or gauge's
// value, a histogram's sample count.
func (s scrape) value(name string, labels map[string]string) float64 {
	return framework.SumSeries(slices.Collect(maps.Values(s)), name, labels)
}

// series names a metric's series as PromQL does, e.g. name{kind="gang"}.
func series(name string, labels map[string]string) string {
	var parts []string
	for k, v := range labels {
		parts = append(parts, fmt.Sprintf("%s=%q", k, v))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return name
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// histogramSum is the sum of the named histogram's samples.
func (s scrape) histogramSum(name string) float64 {
	var sum float64
	for _, m := range s[name].GetMetric() {
		sum += m.GetHistogram().GetSampleSum()
	}
	return sum
}

// metricsToken returns a token of ServiceAccount convoy-system/<name>, bound to the shipped
// convoy-scheduler-metrics-reader ClusterRole when reader is set, as Prometheus's would be.
func (e *env) metricsToken(t *testing.T, name string, reader bool) string {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "convoy-system"}}
	objs := []client.Object{sa}
	if reader {
		objs = append(objs, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-convoy-scheduler-metrics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "convoy-scheduler-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}},
		})
	}
	for _, obj := range objs {
		if err := e.c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if reader {
		util.WaitGranted(t, e.c, sa.Namespace, sa.Name, authorizationv1.SubjectAccessReviewSpec{
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}})
	}
	tr, err := e.c.Clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// metricsURL is the scheduler's /metrics, on its secure port.
func (e *env) metricsURL() string { return fmt.Sprintf("https://127.0.0.1:%d/metrics", e.port) }

// metrics reads the scheduler's /metrics the way Prometheus does in a cluster.
func (e *env) metrics(t *testing.T) scrape {
	t.Helper()
	_, families, err := framework.ScrapeMetrics(t.Context(), e.metricsURL(), e.metricsToken(t, "prometheus", true))
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// TestMetricsShowGangsPlacedAndTurnedAway: a platform team's Prometheus, bound to the shipped
// metrics-reader role, reads on the scheduler's /metrics that a gang was planned and bound whole
// (with the time its pods waited), that another did not fit, and nothing of a plan dropped; a
// ServiceAccount without the role is refused.
func TestMetricsShowGangsPlacedAndTurnedAway(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
	// The gauges are the scheduler's, not the test's: wait until it has seen the pods of earlier
	// tests go, so that what this test reads is its own.
	var before scrape
	util.Eventually(t, 200*time.Millisecond, 30*time.Second, "the scheduler to hold no gang planned or waiting for room", func() (bool, string) {
		before = e.metrics(t)
		planned, waiting := before.value("convoy_scheduler_gangs_planned", nil), before.value("convoy_scheduler_gangs_waiting_for_room", nil)
		return planned == 0 && waiting == 0, fmt.Sprintf("%v planned, %v waiting for room", planned, waiting)
	})
	start := time.Now()

	gang := makeGang(ns, "fits", 2, 8).create(t, e.c.Client)
	waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
	tooBig := makeGang(ns, "too-big", 3, 8).Topology(convoy.TopologyRack, convoy.TopologyRequired).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, tooBig.names(), ns+"/too-big needs 3 pod(s) × 8 GPU(s) in one rack")
	var after scrape
	delta := func(name string, labels map[string]string) float64 {
		return after.value(name, labels) - before.value(name, labels)
	}
	// The scheduler records a gang bound once its informer sees the last binding, a moment after
	// the test may: read until every series the two gangs move has moved, then check by how much.
	util.Eventually(t, 200*time.Millisecond, 30*time.Second, "the metrics to count both gangs", func() (bool, string) {
		after = e.metrics(t)
		moved := map[string]float64{
			series("convoy_scheduler_gang_plans_total", map[string]string{"result": "planned"}):       delta("convoy_scheduler_gang_plans_total", map[string]string{"result": "planned"}),
			series("convoy_scheduler_gang_plans_total", map[string]string{"result": "unschedulable"}): delta("convoy_scheduler_gang_plans_total", map[string]string{"result": "unschedulable"}),
			"convoy_scheduler_gang_time_to_bound_seconds_count":                                       delta("convoy_scheduler_gang_time_to_bound_seconds", nil),
			"convoy_scheduler_gangs_waiting_for_room":                                                 delta("convoy_scheduler_gangs_waiting_for_room", nil),
		}
		return !slices.Contains(slices.Collect(maps.Values(moved)), 0), fmt.Sprint(moved)
	})
	elapsed := time.Since(start).Seconds()
	if got := delta("convoy_scheduler_gang_plans_total", map[string]string{"result": "planned"}); got != 1 {
		t.Errorf("convoy_scheduler_gang_plans_total{result=planned} rose by %v, want 1: one plan for the gang that fits", got)
	}
	if got := delta("convoy_scheduler_gang_plans_total", map[string]string{"result": "unschedulable"}); got < 1 {
		t.Errorf("convoy_scheduler_gang_plans_total{result=unschedulable} rose by %v, want at least 1 for the gang that does not fit", got)
	}
	if got := delta("convoy_scheduler_gang_plan_duration_seconds", map[string]string{"result": "planned"}); got != 1 {
		t.Errorf("convoy_scheduler_gang_plan_duration_seconds{result=planned} got %v observation(s), want 1", got)
	}
	if got := delta("convoy_scheduler_gang_time_to_bound_seconds", nil); got != 1 {
		t.Errorf("convoy_scheduler_gang_time_to_bound_seconds got %v observation(s), want 1: the gang that bound", got)
	}
	if waited := after.histogramSum("convoy_scheduler_gang_time_to_bound_seconds") - before.histogramSum("convoy_scheduler_gang_time_to_bound_seconds"); waited <= 0 || waited > elapsed {
		t.Errorf("convoy_scheduler_gang_time_to_bound_seconds observed %.3fs, want more than 0 and at most the %.1fs the test took", waited, elapsed)
	}
	if got := delta("convoy_scheduler_gang_plans_dropped_total", nil); got != 0 {
		t.Errorf("convoy_scheduler_gang_plans_dropped_total rose by %v, want 0: nothing changed under the plan", got)
	}
	if got := after.value("convoy_scheduler_gangs_planned", nil); got != 0 {
		t.Errorf("convoy_scheduler_gangs_planned = %v once the gang bound, want 0", got)
	}

	if got := delta("convoy_scheduler_gangs_waiting_for_room", nil); got != 1 {
		t.Errorf("convoy_scheduler_gangs_waiting_for_room rose by %v, want 1: the gang that does not fit", got)
	}
	// The gang that does not fit is deleted: it waits no more.
	for _, p := range tooBig.pods {
		if err := e.c.Client.Delete(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	util.Eventually(t, 200*time.Millisecond, 10*time.Second, "convoy_scheduler_gangs_waiting_for_room to fall back once the gang is deleted", func() (bool, string) {
		now := e.metrics(t).value("convoy_scheduler_gangs_waiting_for_room", nil)
		return now == before.value("convoy_scheduler_gangs_waiting_for_room", nil), fmt.Sprintf("gauge %v", now)
	})

	if code, _, err := framework.ScrapeMetrics(t.Context(), e.metricsURL(), e.metricsToken(t, "no-metrics-reader", false)); code != http.StatusForbidden {
		t.Errorf("GET /metrics without the metrics-reader role = %d (%v), want 403 Forbidden", code, err)
	}
}
