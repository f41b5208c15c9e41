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

package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// podEvent is one pod as the watch delivers it: changed (added or updated) or deleted.
type podEvent struct {
	pod     *corev1.Pod
	deleted bool
}

// worker is pod rank of the gang "llm" in attempt, named as the operator names it unless name is given.
func worker(rank, attempt int, phase corev1.PodPhase, name ...string) *corev1.Pod {
	n := fmt.Sprintf("llm-worker-%d-r%d", rank, attempt)
	if len(name) > 0 {
		n = name[0]
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n, UID: types.UID(n), Labels: map[string]string{
			convoy.LabelJobName: "llm", convoy.LabelReplicaRole: "worker",
			convoy.LabelReplicaRank: fmt.Sprint(rank), convoy.LabelRestartAttempt: fmt.Sprint(attempt)}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	return p
}

// TestWatcherCountsDuplicates feeds the watcher pod events of a two-worker gang and checks which it
// counts as duplicate pods: a restart whose new attempt starts only once the old pods are gone or
// finished is clean; a new attempt beside an old pod still running or terminating is not, nor are
// two pods of one rank, whatever their names.
func TestWatcherCountsDuplicates(t *testing.T) {
	running, pending, failed := corev1.PodRunning, corev1.PodPending, corev1.PodFailed
	cases := map[string]struct {
		events []podEvent
		want   []string
	}{
		"a clean restart: the old attempt deleted, then the new one created": {
			events: []podEvent{
				{pod: worker(0, 0, running)}, {pod: worker(1, 0, running)},
				{pod: terminating(worker(0, 0, running))}, {pod: terminating(worker(1, 0, running))},
				{pod: worker(0, 0, running), deleted: true}, {pod: worker(1, 0, running), deleted: true},
				{pod: worker(0, 1, pending)}, {pod: worker(1, 1, pending)},
				{pod: worker(0, 1, running)}, {pod: worker(1, 1, running)},
			},
		},
		"a restart after a failure: the failed pod stays, finished, beside the new attempt": {
			events: []podEvent{
				{pod: worker(0, 0, running)}, {pod: worker(1, 0, running)},
				{pod: worker(1, 0, failed)},
				{pod: worker(0, 0, running), deleted: true},
				{pod: worker(0, 1, pending)}, {pod: worker(1, 1, pending)},
			},
		},
		"the new attempt created while a pod of the old one still runs": {
			events: []podEvent{
				{pod: worker(0, 0, running)}, {pod: worker(1, 0, running)},
				{pod: worker(1, 0, running), deleted: true},
				{pod: worker(0, 1, pending)}, {pod: worker(1, 1, pending)},
			},
			want: []string{
				`ns: llm-worker-0-r1 (attempt "1") alive beside llm-worker-0-r0 (attempt "0")`,
				`ns: llm-worker-1-r1 (attempt "1") alive beside llm-worker-0-r0 (attempt "0")`,
			},
		},
		"the new attempt created while an old pod is terminating": {
			events: []podEvent{
				{pod: worker(0, 0, running)},
				{pod: terminating(worker(0, 0, running))},
				{pod: worker(0, 1, pending)},
				{pod: worker(0, 0, running), deleted: true},
			},
			want: []string{`ns: llm-worker-0-r1 (attempt "1") alive beside llm-worker-0-r0 (attempt "0")`},
		},
		"two pods of one rank and attempt under different names": {
			events: []podEvent{
				{pod: worker(0, 0, running)},
				{pod: worker(0, 0, pending, "llm-worker-0-again")},
			},
			want: []string{"ns: llm-worker-0-again alive beside llm-worker-0-r0, of the same role and rank"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWatcher(time.Minute)
			w.expect("ns", "llm", 2)
			for _, e := range tc.events {
				if e.deleted {
					w.remove(e.pod)
				} else {
					w.update(e.pod)
				}
			}
			got := w.tally("ns")
			if diff := cmp.Diff(tc.want, got.clashes); diff != "" {
				t.Errorf("duplicates (-want,+got):\n%s", diff)
			}
			if got.duplicates != len(tc.want) {
				t.Errorf("duplicates = %d; want %d", got.duplicates, len(tc.want))
			}
		})
	}
}
