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

package queue

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TestGateClosed: a Workload's shrink-first gate is closed until Kueue's status says it is open;
// a Workload without the gate has none to open.
func TestGateClosed(t *testing.T) {
	gate := []kueue.PreemptionGate{{Name: "other"}, {Name: PreemptionGateName}}
	state := func(p kueue.PreemptionGatePosition) []kueue.PreemptionGateState {
		return []kueue.PreemptionGateState{{Name: "other", Position: kueue.PreemptionGatePositionOpen}, {Name: PreemptionGateName, Position: p}}
	}
	cases := map[string]struct {
		spec   []kueue.PreemptionGate
		status []kueue.PreemptionGateState
		want   bool
	}{
		"no gate":                        {want: false},
		"another controller's gate only": {spec: gate[:1], want: false},
		"gate, no state yet":             {spec: gate, want: true},
		"gate closed":                    {spec: gate, status: state(kueue.PreemptionGatePositionClosed), want: true},
		"gate opened":                    {spec: gate, status: state(kueue.PreemptionGatePositionOpen), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &kueue.Workload{Spec: kueue.WorkloadSpec{PreemptionGates: tc.spec}, Status: kueue.WorkloadStatus{PreemptionGates: tc.status}}
			if got := gateClosed(wl); got != tc.want {
				t.Errorf("gateClosed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGateWebhook: a new Workload of another kind than TrainingJob gets the shrink-first gate while
// both Kueue feature gates are on; a TrainingJob's (gatingClient's), one already gated, and one
// whose LocalQueue feeds a ClusterQueue with a MultiKueue admission check do not, nor any with a
// feature gate off.
func TestGateWebhook(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		utiltestingapi.MakeLocalQueue("q", "team").ClusterQueue("gpus").Obj(),
		utiltestingapi.MakeLocalQueue("remote", "team").ClusterQueue("dispatch").Obj(),
		utiltestingapi.MakeClusterQueue("gpus").Obj(),
		utiltestingapi.MakeClusterQueue("dispatch").AdmissionChecks("multikueue").Obj(),
		utiltestingapi.MakeAdmissionCheck("multikueue").ControllerName(kueue.MultiKueueControllerName).Obj(),
	).Build()
	job := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "1", Controller: ptr.To(true)}
	trainingJob := metav1.OwnerReference{APIVersion: convoy.GroupVersion.String(), Kind: "TrainingJob", Name: "t", UID: "2", Controller: ptr.To(true)}
	cases := map[string]struct {
		queue    string
		owner    metav1.OwnerReference
		gated    bool
		gatesOff bool
		want     int
	}{
		"a batch/Job's":                   {queue: "q", owner: job, want: 1},
		"one of no queue":                 {owner: job, want: 1},
		"a TrainingJob's":                 {queue: "q", owner: trainingJob, want: 0},
		"one already gated":               {queue: "q", owner: job, gated: true, want: 1},
		"one MultiKueue dispatches":       {queue: "remote", owner: job, want: 0},
		"one while a feature gate is off": {queue: "q", owner: job, gatesOff: true, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			features.SetFeatureGateDuringTest(t, features.ElasticJobsViaWorkloadSlices, true)
			features.SetFeatureGateDuringTest(t, features.MultiKueueOrchestratedPreemption, !tc.gatesOff)
			wl := utiltestingapi.MakeWorkload("wl", "team").Queue(kueue.LocalQueueName(tc.queue)).Obj()
			wl.OwnerReferences = []metav1.OwnerReference{tc.owner}
			if tc.gated {
				wl.Spec.PreemptionGates = []kueue.PreemptionGate{{Name: PreemptionGateName}}
			}
			if err := (GateWebhook{Client: c}).Default(t.Context(), wl); err != nil {
				t.Fatal(err)
			}
			if got := len(slices.DeleteFunc(slices.Clone(wl.Spec.PreemptionGates), func(g kueue.PreemptionGate) bool { return !isShrinkFirst(g) })); got != tc.want {
				t.Errorf("%d shrink-first gates %v, want %d", got, wl.Spec.PreemptionGates, tc.want)
			}
		})
	}
}

// TestGateDecides: the shrinks for a Workload whose gate is closed are PreemptionGate's while
// Kueue would preempt for it or has not tried to admit it yet; the Resizer's once Kueue left it
// waiting without preempting, or its gate is open or absent.
func TestGateDecides(t *testing.T) {
	pending := metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending"}
	blocked := metav1.Condition{Type: kueue.WorkloadBlockedOnPreemptionGates, Status: metav1.ConditionTrue, Reason: kueue.PreemptionGated}
	unblocked := blocked
	unblocked.Status = metav1.ConditionFalse
	gate := []kueue.PreemptionGate{{Name: PreemptionGateName}}
	open := []kueue.PreemptionGateState{{Name: PreemptionGateName, Position: kueue.PreemptionGatePositionOpen}}
	cases := map[string]struct {
		spec       []kueue.PreemptionGate
		status     []kueue.PreemptionGateState
		conditions []metav1.Condition
		want       bool
	}{
		"not tried yet":                       {spec: gate, want: true},
		"Kueue would preempt, gate closed":    {spec: gate, conditions: []metav1.Condition{pending, blocked}, want: true},
		"left waiting, no preemption":         {spec: gate, conditions: []metav1.Condition{pending}, want: false},
		"left waiting, no longer blocked":     {spec: gate, conditions: []metav1.Condition{pending, unblocked}, want: false},
		"gate opened":                         {spec: gate, status: open, conditions: []metav1.Condition{pending, blocked}, want: false},
		"no gate (Kueue's feature gates off)": {want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &kueue.Workload{Spec: kueue.WorkloadSpec{PreemptionGates: tc.spec},
				Status: kueue.WorkloadStatus{PreemptionGates: tc.status, Conditions: tc.conditions}}
			if got := gateDecides(wl); got != tc.want {
				t.Errorf("gateDecides = %v, want %v", got, tc.want)
			}
		})
	}
}
