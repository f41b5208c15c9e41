package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// apiWrites counts the write requests the API server has served, by verb and resource (with its
// subresource: "POST pods/binding", "POST events", "PATCH pods/status", ...), from its
// apiserver_request_total metric.
func apiWrites(ctx context.Context, cs kubernetes.Interface) (map[string]float64, error) {
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
	// The API server's time on bindings, to tell its queueing from the contender's.
	if mf := families["apiserver_request_duration_seconds"]; mf != nil {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["verb"] == "POST" && labels["resource"] == "pods" && labels["subresource"] == "binding" {
				out[bindingSeconds] += m.GetHistogram().GetSampleSum()
			}
		}
	}
	mf := families["apiserver_request_total"]
	if mf == nil {
		return out, nil
	}
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		res := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[res] += m.GetCounter().GetValue()
	}
	return out, nil
}

// bindingSeconds keys the API server's total seconds serving bindings in apiWrites' result.
const bindingSeconds = "seconds serving bindings"

// contenderWrites is after less before, by verb and resource, and the sum, leaving out the
// benchmark's own writes: the pods and PodGroups it creates (while a streaming contender runs).
func contenderWrites(before, after map[string]float64) (map[string]int, int) {
	out := map[string]int{}
	total := 0
	for k, v := range after {
		if k == "POST pods" || k == "POST podgroups" || k == bindingSeconds {
			continue
		}
		if d := int(v - before[k]); d > 0 {
			out[k] = d
			total += d
		}
	}
	return out, total
}
