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

import (
	"fmt"
	"math"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/sweep"
	"github.com/convoy-dev/convoy/test/sweepsim"
)

// result is what one simulated sweep spent until its best trial came within the target.
type result struct {
	// Reached reports whether a trial came within the target before the sweep ended.
	Reached bool
	// Trials is how many trials had been created by then; GPUHours what they had run.
	Trials   int
	GPUHours float64
	// Best is the best value reported by then.
	Best float64
}

// simTrial is one simulated trial: its objective and how far it trained.
type simTrial struct {
	sweep.Trial
	f float64
}

// run simulates a sweep on the objective with sweep.Decide, as the controller runs it, one
// epoch per step: a created trial starts at the next step (the queue has room for
// parallelTrialCount trials), a running trial reports Curve at each epoch, a paused one holds
// no GPUs and resumes from its last epoch. It stops once a trial reports a value at or below
// target, or the sweep ends. epochHours is the length of an epoch; each trial holds gpus.
func run(spec *convoy.TrainingSweepSpec, objective string, target float64, gpus int, epochHours float64) (result, error) {
	res := result{Best: math.Inf(1)}
	var trials []*simTrial
	total := *spec.TrialTemplate.Spec.Hyperparameters.Epochs
	for range 1_000_000 {
		view := make([]sweep.Trial, len(trials))
		for i, t := range trials {
			view[i] = t.Trial
		}
		p, err := sweep.Decide(spec, view)
		if err != nil {
			return res, err
		}
		byName := map[string]*simTrial{}
		for _, t := range trials {
			byName[t.Name] = t
		}
		for _, c := range p.Stop {
			byName[c.Name].State = convoy.TrialEarlyStopped
		}
		for _, c := range p.Pause {
			byName[c.Name].State, byName[c.Name].Rung = convoy.TrialPaused, c.Rung
		}
		for _, c := range p.Resume {
			byName[c.Name].State, byName[c.Name].Rung = convoy.TrialRunning, c.Rung
		}
		for _, c := range p.Create {
			params := map[string]string{}
			for _, a := range c.Assignments {
				params[a.Name] = a.Value
			}
			params[sweepsim.ParamObjective] = objective
			f, err := sweepsim.FromParams(params)
			if err != nil {
				return res, err
			}
			t := &simTrial{f: f, Trial: sweep.Trial{Index: c.Index, TrialStatus: convoy.TrialStatus{
				Name: sweep.TrialName("sim", c.Index), State: convoy.TrialRunning, ParameterAssignments: c.Assignments}}}
			trials = append(trials, t)
		}
		if p.Finish != nil {
			return res, nil
		}
		// One epoch passes.
		for _, t := range trials {
			if t.State != convoy.TrialRunning {
				continue
			}
			res.GPUHours += float64(gpus) * epochHours
			t.Epoch++
			v := sweepsim.Curve(t.f, t.Epoch, total)
			t.Value = &v
			t.Observations = append(t.Observations, convoy.Observation{Epoch: t.Epoch, Value: v})
			if t.Epoch >= total {
				t.State = convoy.TrialSucceeded
			}
			res.Best = math.Min(res.Best, v)
			res.Trials = len(trials)
			if v <= target {
				res.Reached = true
				return res, nil
			}
		}
	}
	return res, fmt.Errorf("the sweep did not end")
}
