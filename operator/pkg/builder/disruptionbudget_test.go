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

package builder

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestDisruptionBudget: the budget holds the whole gang of every attempt, and selects neither the
// job's publish pod nor another job's gang.
func TestDisruptionBudget(t *testing.T) {
	base := utiltesting.MakeTrainingJob("llm", "team-a").Workers(3).
		Checkpoint(convoy.CheckpointSpec{Enabled: true}).
		Output(convoy.ModelOutput{Image: "registry.example.com/team/llm:v1"}).
		Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "/checkpoints/team-a/llm/epoch-3", Epoch: 3}})
	p := plugin(t, convoy.FrameworkPyTorch)
	on := Options{DisruptionBudget: true, PublishImage: "convoy-operator:v1"}

	if pdb := DisruptionBudget(base.Clone().Obj(), p, Options{}); pdb != nil {
		t.Errorf("DisruptionBudget() without Options.DisruptionBudget = %v, want nil", pdb)
	}
	pdb := DisruptionBudget(base.Clone().Obj(), p, on)
	if got := pdb.Spec.MinAvailable.IntValue(); got != 3 {
		t.Errorf("minAvailable = %d, want the gang's 3 pods", got)
	}
	selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	selects := func(name string, l map[string]string, want bool) {
		t.Helper()
		if got := selector.Matches(labels.Set(l)); got != want {
			t.Errorf("the budget selects %s (labels %v): %v, want %v", name, l, got, want)
		}
	}
	for _, restarts := range []int32{0, 2} {
		job := base.Clone().Obj()
		job.Status.RestartCount = restarts
		for _, r := range p.Replicas(job) {
			pod := Pod(job, r, p, on)
			selects(pod.Name, pod.Labels, true)
		}
	}
	publish, err := PublishPod(base.Clone().Obj(), on)
	if err != nil {
		t.Fatal(err)
	}
	selects("the publish pod", publish.Labels, false)
	other := utiltesting.MakeTrainingJob("llm-2", "team-a").Workers(3).Obj()
	selects("another job's pod", Pod(other, mlframework.Replica{Role: mlframework.RoleWorker}, p, on).Labels, false)
}
