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

package operator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestEventNotesFitTheEventsAPI: a note longer than the events.k8s.io API takes is cut, saying so,
// instead of the API server refusing the event; a short one is recorded as it is.
func TestEventNotesFitTheEventsAPI(t *testing.T) {
	cases := map[string]struct {
		note string
		want func(string) bool
	}{
		"short": {
			note: "pod w-0 failed: 100% of its memory",
			want: func(got string) bool { return got == "Warning Failed pod w-0 failed: 100% of its memory" },
		},
		"too long": {
			note: strings.Repeat("é", 1000),
			want: func(got string) bool {
				note := strings.TrimPrefix(got, "Warning Failed ")
				return len(note) <= noteLimit && strings.HasSuffix(note, "… (truncated)") && strings.HasPrefix(note, "éé")
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fake := events.NewFakeRecorder(1)
			r := eventRecorder{fake}
			r.Eventf(utiltesting.MakeTrainingJob("j", "ns").Obj(), nil, corev1.EventTypeWarning, "Failed", "Reconcile", "%s", tc.note)
			if got := <-fake.Events; !tc.want(got) {
				t.Errorf("recorded %q (%d bytes)", got, len(got))
			}
		})
	}
}
