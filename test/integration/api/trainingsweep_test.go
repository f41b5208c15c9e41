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

package api

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// sweepExample reads examples/sweep/tpe.yaml as kubectl would send it, into namespace ns.
func sweepExample(t *testing.T, ns, name string) map[string]any {
	t.Helper()
	root, _ := framework.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "examples", "sweep", "tpe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := fromYAML(t, string(data))
	u.SetNamespace(ns)
	u.SetName(name)
	return u.Object
}

func TestSweepExampleIsAcceptedAndDefaulted(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "api-sweep")
	u := fromYAML(t, "{}")
	u.Object = sweepExample(t, ns, "resnet-lr")
	if err := c.Client.Create(ctx, u); err != nil {
		t.Fatalf("examples/sweep/tpe.yaml was rejected: %v", err)
	}
	sweep := &v1alpha1.TrainingSweep{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(u), sweep); err != nil {
		t.Fatal(err)
	}
	if got := sweep.Spec.TrialTemplate.Spec.Framework; got != v1alpha1.FrameworkPyTorch {
		t.Errorf("the trial template's framework = %q, want the TrainingJob default pytorch", got)
	}
	if got := sweep.Spec.Parameters[0].FeasibleSpace.Distribution; got != v1alpha1.DistributionLogUniform {
		t.Errorf("learningRate's distribution = %q, want logUniform", got)
	}

	// Only the trial counts may change.
	sweep.Spec.MaxTrialCount = ptr.To[int32](20)
	if err := c.Client.Update(ctx, sweep); err != nil {
		t.Errorf("raising maxTrialCount was refused: %v", err)
	}
	sweep.Spec.Parameters[1].FeasibleSpace.Max = "0.9"
	if err := c.Client.Update(ctx, sweep); err == nil || !strings.Contains(err.Error(), "spec.parameters is immutable") {
		t.Errorf("changing a parameter's feasible space: error = %v, want spec.parameters is immutable", err)
	}
}

