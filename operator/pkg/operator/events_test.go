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
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
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

// TestRepeatedEventsAreCountedNotRewritten: an event that repeats one of the same reason on the same
// job, after status writes changed the job's resourceVersion, is counted in the first one's series
// (one Event, count 2) instead of written as a new Event each time; another reason is an Event of
// its own.
func TestRepeatedEventsAreCountedNotRewritten(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer broadcaster.Shutdown()
	r := eventRecorder{broadcaster.NewRecorder(scheme, "convoy-operator")}
	job := utiltesting.MakeTrainingJob("j", "ns").Obj()
	// The recorder writes in the background: each step waits for its write before the next.
	for i, step := range []struct {
		reason string
		want   map[string]int32 // reason: series count (0: none)
	}{
		{"Restarting", map[string]int32{"Restarting": 0}},
		{"Restarting", map[string]int32{"Restarting": 2}},
		{"Running", map[string]int32{"Restarting": 2, "Running": 0}},
	} {
		job.ResourceVersion = strconv.Itoa(i + 1)
		r.Eventf(job, nil, corev1.EventTypeNormal, step.reason, "Reconcile", "attempt %d", i)
		var got map[string]int32
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := cs.EventsV1().Events("ns").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			got = map[string]int32{}
			for _, e := range list.Items {
				if _, dup := got[e.Reason]; dup {
					got[e.Reason+" again"] = 0
				}
				got[e.Reason] = 0
				if e.Series != nil {
					got[e.Reason] = e.Series.Count
				}
			}
			return cmp.Diff(step.want, got) == "", nil
		}); err != nil {
			t.Fatalf("step %d (%s): Events by reason and series count (-want,+got):\n%s", i, step.reason, cmp.Diff(step.want, got))
		}
	}
}
