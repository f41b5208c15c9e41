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

package sweep

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// makeSweep is a sweep of algo over x in [0, 1] (step 0.25), minimizing loss over 9 epochs.
func makeSweep(algo convoy.AlgorithmName) *convoy.TrainingSweepSpec {
	return &convoy.TrainingSweepSpec{
		Objective: convoy.ObjectiveSpec{Type: convoy.ObjectiveMinimize, ObjectiveMetricName: "loss"},
		Algorithm: convoy.AlgorithmSpec{AlgorithmName: algo},
		Parameters: []convoy.ParameterSpec{{Name: "x", ParameterType: convoy.ParameterDouble,
			FeasibleSpace: convoy.FeasibleSpace{Min: "0", Max: "1", Step: "0.25"}}},
		ParallelTrialCount: ptr.To[int32](2), MaxTrialCount: ptr.To[int32](4), MaxFailedTrialCount: ptr.To[int32](1),
		TrialTemplate: convoy.TrialTemplate{Spec: convoy.TrainingJobSpec{Model: "m", Dataset: "d", NumWorkers: 1,
			Hyperparameters: &convoy.Hyperparameters{Epochs: ptr.To[int32](9)}}},
	}
}

// trial is a trial in state with the objective obs at epochs 1, 2, ...
func trial(i int, state convoy.TrialState, obs ...float64) Trial {
	t := Trial{Index: i, TrialStatus: convoy.TrialStatus{Name: TrialName("s", i), State: state,
		ParameterAssignments: []convoy.ParameterAssignment{{Name: "x", Value: "0.5"}}}}
	for e, v := range obs {
		t.Observations = append(t.Observations, convoy.Observation{Epoch: int32(e + 1), Value: v})
	}
	if len(obs) > 0 {
		t.Value, t.Epoch = ptr.To(obs[len(obs)-1]), int32(len(obs))
	}
	return t
}

