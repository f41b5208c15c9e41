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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/operator/pkg/testing/apivalidation"
)

// FuzzDecide builds a job and what a reconcile could observe of it (pods of any attempt, in any
// phase, terminating or not, on nodes that are gone or not Ready, with long messages from the
// kubelet and the scheduler) from the fuzz input, and checks what decide promises of every plan,
// and that the API server accepts the status it writes.
func FuzzDecide(f *testing.F) {
	crd, err := apivalidation.TrainingJobs()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o := fuzzObservation(utiltesting.NewFuzzBytes(data))
		before := o.job.DeepCopy()
		beforePods := clonePods(o.pods)
		p := decide(o)
		if !equality.Semantic.DeepEqual(before, o.job) || !equality.Semantic.DeepEqual(beforePods, o.pods) {
			t.Fatalf("decide changed what it observed")
		}
		if again := decide(o); !equality.Semantic.DeepEqual(summarize(p), summarize(again)) || !equality.Semantic.DeepEqual(p.status, again.status) {
			t.Fatalf("decide gave two plans for one observation (-first,+second):\n%s", cmp.Diff(summarize(p), summarize(again)))
		}
		checkPlan(t, o, p)
		written := o.job.DeepCopy()
		written.Status = p.status
		if errs := crd.UpdateStatus(written, o.job); len(errs) > 0 {
			t.Errorf("the API server would refuse the status: %v", errs.ToAggregate())
		}
	})
}

