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
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// ValidateHyperparameters refuses spec.hyperparameters.additionalParams whose names would become
// the same variable and ConfigMap key (EnvName) as another entry's or as a named hyperparameter's:
// one of the values would be lost.
func ValidateHyperparameters(job *convoy.TrainingJob) field.ErrorList {
	hp := job.Spec.Hyperparameters
	if hp == nil || len(hp.AdditionalParams) == 0 {
		return nil
	}
	named := job.DeepCopy()
	named.Spec.Hyperparameters.AdditionalParams = nil
	taken := map[string]string{}
	for _, kv := range hyperparameterEnv(named) {
		taken[kv.name] = "a hyperparameter of spec.hyperparameters"
	}
	path := field.NewPath("spec", "hyperparameters", "additionalParams")
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(hp.AdditionalParams)) {
		name := EnvName(k)
		if other, ok := taken[name]; ok {
			errs = append(errs, field.Invalid(path.Key(k), k, fmt.Sprintf(
				"becomes the variable %s, as %s does, and one value would be lost: rename one of them", name, other)))
			continue
		}
		taken[name] = fmt.Sprintf("additionalParams %q", k)
	}
	return errs
}
