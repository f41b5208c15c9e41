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

// Package sweep is the TrainingSweep's logic: Decide is a pure function from a sweep's spec and
// its trials to what the controller does next (trials to create, stop, pause and promote, and
// whether the sweep is over), and TrialJob turns a suggestion into a trial's TrainingJob. The
// search algorithms are in suggest/.
package sweep

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/sweep/suggest"
)

// Defaults of the sweep's counts, as the CRD defaults them.
const (
	DefaultParallelTrials   = 3
	DefaultMaxTrials        = 10
	DefaultMaxFailedTrials  = 3
	defaultSeed             = 1
	defaultEta              = 3
	defaultMinResource      = 1
	defaultTrialPriority    = "low"
	observationsPerTrialCap = 1000
)

// Trial is what the sweep knows of one of its trials.
type Trial struct {
	convoy.TrialStatus
	// Index is the trial's number in the sweep, from 0; it seeds the trial's draws.
	Index int
}

// NewTrial is a trial to create.
type NewTrial struct {
	Index       int
	Assignments []convoy.ParameterAssignment
}

// Change is a trial to stop, pause or promote, and why.
type Change struct {
	Name    string
	Rung    int32
	Message string
}

// Finish ends the sweep.
type Finish struct {
	Succeeded bool
	Reason    string
	Message   string
}

// Plan is what one reconcile of a sweep does.
type Plan struct {
	Create []NewTrial
	// Stop finishes trials as EarlyStopped: the median rule, a rung that ends them, or the
	// sweep's end.
	Stop []Change
	// Pause stops a trial's gang at a hyperband rung, keeping it to resume; Resume promotes a
	// paused trial to the next rung, from its own checkpoint.
	Pause, Resume []Change
	Best          *convoy.BestTrial
	Finish        *Finish
}

// Settings are a sweep's algorithm settings with their defaults.
type Settings struct {
	Seed        uint64
	TPE         suggest.TPEOptions
	Eta         float64
	MinResource int32
	Median      *suggest.MedianOptions
}

// ReadSettings reads algorithmSettings and earlyStopping with their defaults.
func ReadSettings(spec *convoy.TrainingSweepSpec) (Settings, error) {
	s := Settings{Seed: defaultSeed, TPE: suggest.DefaultTPE, Eta: defaultEta, MinResource: defaultMinResource}
	for _, kv := range spec.Algorithm.AlgorithmSettings {
		v, err := strconv.ParseFloat(kv.Value, 64)
		if err != nil {
			return s, fmt.Errorf("spec.algorithm.algorithmSettings %s: %w", kv.Name, err)
		}
		switch kv.Name {
		case "random_state":
			s.Seed = uint64(int64(v))
		case "n_startup_trials":
			s.TPE.Startup = int(v)
		case "n_ei_candidates":
			s.TPE.Candidates = int(v)
		case "eta":
			s.Eta = v
		case "min_resource":
			s.MinResource = int32(v)
		}
	}
	if es := spec.EarlyStopping; es != nil {
		m := suggest.DefaultMedian
		for _, kv := range es.AlgorithmSettings {
			v, err := strconv.Atoi(kv.Value)
			if err != nil {
				return s, fmt.Errorf("spec.earlyStopping.algorithmSettings %s: %w", kv.Name, err)
			}
			switch kv.Name {
			case "min_trials_required":
				m.MinTrialsRequired = v
			case "start_step":
				m.StartStep = int32(v)
			}
		}
		s.Median = &m
	}
	return s, nil
}

// Sign is 1 when the objective is minimized and -1 when maximized: sign*value is a loss.
func Sign(spec *convoy.TrainingSweepSpec) float64 {
	if spec.Objective.Type == convoy.ObjectiveMaximize {
		return -1
	}
	return 1
}

