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

func init() { Register(convoy.FrameworkMXNet, mxnet{}) }

// mxnet runs MXNet's dist kvstore: a scheduler pod, numParameterServers servers (role ps) and the
// workers, told apart by DMLC_ROLE and all pointed at the scheduler.
type mxnet struct{ Workers }

func (mxnet) DefaultImage() string { return "mxnet/python:1.9.1_gpu_cu112_py3" }

// scheduler is MXNet's rendezvous pod.
var scheduler = Replica{Role: RoleScheduler}

func (mxnet) Replicas(job *convoy.TrainingJob) []Replica {
	out := append([]Replica{scheduler}, replicas(RolePS, job.Spec.NumParameterServers)...)
	return append(out, replicas(RoleWorker, job.Spec.NumWorkers)...)
}

func (mxnet) Configure(job *convoy.TrainingJob, r Replica, pod *corev1.Pod) {
	role := map[Role]string{RoleWorker: "worker", RolePS: "server", RoleScheduler: "scheduler"}[r.Role]
	SetEnv(pod,
		"DMLC_ROLE", role,
		"DMLC_PS_ROOT_URI", Host(job, scheduler),
		"DMLC_PS_ROOT_PORT", itoa(job.MasterPort()),
		"DMLC_NUM_SERVER", itoa(job.Spec.NumParameterServers),
		"DMLC_NUM_WORKER", itoa(job.Spec.NumWorkers),
	)
	if r.Role == RoleWorker {
		SetEnv(pod, "DMLC_WORKER_ID", itoa(r.Rank))
	}
	if r == scheduler {
		AddPort(pod, "dmlc", job.MasterPort())
	}
}
