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
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/podset"
	"sigs.k8s.io/kueue/pkg/workloadslicing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

func TestPodSets(t *testing.T) {
	type podSet struct {
		Name     string
		Count    int32
		Requests corev1.ResourceList
	}
	cases := map[string]struct {
		job  *convoy.TrainingJob
		want []podSet
	}{
		"pytorch gang is one pod set of workers": {
			job: utiltesting.MakeTrainingJob("a", "ns").Workers(4).GPUs(8).Resources("16", "64Gi").Obj(),
			want: []podSet{{Name: "worker", Count: 4, Requests: corev1.ResourceList{
				"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
			}}},
		},
		"tensorflow parameter servers are their own pod set without GPUs": {
			job: utiltesting.MakeTrainingJob("a", "ns").Framework(convoy.FrameworkTensorFlow).Workers(2).GPUs(1).ParameterServers(3).Resources("4", "").Obj(),
			want: []podSet{
				{Name: "worker", Count: 2, Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("4")}},
				{Name: "ps", Count: 3, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
			},
		},
		"mxnet has workers, servers and one scheduler": {
			job: utiltesting.MakeTrainingJob("a", "ns").Framework(convoy.FrameworkMXNet).Workers(2).GPUs(2).ParameterServers(1).Obj(),
			want: []podSet{
				{Name: "worker", Count: 2, Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}},
				{Name: "ps", Count: 1},
				{Name: "scheduler", Count: 1},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sets, err := (*Job)(tc.job).PodSets(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var got []podSet
			for _, ps := range sets {
				requests := corev1.ResourceList{}
				for _, c := range ps.Template.Spec.Containers {
					for k, v := range c.Resources.Requests {
						requests[k] = v
					}
				}
				if len(requests) == 0 {
					requests = nil
				}
				got = append(got, podSet{Name: string(ps.Name), Count: ps.Count, Requests: requests})
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("pod sets (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPodSetsIgnoreWhatChangesWhileRunning: a reported checkpoint and a gang restart change the
// pods' environment and labels, but must not make Kueue think the job changed and recreate its
// Workload.
func TestPodSetsIgnoreWhatChangesWhileRunning(t *testing.T) {
	job := utiltesting.MakeTrainingJob("a", "ns").Workers(2).GPUs(8).
		Scheduling(convoy.SchedulingSpec{PriorityClassName: "high", NodeSelector: map[string]string{"pool": "a"}}).Obj()
	before, err := (*Job)(job).PodSets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	job.Status.Checkpoint = &convoy.CheckpointStatus{Latest: "s3://ckpt/epoch-3", Epoch: 3}
	job.Status.RestartCount = 2
	after, err := (*Job)(job).PodSets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("pod sets changed with the job's status:\n%s", cmp.Diff(before, after))
	}
	if got := before[0].Template.Spec.PriorityClassName; got != "high" {
		t.Errorf("priorityClassName = %q, want high", got)
	}
	if got := before[0].Template.Spec.NodeSelector; !equality.Semantic.DeepEqual(got, map[string]string{"pool": "a"}) {
		t.Errorf("nodeSelector = %v, want the job's", got)
	}
	for _, c := range before[0].Template.Spec.Containers {
		if len(c.Env) > 0 || len(c.VolumeMounts) > 0 {
			t.Errorf("container %s keeps env or mounts in the pod set: %+v", c.Name, c)
		}
	}
}

func TestRunAndRestorePodSetsInfo(t *testing.T) {
	spot := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	own := corev1.Toleration{Key: "team", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoSchedule}
	cases := map[string]struct {
		job           *convoy.TrainingJob
		infos         []podset.PodSetInfo
		wantErr       bool
		wantScheduled *convoy.SchedulingSpec
	}{
		"flavor labels and tolerations join the job's own": {
			job: utiltesting.MakeTrainingJob("a", "ns").Queue("q").Suspend(true).
				Scheduling(convoy.SchedulingSpec{Queue: "q", NodeSelector: map[string]string{"pool": "a"}, Tolerations: []corev1.Toleration{own}}).Obj(),
			infos: []podset.PodSetInfo{{Name: "worker", NodeSelector: map[string]string{convoy.LabelGPUProduct: "H100"}, Tolerations: []corev1.Toleration{spot},
				Labels: map[string]string{"kueue.x-k8s.io/podset": "worker"}}},
			wantScheduled: &convoy.SchedulingSpec{Queue: "q", NodeSelector: map[string]string{"pool": "a", convoy.LabelGPUProduct: "H100"},
				Tolerations: []corev1.Toleration{own, spot}},
		},
		"roles on flavors with the same labels run together": {
			job: utiltesting.MakeTrainingJob("a", "ns").Framework(convoy.FrameworkTensorFlow).ParameterServers(1).Queue("q").Suspend(true).Obj(),
			infos: []podset.PodSetInfo{
				{Name: "worker", NodeSelector: map[string]string{convoy.LabelGPUProduct: "H100"}, Labels: map[string]string{"kueue.x-k8s.io/podset": "worker"}},
				{Name: "ps", NodeSelector: map[string]string{convoy.LabelGPUProduct: "H100"}, Labels: map[string]string{"kueue.x-k8s.io/podset": "ps"}},
			},
			wantScheduled: &convoy.SchedulingSpec{Queue: "q", NodeSelector: map[string]string{convoy.LabelGPUProduct: "H100"}},
		},
		"roles on flavors whose labels conflict cannot run": {
			job: utiltesting.MakeTrainingJob("a", "ns").Framework(convoy.FrameworkTensorFlow).ParameterServers(1).Queue("q").Suspend(true).Obj(),
			infos: []podset.PodSetInfo{
				{Name: "worker", NodeSelector: map[string]string{convoy.LabelGPUProduct: "H100"}},
				{Name: "ps", NodeSelector: map[string]string{convoy.LabelGPUProduct: "A100"}},
			},
			wantErr: true,
		},
		"one info per role": {
			job:     utiltesting.MakeTrainingJob("a", "ns").Queue("q").Suspend(true).Obj(),
			infos:   []podset.PodSetInfo{{Name: "worker"}, {Name: "ps"}},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := (*Job)(tc.job.DeepCopy())
			original := recordedInfos(t, tc.job)
			err := job.RunWithPodSetsInfo(context.Background(), tc.infos)
			if tc.wantErr {
				if err == nil || !podset.IsPermanent(err) {
					t.Fatalf("RunWithPodSetsInfo = %v, want a permanent error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if job.IsSuspended() {
				t.Error("the job is still suspended")
			}
			if diff := cmp.Diff(tc.wantScheduled, job.Spec.Scheduling); diff != "" {
				t.Errorf("spec.scheduling (-want,+got):\n%s", diff)
			}
			job.Suspend()
			if !job.RestorePodSetsInfo(original) {
				t.Error("RestorePodSetsInfo reported no change")
			}
			if diff := cmp.Diff(tc.job.Spec.Scheduling.NodeSelector, job.Spec.Scheduling.NodeSelector); diff != "" {
				t.Errorf("restored nodeSelector (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.job.Spec.Scheduling.Tolerations, job.Spec.Scheduling.Tolerations); diff != "" {
				t.Errorf("restored tolerations (-want,+got):\n%s", diff)
			}
			if job.RestorePodSetsInfo(original) {
				t.Error("restoring twice reported a change")
			}
		})
	}
}

// recordedInfos is what Kueue records of the job's pod sets in its Workload and restores on eviction.
func recordedInfos(t *testing.T, job *convoy.TrainingJob) []podset.PodSetInfo {
	t.Helper()
	sets, err := (*Job)(job).PodSets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var infos []podset.PodSetInfo
	for i := range sets {
		infos = append(infos, podset.FromPodSet(&sets[i]))
	}
	return infos
}

func TestJobState(t *testing.T) {
	cond := func(condType string) metav1.Condition {
		return metav1.Condition{Type: condType, Status: metav1.ConditionTrue, Reason: "R", Message: condType + " message"}
	}
	cases := map[string]struct {
		status                              convoy.TrainingJobStatus
		wantActive, wantReady, wantFinished bool
		wantSuccess                         bool
		wantMessage                         string
	}{
		"queued":                 {wantSuccess: true},
		"pods still terminating": {status: convoy.TrainingJobStatus{Workers: convoy.WorkerCounts{Active: 1}}, wantActive: true, wantSuccess: true},
		"pods pending":           {status: convoy.TrainingJobStatus{Workers: convoy.WorkerCounts{Pending: 2}}, wantActive: true, wantSuccess: true},
		"running": {status: convoy.TrainingJobStatus{Workers: convoy.WorkerCounts{Active: 2},
			Conditions: []metav1.Condition{cond(convoy.ConditionRunning)}}, wantActive: true, wantReady: true, wantSuccess: true},
		"completed": {status: convoy.TrainingJobStatus{Workers: convoy.WorkerCounts{Succeeded: 2},
			Conditions: []metav1.Condition{cond(convoy.ConditionCompleted)}}, wantFinished: true, wantSuccess: true, wantMessage: "Completed message"},
		"failed": {status: convoy.TrainingJobStatus{Workers: convoy.WorkerCounts{Failed: 1},
			Conditions: []metav1.Condition{cond(convoy.ConditionFailed)}}, wantFinished: true, wantMessage: "Failed message"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := (*Job)(utiltesting.MakeTrainingJob("a", "ns").Status(tc.status).Obj())
			if got := job.IsActive(); got != tc.wantActive {
				t.Errorf("IsActive = %v, want %v", got, tc.wantActive)
			}
			if got := job.PodsReady(t.Context()); got != tc.wantReady {
				t.Errorf("PodsReady = %v, want %v", got, tc.wantReady)
			}
			msg, success, finished := job.Finished(t.Context())
			if msg != tc.wantMessage || success != tc.wantSuccess || finished != tc.wantFinished {
				t.Errorf("Finished = (%q, %v, %v), want (%q, %v, %v)", msg, success, finished, tc.wantMessage, tc.wantSuccess, tc.wantFinished)
			}
		})
	}
}

func TestPriorityClass(t *testing.T) {
	job := utiltesting.MakeTrainingJob("a", "ns").Scheduling(convoy.SchedulingSpec{PriorityClassName: "high"}).Obj()
	if got := (*Job)(job).PriorityClass(); got != "high" {
		t.Errorf("PriorityClass = %q, want high", got)
	}
	if got := (*Job)(job).GVK(); got.Kind != "TrainingJob" || got.Group != "convoy.dev" {
		t.Errorf("GVK = %v", got)
	}
}

func TestChangedForKueue(t *testing.T) {
	base := utiltesting.MakeTrainingJob("a", "ns").Queue("q").Suspend(true).Obj()
	cond := func(condType string) metav1.Condition {
		return metav1.Condition{Type: condType, Status: metav1.ConditionTrue, Reason: "R"}
	}
	elastic := utiltesting.MakeTrainingJob("a", "ns").Queue("q").Elastic(1, convoy.ElasticSpec{}).
		Status(convoy.TrainingJobStatus{Workers: convoy.WorkerCounts{Active: 1}}).Obj()
	elastic.Annotations = map[string]string{workloadslicing.EnabledAnnotationKey: workloadslicing.EnabledAnnotationValue}
	cases := map[string]struct {
		base   *convoy.TrainingJob
		change func(j *convoy.TrainingJob)
		want   bool
	}{
		"a new Queued message":      {change: func(j *convoy.TrainingJob) { j.Status.Conditions = []metav1.Condition{cond(convoy.ConditionQueued)} }},
		"progress reported":         {change: func(j *convoy.TrainingJob) { j.Status.Progress, j.Status.CurrentEpoch = "40%", 4 }},
		"spec changed":              {change: func(j *convoy.TrainingJob) { j.Generation++ }, want: true},
		"label changed":             {change: func(j *convoy.TrainingJob) { j.Labels = map[string]string{"x": "y"} }, want: true},
		"a pod started":             {change: func(j *convoy.TrainingJob) { j.Status.Workers.Pending = 1 }, want: true},
		"every pod runs":            {change: func(j *convoy.TrainingJob) { j.Status.Conditions = []metav1.Condition{cond(convoy.ConditionRunning)} }, want: true},
		"completed":                 {change: func(j *convoy.TrainingJob) { j.Status.Conditions = []metav1.Condition{cond(convoy.ConditionCompleted)} }, want: true},
		"failed":                    {change: func(j *convoy.TrainingJob) { j.Status.Conditions = []metav1.Condition{cond(convoy.ConditionFailed)} }, want: true},
		"being deleted":             {change: func(j *convoy.TrainingJob) { now := metav1.Now(); j.DeletionTimestamp = &now }, want: true},
		"active count changes only": {change: func(j *convoy.TrainingJob) { j.Status.Workers.Succeeded = 1 }},
		// Its gated pods wake Kueue themselves (elasticGated).
		"an elastic job's added pod counted": {base: elastic, change: func(j *convoy.TrainingJob) { j.Status.Workers.Pending = 1 }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			base := base
			if tc.base != nil {
				base = tc.base
			}
			changed := base.DeepCopy()
			tc.change(changed)
			if got := changedForKueue(base, changed); got != tc.want {
				t.Errorf("changedForKueue = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPartialAdmission: with minWorkers the worker pod set carries Kueue's MinCount; admitted with
// fewer workers the job runs with them, and asks for all again once suspended. Without minWorkers
// a count is ignored.
func TestPartialAdmission(t *testing.T) {
	job := utiltesting.MakeTrainingJob("a", "ns").Framework(convoy.FrameworkTensorFlow).Workers(4).MinWorkers(2).ParameterServers(1).Queue("q").Suspend(true).Obj()
	sets, err := (*Job)(job).PodSets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var mins []string
	for _, ps := range sets {
		if ps.MinCount != nil {
			mins = append(mins, fmt.Sprintf("%s:%d/%d", ps.Name, *ps.MinCount, ps.Count))
		}
	}
	if diff := cmp.Diff([]string{"worker:2/4"}, mins); diff != "" {
		t.Errorf("pod sets with a MinCount (-want,+got):\n%s", diff)
	}
	original := recordedInfos(t, job)

	running := (*Job)(job.DeepCopy())
	if err := running.RunWithPodSetsInfo(t.Context(), []podset.PodSetInfo{{Name: "worker", Count: 3}, {Name: "ps", Count: 1}}); err != nil {
		t.Fatal(err)
	}
	if running.Spec.NumWorkers != 3 || running.IsSuspended() {
		t.Errorf("admitted with 3 workers: numWorkers %d, suspended %v; want 3 and running", running.Spec.NumWorkers, running.IsSuspended())
	}
	// Kueue compares the running job's pod sets with the admitted ones: 3 workers, MinCount 2.
	sets, err = running.PodSets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ps := sets[0]; ps.Count != 3 || ps.MinCount == nil || *ps.MinCount != 2 {
		t.Errorf("running worker pod set: count %d, minCount %v; want 3 and 2", ps.Count, ps.MinCount)
	}
	running.Suspend()
	if !running.RestorePodSetsInfo(original) || running.Spec.NumWorkers != 4 {
		t.Errorf("restored numWorkers = %d, want 4", running.Spec.NumWorkers)
	}

	whole := (*Job)(utiltesting.MakeTrainingJob("b", "ns").Workers(4).Queue("q").Suspend(true).Obj())
	if err := whole.RunWithPodSetsInfo(t.Context(), []podset.PodSetInfo{{Name: "worker", Count: 3}}); err != nil {
		t.Fatal(err)
	}
	if whole.Spec.NumWorkers != 4 {
		t.Errorf("a job without minWorkers runs with %d workers, want its 4", whole.Spec.NumWorkers)
	}
}

// TestElasticAdmission: an elastic job admitted with fewer workers keeps numWorkers as its most
// (torchrun's PET_NNODES max) and runs with the count admitted, which its pod sets then ask
// for; grown, the resize policy sees the size it was admitted at, which lends the worker grown;
// suspended, it asks for numWorkers again and was admitted at no size.
func TestElasticAdmission(t *testing.T) {
	job := utiltesting.MakeTrainingJob("a", "ns").Workers(4).Elastic(2, convoy.ElasticSpec{}).Queue("q").Suspend(true).Obj()
	original := recordedInfos(t, job)
	running := (*Job)(job.DeepCopy())
	if err := running.RunWithPodSetsInfo(t.Context(), []podset.PodSetInfo{{Name: "worker", Count: 3}}); err != nil {
		t.Fatal(err)
	}
	if running.Spec.NumWorkers != 4 || (*convoy.TrainingJob)(running).WorkerCount() != 3 {
		t.Errorf("admitted with 3 workers: numWorkers %d, workers %d; want 4 and 3", running.Spec.NumWorkers, (*convoy.TrainingJob)(running).WorkerCount())
	}
	sets, err := running.PodSets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ps := sets[0]; ps.Count != 3 || ps.MinCount == nil || *ps.MinCount != 2 {
		t.Errorf("running worker pod set: count %d, minCount %v; want 3 and 2", ps.Count, ps.MinCount)
	}
	grown := (*convoy.TrainingJob)(running).DeepCopy()
	grown.Annotations[convoy.AnnotationElasticWorkers] = "4"
	if j := policyJob(grown, &kueue.Workload{}); j.Current != 4 || j.Admitted != 3 {
		t.Errorf("grown to 4: the policy sees %d workers admitted at %d, want 4 and 3", j.Current, j.Admitted)
	}
	running.Suspend()
	if !running.RestorePodSetsInfo(original) || (*convoy.TrainingJob)(running).WorkerCount() != 4 ||
		(*convoy.TrainingJob)(running).ElasticAdmittedWorkers() != 0 {
		t.Errorf("restored: %d workers admitted at %d, want 4 and 0", (*convoy.TrainingJob)(running).WorkerCount(),
			(*convoy.TrainingJob)(running).ElasticAdmittedWorkers())
	}
}

// TestManagedBy: Kueue may set spec.managedBy only while Convoy's operator would run the job.
func TestManagedBy(t *testing.T) {
	for _, tc := range []struct {
		managedBy  *string
		canDefault bool
	}{
		{nil, true},
		{ptr.To(""), true},
		{ptr.To(convoy.ManagedByConvoy), true},
		{ptr.To("kueue.x-k8s.io/multikueue"), false},
	} {
		job := &Job{Spec: convoy.TrainingJobSpec{ManagedBy: tc.managedBy}}
		if got := job.CanDefaultManagedBy(); got != tc.canDefault {
			t.Errorf("managedBy %v: CanDefaultManagedBy() = %v, want %v", ptr.Deref(tc.managedBy, "<nil>"), got, tc.canDefault)
		}
		job.SetManagedBy(ptr.To("kueue.x-k8s.io/multikueue"))
		if got := job.ManagedBy(); got == nil || *got != "kueue.x-k8s.io/multikueue" || !job.trainingJob().ManagedElsewhere() {
			t.Errorf("after SetManagedBy: ManagedBy() = %v, ManagedElsewhere %v", got, job.trainingJob().ManagedElsewhere())
		}
	}
}
