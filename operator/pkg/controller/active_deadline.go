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
	"time"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// activeDeadline is the phase of spec.failurePolicy.activeDeadlineSeconds: a gang that has run
// that long since status.startTime (running time only: a suspended job's clock starts again)
// fails with DeadlineExceeded; before, the job is looked at again when it will have.
func (d *decision) activeDeadline() bool {
	fp := d.job.Spec.FailurePolicy
	if fp == nil || fp.ActiveDeadlineSeconds == nil || d.st.StartTime == nil {
		return false
	}
	deadline := time.Duration(*fp.ActiveDeadlineSeconds) * time.Second
	if left := d.st.StartTime.Add(deadline).Sub(d.o.now); left > 0 {
		d.p.requeue(left)
		return false
	}
	d.finish(convoy.ConditionFailed, convoy.ReasonDeadlineExceeded, fmt.Sprintf(
		"the job ran longer than spec.failurePolicy.activeDeadlineSeconds (%ds): raise it, or resume from the latest checkpoint in a new job", *fp.ActiveDeadlineSeconds))
	return true
}
