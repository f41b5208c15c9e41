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

package suggest

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func space(t *testing.T, params ...convoy.ParameterSpec) Space {
	t.Helper()
	s, err := NewSpace(params)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func double(name, lo, hi, step string, log bool) convoy.ParameterSpec {
	p := convoy.ParameterSpec{Name: name, ParameterType: convoy.ParameterDouble, FeasibleSpace: convoy.FeasibleSpace{Min: lo, Max: hi, Step: step}}
	if log {
		p.FeasibleSpace.Distribution = convoy.DistributionLogUniform
	}
	return p
}

func list(name string, typ convoy.ParameterType, values ...string) convoy.ParameterSpec {
	return convoy.ParameterSpec{Name: name, ParameterType: typ, FeasibleSpace: convoy.FeasibleSpace{List: values}}
}

func TestGrid(t *testing.T) {
	cases := map[string]struct {
		params []convoy.ParameterSpec
		want   [][]string
	}{
		"one double with a step": {params: []convoy.ParameterSpec{double("x", "0", "1", "0.5", false)},
			want: [][]string{{"0"}, {"0.5"}, {"1"}}},
		"int and categorical, the last fastest": {
			params: []convoy.ParameterSpec{{Name: "n", ParameterType: convoy.ParameterInt, FeasibleSpace: convoy.FeasibleSpace{Min: "1", Max: "2"}}, list("opt", convoy.ParameterCategorical, "adamw", "sgd")},
			want:   [][]string{{"1", "adamw"}, {"1", "sgd"}, {"2", "adamw"}, {"2", "sgd"}}},
		"a step that does not divide the range": {params: []convoy.ParameterSpec{double("x", "0", "1", "0.4", false)},
			want: [][]string{{"0"}, {"0.4"}, {"0.8"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := space(t, tc.params...)
			var got [][]string
			for i := 0; ; i++ {
				x, ok := Grid(s, i)
				if !ok {
					break
				}
				var row []string
				for _, a := range s.Assignments(x) {
					row = append(row, a.Value)
				}
				got = append(got, row)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("grid (-want,+got):\n%s", diff)
			}
			if GridSize(s) != len(tc.want) {
				t.Errorf("GridSize = %d, want %d", GridSize(s), len(tc.want))
			}
		})
	}
}

func TestRandomIsSeededAndInBounds(t *testing.T) {
	s := space(t, double("lr", "0.0001", "1", "", true), convoy.ParameterSpec{Name: "bs", ParameterType: convoy.ParameterInt,
		FeasibleSpace: convoy.FeasibleSpace{Min: "16", Max: "128", Step: "16"}}, list("opt", convoy.ParameterCategorical, "a", "b", "c"))
	if diff := cmp.Diff(Random(s, 7, 3), Random(s, 7, 3)); diff != "" {
		t.Errorf("the same seed and index gave different draws:\n%s", diff)
	}
	if cmp.Equal(Random(s, 7, 3), Random(s, 7, 4)) {
		t.Errorf("two trials drew the same point")
	}
	belowMid := 0
	const n = 2000
	for i := range n {
		x := Random(s, 1, i)
		if x[0] < 0.0001 || x[0] > 1 {
			t.Fatalf("lr %g out of [0.0001, 1]", x[0])
		}
		if x[0] < 0.01 { // the middle of the range in the logarithm
			belowMid++
		}
		if int(x[1])%16 != 0 || x[1] < 16 || x[1] > 128 {
			t.Fatalf("bs %g is not a multiple of 16 in [16, 128]", x[1])
		}
	}
	if share := float64(belowMid) / n; share < 0.45 || share > 0.55 {
		t.Errorf("log-uniform: %.2f of draws below the log midpoint, want about 0.5", share)
	}
}

// quadratic is a loss with its minimum 0 at x=0.3, y=-0.2.
func quadratic(x []float64) float64 {
	return (x[0]-0.3)*(x[0]-0.3) + (x[1]+0.2)*(x[1]+0.2)
}

// TestTPEPrefersTheBestCategory: once the model is used, most suggestions take the category
// whose trials did best.
func TestTPEPrefersTheBestCategory(t *testing.T) {
	s := space(t, list("opt", convoy.ParameterCategorical, "a", "b", "c", "d"))
	var hist []Observed
	for i := range 12 {
		c := float64(i % 4)
		loss := 1.0
		if c == 2 {
			loss = 0.1
		}
		hist = append(hist, Observed{X: []float64{c}, Loss: loss})
	}
	picked := 0
	for i := 12; i < 52; i++ {
		if TPE(s, 1, i, hist, DefaultTPE)[0] == 2 {
			picked++
		}
	}
	if picked < 30 {
		t.Errorf("TPE picked the best category in %d of 40 suggestions, want at least 30", picked)
	}
}

// TestTPEBeatsRandom runs 40 trials of each on a quadratic over 10 seeds: TPE's mean best loss
// must be less than half of random search's.
func TestTPEBeatsRandom(t *testing.T) {
	s := space(t, double("x", "-2", "2", "", false), double("y", "-2", "2", "", false))
	run := func(tpe bool, seed uint64) float64 {
		var hist []Observed
		best := math.Inf(1)
		for i := range 40 {
			x := Random(s, seed, i)
			if tpe {
				x = TPE(s, seed, i, hist, DefaultTPE)
			}
			l := quadratic(x)
			hist = append(hist, Observed{X: x, Loss: l})
			best = math.Min(best, l)
		}
		return best
	}
	var tpeSum, randomSum float64
	for seed := range uint64(10) {
		tpeSum += run(true, seed+1)
		randomSum += run(false, seed+1)
	}
	t.Logf("mean best loss over 10 seeds: tpe %.4f, random %.4f", tpeSum/10, randomSum/10)
	if tpeSum >= randomSum/2 {
		t.Errorf("TPE's mean best loss %.4f is not below half of random search's %.4f", tpeSum/10, randomSum/10)
	}
}

func TestRungs(t *testing.T) {
	cases := map[string]struct {
		min, max int32
		eta      float64
		want     []int32
	}{
		"eta 3 to 27":      {min: 1, max: 27, eta: 3, want: []int32{1, 3, 9}},
		"eta 2 to 10":      {min: 1, max: 10, eta: 2, want: []int32{1, 2, 4, 8}},
		"min 2":            {min: 2, max: 20, eta: 3, want: []int32{2, 6, 18}},
		"no room for one":  {min: 5, max: 5, eta: 3, want: nil},
		"fractional steps": {min: 1, max: 6, eta: 2.5, want: []int32{1, 3}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Rungs(tc.min, tc.max, tc.eta)); diff != "" {
				t.Errorf("Rungs (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPromotable(t *testing.T) {
	cases := map[string]struct {
		results []RungResult
		want    []string
	}{
		"fewer than eta":         {results: []RungResult{{Trial: "a", Loss: 1}, {Trial: "b", Loss: 2}}, want: nil},
		"the best of three":      {results: []RungResult{{Trial: "a", Loss: 3}, {Trial: "b", Loss: 1}, {Trial: "c", Loss: 2}}, want: []string{"b"}},
		"already promoted":       {results: []RungResult{{Trial: "a", Loss: 3}, {Trial: "b", Loss: 1, Promoted: true}, {Trial: "c", Loss: 2}}, want: nil},
		"two of six, best first": {results: []RungResult{{Trial: "a", Loss: 6}, {Trial: "b", Loss: 2}, {Trial: "c", Loss: 5}, {Trial: "d", Loss: 1}, {Trial: "e", Loss: 4}, {Trial: "f", Loss: 3}}, want: []string{"d", "b"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Promotable(tc.results, 3)); diff != "" {
				t.Errorf("Promotable (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestMedianStop(t *testing.T) {
	curve := func(vals ...float64) []convoy.Observation {
		out := make([]convoy.Observation, len(vals))
		for i, v := range vals {
			out[i] = convoy.Observation{Epoch: int32(i + 1), Value: v}
		}
		return out
	}
	done := [][]convoy.Observation{curve(1.0, 0.5, 0.3), curve(1.2, 0.7, 0.4), curve(0.9, 0.6, 0.35)}
	cases := map[string]struct {
		loss      float64
		epoch     int32
		succeeded [][]convoy.Observation
		sign      float64
		opts      MedianOptions
		wantStop  bool
	}{
		"worse than the median":      {loss: 0.8, epoch: 2, succeeded: done, sign: 1, opts: DefaultMedian, wantStop: true},
		"better than the median":     {loss: 0.55, epoch: 2, succeeded: done, sign: 1, opts: DefaultMedian},
		"too few succeeded":          {loss: 5, epoch: 2, succeeded: done[:2], sign: 1, opts: DefaultMedian},
		"before start_step":          {loss: 5, epoch: 1, succeeded: done, sign: 1, opts: MedianOptions{MinTrialsRequired: 3, StartStep: 2}},
		"past their last epoch":      {loss: 0.5, epoch: 10, succeeded: done, sign: 1, opts: DefaultMedian, wantStop: true},
		"maximizing: a lower value":  {loss: -0.5, epoch: 2, succeeded: done, sign: -1, opts: DefaultMedian, wantStop: true},
		"maximizing: a higher value": {loss: -0.65, epoch: 2, succeeded: done, sign: -1, opts: DefaultMedian},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, stop := MedianStop(tc.loss, tc.epoch, tc.succeeded, tc.sign, tc.opts); stop != tc.wantStop {
				t.Errorf("MedianStop = %v, want %v", stop, tc.wantStop)
			}
		})
	}
}
