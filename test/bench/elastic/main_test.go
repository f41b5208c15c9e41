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

import "testing"

// A high-priority arrival shrinks the running job instead of stopping it, which grows back once
// the arrival is done; both finish sooner than with fixed sizes.
func TestElasticBeatsFixedOnASmallMix(t *testing.T) {
	jobs := []Spec{
		{Name: "low", Arrive: 0, Min: 4, Max: 8, Work: 4 * 36000},
		{Name: "high", Arrive: 3600, Min: 4, Max: 4, Priority: 1, Work: 4 * 3600},
	}
	fixed := Simulate(jobs, Config{GPUs: 10, Mode: Fixed})
	elastic := Simulate(jobs, Config{GPUs: 10, Mode: Elastic})
	if fixed.Stops != 1 || fixed.Shrinks != 0 {
		t.Errorf("fixed: %d stops, %d shrinks; want the high-priority job to stop the other once", fixed.Stops, fixed.Shrinks)
	}
	if elastic.Stops != 0 || elastic.Shrinks == 0 || elastic.Grows == 0 {
		t.Errorf("elastic: %d stops, %d shrinks, %d grows; want it to grow, then shrink instead of stopping", elastic.Stops, elastic.Shrinks, elastic.Grows)
	}
	if elastic.MeanJCT >= fixed.MeanJCT {
		t.Errorf("mean JCT elastic %.0f s, fixed %.0f s: want resizing to finish sooner", elastic.MeanJCT, fixed.MeanJCT)
	}
}
