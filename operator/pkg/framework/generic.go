package framework

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
