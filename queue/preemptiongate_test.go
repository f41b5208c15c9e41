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
	"testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
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
