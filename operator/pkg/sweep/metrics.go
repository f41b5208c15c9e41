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

package sweep

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

var (
	trialsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingsweep_trials",
		Help: "Trials of a TrainingSweep by state (pending, running, paused, succeeded, early_stopped, failed).",
	}, []string{"namespace", "sweep", "state"})
	bestGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingsweep_best",
		Help: "The best objective value a TrainingSweep's trials reported so far.",
	}, []string{"namespace", "sweep"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(trialsGauge, bestGauge)
}

// Metrics sets a sweep's series on the operator's metrics endpoint.
type Metrics struct{}

// NewMetrics returns the recorder of the sweeps' series.
func NewMetrics() *Metrics { return &Metrics{} }

// Observe sets the sweep's series from its status.
func (m *Metrics) Observe(sw *convoy.TrainingSweep) {
	st := sw.Status
	for state, n := range map[string]int32{
		"pending": st.PendingTrials, "running": st.RunningTrials, "paused": st.PausedTrials,
		"succeeded": st.SucceededTrials, "early_stopped": st.EarlyStoppedTrials, "failed": st.FailedTrials,
	} {
		trialsGauge.WithLabelValues(sw.Namespace, sw.Name, state).Set(float64(n))
	}
	if b := st.BestTrial; b != nil {
		bestGauge.WithLabelValues(sw.Namespace, sw.Name).Set(b.Value)
	}
}

// Forget deletes a deleted sweep's series.
func (m *Metrics) Forget(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "sweep": name}
	trialsGauge.DeletePartialMatch(labels)
	bestGauge.DeletePartialMatch(labels)
}
