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
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func TestMetricsFollowTheSweep(t *testing.T) {
	sw := &convoy.TrainingSweep{}
	sw.Namespace, sw.Name = "ns", "lr"
	sw.Status = convoy.TrainingSweepStatus{RunningTrials: 2, EarlyStoppedTrials: 3, BestTrial: &convoy.BestTrial{Name: "lr-4", Value: 0.25}}
	m := NewMetrics()
	m.Observe(sw)
	for state, want := range map[string]float64{"running": 2, "early_stopped": 3, "failed": 0} {
		if got := testutil.ToFloat64(trialsGauge.WithLabelValues("ns", "lr", state)); got != want {
			t.Errorf("trainingsweep_trials{state=%q} = %g, want %g", state, got, want)
		}
	}
	if got := testutil.ToFloat64(bestGauge.WithLabelValues("ns", "lr")); got != 0.25 {
		t.Errorf("trainingsweep_best = %g, want 0.25", got)
	}
	m.Forget("ns", "lr")
	if n := testutil.CollectAndCount(trialsGauge) + testutil.CollectAndCount(bestGauge); n != 0 {
		t.Errorf("%d series left after the sweep was deleted, want none", n)
	}
}
