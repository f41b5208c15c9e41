package framework

import (
	"context"
	"fmt"
	"strings"

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
