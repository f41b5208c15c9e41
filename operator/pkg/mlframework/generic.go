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

package mlframework

import (
	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func init() { Register(convoy.FrameworkGeneric, generic{}) }

// generic tells each worker only its rank and the gang's size, for code that rendezvouses its own way.
type generic struct{ Workers }

func (generic) DefaultImage() string { return "python:3.12-slim" }

func (generic) Configure(job *convoy.TrainingJob, r Replica, pod *corev1.Pod) {
	SetEnv(pod, "RANK", itoa(r.Rank), "WORLD_SIZE", itoa(job.Spec.NumWorkers))
}
