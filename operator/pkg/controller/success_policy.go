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

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// successPolicy is the phase of a gang that succeeded: every pod that must succeed exited 0 (every
// worker; MPI's launcher alone), or the reported metrics meet spec.successPolicy (targetAccuracy,
// earlyStoppingPatience). The job completes; pods still running are stopped.
func (d *decision) successPolicy() bool {
	if d.t.allSucceeded {
		d.finish(convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded, "every worker exited 0")
		return true
	}
	if reason, message, ok := earlySuccess(d.job, d.st); ok {
		d.finish(convoy.ConditionCompleted, reason, message)
		return true
	}
	return false
}

// earlySuccess applies spec.successPolicy to the reported metrics.
func earlySuccess(job *convoy.TrainingJob, st *convoy.TrainingJobStatus) (reason, message string, ok bool) {
	sp := job.Spec.SuccessPolicy
	if sp == nil {
		return "", "", false
	}
	if m := st.Metrics; sp.TargetAccuracy != nil && m != nil && m.Accuracy != nil && *m.Accuracy >= *sp.TargetAccuracy {
		return convoy.ReasonTargetAccuracy, fmt.Sprintf("reported accuracy %g reached spec.successPolicy.targetAccuracy %g at epoch %d",
			*m.Accuracy, *sp.TargetAccuracy, st.CurrentEpoch), true
	}
	if b := st.Best; sp.EarlyStoppingPatience != nil && b != nil && st.CurrentEpoch-b.Epoch >= *sp.EarlyStoppingPatience {
		return convoy.ReasonEarlyStopping, fmt.Sprintf("%s has not improved on %g (epoch %d) for %d epochs (spec.successPolicy.earlyStoppingPatience)",
			b.Name, b.Value, b.Epoch, st.CurrentEpoch-b.Epoch), true
	}
	return "", "", false
}
