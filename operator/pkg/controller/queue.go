package controller

import (
	"context"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Queue tells the reconciler what the queueing system knows of a job that names a queue. Kueue
// admits a job by setting spec.suspend to false (and injecting node selectors and tolerations into
// spec.scheduling); the reconciler only needs the words to show while the job waits and the
// admission to record once it runs. The queue package implements it from the job's Workload.
type Queue interface {
	Status(ctx context.Context, job *convoy.TrainingJob) (QueueStatus, error)
}

// QueueStatus is what a Queue reports.
type QueueStatus struct {
	// WaitingMessage is the Queued condition's message while the job waits, for example
	// "ClusterQueue team-a lacks 16 nvidia.com/gpu". Empty gives a generic message.
	WaitingMessage string
	// Admission becomes status.admission once the job is admitted.
	Admission *convoy.AdmissionStatus
}
