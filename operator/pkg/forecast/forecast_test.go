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

package forecast

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func gpus(n int64) map[corev1.ResourceName]int64 {
	return map[corev1.ResourceName]int64{convoy.ResourceGPU: n * 1000}
}

func TestPlan(t *testing.T) {
	cases := map[string]struct {
		q    Queue
		want []Estimate
	}{
		"waits for the running job that frees enough": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8),
				Admitted: []Job{{Name: "ns/a", Requests: gpus(4), End: t0.Add(time.Hour)}, {Name: "ns/b", Requests: gpus(4), End: t0.Add(2 * time.Hour)}},
				Pending:  []Job{{Name: "ns/c", Requests: gpus(4)}}},
			want: []Estimate{{Name: "ns/c", Start: t0.Add(time.Hour), Reason: "ns/a must finish first, to free the 4 nvidia.com/gpu it lacks in ClusterQueue cq"}},
		},
		"fits now": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8),
				Admitted: []Job{{Name: "ns/a", Requests: gpus(4)}},
				Pending:  []Job{{Name: "ns/c", Requests: gpus(4)}}},
			want: []Estimate{{Name: "ns/c", Start: t0, Reason: "fits the free quota of ClusterQueue cq"}},
		},
		"a job ahead runs first for its runtime": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8),
				Admitted: []Job{{Name: "ns/a", Requests: gpus(8), End: t0.Add(time.Hour)}},
				Pending:  []Job{{Name: "ns/b", Requests: gpus(8), Runtime: 30 * time.Minute}, {Name: "ns/c", Requests: gpus(8)}}},
			want: []Estimate{
				{Name: "ns/b", Start: t0.Add(time.Hour), Reason: "ns/a must finish first, to free the 8 nvidia.com/gpu it lacks in ClusterQueue cq"},
				{Name: "ns/c", Start: t0.Add(90 * time.Minute), Reason: "ns/b, ns/a must finish first, to free the 8 nvidia.com/gpu it lacks in ClusterQueue cq"},
			},
		},
		"best effort: a small job behind starts in the room the big one cannot use": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8),
				Admitted: []Job{{Name: "ns/a", Requests: gpus(6), End: t0.Add(time.Hour)}},
				Pending:  []Job{{Name: "ns/big", Requests: gpus(8)}, {Name: "ns/small", Requests: gpus(2), Runtime: 30 * time.Minute}}},
			want: []Estimate{
				{Name: "ns/big", Start: t0.Add(time.Hour), Reason: "ns/a, ns/small must finish first, to free the 6 nvidia.com/gpu it lacks in ClusterQueue cq"},
				{Name: "ns/small", Start: t0, Reason: "fits the free quota of ClusterQueue cq"},
			},
		},
		"strict FIFO: the small job waits behind the big one": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8), StrictFIFO: true,
				Admitted: []Job{{Name: "ns/a", Requests: gpus(6), End: t0.Add(time.Hour)}},
				Pending:  []Job{{Name: "ns/big", Requests: gpus(8), Runtime: time.Hour}, {Name: "ns/small", Requests: gpus(2)}}},
			want: []Estimate{
				{Name: "ns/big", Start: t0.Add(time.Hour), Reason: "ns/a must finish first, to free the 6 nvidia.com/gpu it lacks in ClusterQueue cq"},
				{Name: "ns/small", Start: t0.Add(2 * time.Hour), Reason: "ns/big, ns/a must finish first, to free quota in ClusterQueue cq for the jobs ahead of it"},
			},
		},
		"a running job of unknown end makes the wait unknown": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8),
				Admitted: []Job{{Name: "ns/a", Requests: gpus(8)}},
				Pending:  []Job{{Name: "ns/c", Requests: gpus(4)}}},
			want: []Estimate{{Name: "ns/c", Reason: "unknown: it waits for ns/a, whose completion cannot be estimated yet (no measured epoch rate)"}},
		},
		"a job ahead of unknown runtime makes the wait behind it unknown": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8),
				Admitted: []Job{{Name: "ns/a", Requests: gpus(8), End: t0.Add(time.Hour)}},
				Pending:  []Job{{Name: "ns/b", Requests: gpus(8)}, {Name: "ns/c", Requests: gpus(8)}}},
			want: []Estimate{
				{Name: "ns/b", Start: t0.Add(time.Hour), Reason: "ns/a must finish first, to free the 8 nvidia.com/gpu it lacks in ClusterQueue cq"},
				{Name: "ns/c", Reason: "unknown: it waits for ns/b, whose completion cannot be estimated yet (no measured epoch rate)"},
			},
		},
		"an end already past counts as now": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8),
				Admitted: []Job{{Name: "ns/a", Requests: gpus(8), End: t0.Add(-time.Hour)}},
				Pending:  []Job{{Name: "ns/c", Requests: gpus(8)}}},
			want: []Estimate{{Name: "ns/c", Start: t0, Reason: "ns/a must finish first, to free the 8 nvidia.com/gpu it lacks in ClusterQueue cq"}},
		},
		"more than the whole quota never starts": {
			q:    Queue{Name: "cq", Now: t0, Quota: gpus(8), Pending: []Job{{Name: "ns/c", Requests: gpus(16)}}},
			want: []Estimate{{Name: "ns/c", Reason: "unknown: it asks 8 nvidia.com/gpu more than ClusterQueue cq's whole quota"}},
		},
		"a higher priority job preempts a lower one, which queues again behind it": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8), WithinClusterQueue: PreemptLowerPriority,
				Admitted: []Job{{Name: "ns/a", Requests: gpus(4), End: t0.Add(2 * time.Hour), AdmittedAt: t0.Add(-time.Hour)},
					{Name: "ns/b", Requests: gpus(4), End: t0.Add(3 * time.Hour), AdmittedAt: t0.Add(-time.Minute)}},
				Pending: []Job{{Name: "ns/c", Requests: gpus(4), Priority: 10, Runtime: time.Hour}, {Name: "ns/d", Requests: gpus(8)}}},
			want: []Estimate{
				{Name: "ns/c", Start: t0, Reason: "preempts ns/b in ClusterQueue cq", Preempts: []string{"ns/b"}},
				{Name: "ns/d", Start: t0.Add(4 * time.Hour), Reason: "ns/b, ns/a, ns/c must finish first, to free the 8 nvidia.com/gpu it lacks in ClusterQueue cq"},
			},
		},
		"without preemption the higher priority job waits for the finish": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8), WithinClusterQueue: "Never",
				Admitted: []Job{{Name: "ns/a", Requests: gpus(8), End: t0.Add(2 * time.Hour)}},
				Pending:  []Job{{Name: "ns/c", Requests: gpus(8), Priority: 10}}},
			want: []Estimate{{Name: "ns/c", Start: t0.Add(2 * time.Hour), Reason: "ns/a must finish first, to free the 8 nvidia.com/gpu it lacks in ClusterQueue cq"}},
		},
		"equal priority does not preempt under LowerPriority": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8), WithinClusterQueue: PreemptLowerPriority,
				Admitted: []Job{{Name: "ns/a", Requests: gpus(8), End: t0.Add(2 * time.Hour), Priority: 10, QueuedAt: t0}},
				Pending:  []Job{{Name: "ns/c", Requests: gpus(8), Priority: 10, QueuedAt: t0.Add(-time.Hour)}}},
			want: []Estimate{{Name: "ns/c", Start: t0.Add(2 * time.Hour), Reason: "ns/a must finish first, to free the 8 nvidia.com/gpu it lacks in ClusterQueue cq"}},
		},
		"equal priority preempts a newer job under LowerOrNewerEqualPriority": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(8), WithinClusterQueue: PreemptLowerOrNewerEqualPriority,
				Admitted: []Job{{Name: "ns/a", Requests: gpus(8), End: t0.Add(2 * time.Hour), Priority: 10, QueuedAt: t0}},
				Pending:  []Job{{Name: "ns/c", Requests: gpus(8), Priority: 10, QueuedAt: t0.Add(-time.Hour)}}},
			want: []Estimate{{Name: "ns/c", Start: t0, Reason: "preempts ns/a in ClusterQueue cq", Preempts: []string{"ns/a"}}},
		},
		"a reason names the last three jobs to finish": {
			q: Queue{Name: "cq", Now: t0, Quota: gpus(4),
				Admitted: []Job{{Name: "ns/a", Requests: gpus(1), End: t0.Add(1 * time.Minute)}, {Name: "ns/b", Requests: gpus(1), End: t0.Add(2 * time.Minute)},
					{Name: "ns/c", Requests: gpus(1), End: t0.Add(3 * time.Minute)}, {Name: "ns/d", Requests: gpus(1), End: t0.Add(4 * time.Minute)}},
				Pending: []Job{{Name: "ns/e", Requests: gpus(4)}}},
			want: []Estimate{{Name: "ns/e", Start: t0.Add(4 * time.Minute), Reason: "ns/d, ns/c, ns/b and 1 more must finish first, to free the 4 nvidia.com/gpu it lacks in ClusterQueue cq"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Plan(tc.q)); diff != "" {
				t.Errorf("Plan (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestObserveReport(t *testing.T) {
	type report struct {
		epoch, total, attempt int32
		at                    time.Duration
	}
	cases := map[string]struct {
		reports      []report
		wantPer      time.Duration // 0: none
		wantComplete time.Duration // after t0; 0: none
	}{
		"one report measures nothing": {
			reports: []report{{epoch: 1, total: 10}},
		},
		"two epochs give the rate and the completion": {
			reports:      []report{{epoch: 1, total: 10}, {epoch: 3, total: 10, at: 4 * time.Minute}},
			wantPer:      2 * time.Minute,
			wantComplete: 4*time.Minute + 7*2*time.Minute,
		},
		"a report of the same epoch changes nothing": {
			reports:      []report{{epoch: 1, total: 10}, {epoch: 2, total: 10, at: time.Minute}, {epoch: 2, total: 10, at: 30 * time.Minute}},
			wantPer:      time.Minute,
			wantComplete: 9 * time.Minute,
		},
		"more epochs reported move the completion": {
			reports:      []report{{epoch: 1, total: 10}, {epoch: 2, total: 100, at: time.Minute}},
			wantPer:      time.Minute,
			wantComplete: 99 * time.Minute,
		},
		"a new attempt measures again": {
			reports: []report{{epoch: 1, total: 10}, {epoch: 2, total: 10, at: time.Minute}, {epoch: 1, total: 10, attempt: 1, at: time.Hour}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := &convoy.TrainingJobStatus{}
			for _, r := range tc.reports {
				prev := st.CurrentEpoch
				st.CurrentEpoch, st.TotalEpochs, st.RestartCount = r.epoch, r.total, r.attempt
				ObserveReport(st, prev, t0.Add(r.at))
			}
			f := st.Forecast
			var per, complete time.Duration
			if f.EpochDuration != nil {
				per = f.EpochDuration.Duration
			}
			if f.EstimatedCompletionTime != nil {
				complete = f.EstimatedCompletionTime.Sub(t0)
			}
			if per != tc.wantPer || complete != tc.wantComplete {
				t.Errorf("epochDuration %v, completion at t0+%v; want %v, t0+%v", per, complete, tc.wantPer, tc.wantComplete)
			}
			if rem, ok := Remaining(st); ok != (tc.wantPer > 0) || ok && rem != time.Duration(st.TotalEpochs-st.CurrentEpoch)*tc.wantPer {
				t.Errorf("Remaining = %v, %v", rem, ok)
			}
		})
	}
}
