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

func init() { Register(convoy.FrameworkJAX, jax{}) }

// jax sets the coordinator, the process count and this pod's process ID: one process per worker
// pod, with worker 0 as coordinator. jax.distributed.initialize() reads only
// JAX_COORDINATOR_ADDRESS by itself; the script passes the other two (see the operator's README),
// as with Kubeflow Trainer's JAX runtime.
type jax struct{ Workers }

func (jax) DefaultImage() string { return "nvcr.io/nvidia/jax:24.10-py3" }

func (jax) Configure(job *convoy.TrainingJob, r Replica, pod *corev1.Pod) {
	SetEnv(pod,
		"JAX_COORDINATOR_ADDRESS", HostPort(job, Master),
		"JAX_NUM_PROCESSES", itoa(job.Spec.NumWorkers),
		"JAX_PROCESS_ID", itoa(r.Rank),
	)
	if r == Master {
		AddPort(pod, "coordinator", job.MasterPort())
	}
}