func TestInvalidSweepsAreRejectedNamingTheField(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "api-sweep-invalid")
	cases := map[string]struct {
		spec string // YAML merged over the example's spec
		want string
	}{
		"no parameters":            {spec: `{"parameters": []}`, want: "spec.parameters"},
		"min above max":            {spec: `{"parameters": [{"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.5", "max": "0.1"}}]}`, want: "feasibleSpace.min must be less than feasibleSpace.max"},
		"min not a number":         {spec: `{"parameters": [{"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "low", "max": "0.1"}}]}`, want: "spec.parameters[0].feasibleSpace.min"},
		"double without bounds":    {spec: `{"parameters": [{"name": "lr", "parameterType": "double", "feasibleSpace": {"max": "0.1"}}]}`, want: "feasibleSpace.min and feasibleSpace.max are required for a double or int parameter"},
		"int with a fraction":      {spec: `{"parameters": [{"name": "bs", "parameterType": "int", "feasibleSpace": {"min": "1.5", "max": "8"}}]}`, want: "feasibleSpace.min and max of an int parameter must be integers"},
		"log-uniform from zero":    {spec: `{"parameters": [{"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1", "distribution": "logUniform"}}]}`, want: "feasibleSpace.min must be greater than 0 with distribution logUniform"},
		"categorical without list": {spec: `{"parameters": [{"name": "opt", "parameterType": "categorical", "feasibleSpace": {}}]}`, want: "feasibleSpace.list is required for a categorical or discrete parameter"},
		"discrete of words":        {spec: `{"parameters": [{"name": "bs", "parameterType": "discrete", "feasibleSpace": {"list": ["16", "big"]}}]}`, want: "feasibleSpace.list of a discrete parameter must hold numbers"},
		"duplicate parameter":      {spec: `{"parameters": [{"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.1", "max": "0.2"}}, {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.1", "max": "0.2"}}]}`, want: "spec.parameters"},
		"unknown algorithm":        {spec: `{"algorithm": {"algorithmName": "bayes"}}`, want: `spec.algorithm.algorithmName: Unsupported value: "bayes"`},
		"setting of another":       {spec: `{"algorithm": {"algorithmName": "random", "algorithmSettings": [{"name": "eta", "value": "3"}]}}`, want: "algorithm.algorithmSettings: grid and random take random_state"},
		"eta below two":            {spec: `{"algorithm": {"algorithmName": "hyperband", "algorithmSettings": [{"name": "eta", "value": "1"}]}, "earlyStopping": null}`, want: "eta must be at least 2"},
		"grid without step":        {spec: `{"algorithm": {"algorithmName": "grid"}}`, want: "grid search needs feasibleSpace.step for every double parameter"},
		"hyperband with median":    {spec: `{"algorithm": {"algorithmName": "hyperband"}}`, want: "spec.earlyStopping does not apply with algorithm hyperband"},
		"unknown early stopping":   {spec: `{"earlyStopping": {"algorithmName": "curvefit"}}`, want: `spec.earlyStopping.algorithmName: Unsupported value: "curvefit"`},
		"bad median setting":       {spec: `{"earlyStopping": {"algorithmName": "medianstop", "algorithmSettings": [{"name": "patience", "value": "3"}]}}`, want: "earlyStopping.algorithmSettings are min_trials_required and start_step"},
		"invalid template":         {spec: `{"trialTemplate": {"spec": {"model": "m", "dataset": "d", "numWorkers": 0}}}`, want: "spec.trialTemplate.spec.numWorkers"},
		"suspended template":       {spec: `{"trialTemplate": {"spec": {"model": "m", "dataset": "d", "numWorkers": 1, "suspend": true}}}`, want: "spec.trialTemplate.spec.suspend must be false"},
		"no parallel trials":       {spec: `{"parallelTrialCount": 0}`, want: "spec.parallelTrialCount"},
		"minimize what":            {spec: `{"objective": {"type": "lower", "objectiveMetricName": "loss"}}`, want: `spec.objective.type: Unsupported value: "lower"`},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			u := fromYAML(t, "{}")
			u.Object = sweepExample(t, ns, fmt.Sprintf("invalid-%d", i))
			wantInvalid(t, c, u, tc.spec, tc.want)
		})
	}
	t.Run("hyperband without epochs", func(t *testing.T) {
		u := fromYAML(t, "{}")
		u.Object = sweepExample(t, ns, "hyperband-epochs")
		spec := u.Object["spec"].(map[string]any)
		spec["algorithm"] = map[string]any{"algorithmName": "hyperband"}
		delete(spec, "earlyStopping")
		delete(spec["trialTemplate"].(map[string]any)["spec"].(map[string]any)["hyperparameters"].(map[string]any), "epochs")
		if err := c.Client.Create(ctx, u); err == nil || !strings.Contains(err.Error(), "spec.trialTemplate.spec.hyperparameters.epochs is required with algorithm hyperband") {
			t.Fatalf("error = %v, want hyperparameters.epochs required", err)
		}
	})
}

func TestKubectlPrintsTheSweepColumns(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := namespace(t, c, "api-sweep-columns")
	u := fromYAML(t, "{}")
	u.Object = sweepExample(t, ns, "lr")
	if err := c.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	sweep := &v1alpha1.TrainingSweep{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(u), sweep); err != nil {
		t.Fatal(err)
	}
	sweep.Status = v1alpha1.TrainingSweepStatus{State: v1alpha1.SweepRunning, TrialsSummary: "2/3/1/0",
		BestTrial: &v1alpha1.BestTrial{Name: "lr-3", Value: 0.125},
		Cost:      &v1alpha1.CostTotal{GPUHours: 6, Amount: ptr.To(24.5), Currency: "USD", Summary: "24.50 USD"}}
	if err := c.Client.Status().Update(ctx, sweep); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(util.MustKubectl(t, c, "get", "sweeps", "-n", ns)), "\n")
	if got, want := strings.Join(strings.Fields(lines[0]), " "), "NAME STATE TRIALS BEST COST AGE"; got != want {
		t.Errorf("kubectl get sweeps header = %q, want %q", got, want)
	}
	if got, want := strings.Join(strings.Fields(lines[1])[:6], " "), "lr Running 2/3/1/0 0.125 24.50 USD"; got != want {
		t.Errorf("kubectl get sweeps row = %q, want %q", got, want)
	}
	if doc := util.MustKubectl(t, c, "explain", "trainingsweep.spec.objective.goal"); !strings.Contains(doc, "ends the sweep") {
		t.Errorf("kubectl explain does not show the field's documentation:\n%s", doc)
	}
}
