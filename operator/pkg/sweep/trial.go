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
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// AnnotationTrialRung is the hyperband rung a trial works towards (0 is the first); with
// AnnotationTrialPaused set it waits at that rung for a promotion.
const (
	AnnotationTrialRung   = "convoy.dev/trial-rung"
	AnnotationTrialPaused = "convoy.dev/trial-paused"
	// LabelTrialIndex is the trial's number in its sweep.
	LabelTrialIndex = "convoy.dev/trial-index"
)

// placeholder matches ${trialParameters.<name>}.
var placeholder = regexp.MustCompile(`\$\{trialParameters\.([^}]*)\}`)

// TrialName is the name of the sweep's index-th trial.
func TrialName(sweep string, index int) string { return sweep + "-" + strconv.Itoa(index) }

// TrialJob builds the TrainingJob of a new trial: the template with the trial's values in place of
// its placeholders, owned by the sweep, queued in the template's queue with the template's
// priority class, or "low" when it names none.
func TrialJob(sw *convoy.TrainingSweep, t NewTrial) (*convoy.TrainingJob, error) {
	values := map[string]string{}
	for _, a := range t.Assignments {
		values[a.Name] = a.Value
	}
	spec := sw.Spec.TrialTemplate.Spec.DeepCopy()
	subst := func(field, s string) (string, error) {
		var err error
		out := placeholder.ReplaceAllStringFunc(s, func(m string) string {
			name := placeholder.FindStringSubmatch(m)[1]
			v, ok := values[name]
			if !ok && err == nil {
				err = fmt.Errorf("spec.trialTemplate.spec.%s refers to ${trialParameters.%s}, which is not in spec.parameters: add the parameter or fix the name", field, name)
			}
			return v
		})
		return out, err
	}
	var err error
	for i := range spec.Args {
		if spec.Args[i], err = subst("args", spec.Args[i]); err != nil {
			return nil, err
		}
	}
	for i := range spec.Command {
		if spec.Command[i], err = subst("command", spec.Command[i]); err != nil {
			return nil, err
		}
	}
	for i := range spec.Env {
		if spec.Env[i].Value, err = subst("env", spec.Env[i].Value); err != nil {
			return nil, err
		}
	}
	if hp := spec.Hyperparameters; hp != nil {
		for k, v := range hp.AdditionalParams {
			if hp.AdditionalParams[k], err = subst("hyperparameters.additionalParams", v); err != nil {
				return nil, err
			}
		}
		if hp.Optimizer, err = subst("hyperparameters.optimizer", hp.Optimizer); err != nil {
			return nil, err
		}
	}
	if err := setTypedHyperparameters(spec, values); err != nil {
		return nil, err
	}
	if spec.Scheduling == nil {
		spec.Scheduling = &convoy.SchedulingSpec{}
	}
	if spec.Scheduling.PriorityClassName == "" && spec.Scheduling.Priority == "" {
		spec.Scheduling.PriorityClassName = defaultTrialPriority
	}

	params, err := json.Marshal(t.Assignments)
	if err != nil {
		return nil, err
	}
	job := &convoy.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   sw.Namespace,
			Name:        TrialName(sw.Name, t.Index),
			Labels:      map[string]string{},
			Annotations: map[string]string{},
		},
		Spec: *spec,
	}
	if m := sw.Spec.TrialTemplate.Metadata; m != nil {
		for k, v := range m.Labels {
			job.Labels[k] = v
		}
		for k, v := range m.Annotations {
			job.Annotations[k] = v
		}
	}
	job.Labels[convoy.LabelSweepName] = sw.Name
	job.Labels[LabelTrialIndex] = strconv.Itoa(t.Index)
	job.Annotations[convoy.AnnotationTrialParameters] = string(params)
	if sw.Spec.Algorithm.AlgorithmName == convoy.AlgorithmHyperband {
		job.Annotations[AnnotationTrialRung] = "0"
	}
	job.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sw, convoy.GroupVersion.WithKind("TrainingSweep"))}
	return job, nil
}

// setTypedHyperparameters sets the hyperparameters a parameter of the same name stands for.
func setTypedHyperparameters(spec *convoy.TrainingJobSpec, values map[string]string) error {
	ints := map[string]func(hp *convoy.Hyperparameters) **int32{
		"batchSize":                 func(hp *convoy.Hyperparameters) **int32 { return &hp.BatchSize },
		"warmupSteps":               func(hp *convoy.Hyperparameters) **int32 { return &hp.WarmupSteps },
		"gradientAccumulationSteps": func(hp *convoy.Hyperparameters) **int32 { return &hp.GradientAccumulationSteps },
	}
	for name, v := range values {
		field, isInt := ints[name]
		if name != "learningRate" && !isInt {
			continue
		}
		if spec.Hyperparameters == nil {
			spec.Hyperparameters = &convoy.Hyperparameters{}
		}
		if name == "learningRate" {
			lr, err := strconv.ParseFloat(v, 64)
			if err != nil || lr <= 0 {
				return fmt.Errorf("parameter learningRate sets spec.hyperparameters.learningRate, which must be a number above 0, not %q: change its feasibleSpace", v)
			}
			spec.Hyperparameters.LearningRate = ptr.To(lr)
			continue
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("parameter %s sets spec.hyperparameters.%s, which must be a whole number, not %q: make it an int parameter", name, name, v)
		}
		*field(spec.Hyperparameters) = ptr.To(int32(n))
	}
	return nil
}
