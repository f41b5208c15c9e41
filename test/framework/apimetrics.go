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

package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// APIRequests reads the API server's apiserver_request_total counter, summed by verb and resource
// with its subresource ("POST pods/binding", "POST tokenreviews", "PATCH pods/status", ...), and
// its apiserver_request_duration_seconds total, keyed the same with " seconds" appended.
func APIRequests(ctx context.Context, cs kubernetes.Interface) (map[string]float64, error) {
	data, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(data)))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	out := map[string]float64{}
	for name, suffix := range map[string]string{"apiserver_request_total": "", "apiserver_request_duration_seconds": " seconds"} {
		mf := families[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			key := labels["verb"] + " " + labels["resource"]
			if sub := labels["subresource"]; sub != "" {
				key += "/" + sub
			}
			if h := m.GetHistogram(); h != nil {
				out[key+suffix] += h.GetSampleSum()
			} else {
				out[key+suffix] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

// HasLabels reports whether a series carries every label in want with its value.
func HasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k {
				found = l.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// SumSeries sums the series of the family called name whose labels include want: counters and
// gauges by value, histograms by sample count. It is 0 when there is no such series.
func SumSeries(families []*dto.MetricFamily, name string, want map[string]string) float64 {
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !HasLabels(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// ScrapeMetrics GETs a component's /metrics over HTTPS, with token as its bearer token when set,
// accepting the self-signed certificate a component serves on loopback when given none, and parses
// the answer. It returns the HTTP status; an answer other than 200 OK is an error that quotes it.
func ScrapeMetrics(ctx context.Context, url, token string) (int, map[string]*dto.MetricFamily, error) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed by design
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("reading %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, fmt.Errorf("reading %s: %s: %.300s", url, resp.Status, data)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(data)))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	return resp.StatusCode, families, nil
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages from /proc/loadavg, for a
// benchmark to print beside its figures ("?" where there is none).
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
