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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/cost"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestDecideStopsAJobAtItsBudget: two workers of one GPU, bound 100 s before now on a node priced
// 36 per GPU-hour, have cost 2 × 98 s (up to costSettle before now) × 0.01 = 1.96: a budget of
// 1.5 is reached, one of 3 is not. A job that fails is counted up to now: 2.00.
func TestDecideStopsAJobAtItsBudget(t *testing.T) {
	list, errs := cost.Parse(map[string]string{"currency": "EUR", "gpu.H100": "36"})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	prices := cost.Prices{List: list, Source: "ConfigMap convoy-system/convoy-prices"}
	checkpointing := convoy.CheckpointSpec{Enabled: true, PreemptionGraceSeconds: ptr.To[int32](30)}
	runningJob := func(budget float64, cp *convoy.CheckpointSpec) *convoy.TrainingJob {
		w := utiltesting.MakeTrainingJob("llm", "ns").Workers(2).Budget(budget).
			Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: ptr.To(metav1.NewTime(t0))})
		if cp != nil {
			w = w.Checkpoint(*cp)
		}
		return w.Obj()
	}
	cases := map[string]struct {
		job           *convoy.TrainingJob
		wantState     convoy.TrainingJobState
		wantRequested bool
		wantRequeue   time.Duration
		wantAmount    float64
	}{
		"under budget: runs on, looked at again when the budget would be reached": {
			job: runningJob(3, nil), wantState: convoy.StateRunning, wantAmount: 1.96,
			// 1.04 left at 2 GPUs × 36 per hour: 52 s, plus costSettle; before the refresh (58 s).
			wantRequeue: 52*time.Second + costSettle,
		},
		"budget reached with checkpointing: asked for a checkpoint first": {
			job: runningJob(1.5, &checkpointing), wantState: convoy.StateRunning, wantRequested: true, wantRequeue: 30 * time.Second, wantAmount: 1.96,
		},
		"budget reached without checkpointing: failed at once": {
			job: runningJob(1.5, nil), wantState: convoy.StateFailed, wantAmount: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := mlframework.For(tc.job.Spec.Framework)
			pods := gang(tc.job, corev1.PodRunning)
			for _, pod := range pods {
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
					LastTransitionTime: metav1.NewTime(now.Add(-100 * time.Second))}}
			}
			got := decide(observation{job: tc.job, plugin: p, pods: pods, prices: prices, now: now, backoff: DefaultBackoff,
				nodes: map[string]map[string]string{"node-a": {convoy.LabelGPUProduct: "H100"}}})
			st := got.status
			if c := st.Cost; c == nil || c.Amount == nil || *c.Amount != tc.wantAmount || c.Currency != "EUR" {
				t.Fatalf("status.cost = %+v, want %v EUR", c, tc.wantAmount)
			}
			if state, _ := convoy.StateAndReason(st.Conditions); state != tc.wantState {
				t.Errorf("state = %s, want %s", state, tc.wantState)
			}
			if tc.wantState == convoy.StateFailed && st.FailureReason != convoy.ReasonBudgetExceeded {
				t.Errorf("failureReason = %q, want BudgetExceeded", st.FailureReason)
			}
			if got := meta.IsStatusConditionTrue(st.Conditions, convoy.ConditionCheckpointRequested); got != tc.wantRequested {
				t.Errorf("CheckpointRequested = %v, want %v", got, tc.wantRequested)
			}
			if got.requeueAfter != tc.wantRequeue {
				t.Errorf("requeueAfter = %v, want %v", got.requeueAfter, tc.wantRequeue)
			}
		})
	}
}
