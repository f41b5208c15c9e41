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

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestDispatchAnnotations: the manager's job names the worker its Workload reserved on and the
// latest checkpoint a worker reported; a worker without one yet leaves the one before.
func TestDispatchAnnotations(t *testing.T) {
	onWorker := func(name string) *kueue.Workload {
		return &kueue.Workload{Status: kueue.WorkloadStatus{ClusterName: ptr.To(name)}}
	}
	checkpoint := &convoy.CheckpointStatus{Latest: "s3://ckpt/team-a/llm/attempt-0/epoch-4", Epoch: 4}
	cases := map[string]struct {
		annotations map[string]string
		status      convoy.TrainingJobStatus
		wl          *kueue.Workload
		want        map[string]string
		wantNote    string
	}{
		"no Workload yet":      {},
		"waiting for a worker": {wl: &kueue.Workload{}},
		"dispatched": {
			annotations: map[string]string{"team": "nlp"},
			wl:          onWorker("worker-1"),
			want:        map[string]string{"team": "nlp", convoy.AnnotationWorkerCluster: "worker-1"},
			wantNote:    "MultiKueue runs the job on worker cluster worker-1",
		},
		"the worker reported a checkpoint": {
			annotations: map[string]string{convoy.AnnotationWorkerCluster: "worker-1"},
			status:      convoy.TrainingJobStatus{Checkpoint: checkpoint},
			wl:          onWorker("worker-1"),
			want:        map[string]string{convoy.AnnotationWorkerCluster: "worker-1", convoy.AnnotationResumeFrom: checkpoint.Latest},
		},
		"dispatched again, before the new worker checkpointed": {
			annotations: map[string]string{convoy.AnnotationWorkerCluster: "worker-1", convoy.AnnotationResumeFrom: checkpoint.Latest},
			wl:          onWorker("worker-2"),
			want:        map[string]string{convoy.AnnotationWorkerCluster: "worker-2", convoy.AnnotationResumeFrom: checkpoint.Latest},
			wantNote:    "MultiKueue runs the job again, on worker cluster worker-2 (it ran on worker-1 before); it resumes from checkpoint " + checkpoint.Latest,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := utiltesting.MakeTrainingJob("llm", "team-a").Status(tc.status).Obj()
			job.Annotations = tc.annotations
			got := dispatchAnnotations(job, tc.wl)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("annotations (-want,+got):\n%s", diff)
			}
			note, _ := dispatchNote(tc.annotations, got)
			if note != tc.wantNote {
				t.Errorf("event note = %q, want %q", note, tc.wantNote)
			}
		})
	}
}
