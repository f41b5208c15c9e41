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

package controller

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestTally: status.workers counts the current attempt, and pods of earlier attempts or outside the gang are deleted.
func TestTally(t *testing.T) {
	job, runningJob := twoWorkers()
	testDecide(t, map[string]decideCase{
		"pods of an earlier attempt are deleted and not mistaken for the new gang, whose pods have names of their own": {
			job: job.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 1, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0)}}).Obj(),
			pods: []*corev1.Pod{
				makePod(job.Obj(), "worker", 0).attempt(1).phase(corev1.PodRunning).obj(),
				makePod(job.Obj(), "worker", 1).attempt(0).exit(1).obj(),
			},
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				RestartCount: 1, Workers: convoy.WorkerCounts{Active: 1, Pending: 1}, Create: []mlframework.Replica{{Role: mlframework.RoleWorker, Rank: 1}},
				Delete: []string{"llm-worker-1"}, Children: true, Started: true},
		},
		"a pod of the current attempt is the gang's by its labels, whatever its name (an earlier operator version named every attempt alike)": {
			job: runningJob.Clone().Status(convoy.TrainingJobStatus{StartTime: start, RestartCount: 2, Conditions: running(t0)}).Obj(),
			pods: []*corev1.Pod{
				makePod(job.Obj(), "worker", 0).attempt(2).phase(corev1.PodRunning).named("llm-worker-0").obj(),
				makePod(job.Obj(), "worker", 1).attempt(2).phase(corev1.PodRunning).obj(),
			},
			want: outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning),
				RestartCount: 2, Workers: convoy.WorkerCounts{Active: 2}, Children: true, Started: true},
		},

		"a pod of a rank the gang no longer has is deleted; the gang's own run on": {
			job:  runningJob.Clone().Obj(),
			pods: append(gang(job.Obj(), corev1.PodRunning), makePod(job.Obj(), "worker", 2).phase(corev1.PodRunning).obj()),
			want: outcome{State: convoy.StateRunning, Reasons: with(admitted, convoy.ConditionRunning, convoy.ReasonPodsRunning),
				Workers: convoy.WorkerCounts{Active: 2}, Delete: []string{"llm-worker-2"}, Children: true, Started: true},
		},
		"workers count the current attempt by phase": {
			job: job.Clone().Workers(4).Status(convoy.TrainingJobStatus{StartTime: start, Conditions: []metav1.Condition{
				cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, t0)}}).Obj(),
			pods: []*corev1.Pod{makePod(job.Obj(), "worker", 0).phase(corev1.PodRunning).obj(), makePod(job.Obj(), "worker", 1).exit(0).obj(),
				makePod(job.Obj(), "worker", 2).obj()},
			want: outcome{State: convoy.StateInitializing, Reasons: with(admitted, convoy.ConditionInitializing, convoy.ReasonPodsCreated),
				Workers: convoy.WorkerCounts{Active: 1, Succeeded: 1, Pending: 2}, Create: []mlframework.Replica{{Role: mlframework.RoleWorker, Rank: 3}},
				Children: true, Started: true},
			says: map[string]string{convoy.ConditionInitializing: "2 of 4 pods are running"},
		},
	})
}

// TestCountAttempt: the tally of a gang's pods counts only the current attempt's, replica by
// replica, and says why the first lost pod was lost.
func TestCountAttempt(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(4).Status(convoy.TrainingJobStatus{RestartCount: 1}).Obj()
	plugin, _ := mlframework.For(job.Spec.Framework)
	w := func(rank int32) mlframework.Replica {
		return mlframework.Replica{Role: mlframework.RoleWorker, Rank: rank}
	}
	pods := []*corev1.Pod{
		makePod(job, "worker", 0).attempt(1).phase(corev1.PodRunning).obj(),
		makePod(job, "worker", 1).attempt(1).phase(corev1.PodRunning).node("gone").obj(),
		makePod(job, "worker", 2).attempt(0).exit(1).obj(),
		makePod(job, "worker", 3).attempt(1).exit(1).obj(),
	}
	type counts struct {
		Failed, Lost, Missing []mlframework.Replica
		LostMsg               string
		Workers               convoy.WorkerCounts
		Running, Succeeded    int
		AllSucceeded          bool
	}
	got := countAttempt(observation{job: job, plugin: plugin, pods: pods, goneNodes: map[string]bool{"gone": true}}, 1)
	want := counts{Failed: []mlframework.Replica{w(3)}, Lost: []mlframework.Replica{w(1)}, Missing: []mlframework.Replica{w(2)},
		LostMsg: "node gone of pod llm-worker-1-r1 no longer exists", Workers: convoy.WorkerCounts{Active: 1, Failed: 2}, Running: 1}
	if diff := cmp.Diff(want, counts{got.failed, got.lost, got.missing, got.lostMsg, got.workers, got.running, got.succeeded, got.allSucceeded}); diff != "" {
		t.Errorf("countAttempt (-want,+got):\n%s", diff)
	}
	if got.attempt != "1" || len(got.current) != 3 || got.current[w(2)] != nil {
		t.Errorf("current attempt %q holds %v, want attempt 1 without llm-worker-2 of attempt 0", got.attempt, names(slices.Collect(maps.Values(got.current))))
	}
}
