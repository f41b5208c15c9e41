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