func orDefault(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

// epochs is the most epochs a trial runs: the template's hyperparameters.epochs.
func epochs(spec *convoy.TrainingSweepSpec) int32 {
	if hp := spec.TrialTemplate.Spec.Hyperparameters; hp != nil && hp.Epochs != nil {
		return *hp.Epochs
	}
	return 0
}

func unfinished(s convoy.TrialState) bool {
	return s == convoy.TrialPending || s == convoy.TrialRunning || s == convoy.TrialPaused
}

// Decide is the sweep's state machine: what to do given its spec and its trials, oldest first.
func Decide(spec *convoy.TrainingSweepSpec, trials []Trial) (Plan, error) {
	var p Plan
	space, err := suggest.NewSpace(spec.Parameters)
	if err != nil {
		return p, err
	}
	set, err := ReadSettings(spec)
	if err != nil {
		return p, err
	}
	sign := Sign(spec)
	p.Best = best(trials, sign)

	stopAll := func(msg string) {
		for _, t := range trials {
			if unfinished(t.State) {
				p.Stop = append(p.Stop, Change{Name: t.Name, Message: msg})
			}
		}
	}
	failed := 0
	for _, t := range trials {
		if t.State == convoy.TrialFailed {
			failed++
		}
	}
	if maxFailed := orDefault(spec.MaxFailedTrialCount, DefaultMaxFailedTrials); failed > int(maxFailed) {
		p.Finish = &Finish{Reason: convoy.SweepReasonMaxFailedTrialsReached,
			Message: fmt.Sprintf("%d trials failed, more than spec.maxFailedTrialCount (%d): `kubectl describe tj` of a failed trial says why", failed, maxFailed)}
		stopAll("the sweep failed: too many trials failed")
		return p, nil
	}
	if g := spec.Objective.Goal; g != nil && p.Best != nil && sign*p.Best.Value <= sign**g {
		p.Finish = &Finish{Succeeded: true, Reason: convoy.SweepReasonGoalReached,
			Message: fmt.Sprintf("trial %s reported %s %g, reaching spec.objective.goal %g", p.Best.Name, spec.Objective.ObjectiveMetricName, p.Best.Value, *g)}
		stopAll("the sweep reached its goal")
		return p, nil
	}

	state := map[string]convoy.TrialState{}
	for _, t := range trials {
		state[t.Name] = t.State
	}
	if set.Median != nil && spec.Algorithm.AlgorithmName != convoy.AlgorithmHyperband {
		p.Stop = append(p.Stop, medianStops(trials, sign, *set.Median)...)
		for _, c := range p.Stop {
			state[c.Name] = convoy.TrialEarlyStopped
		}
	}
	if spec.Algorithm.AlgorithmName == convoy.AlgorithmHyperband {
		hyperband(&p, trials, state, sign, Rungs(spec, set), set.Eta)
	}

	active := 0
	for _, t := range trials {
		if s := state[t.Name]; s == convoy.TrialPending || s == convoy.TrialRunning {
			active++
		}
	}
	// Promotions take free slots first; the rest waits.
	free := int(orDefault(spec.ParallelTrialCount, DefaultParallelTrials)) - active
	var resumes []Change
	for _, r := range p.Resume {
		if state[r.Name] != convoy.TrialPaused {
			resumes = append(resumes, r) // running on: it takes no new slot
		} else if free > 0 {
			resumes = append(resumes, r)
			free--
			active++
		}
	}
	p.Resume = resumes

	total := int(orDefault(spec.MaxTrialCount, DefaultMaxTrials))
	exhausted := false
	if spec.Algorithm.AlgorithmName == convoy.AlgorithmGrid && suggest.GridSize(space) <= total {
		total, exhausted = suggest.GridSize(space), true
	}
	history := tpeHistory(space, trials, sign)
	for i := len(trials); i < total && free > 0; i, free = i+1, free-1 {
		var x []float64
		switch spec.Algorithm.AlgorithmName {
		case convoy.AlgorithmGrid:
			x, _ = suggest.Grid(space, i)
		case convoy.AlgorithmTPE:
			x = suggest.TPE(space, set.Seed, i, history, set.TPE)
		default:
			x = suggest.Random(space, set.Seed, i)
		}
		p.Create = append(p.Create, NewTrial{Index: i, Assignments: space.Assignments(x)})
		active++
	}
	if active > 0 || len(trials)+len(p.Create) < total {
		return p, nil
	}
	if spec.Algorithm.AlgorithmName == convoy.AlgorithmHyperband {
		if c, ok := lastPromotion(trials, state, sign, Rungs(spec, set)); ok {
			p.Resume = append(p.Resume, c)
			return p, nil
		}
	}
	// Nothing runs and nothing is left to start: paused trials that no rung promotes are stopped.
	for _, t := range trials {
		if state[t.Name] == convoy.TrialPaused {
			p.Stop = append(p.Stop, Change{Name: t.Name, Rung: t.Rung, Message: fmt.Sprintf("not promoted past rung %d: the sweep has no more trials to run", t.Rung)})
		}
	}
	reason, msg := convoy.SweepReasonMaxTrialsReached, fmt.Sprintf("all %d trials (spec.maxTrialCount) finished", total)
	if exhausted {
		reason, msg = convoy.SweepReasonSearchSpaceExhausted, fmt.Sprintf("all %d points of the grid were tried", total)
	}
	p.Finish = &Finish{Succeeded: true, Reason: reason, Message: msg}
	return p, nil
}

// Rungs are the sweep's hyperband rungs, in epochs.
func Rungs(spec *convoy.TrainingSweepSpec, set Settings) []int32 {
	return suggest.Rungs(set.MinResource, epochs(spec), set.Eta)
}

// best is the trial with the best latest value.
func best(trials []Trial, sign float64) *convoy.BestTrial {
	var b *convoy.BestTrial
	for _, t := range trials {
		if t.Value == nil {
			continue
		}
		if b == nil || sign**t.Value < sign*b.Value {
			b = &convoy.BestTrial{Name: t.Name, ParameterAssignments: t.ParameterAssignments, Value: *t.Value, Epoch: t.Epoch}
		}
	}
	return b
}

// medianStops applies the median rule to every running trial.
func medianStops(trials []Trial, sign float64, o suggest.MedianOptions) []Change {
	var succeeded [][]convoy.Observation
	for _, t := range trials {
		if t.State == convoy.TrialSucceeded {
			succeeded = append(succeeded, t.Observations)
		}
	}
	var out []Change
	for _, t := range trials {
		if t.State != convoy.TrialRunning || t.Value == nil {
			continue
		}
		if median, stop := suggest.MedianStop(sign**t.Value, t.Epoch, succeeded, sign, o); stop {
			out = append(out, Change{Name: t.Name, Message: fmt.Sprintf("objective %g at epoch %d is worse than the median %g of %d succeeded trials at that epoch (medianstop)",
				*t.Value, t.Epoch, sign*median, len(succeeded))})
		}
	}
	return out
}

// hyperband pauses running trials that reached their rung and promotes the best paused ones.
func hyperband(p *Plan, trials []Trial, state map[string]convoy.TrialState, sign float64, rungs []int32, eta float64) {
	rung := map[string]int32{}
	for _, t := range trials {
		rung[t.Name] = t.Rung
		if t.State == convoy.TrialRunning && int(t.Rung) < len(rungs) && t.Epoch >= rungs[t.Rung] {
			p.Pause = append(p.Pause, Change{Name: t.Name, Rung: t.Rung, Message: fmt.Sprintf("paused at rung %d (epoch %d)", t.Rung, rungs[t.Rung])})
			state[t.Name] = convoy.TrialPaused
		}
	}
	for k := len(rungs) - 1; k >= 0; k-- {
		var results []suggest.RungResult
		for _, t := range trials {
			reached := rung[t.Name] > int32(k) || (rung[t.Name] == int32(k) && state[t.Name] == convoy.TrialPaused)
			if !reached {
				continue
			}
			if loss, ok := suggest.RungLoss(t.Observations, rungs[k], sign); ok {
				results = append(results, suggest.RungResult{Trial: t.Name, Loss: loss, Promoted: rung[t.Name] > int32(k)})
			}
		}
		for _, name := range suggest.Promotable(results, eta) {
			if state[name] == convoy.TrialPaused {
				p.Resume = append(p.Resume, Change{Name: name, Rung: int32(k) + 1, Message: fmt.Sprintf("promoted to rung %d: among the best 1/%g of %d trials at epoch %d", k+1, eta, len(results), rungs[k])})
			}
		}
	}
	// A trial that reaches a rung already among the best is not paused: it runs on (its Resume
	// only moves it to the next rung).
	p.Pause = slices.DeleteFunc(p.Pause, func(c Change) bool {
		if slices.ContainsFunc(p.Resume, func(r Change) bool { return r.Name == c.Name }) {
			state[c.Name] = convoy.TrialRunning
			return true
		}
		return false
	})
}

// lastPromotion, once no trial runs and none is left to start, promotes the paused trial that
// is the best of all that reached its rung, the highest rung first, so that the best trial
// runs every epoch even where fewer than eta trials reached its rung.
func lastPromotion(trials []Trial, state map[string]convoy.TrialState, sign float64, rungs []int32) (Change, bool) {
	for k := len(rungs) - 1; k >= 0; k-- {
		var bestName string
		bestLoss := math.Inf(1)
		for _, t := range trials {
			if t.Rung < int32(k) || (t.Rung == int32(k) && state[t.Name] != convoy.TrialPaused) {
				continue
			}
			if loss, ok := suggest.RungLoss(t.Observations, rungs[k], sign); ok && loss < bestLoss {
				bestName, bestLoss = t.Name, loss
			}
		}
		for _, t := range trials {
			if t.Name == bestName && t.Rung == int32(k) && state[t.Name] == convoy.TrialPaused {
				return Change{Name: t.Name, Rung: int32(k) + 1, Message: fmt.Sprintf("promoted to rung %d: the best of the trials at epoch %d, with no trial left to run", k+1, rungs[k])}, true
			}
		}
	}
	return Change{}, false
}

// tpeHistory are the finished and paused trials' points and losses.
func tpeHistory(space suggest.Space, trials []Trial, sign float64) []suggest.Observed {
	var out []suggest.Observed
	for _, t := range trials {
		if t.Value == nil || t.State == convoy.TrialPending || t.State == convoy.TrialRunning || math.IsNaN(*t.Value) {
			continue
		}
		x, err := space.Point(t.ParameterAssignments)
		if err != nil {
			continue
		}
		out = append(out, suggest.Observed{X: x, Loss: sign * *t.Value})
	}
	return out
}