// checkPlan fails t when p breaks one of decide's promises for o.
func checkPlan(t *testing.T, o observation, p plan) {
	t.Helper()
	job, st := o.job, &p.status
	replicas := o.plugin.Replicas(job)
	inGang := func(pod *corev1.Pod) bool {
		r, ok := builder.PodReplica(pod)
		return ok && slices.Contains(replicas, r)
	}
	observed := map[string]*corev1.Pod{}
	for _, pod := range o.pods {
		observed[pod.Name] = pod
	}

	// Creates: replicas of the gang, each once, never over a pod of the same name.
	created := map[string]bool{}
	for _, r := range p.create {
		name := mlframework.PodName(job, r, st.RestartCount)
		switch {
		case !slices.Contains(replicas, r):
			t.Errorf("creates %s, which is not a replica of the gang %v", name, replicas)
		case created[name]:
			t.Errorf("creates %s twice", name)
		case observed[name] != nil:
			t.Errorf("creates %s while a pod of that name exists (attempt %s)", name, observed[name].Labels[convoy.LabelRestartAttempt])
		}
		created[name] = true
	}
	// Deletes: observed pods only, each once, by one kind of deletion.
	deleted := map[string]bool{}
	for _, pod := range p.delete {
		if observed[pod.Name] != pod || deleted[pod.Name] {
			t.Errorf("deletes %s, which is not an observed pod or is deleted twice", pod.Name)
		}
		if pod.DeletionTimestamp != nil {
			t.Errorf("deletes %s, which is already terminating", pod.Name)
		}
		if created[pod.Name] {
			t.Errorf("both creates and deletes %s", pod.Name)
		}
		deleted[pod.Name] = true
	}
	for _, pod := range p.forceDelete {
		if observed[pod.Name] != pod || deleted[pod.Name] {
			t.Errorf("force-deletes %s, which is not an observed pod or is deleted twice", pod.Name)
		}
		if pod.DeletionTimestamp == nil || !o.goneNodes[pod.Spec.NodeName] && (pod.DeletionTimestamp.After(o.now) || !o.unreadyNodes[pod.Spec.NodeName]) {
			t.Errorf("force-deletes %s before its grace period ended on a node that is not Ready, on a node that exists (deletion %v, node %q)", pod.Name, pod.DeletionTimestamp, pod.Spec.NodeName)
		}
		deleted[pod.Name] = true
	}
	// The gang never has more pods than its replicas: those that stay, not finished, and those created.
	alive := len(p.create)
	for _, pod := range o.pods {
		if pod.DeletionTimestamp == nil && !deleted[pod.Name] && !isFinished(pod) {
			alive++
			if !inGang(pod) {
				t.Errorf("keeps %s, which is not a replica of the gang", pod.Name)
			}
		}
	}
	if alive > len(replicas) {
		t.Errorf("plans %d live pods for a gang of %d", alive, len(replicas))
	}

	finishedBefore, finished := job.Status.IsFinished(), st.IsFinished()
	switch {
	case finishedBefore && !finished:
		t.Errorf("a finished job is no longer finished: %s", convoy.StateFromConditions(st.Conditions))
	case finished && (len(p.create) > 0 || p.ensureChildren):
		t.Errorf("a finished job gets pods %v (ensureChildren %v)", p.create, p.ensureChildren)
	case finished:
		attempt := strconv.Itoa(int(st.RestartCount))
		for _, pod := range p.delete {
			if isFinished(pod) && inGang(pod) && pod.Labels[convoy.LabelRestartAttempt] == attempt {
				t.Errorf("a finished job deletes its finished pod %s: its logs go with it", pod.Name)
			}
		}
		if !finishedBefore && st.CompletionTime == nil {
			t.Errorf("a job that finished has no completionTime")
		}
	case job.IsSuspended() && (len(p.create) > 0 || p.ensureChildren || st.StartTime != nil):
		t.Errorf("a suspended job gets pods %v (ensureChildren %v, startTime %v)", p.create, p.ensureChildren, st.StartTime)
	}
	if !finishedBefore && meta.IsStatusConditionTrue(st.Conditions, convoy.ConditionFailed) && st.FailureReason == "" {
		t.Errorf("a failed job has no failureReason")
	}
	if p.deleteJob && !finished {
		t.Errorf("deletes a job that has not finished")
	}

	// Counters only grow, by one restart at most, and stay within the spec's limits.
	in := job.Status
	if st.RestartCount < in.RestartCount || st.RestartCount > in.RestartCount+1 {
		t.Errorf("restartCount went from %d to %d", in.RestartCount, st.RestartCount)
	}
	if st.FailureRestarts < in.FailureRestarts || st.FailureRestarts > max(in.FailureRestarts, backoffLimit(job)) {
		t.Errorf("failureRestarts went from %d to %d, backoffLimit %d", in.FailureRestarts, st.FailureRestarts, backoffLimit(job))
	}
	if st.DisruptionRestarts < in.DisruptionRestarts || st.DisruptionRestarts > max(in.DisruptionRestarts, disruptionLimit(job)) {
		t.Errorf("disruptionRestarts went from %d to %d, disruptionLimit %d", in.DisruptionRestarts, st.DisruptionRestarts, disruptionLimit(job))
	}
	if p.requeueAfter < 0 {
		t.Errorf("requeueAfter %v is negative", p.requeueAfter)
	}
	if st.ObservedGeneration != job.Generation {
		t.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, job.Generation)
	}
	// Conditions pass the API's validation of metav1.Condition too: messages within 32 KiB.
	if errs := metav1validation.ValidateConditions(st.Conditions, field.NewPath("status", "conditions")); len(errs) > 0 {
		t.Errorf("the API server would refuse the conditions: %v", errs.ToAggregate())
	}
}

