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

package progress

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// ApplyReport folds a progress report into the job's status: epoch, progress, metrics and the best
// metric early stopping counts from.
func ApplyReport(job *convoy.TrainingJob, st *convoy.TrainingJobStatus, r *Report) {
	if r.Epoch != nil {
		st.CurrentEpoch = *r.Epoch
	}
	switch {
	case r.TotalEpochs != nil:
		st.TotalEpochs = *r.TotalEpochs
	case st.TotalEpochs == 0 && job.Spec.Hyperparameters != nil && job.Spec.Hyperparameters.Epochs != nil:
		st.TotalEpochs = *job.Spec.Hyperparameters.Epochs
	}
	if st.TotalEpochs > 0 {
		st.Progress = fmt.Sprintf("%d%%", min(100, int64(st.CurrentEpoch)*100/int64(st.TotalEpochs)))
	}
	if r.SamplesPerSecond != nil {
		observeThroughput(job, st, *r.SamplesPerSecond)
	}
	if r.Step == nil && len(r.Metrics) == 0 {
		return
	}
	if st.Metrics == nil {
		st.Metrics = &convoy.TrainingMetrics{}
	}
	m := st.Metrics
	if r.Step != nil {
		m.Step = *r.Step
	}
	others := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(r.Metrics)) {
		v := r.Metrics[k]
		switch k {
		case "loss":
			m.Loss = ptr.To(v)
		case "accuracy":
			m.Accuracy = ptr.To(v)
		default:
			others[k] = strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	if len(others) > 0 {
		m.Additional = others
	}
	// Accuracy, once reported, is what early stopping watches; until then the loss.
	if acc, ok := r.Metrics["accuracy"]; ok {
		if b := st.Best; b == nil || b.Name != "accuracy" || acc > b.Value {
			st.Best = &convoy.BestMetric{Name: "accuracy", Value: acc, Epoch: st.CurrentEpoch}
		}
	} else if loss, ok := r.Metrics["loss"]; ok {
		if b := st.Best; b == nil || b.Name == "loss" && loss < b.Value {
			st.Best = &convoy.BestMetric{Name: "loss", Value: loss, Epoch: st.CurrentEpoch}
		}
	}
}

// throughputWindow is the most reports a size's mean weighs as one: later reports move it, so
// that it follows a job whose speed drifts.
const throughputWindow = 20

// observeThroughput folds a report's samples per second into the mean of the elastic job's
// current size (status.elastic.throughput). Reports while the gang resizes, or of a job that
// is not elastic, are not recorded: their size is not known.
func observeThroughput(job *convoy.TrainingJob, st *convoy.TrainingJobStatus, v float64) {
	e := st.Elastic
	if !job.IsElastic() || e == nil || e.CurrentWorkers == 0 || e.CurrentWorkers != e.TargetWorkers {
		return
	}
	i := slices.IndexFunc(e.Throughput, func(t convoy.SizeThroughput) bool { return t.Workers == e.CurrentWorkers })
	if i < 0 {
		e.Throughput = append(e.Throughput, convoy.SizeThroughput{Workers: e.CurrentWorkers})
		slices.SortFunc(e.Throughput, func(a, b convoy.SizeThroughput) int { return int(a.Workers - b.Workers) })
		i = slices.IndexFunc(e.Throughput, func(t convoy.SizeThroughput) bool { return t.Workers == e.CurrentWorkers })
	}
	t := &e.Throughput[i]
	n := float64(min(t.Reports, throughputWindow))
	t.SamplesPerSecond = (t.SamplesPerSecond*n + v) / (n + 1)
	t.Reports++
}

// ApplyCheckpoint records c, reported by a pod of the gang's attempt, as the job's latest
// checkpoint, which a restarted gang resumes from.
func ApplyCheckpoint(st *convoy.TrainingJobStatus, c *Checkpoint, attempt int32, now time.Time) {
	// Times are stored to the second, and the operator stops a gang it asked for a checkpoint once
	// one of a later second than the request is recorded: a checkpoint that answers the request
	// within the request's own second is stamped with the next second.
	if req := meta.FindStatusCondition(st.Conditions, convoy.ConditionCheckpointRequested); req != nil && req.Status == metav1.ConditionTrue {
		if next := req.LastTransitionTime.Truncate(time.Second).Add(time.Second); now.Before(next) {
			now = next
		}
	}
	st.Checkpoint = &convoy.CheckpointStatus{Latest: c.Path, Epoch: c.Epoch, Time: ptr.To(metav1.NewTime(now)), Attempt: attempt}
}

// ApplyTracking records the job's tracker run: the MLflow run id and the run's URL, each only
// where none is recorded yet (refuse turns a different one away first). It returns whether the
// status changed.
func ApplyTracking(st *convoy.TrainingJobStatus, t *Tracking) bool {
	if st.Tracking == nil {
		st.Tracking = &convoy.TrackingStatus{}
	}
	changed := false
	if st.Tracking.MLflowRunID == "" && t.MLflowRunID != "" {
		st.Tracking.MLflowRunID, changed = t.MLflowRunID, true
	}
	if st.Tracking.URL == "" && t.URL != "" {
		st.Tracking.URL, changed = t.URL, true
	}
	return changed
}
