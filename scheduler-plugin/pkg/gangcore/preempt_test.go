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

package gangcore

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestPreemptionsRemain: a preemption holds while one of its victims exists and its deadline has
// not passed, and is forgotten once it ends.
func TestPreemptionsRemain(t *testing.T) {
	now := time.Now()
	start := func(ps *preemptions) {
		ps.inProgress["ns/urgent"] = &preemption{deadline: now.Add(time.Minute),
			victims: []types.NamespacedName{{Namespace: "ns", Name: "v-0"}, {Namespace: "ns", Name: "v-1"}},
			uids:    []types.UID{"u0", "u1"}, nodes: []string{"a", "b"}}
	}
	alive := func(uids ...types.UID) func(types.NamespacedName, types.UID, string) bool {
		return func(_ types.NamespacedName, uid types.UID, _ string) bool {
			for _, u := range uids {
				if u == uid {
					return true
				}
			}
			return false
		}
	}
	cases := map[string]struct {
		at      time.Time
		exists  func(types.NamespacedName, types.UID, string) bool
		started bool
		want    bool
	}{
		"a victim remains":          {at: now, exists: alive("u1"), started: true, want: true},
		"every victim is gone":      {at: now, exists: alive(), started: true},
		"past the deadline":         {at: now.Add(2 * time.Minute), exists: alive("u0", "u1"), started: true},
		"the gang preempts nothing": {at: now, exists: alive("u0")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := newPreemptions()
			if tc.started {
				start(ps)
			}
			if got := ps.remain("ns/urgent", tc.at, tc.exists); got != tc.want {
				t.Errorf("remain = %v, want %v", got, tc.want)
			}
			if _, held := ps.inProgress["ns/urgent"]; held != tc.want {
				t.Errorf("preemption still held: %v, want %v", held, tc.want)
			}
		})
	}
}