// fuzzNow is when the fuzzed reconcile runs; the observed times lie around it.
var fuzzNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fuzzObservation builds a well-formed observation: what the API server could hold (unique pod
// names, valid conditions) in any combination.
func fuzzObservation(in *utiltesting.FuzzBytes) observation {
	fw := utiltesting.Pick(in, convoy.FrameworkPyTorch, convoy.FrameworkTensorFlow, convoy.FrameworkJAX,
		convoy.FrameworkMPI, convoy.FrameworkMXNet, convoy.FrameworkGeneric)
	w := utiltesting.MakeTrainingJob("llm", "ns").Framework(fw).Workers(int32(1 + in.Intn(5))).GPUs(int32(in.Intn(3)))
	switch fw {
	case convoy.FrameworkTensorFlow:
		w.ParameterServers(int32(in.Intn(3)))
	case convoy.FrameworkMXNet:
		w.ParameterServers(int32(1 + in.Intn(2)))
	}
	w.Generation = int64(1 + in.Intn(4))
	if in.Bool() {
		w.Queue("team-a")
	}
	if in.Bool() {
		w.Suspend(in.Bool())
	}
	if in.Bool() {
		w.FailurePolicy(utiltesting.Pick(in, convoy.RestartNever, convoy.RestartOnFailure, convoy.RestartExitCode, ""), int32(in.Intn(4)))
		fp := w.Spec.FailurePolicy
		if in.Bool() {
			fp.DisruptionLimit = ptr.To(int32(in.Intn(4)))
		}
		if in.Bool() {
			fp.StartupTimeoutSeconds = ptr.To(int32(1 + in.Intn(1200)))
		}
		if in.Bool() {
			fp.ActiveDeadlineSeconds = ptr.To(int64(1 + in.Intn(7200)))
		}
	}
	if in.Bool() {
		w.TargetAccuracy(float64(in.Intn(101)) / 100)
	}
	if in.Bool() {
		w.Patience(int32(1 + in.Intn(5)))
	}
	if in.Bool() {
		w.TTL(int32(in.Intn(7200)))
	}
	job := w.Obj()
	job.Status = fuzzStatus(in, job)
	plugin, err := mlframework.For(job.Spec.Framework)
	if err != nil {
		panic(err)
	}

	nodes := []string{"", "node-a", "node-b", "gone", "unready"}
	o := observation{job: job, plugin: plugin, now: fuzzNow, backoff: DefaultBackoff,
		nodes:        map[string]map[string]string{"node-a": {convoy.LabelTopologyRack: "rack-a"}, "node-b": {}},
		goneNodes:    map[string]bool{"gone": true},
		unreadyNodes: map[string]bool{"unready": in.Bool()}}
	if in.Bool() {
		o.notReadyNodes = map[string]*corev1.Taint{"unready": {Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
	}
	if in.Bool() {
		o.queue = QueueStatus{WaitingMessage: fuzzMessage(in), Preempted: fuzzMessage(in)}
	}
	// Every replica, and ranks past the gang's (the gang was larger before), may have a pod of
	// some attempt: one pod a name, as in the API server.
	candidates := append(plugin.Replicas(job), mlframework.Replica{Role: mlframework.RoleWorker, Rank: job.Spec.NumWorkers},
		mlframework.Replica{Role: mlframework.RolePS, Rank: 3})
	for _, r := range candidates {
		if in.Intn(4) == 0 {
			continue
		}
		o.pods = append(o.pods, fuzzPod(in, job, r, utiltesting.Pick(in, nodes...)))
	}
	return o
}

func fuzzStatus(in *utiltesting.FuzzBytes, job *convoy.TrainingJob) convoy.TrainingJobStatus {
	at := func() metav1.Time { return metav1.NewTime(fuzzNow.Add(-time.Duration(in.Intn(7200)) * time.Second)) }
	st := convoy.TrainingJobStatus{RestartCount: int32(in.Intn(4))}
	st.FailureRestarts = int32(in.Intn(int(st.RestartCount) + 1))
	st.DisruptionRestarts = int32(in.Intn(int(st.RestartCount-st.FailureRestarts) + 1))
	if in.Bool() {
		st.StartTime = ptr.To(at())
	}
	reasons := []string{convoy.ReasonPodsCreated, convoy.ReasonPodsRunning, convoy.ReasonPodFailed, convoy.ReasonNodeLost,
		convoy.ReasonPodCreationFailed, convoy.ReasonUserSuspended, convoy.ReasonWaitingForAdmission, convoy.ReasonAllWorkersSucceeded,
		convoy.ReasonNoQueue, convoy.ReasonPreempted}
	for _, c := range []string{convoy.ConditionAdmitted, convoy.ConditionQueued, convoy.ConditionInitializing, convoy.ConditionRunning,
		convoy.ConditionRestarting, convoy.ConditionSuspended, convoy.ConditionPreempted, convoy.ConditionCompleted, convoy.ConditionFailed} {
		if in.Intn(3) != 0 {
			continue
		}
		status := utiltesting.Pick(in, metav1.ConditionTrue, metav1.ConditionFalse)
		st.Conditions = append(st.Conditions, metav1.Condition{Type: c, Status: status, Reason: utiltesting.Pick(in, reasons...),
			Message: truncate(fuzzMessage(in)), LastTransitionTime: at(), ObservedGeneration: job.Generation})
		if status == metav1.ConditionTrue && (c == convoy.ConditionCompleted || c == convoy.ConditionFailed) && in.Bool() {
			st.CompletionTime = ptr.To(at())
		}
	}
	if in.Bool() {
		st.CurrentEpoch = int32(in.Intn(20))
		st.Metrics = &convoy.TrainingMetrics{Accuracy: ptr.To(float64(in.Intn(101)) / 100)}
		st.Best = &convoy.BestMetric{Name: "accuracy", Value: float64(in.Intn(101)) / 100, Epoch: int32(in.Intn(20))}
	}
	return st
}

// fuzzPod is a pod of replica r as the operator created it in some attempt, in whatever state
// the kubelet, the scheduler or an eviction left it.
func fuzzPod(in *utiltesting.FuzzBytes, job *convoy.TrainingJob, r mlframework.Replica, node string) *corev1.Pod {
	pod := makePod(job, r.Role, r.Rank).attempt(in.Intn(int(job.Status.RestartCount) + 2)).node(node).obj()
	pod.Status.Phase = utiltesting.Pick(in, corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown)
	if in.Intn(4) == 0 {
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(fuzzNow.Add(time.Duration(in.Intn(120)-60) * time.Second)))
	}
	if in.Intn(4) == 0 {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: utiltesting.Pick(in, corev1.PodReasonPreemptionByScheduler, "EvictionByEvictionAPI", "DeletionByTaintManager"), Message: fuzzMessage(in)})
	}
	if in.Intn(4) == 0 {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: fuzzMessage(in)})
	} else if node != "" {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(fuzzNow.Add(-time.Duration(in.Intn(1300)) * time.Second))})
	}
	if in.Intn(8) == 0 {
		pod.Status.Reason, pod.Status.Message = "Evicted", fuzzMessage(in)
	}
	state := corev1.ContainerState{}
	switch in.Intn(3) {
	case 1:
		state.Terminated = &corev1.ContainerStateTerminated{ExitCode: utiltesting.Pick(in, 0, 1, 2, 137, 139, 143, 255, in.Int32()),
			Reason: utiltesting.Pick(in, "", "Error", "OOMKilled"), FinishedAt: metav1.NewTime(fuzzNow.Add(-time.Duration(in.Intn(600)) * time.Second))}
	case 2:
		state.Waiting = &corev1.ContainerStateWaiting{Reason: utiltesting.Pick(in, "ContainerCreating", "ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError"),
			Message: fuzzMessage(in)}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: utiltesting.Pick(in, "trainer", "sidecar"), State: state}}
	return pod
}

// fuzzMessage is what a kubelet, scheduler or queue may say: empty, short, or past the API's limit
// on a condition message, in one- to four-byte characters.
func fuzzMessage(in *utiltesting.FuzzBytes) string {
	return strings.Repeat(utiltesting.Pick(in, "x", "é", "漢", "🚀", "a b"), utiltesting.Pick(in, 0, 1, 10, maxMessage/2, maxMessage))
}

func clonePods(pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
	}
	return out
}