func names(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestDecide(t *testing.T) {
	median := func(s *convoy.TrainingSweepSpec) *convoy.TrainingSweepSpec {
		s.EarlyStopping = &convoy.EarlyStoppingSpec{AlgorithmName: convoy.EarlyStoppingMedian,
			AlgorithmSettings: []convoy.AlgorithmSetting{{Name: "min_trials_required", Value: "2"}}}
		s.MaxTrialCount = ptr.To[int32](6)
		return s
	}
	withGoal := func(s *convoy.TrainingSweepSpec) *convoy.TrainingSweepSpec {
		s.Objective.Goal = ptr.To(0.2)
		return s
	}
	hb := func(s *convoy.TrainingSweepSpec) *convoy.TrainingSweepSpec {
		s.MaxTrialCount, s.ParallelTrialCount = ptr.To[int32](3), ptr.To[int32](3)
		return s
	}
	paused := func(t Trial, rung int32) Trial { t.State, t.Rung = convoy.TrialPaused, rung; return t }
	// unseenFirst drops the trial's first observation: the sweep looked only after its next report.
	unseenFirst := func(t Trial) Trial { t.Observations = t.Observations[1:]; return t }
	cases := map[string]struct {
		spec       *convoy.TrainingSweepSpec
		trials     []Trial
		wantCreate []int
		wantValues []string // of the created trials' x
		wantStop   []string
		wantPause  []string
		wantResume []string
		wantFinish string
		wantBest   string
	}{
		"grid starts parallelTrialCount trials in order": {spec: makeSweep(convoy.AlgorithmGrid),
			wantCreate: []int{0, 1}, wantValues: []string{"0", "0.25"}},
		"grid fills a freed slot": {spec: makeSweep(convoy.AlgorithmGrid),
			trials:     []Trial{trial(0, convoy.TrialSucceeded, 0.5), trial(1, convoy.TrialRunning, 0.4)},
			wantCreate: []int{2}, wantValues: []string{"0.5"}, wantBest: "s-1"},
		"grid ends with the space, before maxTrialCount": {spec: func() *convoy.TrainingSweepSpec {
			s := makeSweep(convoy.AlgorithmGrid)
			s.MaxTrialCount = ptr.To[int32](50)
			return s
		}(),
			trials: []Trial{trial(0, convoy.TrialSucceeded, 3), trial(1, convoy.TrialSucceeded, 2), trial(2, convoy.TrialSucceeded, 1),
				trial(3, convoy.TrialSucceeded, 2), trial(4, convoy.TrialEarlyStopped, 5)},
			wantFinish: convoy.SweepReasonSearchSpaceExhausted, wantBest: "s-2"},
		"random stops at maxTrialCount once nothing runs": {spec: makeSweep(convoy.AlgorithmRandom),
			trials:     []Trial{trial(0, convoy.TrialSucceeded, 3), trial(1, convoy.TrialSucceeded, 2), trial(2, convoy.TrialFailed), trial(3, convoy.TrialSucceeded, 1)},
			wantFinish: convoy.SweepReasonMaxTrialsReached, wantBest: "s-3"},
		"maxFailedTrialCount fails the sweep and stops the rest": {spec: makeSweep(convoy.AlgorithmRandom),
			trials:   []Trial{trial(0, convoy.TrialFailed), trial(1, convoy.TrialFailed), trial(2, convoy.TrialRunning, 1)},
			wantStop: []string{"s-2"}, wantFinish: convoy.SweepReasonMaxFailedTrialsReached, wantBest: "s-2"},
		"failures up to the limit go on": {spec: makeSweep(convoy.AlgorithmRandom),
			trials:     []Trial{trial(0, convoy.TrialFailed), trial(1, convoy.TrialRunning, 1)},
			wantCreate: []int{2}, wantBest: "s-1"},
		"the goal ends the sweep": {spec: withGoal(makeSweep(convoy.AlgorithmRandom)),
			trials:   []Trial{trial(0, convoy.TrialRunning, 0.5, 0.19), trial(1, convoy.TrialPending)},
			wantStop: []string{"s-0", "s-1"}, wantFinish: convoy.SweepReasonGoalReached, wantBest: "s-0"},
		"median stops a trial worse than the median at its epoch": {spec: median(makeSweep(convoy.AlgorithmRandom)),
			trials: []Trial{trial(0, convoy.TrialSucceeded, 1, 0.5, 0.2), trial(1, convoy.TrialSucceeded, 1, 0.6, 0.3),
				trial(2, convoy.TrialRunning, 1.2, 0.9), trial(3, convoy.TrialRunning, 0.9, 0.4)},
			wantStop: []string{"s-2"}, wantCreate: []int{4}, wantBest: "s-0"},
		"hyperband pauses a trial at its rung": {spec: hb(makeSweep(convoy.AlgorithmHyperband)),
			trials:    []Trial{trial(0, convoy.TrialRunning, 0.5), trial(1, convoy.TrialRunning), trial(2, convoy.TrialPending)},
			wantPause: []string{"s-0"}, wantBest: "s-0"},
		"hyperband promotes the best 1/eta of a rung": {spec: hb(makeSweep(convoy.AlgorithmHyperband)),
			trials:    []Trial{paused(trial(0, convoy.TrialRunning, 0.5), 0), paused(trial(1, convoy.TrialRunning, 0.3), 0), trial(2, convoy.TrialRunning, 0.9)},
			wantPause: []string{"s-2"}, wantResume: []string{"s-1"}, wantBest: "s-1"},
		"hyperband compares a trial whose rung report went unseen at its next epoch": {spec: hb(makeSweep(convoy.AlgorithmHyperband)),
			trials:    []Trial{paused(trial(0, convoy.TrialRunning, 0.5), 0), paused(unseenFirst(trial(1, convoy.TrialRunning, 0.4, 0.3)), 0), trial(2, convoy.TrialRunning, 0.9)},
			wantPause: []string{"s-2"}, wantResume: []string{"s-1"}, wantBest: "s-1"},
		"hyperband runs the best on when nothing is left": {spec: hb(makeSweep(convoy.AlgorithmHyperband)),
			trials:     []Trial{paused(trial(0, convoy.TrialRunning, 0.5, 0.4, 0.3), 1), trial(1, convoy.TrialEarlyStopped, 0.3, 0.35, 0.32), paused(trial(2, convoy.TrialRunning, 0.9), 0)},
			wantResume: []string{"s-0"}, wantBest: "s-0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Decide(tc.spec, tc.trials)
			if err != nil {
				t.Fatal(err)
			}
			var created []int
			var values []string
			for _, c := range p.Create {
				created = append(created, c.Index)
				values = append(values, c.Assignments[0].Value)
			}
			if diff := cmp.Diff(tc.wantCreate, created); diff != "" {
				t.Errorf("created (-want,+got):\n%s", diff)
			}
			if tc.wantValues != nil {
				if diff := cmp.Diff(tc.wantValues, values); diff != "" {
					t.Errorf("values (-want,+got):\n%s", diff)
				}
			}
			for what, pair := range map[string][2][]string{"stopped": {tc.wantStop, names(p.Stop)}, "paused": {tc.wantPause, names(p.Pause)}, "resumed": {tc.wantResume, names(p.Resume)}} {
				if diff := cmp.Diff(pair[0], pair[1]); diff != "" {
					t.Errorf("%s (-want,+got):\n%s", what, diff)
				}
			}
			gotFinish := ""
			if p.Finish != nil {
				gotFinish = p.Finish.Reason
			}
			if gotFinish != tc.wantFinish {
				t.Errorf("finish = %q, want %q", gotFinish, tc.wantFinish)
			}
			gotBest := ""
			if p.Best != nil {
				gotBest = p.Best.Name
			}
			if gotBest != tc.wantBest {
				t.Errorf("best = %q, want %q", gotBest, tc.wantBest)
			}
		})
	}
}

