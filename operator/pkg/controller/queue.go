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

package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Queue tells the reconciler what the queueing system knows of a job: whether the job is the
// queue's (it names a queue, or the queue manages jobs without one in its namespace) and, for one
// that is, whether it is admitted. Kueue admits a job by admitting its Workload, then setting
// spec.suspend to false (and injecting node selectors and tolerations into spec.scheduling); the
// reconciler creates pods only for an admitted job, whatever spec.suspend says. The queue package
// implements it from the job's Workload.
type Queue interface {
	Status(ctx context.Context, job *convoy.TrainingJob) (QueueStatus, error)
}

// QueueStatus is what a Queue reports.
type QueueStatus struct {
	// Managed is true when the job is the queue's: it waits for admission and runs only once
	// Admitted. False for a job the queue leaves alone, which runs at once.
	Managed bool
	// Admitted is true while the queue admits a Managed job (Kueue: its Workload is admitted).
	Admitted bool
	// WaitingMessage is the Queued condition's message while the job waits, for example
	// "ClusterQueue team-a lacks 16 nvidia.com/gpu". Empty gives a generic message.
	WaitingMessage string
	// Admission becomes status.admission once the job is admitted.
	Admission *convoy.AdmissionStatus
	// Preempted is the Preempted condition's message while the queue holds the job back after a
	// preemption: by whom and why. Empty when the job was not preempted.
	Preempted string
	// GrowWaiting, while an admitted elastic job's grow waits for the queue to admit the larger
	// size, says why it waits, as WaitingMessage does; empty when no grow waits.
	GrowWaiting string
	// Move, while the queue admitted an elastic job's grow by moving the whole gang (the message of
	// convoy-scheduler's placement check: convoy.ElasticMoveMessage), is that message; empty
	// otherwise.
	Move string
}

// ManagedQueue is a Queue that runs its own controllers in the operator's manager (Kueue's job
// reconciler, the queue webhook) and whose verdict lives in objects the jobs control (Kueue's
// Workloads). SetupWithManager sets it up before the TrainingJob controller, which then watches
// the Owned objects so that a change of the verdict reaches the job's status.
type ManagedQueue interface {
	Queue
	SetupWithManager(ctx context.Context, mgr ctrl.Manager) error
	Owned() client.Object
}
