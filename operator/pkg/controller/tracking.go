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
	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// setWandbRun records the W&B run id the pods get as WANDB_RUN_ID in status.tracking, so that
// kubectl describe names the run before the training code logs anything.
func setWandbRun(job *convoy.TrainingJob, st *convoy.TrainingJobStatus) {
	if m := job.Spec.Monitoring; m == nil || m.WandbProject == "" {
		return
	}
	if st.Tracking == nil {
		st.Tracking = &convoy.TrackingStatus{}
	}
	st.Tracking.WandbRunID = job.WandbRunID()
}
