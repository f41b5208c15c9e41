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

package gangcore

import (
	"time"

	"k8s.io/component-base/metrics"
)

// verdict remembers that a gang did not fit, so its other pods fail fast.
type verdict struct {
	generation int64
	at         time.Time
	message    string
}

// verdictTTL bounds how long a verdict is trusted without a change in generation: a safety net
// for a change the generation misses.
const verdictTTL = 5 * time.Minute

// verdicts remember, by gang, that it did not fit (or that preemption could not make room for
// it), until the cluster changes. It has no lock: State.mu guards it.
type verdicts struct {
	m map[string]verdict
	// gauge, when set, counts the gangs with a verdict.
	gauge metrics.GaugeMetric
}

func newVerdicts(gauge metrics.GaugeMetric) *verdicts {
	return &verdicts{m: map[string]verdict{}, gauge: gauge}
}

// holds returns the gang's verdict while it holds: made at the cluster's current generation, less
// than verdictTTL before now.
func (v *verdicts) holds(key string, generation int64, now time.Time) (verdict, bool) {
	got, ok := v.m[key]
	if !ok || got.generation != generation || now.Sub(got.at) >= verdictTTL {
		return verdict{}, false
	}
	return got, true
}

// set remembers that the gang did not fit; it holds until it is cleared or the cluster changes.
func (v *verdicts) set(key string, d verdict) {
	if _, ok := v.m[key]; !ok && v.gauge != nil {
		v.gauge.Inc()
	}
	v.m[key] = d
}

// clear forgets the gang's verdict: it was placed, or it is gone.
func (v *verdicts) clear(key string) {
	if _, ok := v.m[key]; ok {
		delete(v.m, key)
		if v.gauge != nil {
			v.gauge.Dec()
		}
	}
}
