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
	"cmp"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// suspend is the phase of a job with spec.suspend true: its gang is stopped. Without a queue it is
// Suspended; with one it is Queued, waiting for Kueue to admit it, and Preempted when Kueue
// evicted it for another workload.
func (d *decision) suspend() bool {
	if !d.job.IsSuspended() {
		return false
	}
	queue, queued := d.job.QueueName(), d.o.queue.Managed || d.job.QueueName() != ""
	// A gang stopped while it has pods (by the user, or by Kueue evicting or preempting it) is
	// restarted when it resumes: counted once, as it stops, and not against the backoff limit.
	// Its next pods are the next attempt's.
	if !d.isTrue(convoy.ConditionSuspended) && !d.isTrue(convoy.ConditionQueued) && len(d.o.pods) > 0 {
		why := "spec.suspend is true"
		if queued {
			why = cmp.Or(d.o.queue.Preempted, "Kueue evicted the job from LocalQueue "+queue)
		}
		if wait := checkpointFirst(d.job, d.st, d.o.pods, d.o.now, why, gangStops); wait > 0 {
			d.p.requeue(wait)
			return true
		}
		d.st.RestartCount++
	}
	if queued {
		msg := d.o.queue.WaitingMessage
		switch {
		case msg != "":
		case queue == "":
			msg = fmt.Sprintf("Kueue manages the jobs of namespace %s, and the job names no LocalQueue while the namespace has no LocalQueue \"default\": name one in spec.scheduling.queue", d.job.Namespace)
		default:
			msg = fmt.Sprintf("waiting for Kueue to admit the job to LocalQueue %q; `kubectl get workloads -n %s` shows why it waits", queue, d.job.Namespace)
		}
		d.set(convoy.ConditionQueued, metav1.ConditionTrue, convoy.ReasonWaitingForAdmission, msg)
		d.set(convoy.ConditionAdmitted, metav1.ConditionFalse, convoy.ReasonWaitingForAdmission, msg)
		d.st.Admission = nil
		if d.o.queue.Preempted != "" {
			d.set(convoy.ConditionPreempted, metav1.ConditionTrue, convoy.ReasonPreempted, d.o.queue.Preempted)
		}
	} else {
		d.set(convoy.ConditionSuspended, metav1.ConditionTrue, convoy.ReasonUserSuspended,
			"spec.suspend is true: the gang's pods are deleted; set it to false to resume from the latest checkpoint")
	}
	d.stopGang()
	// activeDeadlineSeconds counts running time only, as batch/v1 Job's does.
	d.st.StartTime = nil
	// Kueue keeps an evicted job's quota until no pod of it is active: count them until gone.
	d.st.Workers = countWorkers(d.o.pods)
	d.deleteAll()
	return true
}
