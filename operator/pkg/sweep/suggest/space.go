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

// Package suggest holds a sweep's search algorithms as pure functions: grid, random and TPE
// suggest parameter values from the trials so far, and the median rule and hyperband's rungs
// say which trials to stop, pause or promote. Every draw comes from a generator seeded by the
// sweep's random_state and the trial's index, so the same history gives the same suggestion.
package suggest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Param is one dimension of the search space. Categorical and discrete parameters take the
// index into List as their value.
type Param struct {
	Name string
	Type convoy.ParameterType
	// Min, Max and Step bound a double or int; Step is 0 when unset.
	Min, Max, Step float64
	Log            bool
	List           []string
}

// Space is the search space: one Param per sweep parameter, in the sweep's order.
type Space []Param

// NewSpace reads the sweep's parameters; the API's validation has checked them, so an error
// names a value that escaped it.
func NewSpace(params []convoy.ParameterSpec) (Space, error) {
	s := make(Space, 0, len(params))
	for _, p := range params {
		fs := p.FeasibleSpace
		q := Param{Name: p.Name, Type: p.ParameterType, Log: fs.Distribution == convoy.DistributionLogUniform, List: fs.List}
		if p.ParameterType == convoy.ParameterDouble || p.ParameterType == convoy.ParameterInt {
			var err error
			if q.Min, err = strconv.ParseFloat(fs.Min, 64); err != nil {
				return nil, fmt.Errorf("parameter %s: feasibleSpace.min: %w", p.Name, err)
			}
			if q.Max, err = strconv.ParseFloat(fs.Max, 64); err != nil {
				return nil, fmt.Errorf("parameter %s: feasibleSpace.max: %w", p.Name, err)
			}
			if fs.Step != "" {
				if q.Step, err = strconv.ParseFloat(fs.Step, 64); err != nil {
					return nil, fmt.Errorf("parameter %s: feasibleSpace.step: %w", p.Name, err)
				}
			}
			if p.ParameterType == convoy.ParameterInt && q.Step == 0 {
				q.Step = 1
			}
			if q.Log && q.Min <= 0 {
				return nil, fmt.Errorf("parameter %s: feasibleSpace.min must be above 0 with logUniform", p.Name)
			}
		} else if len(q.List) == 0 {
			return nil, fmt.Errorf("parameter %s: feasibleSpace.list is empty", p.Name)
		}
		s = append(s, q)
	}
	return s, nil
}

// categorical reports whether the parameter's value is an index into List.
func (p Param) categorical() bool {
	return p.Type == convoy.ParameterCategorical || p.Type == convoy.ParameterDiscrete
}

// snap rounds a number into the parameter's bounds and onto its step.
func (p Param) snap(v float64) float64 {
	if p.categorical() {
		return math.Max(0, math.Min(float64(len(p.List)-1), math.Round(v)))
	}
	if p.Step > 0 {
		v = p.Min + math.Round((v-p.Min)/p.Step)*p.Step
		if v > p.Max+1e-9 {
			v -= p.Step
		}
	}
	return math.Max(p.Min, math.Min(p.Max, v))
}

// sample draws a value uniformly (in the logarithm for log-uniform) from the parameter's space.
func (p Param) sample(rng *rand.Rand) float64 {
	switch {
	case p.categorical():
		return float64(rng.IntN(len(p.List)))
	case p.Log:
		return p.snap(math.Exp(math.Log(p.Min) + rng.Float64()*(math.Log(p.Max)-math.Log(p.Min))))
	case p.Type == convoy.ParameterInt:
		return p.snap(p.Min - 0.5 + rng.Float64()*(p.Max-p.Min+1))
	}
	return p.snap(p.Min + rng.Float64()*(p.Max-p.Min))
}

// Format writes a value as the trial template receives it.
func (p Param) Format(v float64) string {
	switch {
	case p.categorical():
		return p.List[int(p.snap(v))]
	case p.Type == convoy.ParameterInt:
		return strconv.FormatInt(int64(math.Round(v)), 10)
	}
	return strconv.FormatFloat(v, 'g', 8, 64)
}

// Parse reads a value written by Format.
func (p Param) Parse(s string) (float64, error) {
	if p.categorical() {
		for i, v := range p.List {
			if v == s {
				return float64(i), nil
			}
		}
		return 0, fmt.Errorf("parameter %s: %q is not in feasibleSpace.list", p.Name, s)
	}
	return strconv.ParseFloat(s, 64)
}

// Assignments formats a point of the space.
func (s Space) Assignments(x []float64) []convoy.ParameterAssignment {
	out := make([]convoy.ParameterAssignment, len(s))
	for i, p := range s {
		out[i] = convoy.ParameterAssignment{Name: p.Name, Value: p.Format(x[i])}
	}
	return out
}

// Point parses assignments back into a point of the space.
func (s Space) Point(as []convoy.ParameterAssignment) ([]float64, error) {
	byName := map[string]string{}
	for _, a := range as {
		byName[a.Name] = a.Value
	}
	x := make([]float64, len(s))
	for i, p := range s {
		v, ok := byName[p.Name]
		if !ok {
			return nil, fmt.Errorf("no value for parameter %s", p.Name)
		}
		var err error
		if x[i], err = p.Parse(v); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// rngFor is the generator of one trial's draws: the same seed and index give the same values.
func rngFor(seed uint64, index int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(index)*0x9e3779b97f4a7c15+1))
}

// Random draws every parameter independently.
func Random(s Space, seed uint64, index int) []float64 {
	rng := rngFor(seed, index)
	x := make([]float64, len(s))
	for i, p := range s {
		x[i] = p.sample(rng)
	}
	return x
}
