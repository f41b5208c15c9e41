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

package gangpreemption

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
)

func TestNewRejectsWrongArgs(t *testing.T) {
	if _, err := New(context.Background(), &config.GangPlacementArgs{}, nil); err == nil {
		t.Error("New() with GangPlacementArgs succeeded")
	}
	if _, err := New(context.Background(), &config.GangPreemptionArgs{VictimTerminationSeconds: 0}, nil); err == nil {
		t.Error("New() with a zero wait succeeded, want a validation error")
	}
}

// TestPostFilterOnlyPreemptsForGPUs: no preemption when GangPlacement did not reject the gang for
// want of GPUs, or when the pod may not preempt.
func TestPostFilterOnlyPreemptsForGPUs(t *testing.T) {
	never := corev1.PreemptNever
	unplaced := &gangcore.CycleState{Gang: "ns/job", Unplaceable: "no room"}
	cases := map[string]struct {
		state   *gangcore.CycleState
		class   string
		policy  *corev1.PreemptionPolicy
		wantMsg string
	}{
		"another plugin rejected the pod":     {},
		"a filter failed on the planned node": {state: &gangcore.CycleState{Gang: "ns/job", Placed: true}},
		"the pod's preemptionPolicy is Never": {state: unplaced, policy: &never,
			wantMsg: "the pod's preemptionPolicy is Never: the gang waits for free GPUs and preempts nothing"},
		// The API server copies the class's preemptionPolicy into the pod.
		"its priority class's preemptionPolicy is Never": {state: unplaced, class: "batch-high", policy: &never,
			wantMsg: "priority class batch-high has preemptionPolicy Never: the gang waits for free GPUs and preempts nothing"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := framework.NewCycleState()
			if tc.state != nil {
				cs.Write(gangcore.StateKey, tc.state)
			}
			pod := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: tc.class, PreemptionPolicy: tc.policy}}
			res, status := (&GangPreemption{}).PostFilter(context.Background(), cs, pod, nil)
			if res != nil || status.Code() != fwk.Unschedulable || status.Message() != tc.wantMsg {
				t.Errorf("PostFilter() = %v, %v %q; want nil, Unschedulable %q", res, status.Code(), status.Message(), tc.wantMsg)
			}
		})
	}
}

// TestPodByPodVictimsBelongToNoGang: a pod without GPUs preempts pod by pod, so a member of a
// gang is never its victim (evicting one would leave the gang broken).
func TestPodByPodVictimsBelongToNoGang(t *testing.T) {
	lone := &corev1.Pod{}
	member := &corev1.Pod{}
	member.Labels = map[string]string{v1alpha1.PodGroupLabel: "llama"}
	if !eligibleOneByOne(lone) {
		t.Error("a pod of no gang is not eligible, want eligible")
	}
	if eligibleOneByOne(member) {
		t.Error("a member of gang llama is eligible, want not")
	}
}