func TestTrialJob(t *testing.T) {
	sw := &convoy.TrainingSweep{Spec: *makeSweep(convoy.AlgorithmRandom)}
	sw.Name, sw.Namespace, sw.UID = "lr", "ns", "uid-1"
	sw.Spec.Parameters = append(sw.Spec.Parameters, convoy.ParameterSpec{Name: "learningRate", ParameterType: convoy.ParameterDouble,
		FeasibleSpace: convoy.FeasibleSpace{Min: "0.001", Max: "0.1"}})
	tmpl := &sw.Spec.TrialTemplate.Spec
	tmpl.Args = []string{"--x=${trialParameters.x}", "--fixed"}
	tmpl.Env = []corev1.EnvVar{{Name: "X", Value: "x is ${trialParameters.x}"}}
	tmpl.Hyperparameters.AdditionalParams = map[string]string{"x": "${trialParameters.x}"}
	tmpl.Scheduling = &convoy.SchedulingSpec{Queue: "training"}

	job, err := TrialJob(sw, NewTrial{Index: 3, Assignments: []convoy.ParameterAssignment{{Name: "x", Value: "0.25"}, {Name: "learningRate", Value: "0.01"}}})
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "lr-3" || job.Labels[convoy.LabelSweepName] != "lr" || job.Labels[LabelTrialIndex] != "3" {
		t.Errorf("name %q labels %v, want lr-3 with the sweep's name and the index", job.Name, job.Labels)
	}
	if diff := cmp.Diff([]string{"--x=0.25", "--fixed"}, job.Spec.Args); diff != "" {
		t.Errorf("args (-want,+got):\n%s", diff)
	}
	if job.Spec.Env[0].Value != "x is 0.25" || job.Spec.Hyperparameters.AdditionalParams["x"] != "0.25" {
		t.Errorf("env %v, additionalParams %v: want the placeholders replaced", job.Spec.Env, job.Spec.Hyperparameters.AdditionalParams)
	}
	if lr := job.Spec.Hyperparameters.LearningRate; lr == nil || *lr != 0.01 {
		t.Errorf("learningRate = %v, want 0.01 from the parameter of that name", lr)
	}
	if got := job.PriorityClassName(); got != "low" {
		t.Errorf("priority class = %q, want low for a template that names none", got)
	}
	if ref := job.OwnerReferences; len(ref) != 1 || ref[0].UID != "uid-1" || ref[0].Controller == nil || !*ref[0].Controller {
		t.Errorf("owner references = %v, want the sweep as controller", ref)
	}
	if tmpl.Args[0] != "--x=${trialParameters.x}" {
		t.Errorf("the template itself was changed: %v", tmpl.Args)
	}

	tmpl.Command = []string{"train", "--y=${trialParameters.y}"}
	if _, err := TrialJob(sw, NewTrial{Index: 4, Assignments: []convoy.ParameterAssignment{{Name: "x", Value: "0.25"}, {Name: "learningRate", Value: "0.01"}}}); err == nil ||
		!strings.Contains(err.Error(), "spec.trialTemplate.spec.command refers to ${trialParameters.y}") {
		t.Errorf("an unknown placeholder: error = %v, want one naming the field and the parameter", err)
	}
}
