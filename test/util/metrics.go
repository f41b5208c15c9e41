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
package util

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/convoy-dev/convoy/test/framework"
)

// Gathered sums the series of metric name whose labels include want, gathered from g (a registry
// in the test's process), as framework.SumSeries counts them; found says whether there is such a
// series at all.
func Gathered(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) (sum float64, found bool) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return framework.SumSeries(families, name, want), hasSeries(families, name, want)
}

// Scraped sums the series of metric name whose labels include want on a component's plain-HTTP
// /metrics at url, as framework.SumSeries counts them.
func Scraped(t testing.TB, url, name string, want map[string]string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return framework.SumSeries([]*dto.MetricFamily{families[name]}, name, want)
}

func hasSeries(families []*dto.MetricFamily, name string, want map[string]string) bool {
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if framework.HasLabels(m, want) {
				return true
			}
		}
	}
	return false
}
