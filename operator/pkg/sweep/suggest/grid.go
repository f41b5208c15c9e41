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

import "math"

// maxGridValues bounds the values of one double or int parameter on the grid.
const maxGridValues = 1000

// gridValues are the values grid search tries for one parameter: every list entry, or min,
// min+step, ... up to max (a double without a step gets 10 evenly spaced values).
func gridValues(p Param) []float64 {
	if p.categorical() {
		out := make([]float64, len(p.List))
		for i := range out {
			out[i] = float64(i)
		}
		return out
	}
	step := p.Step
	if step <= 0 {
		step = (p.Max - p.Min) / 9
	}
	var out []float64
	for i := 0; len(out) < maxGridValues; i++ {
		v := p.Min + float64(i)*step
		if v > p.Max+step*1e-9 {
			break
		}
		out = append(out, math.Min(v, p.Max))
	}
	return out
}

// GridSize is how many points the grid has.
func GridSize(s Space) int {
	n := 1
	for _, p := range s {
		n *= len(gridValues(p))
		if n > math.MaxInt32 {
			return math.MaxInt32
		}
	}
	return n
}

// Grid returns the index-th point of the grid, the last parameter varying fastest, and false
// once every point has been suggested.
func Grid(s Space, index int) ([]float64, bool) {
	if index < 0 || index >= GridSize(s) {
		return nil, false
	}
	x := make([]float64, len(s))
	for i := len(s) - 1; i >= 0; i-- {
		vals := gridValues(s[i])
		x[i] = vals[index%len(vals)]
		index /= len(vals)
	}
	return x, true
}
