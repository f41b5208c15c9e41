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

// Package metrics holds the operator's Prometheus metrics, served on the manager's metrics
// endpoint with controller-runtime's own. Names and labels are those of Convoy's seed design.
package metrics

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

var (
	reconciliations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_reconciliation_total",
		Help: "Reconciliations of TrainingJobs, by job and result (success, error).",
	}, []string{"namespace", "training_job", "result"})
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "trainingjob_reconciliation_duration_seconds",
		Help:    "How long one reconciliation of a TrainingJob took, by job.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"namespace", "training_job"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_reconciliation_errors_total",
		Help: "Failed reconciliations, by job and the kind of error (conflict, not_found, forbidden, invalid, timeout, other).",
	}, []string{"namespace", "training_job", "error_type"})
	jobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_total",
		Help: "TrainingJobs by namespace and state.",
	}, []string{"namespace", "state"})
	progressPercent = jobGauge("trainingjob_progress_percent", "Share of epochs done, from 0 to 100.")
	currentEpoch    = jobGauge("trainingjob_current_epoch", "Latest epoch reported by the training code.")
	allocatedGPUs   = jobGauge("trainingjob_allocated_gpus", "GPUs held by the job's running workers.")
	allocatedWorker = jobGauge("trainingjob_allocated_workers", "Running workers of the job.")
	loss            = jobGauge("trainingjob_loss", "Latest reported training loss.")
	accuracy        = jobGauge("trainingjob_accuracy", "Latest reported accuracy, from 0 to 1.")
	restarts        = jobGauge("trainingjob_restart_count", "Whole-gang restarts of the job so far, for any cause (status.restartCount).")
	durations       = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "trainingjob_duration_seconds",
		Help:    "Run time of finished TrainingJobs, from start to completion, by job and final state.",
		Buckets: prometheus.ExponentialBuckets(60, 2, 14),
	}, []string{"namespace", "training_job", "state"})
	created = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_created_total",
		Help: "TrainingJobs the operator has started handling, by namespace.",
	}, []string{"namespace"})
	completed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_completed_total",
		Help: "TrainingJobs that finished, by namespace and result (succeeded, failed).",
	}, []string{"namespace", "result"})
	failed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_failed_total",
		Help: "TrainingJobs that failed, by namespace and reason.",
	}, []string{"namespace", "reason"})

	gpuHours = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_gpu_hours_total",
		Help: "GPU-hours the job's pods held (status.cost.gpuHours).",
	}, []string{"namespace", "training_job"})
	costs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_cost_total",
		Help: "What the job's pods cost by the price list, in its currency (status.cost.amount).",
	}, []string{"namespace", "training_job"})

	perJob = []*prometheus.GaugeVec{progressPercent, currentEpoch, allocatedGPUs, allocatedWorker, loss, accuracy, restarts}
)

func jobGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"namespace", "training_job"})
}

func init() {
	ctrlmetrics.Registry.MustRegister(reconciliations, reconcileDuration, reconcileErrors, jobs, durations, created, completed, failed, gpuHours, costs)
	for _, g := range perJob {
		ctrlmetrics.Registry.MustRegister(g)
	}
}

// Recorder keeps the state of every job it has seen, so that trainingjob_total is a count and a
// job's series go with it.
type Recorder struct {
	mu     sync.Mutex
	states map[types.NamespacedName]convoy.TrainingJobState
	counts map[stateKey]int
	// counted is what the cost counters hold for each job: they add what its status adds.
	counted map[types.NamespacedName]costCount
}

type costCount struct{ gpuHours, amount float64 }

type stateKey struct {
	namespace string
	state     convoy.TrainingJobState
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{states: map[types.NamespacedName]convoy.TrainingJobState{}, counts: map[stateKey]int{}, counted: map[types.NamespacedName]costCount{}}
}

// ObserveReconcile counts one reconciliation and its error.
func (r *Recorder) ObserveReconcile(key types.NamespacedName, took time.Duration, err error) {
	reconcileDuration.WithLabelValues(key.Namespace, key.Name).Observe(took.Seconds())
	result := "success"
	if err != nil {
		result = "error"
		reconcileErrors.WithLabelValues(key.Namespace, key.Name, errorType(err)).Inc()
	}
	reconciliations.WithLabelValues(key.Namespace, key.Name, result).Inc()
}

