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

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

// sweepLearningRates are the grid the real sweep tries, one trial each.
var sweepLearningRates = []string{"0.0001", "0.001", "0.01", "0.3"}

// A user applies a 4-trial grid sweep of the digits example over the learning rate, two trials at
// a time: every trial is a real 2-worker PyTorch gang that trains and reports its accuracy; the
// sweep succeeds with the trial of the highest accuracy as its best, with that trial's learning
// rate, and `kubectl get sweep` shows it.
func TestSweepOfTheExampleModel(t *testing.T) {
	e := realstack.Shared(t)
	ns := framework.TestNamespace(t)
	ctx := t.Context()
	if err := e.StoryQueue(ctx, ns); err != nil {
		t.Fatal(err)
	}
	list, _ := json.Marshal(sweepLearningRates)
	began := time.Now()
	if err := e.Apply(ctx, fmt.Sprintf(`apiVersion: convoy.dev/v1alpha1
kind: TrainingSweep
metadata: {name: digits-lr, namespace: %[1]s}
spec:
  objective: {type: maximize, objectiveMetricName: accuracy}
  algorithm: {algorithmName: grid}
  parameters:
  - name: learningRate
    parameterType: discrete
    feasibleSpace: {list: %[2]s}
  parallelTrialCount: 2
  maxTrialCount: %[3]d
  trialTemplate:
    spec:
      model: mlp
      dataset: sklearn-digits
      framework: pytorch
      numWorkers: 2
      gpusPerWorker: 1
      image: %[4]s
      resources:
        requests: {cpu: 100m, memory: 256Mi}
      hyperparameters: {epochs: 5}
      networking: {backend: gloo}
      scheduling: {queue: training}
`, ns, list, len(sweepLearningRates), e.Image(images.Trainer))); err != nil {
		t.Fatal(err)
	}

	sw := &convoy.TrainingSweep{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "digits-lr"}, sw); err != nil {
			return false, nil
		}
		return sw.Status.State == convoy.SweepSucceeded || sw.Status.State == convoy.SweepFailed, nil
	})
	if err != nil || sw.Status.State != convoy.SweepSucceeded {
		t.Fatalf("the sweep did not succeed (%v): %+v", err, sw.Status)
	}
	took := time.Since(began)

	trials := &convoy.TrainingJobList{}
	if err := e.Cluster.Client.List(ctx, trials, client.InNamespace(ns), client.MatchingLabels{convoy.LabelSweepName: "digits-lr"}); err != nil {
		t.Fatal(err)
	}
	if len(trials.Items) != len(sweepLearningRates) {
		t.Fatalf("the sweep made %d trials, want %d", len(trials.Items), len(sweepLearningRates))
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| trial | learningRate | accuracy | ran |\n| --- | --- | --- | --- |\n")
	best, bestName, seen := -1.0, "", map[string]bool{}
	for _, j := range trials.Items {
		lr := j.Spec.Hyperparameters.LearningRate
		m := j.Status.Metrics
		if j.Status.State != convoy.StateCompleted || m == nil || m.Accuracy == nil || lr == nil {
			t.Errorf("trial %s: state %s, metrics %+v, learningRate %v; want Completed with the accuracy it reached", j.Name, j.Status.State, m, lr)
			continue
		}
		seen[strconv.FormatFloat(*lr, 'g', -1, 64)] = true
		if *m.Accuracy > best {
			best, bestName = *m.Accuracy, j.Name
		}
		ran := "?"
		if j.Status.StartTime != nil && j.Status.CompletionTime != nil {
			ran = j.Status.CompletionTime.Sub(j.Status.StartTime.Time).String()
		}
		fmt.Fprintf(&table, "| %s | %g | %.4f | %s |\n", j.Name, *lr, *m.Accuracy, ran)
	}
	t.Logf("4-trial grid sweep of the digits example on the real nodes, all done in %s:\n%s", took.Round(time.Second), table.String())
	for _, lr := range sweepLearningRates {
		f, _ := strconv.ParseFloat(lr, 64)
		if !seen[strconv.FormatFloat(f, 'g', -1, 64)] {
			t.Errorf("no completed trial ran learningRate %s; trials ran %v", lr, seen)
		}
	}

	bt := sw.Status.BestTrial
	if bt == nil || bt.Name != bestName || bt.Value != best {
		t.Fatalf("status.bestTrial = %+v, want %s with accuracy %v, the best of the trials", bt, bestName, best)
	}
	if sw.Status.SucceededTrials != int32(len(sweepLearningRates)) {
		t.Errorf("status.succeededTrials = %d, want %d", sw.Status.SucceededTrials, len(sweepLearningRates))
	}
	out, err := e.Kubectl(ctx, "get", "sweep", "-n", ns, "digits-lr", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get sweep -o wide:\n%s", out)
	if !regexp.MustCompile(`\bSucceeded\b.*\b` + regexp.QuoteMeta(bestName) + `\b`).MatchString(out) {
		t.Errorf("kubectl get sweep does not show Succeeded and the best trial %s:\n%s", bestName, out)
	}
}
