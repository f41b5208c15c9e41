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

package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func job(ns, name string, state convoy.TrainingJobState, conds ...string) *convoy.TrainingJob {
	j := &convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: convoy.TrainingJobSpec{NumWorkers: 2, GPUsPerWorker: ptr.To[int32](8)}}
	j.Status.State = state
	for _, c := range conds {
		meta.SetStatusCondition(&j.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "Test"})
	}
	return j
}

func TestRecorderCountsStatesAndForgets(t *testing.T) {
	r := NewRecorder()
	running := job("m1", "a", convoy.StateRunning, convoy.ConditionRunning)
	running.Status.Workers.Active = 2
	running.Status.Progress = "40%"
	running.Status.Metrics = &convoy.TrainingMetrics{Loss: ptr.To(0.5)}
	running.Status.RestartCount = 2
	r.ObserveJob(running, &convoy.TrainingJobStatus{})
	r.ObserveJob(job("m1", "b", convoy.StateRunning, convoy.ConditionRunning), &convoy.TrainingJobStatus{})
	if got := testutil.ToFloat64(jobs.WithLabelValues("m1", "Running")); got != 2 {
		t.Errorf("trainingjob_total{Running} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(allocatedGPUs.WithLabelValues("m1", "a")); got != 16 {
		t.Errorf("trainingjob_allocated_gpus = %v, want 16", got)
	}
	if got := testutil.ToFloat64(progressPercent.WithLabelValues("m1", "a")); got != 40 {
		t.Errorf("trainingjob_progress_percent = %v, want 40", got)
	}
	if got := testutil.ToFloat64(restarts.WithLabelValues("m1", "a")); got != 2 {
		t.Errorf("trainingjob_restart_count = %v, want 2", got)
	}

	failedBefore := testutil.ToFloat64(failed.WithLabelValues("m1", convoy.ReasonDeadlineExceeded))
	done := job("m1", "b", convoy.StateFailed, convoy.ConditionFailed)
	done.Status.FailureReason = convoy.ReasonDeadlineExceeded
	r.ObserveJob(done, &job("m1", "b", convoy.StateRunning, convoy.ConditionRunning).Status)
	r.ObserveJob(done, &done.Status) // a later reconcile of the finished job counts nothing more
	if got := testutil.ToFloat64(jobs.WithLabelValues("m1", "Running")); got != 1 {
		t.Errorf("trainingjob_total{Running} = %v after one failed, want 1", got)
	}
	if got := testutil.ToFloat64(failed.WithLabelValues("m1", convoy.ReasonDeadlineExceeded)) - failedBefore; got != 1 {
		t.Errorf("trainingjob_failed_total{DeadlineExceeded} grew by %v, want 1", got)
	}

	r.ObserveReconcile(types.NamespacedName{Namespace: "m1", Name: "a"}, time.Millisecond, apierrors.NewConflict(schema.GroupResource{}, "a", errors.New("x")))
	if got := testutil.ToFloat64(reconcileErrors.WithLabelValues("m1", "a", "conflict")); got != 1 {
		t.Errorf("trainingjob_reconciliation_errors_total{m1,a,conflict} = %v, want 1", got)
	}
	r.Forget(types.NamespacedName{Namespace: "m1", Name: "a"})
	if n := testutil.CollectAndCount(reconcileErrors, "trainingjob_reconciliation_errors_total"); n != 0 {
		t.Errorf("%d trainingjob_reconciliation_errors_total series after the job went, want 0", n)
	}
	if got := testutil.ToFloat64(jobs.WithLabelValues("m1", "Running")); got != 0 {
		t.Errorf("trainingjob_total{Running} = %v after the job went, want 0", got)
	}
	if n := testutil.CollectAndCount(allocatedGPUs, "trainingjob_allocated_gpus"); n != 1 {
		t.Errorf("%d trainingjob_allocated_gpus series, want only b's", n)
	}
}

func TestErrorType(t *testing.T) {
	gr := schema.GroupResource{Group: "convoy.dev", Resource: "trainingjobs"}
	cases := map[string]struct {
		err  error
		want string
	}{
		"conflict":  {err: apierrors.NewConflict(gr, "a", errors.New("x")), want: "conflict"},
		"forbidden": {err: apierrors.NewForbidden(gr, "a", errors.New("x")), want: "forbidden"},
		"throttled": {err: apierrors.NewTooManyRequests("slow down", 1), want: "timeout"},
		"other":     {err: errors.New("dial tcp: refused"), want: "other"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := errorType(tc.err); got != tc.want {
				t.Errorf("errorType = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRecorderCostCountersFollowStatus(t *testing.T) {
	r := NewRecorder()
	j := job("m3", "c", convoy.StateRunning, convoy.ConditionRunning)
	for _, step := range []struct{ gpuHours, amount float64 }{{1.5, 6}, {1.5, 6}, {4, 16.4}} {
		old := j.Status.DeepCopy()
		j.Status.Cost = &convoy.CostStatus{GPUHours: step.gpuHours, Amount: ptr.To(step.amount), Currency: "USD"}
		r.ObserveJob(j, old)
		if got := testutil.ToFloat64(gpuHours.WithLabelValues("m3", "c")); got != step.gpuHours {
			t.Errorf("trainingjob_gpu_hours_total = %v, want status.cost.gpuHours %v", got, step.gpuHours)
		}
		if got := testutil.ToFloat64(costs.WithLabelValues("m3", "c")); got != step.amount {
			t.Errorf("trainingjob_cost_total = %v, want status.cost.amount %v", got, step.amount)
		}
	}
	r.Forget(types.NamespacedName{Namespace: "m3", Name: "c"})
	if n := testutil.CollectAndCount(costs, "trainingjob_cost_total"); n != 0 {
		t.Errorf("%d trainingjob_cost_total series left after Forget, want 0", n)
	}
}
