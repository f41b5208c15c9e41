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

package nodeagent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func TestEvictionsOnHealthTransitions(t *testing.T) {
	gpu := func(i int32, holder, reason string) convoy.GPUDevice {
		g := convoy.GPUDevice{Index: i, UUID: "GPU-" + string('a'+i), Health: convoy.GPUHealthy, AllocatedTo: holder}
		if reason != "" {
			g.Health, g.HealthReason = convoy.GPUUnhealthy, reason
		}
		return g
	}
	healthy := map[int32]convoy.GPUHealth{0: convoy.GPUHealthy, 1: convoy.GPUHealthy, 2: convoy.GPUHealthy, 3: convoy.GPUHealthy}
	xid79 := "XID 79: GPU has fallen off the bus"
	cases := map[string]struct {
		before map[int32]convoy.GPUHealth
		gpus   []convoy.GPUDevice
		want   []Eviction
	}{
		"a held GPU turns unhealthy: its pod": {
			before: healthy,
			gpus:   []convoy.GPUDevice{gpu(0, "ml/a", ""), gpu(1, "ml/b", xid79), gpu(2, "ml/b", ""), gpu(3, "", "")},
			want:   []Eviction{{Pod: "ml/b", GPUs: []int32{1}, Reason: "GPU 1 (GPU-b) unhealthy: " + xid79}},
		},
		"a free GPU turns unhealthy: nothing": {
			before: healthy,
			gpus:   []convoy.GPUDevice{gpu(0, "ml/a", ""), gpu(3, "", "uncorrectable ECC errors")},
		},
		"already unhealthy at the last poll: nothing, it was evicted then": {
			before: map[int32]convoy.GPUHealth{0: convoy.GPUHealthy, 1: convoy.GPUUnhealthy},
			gpus:   []convoy.GPUDevice{gpu(0, "ml/a", ""), gpu(1, "ml/b", xid79)},
		},
		"recovering: nothing": {
			before: map[int32]convoy.GPUHealth{0: convoy.GPUUnhealthy},
			gpus:   []convoy.GPUDevice{gpu(0, "ml/a", "")},
		},
		"two GPUs of one pod and one of another: each pod once, by name": {
			before: healthy,
			gpus:   []convoy.GPUDevice{gpu(0, "ml/z", "lost"), gpu(1, "ml/z", ""), gpu(2, "ml/b", xid79), gpu(3, "ml/b", xid79)},
			want: []Eviction{
				{Pod: "ml/b", GPUs: []int32{2, 3}, Reason: "GPU 2 (GPU-c) unhealthy: " + xid79 + "; GPU 3 (GPU-d) unhealthy: " + xid79},
				{Pod: "ml/z", GPUs: []int32{0}, Reason: "GPU 0 (GPU-a) unhealthy: lost"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			unhealthy, _ := healthChanges(tc.before, tc.gpus)
			got := Evictions(unhealthy)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(Eviction{})); diff != "" {
				t.Errorf("evictions (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestEvictionStillHeld(t *testing.T) {
	e := Eviction{Pod: "ml/b", GPUs: []int32{1}}
	cases := map[string]struct {
		gpus []convoy.GPUDevice
		want bool
	}{
		"the pod holds the GPU":                      {gpus: []convoy.GPUDevice{{Index: 0}, {Index: 1, AllocatedTo: "ml/b"}}, want: true},
		"the pod is gone":                            {gpus: []convoy.GPUDevice{{Index: 0}, {Index: 1}}},
		"another pod of that name holds another GPU": {gpus: []convoy.GPUDevice{{Index: 0, AllocatedTo: "ml/b"}, {Index: 1}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := e.stillHeld(&convoy.GPUNodeStatus{GPUs: tc.gpus}); got != tc.want {
				t.Errorf("stillHeld = %v, want %v", got, tc.want)
			}
		})
	}
}
