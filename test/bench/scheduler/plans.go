package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/component-base/metrics/testutil"

	"github.com/convoy-dev/convoy/test/framework"
)

// Plans is what Convoy's scheduler reports of its own work in its metrics (convoy_scheduler_*,
// deploy/scheduler/README.md) at the end of a run.
type Plans struct {
	// Planned and Unschedulable count the whole-gang plannings by result; Dropped the plans given
	// up before their gang bound, by reason.
	Planned       int            `json:"planned"`
	Unschedulable int            `json:"unschedulable"`
	Dropped       map[string]int `json:"dropped,omitempty"`
	// P50Millis and P99Millis are the time to plan a gang, read from the histogram's buckets
	// (powers of two from 0.1 ms: within a factor of two).
	P50Millis float64 `json:"planP50Milliseconds"`
	P99Millis float64 `json:"planP99Milliseconds"`
	// Preemptions counts the gangs that preempted.
	Preemptions int `json:"preemptions"`
}

func (p *Plans) String() string {
	var dropped []string
	for _, k := range slices.Sorted(maps.Keys(p.Dropped)) {
		dropped = append(dropped, fmt.Sprintf("%s %d", k, p.Dropped[k]))
	}
	if len(dropped) == 0 {
		dropped = []string{"none"}
	}
	return fmt.Sprintf("%d planned, %d unschedulable, planning p50 %.2f ms p99 %.2f ms; plans dropped: %s; preemptions %d",
		p.Planned, p.Unschedulable, p.P50Millis, p.P99Millis, strings.Join(dropped, ", "), p.Preemptions)
}

// families is a Gatherer of metrics already read.
type families []*dto.MetricFamily

func (f families) Gather() ([]*dto.MetricFamily, error) { return f, nil }

// readPlans reads Convoy's scheduler metrics from its secure port (the benchmark lets /metrics
// through without a token: see startScheduler).
func readPlans(ctx context.Context, port int) (*Plans, error) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed by kube-scheduler
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the scheduler's metrics: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the scheduler's metrics: %s: %.300s", resp.Status, data)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := parser.TextToMetricFamilies(strings.NewReader(string(data)))
	if err != nil {
		return nil, fmt.Errorf("parsing the scheduler's metrics: %w", err)
	}
	all := families(slices.Collect(maps.Values(byName)))
	count := func(name string, labels map[string]string) int {
		return int(framework.SumSeries(all, name, labels))
	}
	p := &Plans{
		Planned:       count("convoy_scheduler_gang_plans_total", map[string]string{"result": "planned"}),
		Unschedulable: count("convoy_scheduler_gang_plans_total", map[string]string{"result": "unschedulable"}),
		Preemptions:   count("convoy_scheduler_gang_preemptions_total", nil),
		Dropped:       map[string]int{},
	}
	for _, m := range byName["convoy_scheduler_gang_plans_dropped_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				p.Dropped[l.GetValue()] += int(m.GetCounter().GetValue())
			}
		}
	}
	if vec, err := testutil.GetHistogramVecFromGatherer(all, "convoy_scheduler_gang_plan_duration_seconds", nil); err == nil && vec.GetAggregatedSampleCount() > 0 {
		p.P50Millis, p.P99Millis = 1000*vec.Quantile(0.50), 1000*vec.Quantile(0.99)
	}
	return p, nil
}
