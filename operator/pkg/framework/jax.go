package framework

import (
	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func init() { Register(convoy.FrameworkJAX, jax{}) }

// jax sets the variables jax.distributed.initialize() reads: one process per worker pod, with
// worker 0 as coordinator.
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
