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
	"math/rand/v2"
	"slices"
)

// Observed is a trial's point and its loss: the objective, negated when maximizing, so lower is
// always better.
type Observed struct {
	X    []float64
	Loss float64
}

// TPEOptions are the settings of the tree-structured Parzen estimator.
type TPEOptions struct {
	// Startup is how many trials are drawn at random before the model is used.
	Startup int
	// Candidates is how many values are drawn from the good trials' density per parameter.
	Candidates int
	// Gamma is the share of trials counted as good.
	Gamma float64
}

// DefaultTPE are the settings when the sweep names none (those of hyperopt and Optuna).
var DefaultTPE = TPEOptions{Startup: 5, Candidates: 24, Gamma: 0.25}

// TPE suggests the index-th trial (Bergstra et al., 2011): the trials so far are split into the
// best Gamma and the rest, a Parzen estimator (a mixture of truncated Gaussians, one per trial,
// plus a wide prior) is fitted to each group, and of Candidates draws from the good density the
// one with the highest ratio good/bad wins. Categorical parameters are chosen one by one from
// their frequencies in each group.
func TPE(s Space, seed uint64, index int, history []Observed, o TPEOptions) []float64 {
	if len(history) < max(o.Startup, 2) {
		return Random(s, seed, index)
	}
	sorted := slices.Clone(history)
	slices.SortStableFunc(sorted, func(a, b Observed) int { return compareFloat(a.Loss, b.Loss) })
	nGood := max(1, int(math.Ceil(o.Gamma*float64(len(sorted)))))
	good, bad := sorted[:nGood], sorted[nGood:]
	rng := rngFor(seed, index)
	x := make([]float64, len(s))
	var numeric []int
	var l, g []parzen
	for i, p := range s {
		column := func(obs []Observed) []float64 {
			out := make([]float64, len(obs))
			for j, ob := range obs {
				out[j] = p.internal(ob.X[i])
			}
			return out
		}
		if p.categorical() {
			x[i] = bestCategory(len(p.List), column(good), column(bad), o.Candidates, rng)
			continue
		}
		lo, hi := p.internal(p.Min), p.internal(p.Max)
		if p.Type == "int" && !p.Log {
			lo, hi = lo-0.5, hi+0.5
		}
		numeric = append(numeric, i)
		l, g = append(l, newParzen(column(good), lo, hi)), append(g, newParzen(column(bad), lo, hi))
	}
	if len(numeric) == 0 {
		return x
	}
	// The numeric parameters are drawn together, as Optuna's multivariate TPE does: a candidate
	// takes every coordinate from one kernel of the good mixture, and is scored by the joint
	// densities, so that parameters that only work together are found together.
	best, bestScore := make([]float64, len(numeric)), math.Inf(-1)
	c := make([]float64, len(numeric))
	for range max(1, o.Candidates) {
		j := rng.IntN(len(l[0].mus))
		for d := range numeric {
			c[d] = l[d].sampleFrom(j, rng)
		}
		if score := jointLogPDF(l, c) - jointLogPDF(g, c); score > bestScore {
			copy(best, c)
			bestScore = score
		}
	}
	for d, i := range numeric {
		x[i] = s[i].snap(s[i].external(best[d]))
	}
	return x
}

// internal maps a value to the space the estimator works in: the logarithm for log-uniform.
func (p Param) internal(v float64) float64 {
	if p.Log {
		return math.Log(v)
	}
	return v
}

func (p Param) external(v float64) float64 {
	if p.Log {
		return math.Exp(v)
	}
	return v
}

// parzen is a mixture of Gaussians truncated to [lo, hi], one per observation plus a prior
// centred in the range, each of equal weight.
type parzen struct {
	mus, sigmas []float64
	lo, hi      float64
}

func newParzen(obs []float64, lo, hi float64) parzen {
	width := hi - lo
	mus := append(slices.Clone(obs), (lo+hi)/2)
	sigmas := make([]float64, len(mus))
	sortedObs := slices.Sorted(slices.Values(obs))
	// The bandwidth of each point is the larger gap to its neighbours (hyperopt's rule), clipped
	// so that no kernel is narrower than the range over min(100, n+1) nor wider than the range.
	minSigma := width / math.Min(100, float64(len(obs)+1))
	for j, mu := range obs {
		k, _ := slices.BinarySearch(sortedObs, mu)
		left, right := mu-lo, hi-mu
		if k > 0 {
			left = mu - sortedObs[k-1]
		}
		if k+1 < len(sortedObs) {
			right = sortedObs[k+1] - mu
		}
		sigmas[j] = math.Max(minSigma, math.Min(width, math.Max(left, right)))
	}
	sigmas[len(obs)] = width
	return parzen{mus: mus, sigmas: sigmas, lo: lo, hi: hi}
}

// sampleFrom draws from the j-th kernel, within the range.
func (p parzen) sampleFrom(j int, rng *rand.Rand) float64 {
	for range 100 {
		if v := p.mus[j] + rng.NormFloat64()*p.sigmas[j]; v >= p.lo && v <= p.hi {
			return v
		}
	}
	return math.Max(p.lo, math.Min(p.hi, p.mus[j]))
}

// logKernel is the log density of the j-th truncated Gaussian at v.
func (p parzen) logKernel(j int, v float64) float64 {
	mu, s := p.mus[j], p.sigmas[j]
	mass := normCDF((p.hi-mu)/s) - normCDF((p.lo-mu)/s)
	z := (v - mu) / s
	return -z*z/2 - math.Log(s*math.Sqrt(2*math.Pi)*math.Max(mass, 1e-300))
}

// jointLogPDF is the log density at x of the mixture whose j-th kernel is the product of
// every dimension's j-th kernel.
func jointLogPDF(dims []parzen, x []float64) float64 {
	n := len(dims[0].mus)
	logs := make([]float64, n)
	top := math.Inf(-1)
	for j := range n {
		for d, p := range dims {
			logs[j] += p.logKernel(j, x[d])
		}
		top = math.Max(top, logs[j])
	}
	sum := 0.0
	for _, v := range logs {
		sum += math.Exp(v - top)
	}
	return top + math.Log(sum/float64(n))
}

func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// bestCategory draws candidates from the good trials' category frequencies (with a prior of one
// per category) and keeps the one with the highest ratio good/bad.
func bestCategory(n int, good, bad []float64, candidates int, rng *rand.Rand) float64 {
	weights := func(obs []float64) []float64 {
		w := make([]float64, n)
		for i := range w {
			w[i] = 1
		}
		for _, v := range obs {
			w[int(v)]++
		}
		total := float64(n + len(obs))
		for i := range w {
			w[i] /= total
		}
		return w
	}
	l, g := weights(good), weights(bad)
	best, bestScore := 0, math.Inf(-1)
	for range max(1, candidates) {
		r, c := rng.Float64(), 0
		for acc := l[0]; acc < r && c < n-1; acc += l[c] {
			c++
		}
		if score := math.Log(l[c]) - math.Log(g[c]); score > bestScore {
			best, bestScore = c, score
		}
	}
	return float64(best)
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
