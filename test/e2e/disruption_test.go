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

package e2e

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TestSchedulerPreemptionWaitsForTheVictimsCheckpoint: four low-priority gangs that checkpoint
// only when asked fill the fleet; a high-priority gang makes the scheduler preempt one. The
// victim is not evicted: the operator asks it for a checkpoint in its replies to simtrainer's
// progress reports, simtrainer writes one, and only then is the gang stopped as preempted, its
// backoff unspent; the high gang runs, and the victim's next pods resume from that checkpoint.
func TestSchedulerPreemptionWaitsForTheVictimsCheckpoint(t *testing.T) {
	e := setup(t)
	e.queue(1000)
	job := func(name, priorityClass string) *convoy.TrainingJob {
		j := e.job(name, 4, 8, priorityClass)
		j.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Frequency: 1000, PreemptionGraceSeconds: ptr.To[int32](300),
			Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
		return j
	}
	for _, name := range e.preemptOneOfFour(job) {
		j := e.get(name)
		c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionCheckpointRequested)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != convoy.ReasonCheckpointSaved {
			t.Errorf("%s: CheckpointRequested = %+v, want False with reason %s", name, c, convoy.ReasonCheckpointSaved)
		}
		cp := j.Status.Checkpoint
		if cp == nil || cp.Epoch == 0 || !strings.HasSuffix(cp.Latest, "/epoch-"+strconv.Itoa(int(cp.Epoch))) {
			t.Fatalf("%s: status.checkpoint = %+v, want the checkpoint simtrainer wrote when asked", name, cp)
		}
		if !meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionPreempted) || j.Status.FailureRestarts != 0 {
			t.Errorf("%s: Preempted %v, failureRestarts %d; want preempted without spending backoffLimit", name,
				meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionPreempted), j.Status.FailureRestarts)
		}
		for _, p := range e.pods(name) {
			if p.DeletionTimestamp != nil {
				continue
			}
			if got := envOf(&p, "CONVOY_RESUME_FROM"); got != cp.Latest {
				t.Errorf("pod %s of the preempted gang resumes from %q, want %q", p.Name, got, cp.Latest)
			}
		}
	}
}

func envOf(pod *corev1.Pod, name string) string {
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}
