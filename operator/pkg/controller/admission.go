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
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// admission is the phase of a job that is not suspended: it is Admitted, by Kueue to its
// LocalQueue or at once when no queue manages it. A job the queue manages runs only once the queue
// admits it (Kueue: its Workload is admitted), whatever spec.suspend says: a user who sets
// spec.suspend to false does not start it. A gang that was Suspended or Queued starts again only
// once its stopped pods are gone: the next attempt's pods take their names.
func (d *decision) admission() bool {
	queue := d.job.QueueName()
	switch {
	case d.o.queue.Managed && !d.o.queue.Admitted:
		msg := "spec.suspend is false, but Kueue has not admitted the job's Workload: no pod is created until it does"
		if w := d.o.queue.WaitingMessage; w != "" {
			msg += "; " + w
		}
		d.set(convoy.ConditionQueued, metav1.ConditionTrue, convoy.ReasonWaitingForAdmission, msg)
		d.set(convoy.ConditionAdmitted, metav1.ConditionFalse, convoy.ReasonWaitingForAdmission, msg)
		d.st.Admission = nil
		return true
	case d.o.queue.Managed || queue != "":
		d.set(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonAdmitted,
			fmt.Sprintf("admitted to LocalQueue %q: spec.suspend is false", queue))
		d.st.Admission = d.o.queue.Admission
	default:
		d.set(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, "no queue is named: the job runs at once")
	}
	if d.isTrue(convoy.ConditionSuspended) || d.isTrue(convoy.ConditionQueued) {
		if len(d.o.pods) > 0 {
			d.deleteAll()
			return true
		}
		d.clear(convoy.ConditionSuspended, convoy.ReasonResumed, "spec.suspend is false: the gang starts again from the latest checkpoint")
		d.clear(convoy.ConditionQueued, convoy.ReasonAdmitted, "admitted")
	}
	return false
}
