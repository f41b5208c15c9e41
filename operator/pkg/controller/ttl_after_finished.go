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
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// ttlAfterFinished is the phase of a finished job: nothing more is decided of it. Its finished pods
// stay for their logs and the others are stopped; spec.ttlSecondsAfterFinished after its
// completion the job itself is deleted, its children with it through the garbage collector, but
// not while its model is still to be published: the publish pod, a child, would go with it.
func (d *decision) ttlAfterFinished() bool {
	if !d.st.IsFinished() {
		return false
	}
	d.deleteWhere(isFinished)
	if ttl := d.job.Spec.TTLSecondsAfterFinished; ttl != nil && !publishing(d.job, d.st) {
		end := d.o.now
		if d.st.CompletionTime != nil {
			end = d.st.CompletionTime.Time
		}
		if left := end.Add(time.Duration(*ttl) * time.Second).Sub(d.o.now); left > 0 {
			d.p.requeue(left)
		} else {
			d.p.deleteJob = true
		}
	}
	return true
}

// publishing reports whether the job's model is still to be published: spec.output.model set, the
// job completed, and ModelPublished not yet true or failed. The publish pod's end reconciles the
// job again.
func publishing(job *convoy.TrainingJob, st *convoy.TrainingJobStatus) bool {
	if job.ModelImage() == "" || !meta.IsStatusConditionTrue(st.Conditions, convoy.ConditionCompleted) {
		return false
	}
	c := meta.FindStatusCondition(st.Conditions, convoy.ConditionModelPublished)
	return c == nil || c.Reason == convoy.ReasonPublishing
}
