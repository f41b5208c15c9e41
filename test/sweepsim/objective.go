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

// Package sweepsim is the simulated objective of the sweep tests and benchmark: a known function
// of a trial's hyperparameters, reported epoch by epoch as a learning curve that converges on it.
// test/cmd/simtrainer reports it for the trials of the e2e tests; test/bench/sweep runs whole
// sweeps against it without a cluster. It imports nothing of the operator, so that simtrainer
// stays free of controller-runtime's flags.
package sweepsim

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
)

// Objective names, as a trial names one in hyperparameters.additionalParams[ParamObjective].
const (
	// ParamObjective selects the function; its inputs are the additionalParams x and y.
	ParamObjective = "sim-objective"
	// Quadratic is (x-0.3)² + (y+0.2)², least (0) at x=0.3, y=-0.2.
	Quadratic = "quadratic"
	// Branin is the Branin-Hoo function over x in [-5, 10], y in [0, 15]; its least value,
	// BraninMin, is at (-π, 12.275), (π, 2.275) and (9.42478, 2.475).
	Branin = "branin"
	// Fail makes the trial's workers exit 1 after the first epoch.
	Fail = "fail"

	BraninMin = 0.39788735772973816
	// BraninMax is Branin's greatest value over its domain, at (-5, 0).
	BraninMax = 308.12909601160663
)

// F is the objective's value at (x, y).
func F(name string, x, y float64) (float64, error) {
	switch name {
	case Quadratic:
		return (x-0.3)*(x-0.3) + (y+0.2)*(y+0.2), nil
	case Branin:
		b, c := 5.1/(4*math.Pi*math.Pi), 5/math.Pi
		u := y - b*x*x + c*x - 6
		return u*u + 10*(1-1/(8*math.Pi))*math.Cos(x) + 10, nil
	}
	return 0, fmt.Errorf("unknown objective %q: use %s or %s", name, Quadratic, Branin)
}

// FromParams reads the objective and its inputs from a trial's additionalParams.
func FromParams(params map[string]string) (float64, error) {
	x, err := strconv.ParseFloat(params["x"], 64)
	if err != nil {
		return 0, fmt.Errorf("additionalParams x: %w", err)
	}
	y, err := strconv.ParseFloat(params["y"], 64)
	if err != nil {
		return 0, fmt.Errorf("additionalParams y: %w", err)
	}
	return F(params[ParamObjective], x, y)
}

// Curve is the loss reported at epoch of total for a trial whose objective is f: it starts
// about 2 above f and falls to f at the last epoch, with noise that shrinks as it converges
// (seeded by f and the epoch, so a trial resumed from a checkpoint reports the same values).
// Every trial's curve has the same shape, so an earlier epoch ranks trials as the last does,
// up to the noise.
func Curve(f float64, epoch, total int32) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%.12g/%d", f, epoch)
	rng := rand.New(rand.NewPCG(h.Sum64(), 1))
	left := 1 - float64(epoch)/float64(max(total, 1))
	return f + 2*left*left*(1+0.2*rng.NormFloat64()) + 0.001*math.Abs(rng.NormFloat64())
}
