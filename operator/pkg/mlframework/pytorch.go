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
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func init() { Register(convoy.FrameworkPyTorch, pytorch{}) }

// pytorch wires torchrun's static rendezvous as Kubeflow's PyTorchJob does: one node per worker
// pod, gpusPerWorker processes per node, rank 0 as master. The PET_ variables are torchrun's
// arguments; MASTER_ADDR, RANK and WORLD_SIZE (in nodes) serve scripts that call
// init_process_group without torchrun.
type pytorch struct{ Workers }

func (pytorch) DefaultImage() string { return "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime" }

func (pytorch) Configure(job *convoy.TrainingJob, r Replica, pod *corev1.Pod) {
	if job.IsElastic() {
		configureElastic(job, r, pod)
		return
	}
	master := Host(job, Master)
	port := itoa(job.MasterPort())
	nodes := itoa(job.Spec.NumWorkers)
	rank := itoa(r.Rank)
	SetEnv(pod,
		"MASTER_ADDR", master,
		"MASTER_PORT", port,
		"WORLD_SIZE", nodes,
		"RANK", rank,
		"NODE_RANK", rank,
		"PET_MASTER_ADDR", master,
		"PET_MASTER_PORT", port,
		"PET_NNODES", nodes,
		"PET_NPROC_PER_NODE", strconv.Itoa(int(max(job.GPUsPerWorker(), 1))),
		"PET_NODE_RANK", rank,
	)
	if r == Master {
		AddPort(pod, "rendezvous", job.MasterPort())
	}
}

// ElasticMaxRestarts is torchrun's --max-restarts for an elastic gang: every resize is one
// restart of the workers' processes, so it is far above what cooldowns allow in a job's life.
const ElasticMaxRestarts = 1000

// configureElastic wires torchrun's elastic rendezvous: the c10d store on worker 0, between
// minWorkers and numWorkers nodes, the job's UID as the rendezvous id. torchrun sets RANK and
// WORLD_SIZE for each process after every rendezvous, so the pod has none of its own; worker 0
// is never removed by a shrink, so its DNS name stays the endpoint. Worker 0 is told it hosts the
// store (PET_RDZV_CONF is_host=1, after what spec.env set): torchrun would host it only where the
// endpoint's host matches the machine's name or FQDN, and a pod's FQDN ends in the cluster domain
// where the endpoint's does not.
//
// TORCH_DISABLE_SHARE_RDZV_TCP_STORE: PyTorch 2's agents share one TCPStore whose address rank 0
// writes under the first round's key only, so a node that joins a later round (a grown gang) waits
// for it forever; without sharing each round publishes its own. PyTorch 1 ignores the variable.
func configureElastic(job *convoy.TrainingJob, r Replica, pod *corev1.Pod) {
	SetEnv(pod,
		"PET_NNODES", itoa(job.ElasticMinWorkers())+":"+itoa(job.Spec.NumWorkers),
		"PET_NPROC_PER_NODE", strconv.Itoa(int(max(job.GPUsPerWorker(), 1))),
		"PET_RDZV_BACKEND", "c10d",
		"PET_RDZV_ENDPOINT", Host(job, Master)+":"+strconv.Itoa(convoy.ElasticRendezvousPort),
		"PET_RDZV_ID", string(job.UID),
		"PET_MAX_RESTARTS", strconv.Itoa(ElasticMaxRestarts),
		"TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1",
	)
	if r == Master {
		AddPort(pod, "rendezvous", convoy.ElasticRendezvousPort)
		if conf := envOf(pod, "PET_RDZV_CONF"); !strings.Contains(conf, "is_host") {
			SetEnv(pod, "PET_RDZV_CONF", strings.TrimPrefix(conf+",is_host=1", ","))
		}
	}
}

// envOf is the value of the pod's first container's variable name, "" when it has none.
func envOf(pod *corev1.Pod, name string) string {
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}