func errorType(err error) string {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsConflict(err):
		return "conflict"
	case apierrors.IsNotFound(err):
		return "not_found"
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.IsInvalid(err):
		return "invalid"
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err):
		return "timeout"
	case errors.As(err, &status):
		return strings.ToLower(string(status.Status().Reason))
	}
	return "other"
}

// ObserveJob records a job's status after a reconcile wrote it: per-job gauges, the count by
// state, and, when this write finished the job, its outcome. old is the status before the write.
func (r *Recorder) ObserveJob(job *convoy.TrainingJob, old *convoy.TrainingJobStatus) {
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	st := &job.Status
	r.mu.Lock()
	prev, seen := r.states[key]
	r.states[key] = st.State
	if !seen || prev != st.State {
		if seen {
			r.add(job.Namespace, prev, -1)
		}
		r.add(job.Namespace, st.State, 1)
	}
	if c := st.Cost; c != nil {
		was := r.counted[key]
		now := costCount{gpuHours: max(c.GPUHours, was.gpuHours), amount: was.amount}
		if c.Amount != nil {
			now.amount = max(*c.Amount, was.amount)
		}
		gpuHours.WithLabelValues(job.Namespace, job.Name).Add(now.gpuHours - was.gpuHours)
		costs.WithLabelValues(job.Namespace, job.Name).Add(now.amount - was.amount)
		r.counted[key] = now
	}
	r.mu.Unlock()

	if len(old.Conditions) == 0 && len(st.Conditions) > 0 {
		created.WithLabelValues(job.Namespace).Inc()
	}
	if !old.IsFinished() && st.IsFinished() {
		if st.State == convoy.StateFailed {
			completed.WithLabelValues(job.Namespace, "failed").Inc()
			failed.WithLabelValues(job.Namespace, st.FailureReason).Inc()
		} else {
			completed.WithLabelValues(job.Namespace, "succeeded").Inc()
		}
		if st.StartTime != nil && st.CompletionTime != nil {
			durations.WithLabelValues(job.Namespace, job.Name, string(st.State)).Observe(st.CompletionTime.Sub(st.StartTime.Time).Seconds())
		}
	}

	ns, name := job.Namespace, job.Name
	if pct, err := strconv.ParseFloat(strings.TrimSuffix(st.Progress, "%"), 64); err == nil {
		progressPercent.WithLabelValues(ns, name).Set(pct)
	}
	currentEpoch.WithLabelValues(ns, name).Set(float64(st.CurrentEpoch))
	allocatedWorker.WithLabelValues(ns, name).Set(float64(st.Workers.Active))
	allocatedGPUs.WithLabelValues(ns, name).Set(float64(st.Workers.Active * job.GPUsPerWorker()))
	restarts.WithLabelValues(ns, name).Set(float64(st.RestartCount))
	if m := st.Metrics; m != nil {
		if m.Loss != nil {
			loss.WithLabelValues(ns, name).Set(*m.Loss)
		}
		if m.Accuracy != nil {
			accuracy.WithLabelValues(ns, name).Set(*m.Accuracy)
		}
	}
}

func (r *Recorder) add(namespace string, state convoy.TrainingJobState, delta int) {
	k := stateKey{namespace, state}
	r.counts[k] += delta
	jobs.WithLabelValues(namespace, string(state)).Set(float64(r.counts[k]))
}

// Forget deletes a job's series once the job is gone.
func (r *Recorder) Forget(key types.NamespacedName) {
	r.mu.Lock()
	if prev, seen := r.states[key]; seen {
		delete(r.states, key)
		r.add(key.Namespace, prev, -1)
	}
	delete(r.counted, key)
	r.mu.Unlock()
	labels := prometheus.Labels{"namespace": key.Namespace, "training_job": key.Name}
	reconciliations.DeletePartialMatch(labels)
	reconcileDuration.Delete(labels)
	reconcileErrors.DeletePartialMatch(labels)
	durations.DeletePartialMatch(labels)
	gpuHours.Delete(labels)
	costs.Delete(labels)
	for _, g := range perJob {
		g.Delete(labels)
	}
}
