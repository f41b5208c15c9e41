package framework

import (
	"context"
	"fmt"
	"strings"

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
