package framework

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
