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

// Command sweep measures what each search algorithm of a TrainingSweep spends to find the
// optimum of a known objective: over -seeds seeds, the trials created and the GPU-hours run
// until a trial reports a value within -within of the optimum of the Branin function
// (test/sweepsim), as a share of the function's range over the search space (normalized
// regret: 1% is 3.08 above the least value 0.398), with the controller's own Decide run on a simulated cluster (no API server:
// one epoch per step, room for parallelTrialCount trials). It prints a Markdown table.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"

	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/sweepsim"
)

func main() {
	seeds := flag.Int("seeds", 10, "Seeds (random_state) per algorithm.")
	within := flag.Float64("within", 0.01, "Target: a reported value within this share of the objective's range above its optimum.")
	maxTrials := flag.Int("max-trials", 200, "maxTrialCount of every sweep.")
	epochs := flag.Int("epochs", 27, "Epochs of a trial (hyperband's most resource).")
	parallel := flag.Int("parallel", 4, "parallelTrialCount.")
	gpus := flag.Int("gpus", 8, "GPUs of each trial.")
	epochHours := flag.Float64("epoch-hours", 0.1, "Length of an epoch, in hours.")
	flag.Parse()

	target := sweepsim.BraninMin + *within*(sweepsim.BraninMax-sweepsim.BraninMin)
	fmt.Printf("Branin, optimum %.6f, target <= %.6f; %d seeds; maxTrialCount %d, parallelTrialCount %d, %d epochs of %.2f h on %d GPUs per trial\n\n",
		sweepsim.BraninMin, target, *seeds, *maxTrials, *parallel, *epochs, *epochHours, *gpus)
	fmt.Println("| algorithm | reached | trials (median) | trials (mean) | GPU-hours (median) | GPU-hours (mean) |")
	fmt.Println("| --- | --- | --- | --- | --- | --- |")
	for _, c := range []struct {
		name   string
		algo   convoy.AlgorithmName
		median bool
	}{
		{"random", convoy.AlgorithmRandom, false},
		{"random + medianstop", convoy.AlgorithmRandom, true},
		{"tpe", convoy.AlgorithmTPE, false},
		{"tpe + medianstop", convoy.AlgorithmTPE, true},
		{"hyperband (eta 3)", convoy.AlgorithmHyperband, false},
	} {
		var trials, hours []float64
		reached := 0
		for seed := 1; seed <= *seeds; seed++ {
			spec := spec(c.algo, c.median, seed, *maxTrials, *parallel, *epochs)
			res, err := run(spec, sweepsim.Branin, target, *gpus, *epochHours)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			if res.Reached {
				reached++
			}
			// A sweep that never got there counts with what it spent.
			trials = append(trials, float64(res.Trials))
			hours = append(hours, res.GPUHours)
		}
		fmt.Printf("| %s | %d/%d | %.0f | %.1f | %.0f | %.1f |\n", c.name, reached, *seeds, median(trials), mean(trials), median(hours), mean(hours))
	}
}

func spec(algo convoy.AlgorithmName, withMedian bool, seed, maxTrials, parallel, epochs int) *convoy.TrainingSweepSpec {
	s := &convoy.TrainingSweepSpec{
		Objective: convoy.ObjectiveSpec{Type: convoy.ObjectiveMinimize, ObjectiveMetricName: "loss"},
		Algorithm: convoy.AlgorithmSpec{AlgorithmName: algo, AlgorithmSettings: []convoy.AlgorithmSetting{{Name: "random_state", Value: strconv.Itoa(seed)}}},
		Parameters: []convoy.ParameterSpec{
			{Name: "x", ParameterType: convoy.ParameterDouble, FeasibleSpace: convoy.FeasibleSpace{Min: "-5", Max: "10"}},
			{Name: "y", ParameterType: convoy.ParameterDouble, FeasibleSpace: convoy.FeasibleSpace{Min: "0", Max: "15"}},
		},
		ParallelTrialCount: ptr.To(int32(parallel)), MaxTrialCount: ptr.To(int32(maxTrials)), MaxFailedTrialCount: ptr.To[int32](0),
		TrialTemplate: convoy.TrialTemplate{Spec: convoy.TrainingJobSpec{Model: "m", Dataset: "d", NumWorkers: 1,
			Hyperparameters: &convoy.Hyperparameters{Epochs: ptr.To(int32(epochs))}}},
	}
	if withMedian {
		s.EarlyStopping = &convoy.EarlyStoppingSpec{AlgorithmName: convoy.EarlyStoppingMedian,
			AlgorithmSettings: []convoy.AlgorithmSetting{{Name: "min_trials_required", Value: "3"}, {Name: "start_step", Value: "3"}}}
	}
	return s
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mean(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}
