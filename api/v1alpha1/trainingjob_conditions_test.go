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

package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func conds(types ...string) []metav1.Condition {
	var out []metav1.Condition
	for _, t := range types {
		meta.SetStatusCondition(&out, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Test"})
	}
	return out
}

func TestStateFromConditions(t *testing.T) {
	cases := map[string]struct {
		conditions []metav1.Condition
		want       TrainingJobState
	}{
		"no conditions":                 {want: StatePending},
		"queued":                        {conditions: conds(ConditionQueued), want: StateQueued},
		"admitted, pods not yet made":   {conditions: conds(ConditionAdmitted), want: StatePending},
		"initializing":                  {conditions: conds(ConditionAdmitted, ConditionInitializing), want: StateInitializing},
		"running":                       {conditions: conds(ConditionAdmitted, ConditionRunning), want: StateRunning},
		"restarting beats running":      {conditions: conds(ConditionRunning, ConditionRestarting), want: StateRestarting},
		"preempted back to the queue":   {conditions: conds(ConditionPreempted, ConditionQueued), want: StateQueued},
		"user suspend beats queued":     {conditions: conds(ConditionQueued, ConditionSuspended), want: StateSuspended},
		"completed is terminal":         {conditions: conds(ConditionRunning, ConditionCompleted), want: StateCompleted},
		"failed beats everything":       {conditions: conds(ConditionCompleted, ConditionSuspended, ConditionFailed), want: StateFailed},
		"a false condition is not used": {conditions: []metav1.Condition{{Type: ConditionRunning, Status: metav1.ConditionFalse}}, want: StatePending},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := StateFromConditions(tc.conditions); got != tc.want {
				t.Errorf("StateFromConditions() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTrainingJobDefaults(t *testing.T) {
	cases := map[string]struct {
		job           TrainingJob
		wantGPUs      int32
		wantTotal     int32
		wantPriority  string
		wantQueue     string
		wantScheduler string
		wantPort      int32
	}{
		"unset fields take the documented defaults": {
			job:           TrainingJob{Spec: TrainingJobSpec{NumWorkers: 4}},
			wantGPUs:      1,
			wantTotal:     4,
			wantScheduler: DefaultSchedulerName,
			wantPort:      29500,
		},
		"zero GPUs is allowed": {
			job:           TrainingJob{Spec: TrainingJobSpec{NumWorkers: 2, GPUsPerWorker: ptr.To[int32](0)}},
			wantGPUs:      0,
			wantTotal:     0,
			wantScheduler: DefaultSchedulerName,
			wantPort:      29500,
		},
		"priority is an alias of priorityClassName; the queue label names the queue": {
			job: TrainingJob{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{QueueNameLabel: "team-a"}},
				Spec: TrainingJobSpec{NumWorkers: 2, GPUsPerWorker: ptr.To[int32](8),
					Scheduling: &SchedulingSpec{Priority: "high", SchedulerName: "default-scheduler"},
					Networking: &NetworkingSpec{MasterPort: 23456}},
			},
			wantGPUs: 8, wantTotal: 16, wantPriority: "high", wantQueue: "team-a",
			wantScheduler: "default-scheduler", wantPort: 23456,
		},
		"spec queue wins over the label": {
			job: TrainingJob{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{QueueNameLabel: "team-a"}},
				Spec: TrainingJobSpec{NumWorkers: 1,
					Scheduling: &SchedulingSpec{PriorityClassName: "low", Queue: "team-b"}},
			},
			wantGPUs: 1, wantTotal: 1, wantPriority: "low", wantQueue: "team-b",
			wantScheduler: DefaultSchedulerName, wantPort: 29500,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := tc.job
			if got := j.GPUsPerWorker(); got != tc.wantGPUs {
				t.Errorf("GPUsPerWorker() = %d, want %d", got, tc.wantGPUs)
			}
			if got := j.TotalGPUs(); got != tc.wantTotal {
				t.Errorf("TotalGPUs() = %d, want %d", got, tc.wantTotal)
			}
			if got := j.PriorityClassName(); got != tc.wantPriority {
				t.Errorf("PriorityClassName() = %q, want %q", got, tc.wantPriority)
			}
			if got := j.QueueName(); got != tc.wantQueue {
				t.Errorf("QueueName() = %q, want %q", got, tc.wantQueue)
			}
			if got := j.SchedulerName(); got != tc.wantScheduler {
				t.Errorf("SchedulerName() = %q, want %q", got, tc.wantScheduler)
			}
			if got := j.MasterPort(); got != tc.wantPort {
				t.Errorf("MasterPort() = %d, want %d", got, tc.wantPort)
			}
		})
	}
}

func TestGPUNodeSummarize(t *testing.T) {
	s := GPUNodeStatus{GPUs: []GPUDevice{
		{Index: 0, Product: "NVIDIA H100 80GB HBM3", Health: GPUHealthy},
		{Index: 1, Product: "NVIDIA H100 80GB HBM3", Health: GPUHealthy, AllocatedTo: "ns/pod"},
		{Index: 2, Product: "NVIDIA H100 80GB HBM3", Health: GPUUnhealthy, HealthReason: "XID 79"},
		{Index: 3, Product: "NVIDIA H100 80GB HBM3", Health: GPUUnknown},
	}}
	s.Summarize()
	if s.Capacity != 4 || s.Healthy != 2 || s.Free != 1 || s.Product != "NVIDIA H100 80GB HBM3" {
		t.Errorf("Summarize() = capacity %d healthy %d free %d product %q, want 4 2 1 H100", s.Capacity, s.Healthy, s.Free, s.Product)
	}
}
