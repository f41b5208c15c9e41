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

// Package progress is the operator's HTTPS endpoint that training code calls with its progress and
// checkpoints. Pods authenticate with a projected ServiceAccount token for Audience, which the
// server checks with a TokenReview; reports are accepted only from the job's own pods and folded
// into the TrainingJob's status. See operator/README.md for the protocol.
package progress

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
)

// Audience is the audience of the projected ServiceAccount token pods present; a token for the
// API server (or any other audience) is refused.
const Audience = "convoy.dev/progress"

// JobPath is the path of a job's endpoints; pods get the server's URL joined with it as
// CONVOY_PROGRESS_URL and post to CONVOY_PROGRESS_URL/progress and CONVOY_PROGRESS_URL/checkpoint.
func JobPath(namespace, name string) string {
	return "/v1/namespaces/" + namespace + "/trainingjobs/" + name
}

// Report is the body of POST .../progress.
type Report struct {
	// Epoch is the epoch the training code is in or has finished.
	Epoch *int32 `json:"epoch,omitempty"`
	// TotalEpochs is how many epochs the run will have; hyperparameters.epochs when omitted.
	TotalEpochs *int32 `json:"totalEpochs,omitempty"`
	// Step is the global step.
	Step *int64 `json:"step,omitempty"`
	// Metrics are the latest values by name; "loss" and "accuracy" have their own status fields and
	// drive the success policy.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// SamplesPerSecond is the whole gang's training throughput since the previous report; the
	// operator keeps its mean per gang size in status.elastic.throughput.
	SamplesPerSecond *float64 `json:"samplesPerSecond,omitempty"`
}

// Checkpoint is the body of POST .../checkpoint.
type Checkpoint struct {
	// Path is the checkpoint's path or URI, as CONVOY_RESUME_FROM will give it back.
	Path string `json:"path"`
	// Epoch is the epoch the checkpoint was taken at.
	Epoch int32 `json:"epoch"`
}

// Tracking is the body of POST .../tracking: the experiment-tracker run rank 0 created or
// resumed, which every later attempt of the job logs into. Only rank 0 of the current attempt may
// send it, and once the job has a run it does not change.
type Tracking struct {
	// MLflowRunID is the MLflow run's id; later attempts get it as MLFLOW_RUN_ID.
	MLflowRunID string `json:"mlflowRunId,omitempty"`
	// URL is the run's page in the tracker (MLflow's or W&B's).
	URL string `json:"url,omitempty"`
}

// Reply is the body of the answer to a progress report while the operator asks the gang for a
// checkpoint before stopping it (200; otherwise the answer is 204 with no body). The training code
// should write a checkpoint at once and report it: the gang is stopped when the checkpoint is
// reported, or at Deadline without it (spec.checkpoint.preemptionGraceSeconds).
type Reply struct {
	CheckpointRequested bool      `json:"checkpointRequested"`
	Deadline            time.Time `json:"deadline"`
}

// Limits of a report; the status fields they land in have the same bounds.
const (
	MaxMetrics   = 32
	MaxPathLen   = 2048
	maxMetricKey = 63
	MaxRunIDLen  = 256
)

// Validate returns an error a person can act on when the report cannot be recorded.
func (r *Report) Validate() error {
	if r.Epoch != nil && *r.Epoch < 0 {
		return fmt.Errorf("epoch must not be negative, got %d", *r.Epoch)
	}
	if r.TotalEpochs != nil && *r.TotalEpochs < 1 {
		return fmt.Errorf("totalEpochs must be at least 1, got %d", *r.TotalEpochs)
	}
	if r.Step != nil && *r.Step < 0 {
		return fmt.Errorf("step must not be negative, got %d", *r.Step)
	}
	if v := r.SamplesPerSecond; v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0) {
		return fmt.Errorf("samplesPerSecond is %v: report a finite number of samples per second, 0 or more", *v)
	}
	others := 0
	for k, v := range r.Metrics {
		if k == "" || len(k) > maxMetricKey {
			return fmt.Errorf("metric names must be 1 to %d characters, got %q", maxMetricKey, k)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("metric %q is %v: report finite numbers only", k, v)
		}
		if k == "accuracy" && (v < 0 || v > 1) {
			return fmt.Errorf("accuracy is %v: report a fraction between 0 and 1", v)
		}
		if k != "loss" && k != "accuracy" {
			others++
		}
	}
	if others > MaxMetrics {
		return fmt.Errorf("at most %d metrics besides loss and accuracy, got %d", MaxMetrics, others)
	}
	return nil
}

// Validate returns an error a person can act on when the checkpoint cannot be recorded.
func (c *Checkpoint) Validate() error {
	if c.Path == "" || len(c.Path) > MaxPathLen {
		return fmt.Errorf("path must be 1 to %d characters", MaxPathLen)
	}
	if c.Epoch < 0 {
		return fmt.Errorf("epoch must not be negative, got %d", c.Epoch)
	}
	return nil
}

// Validate returns an error a person can act on when the run cannot be recorded.
func (t *Tracking) Validate() error {
	if t.MLflowRunID == "" && t.URL == "" {
		return errors.New("report mlflowRunId, url or both")
	}
	if len(t.MLflowRunID) > MaxRunIDLen || strings.Trim(t.MLflowRunID, runIDChars) != "" {
		return fmt.Errorf("mlflowRunId must be at most %d letters, digits, '.', '_' or '-', got %q", MaxRunIDLen, t.MLflowRunID)
	}
	if t.URL != "" {
		u, err := url.Parse(t.URL)
		if err != nil || len(t.URL) > MaxPathLen || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url must be an http or https URL of at most %d characters, got %q", MaxPathLen, t.URL)
		}
	}
	return nil
}

const runIDChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
