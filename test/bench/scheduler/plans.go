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
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
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
	_, byName, err := framework.ScrapeMetrics(ctx, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), "")
	if err != nil {
		return nil, err
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
