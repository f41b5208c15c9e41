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
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

var (
	t0  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now = t0.Add(time.Hour)
)

// podWrapper builds a pod of the job as the operator would have created it.
type podWrapper struct{ corev1.Pod }

func makePod(job *convoy.TrainingJob, role mlframework.Role, rank int32) *podWrapper {
	p, _ := mlframework.For(job.Spec.Framework)
	pod := builder.Pod(job, mlframework.Replica{Role: role, Rank: rank}, p, builder.Options{})
	pod.UID = types.UID("uid-" + pod.Name)
	return &podWrapper{*pod}
}

func (w *podWrapper) phase(phase corev1.PodPhase) *podWrapper {
	w.Status.Phase = phase
	if w.Spec.NodeName == "" && phase != corev1.PodPending {
		w.Spec.NodeName = "node-a"
	}
	return w
}

func (w *podWrapper) exit(code int32) *podWrapper {
	w.phase(map[bool]corev1.PodPhase{true: corev1.PodSucceeded, false: corev1.PodFailed}[code == 0])
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
	return w
}

// finishedAt sets when the container of an exited pod terminated.
func (w *podWrapper) finishedAt(t time.Time) *podWrapper {
	w.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(t)
	return w
}

func (w *podWrapper) node(name string) *podWrapper {
	w.Spec.NodeName = name
	return w
}

// attempt makes the pod one of restart attempt n, named as that attempt names it.
func (w *podWrapper) attempt(n int) *podWrapper {
	w.Labels[convoy.LabelRestartAttempt] = strconv.Itoa(n)
	r, _ := builder.PodReplica(&w.Pod)
	job := &convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: w.Labels[convoy.LabelJobName]}}
	w.Name = mlframework.PodName(job, r, int32(n))
	w.UID = types.UID("uid-" + w.Name)
	return w
}

// named renames the pod, keeping its labels.
func (w *podWrapper) named(name string) *podWrapper {
	w.Name = name
	w.UID = types.UID("uid-" + name)
	return w
}

func (w *podWrapper) disrupted(reason string) *podWrapper {
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
		Status: corev1.ConditionTrue, Reason: reason, Message: "preempted"})
	return w
}

// tolerates adds a toleration of the taint key, for seconds (for ever when nil).
func (w *podWrapper) tolerates(key string, seconds *int64) *podWrapper {
	w.Spec.Tolerations = append(w.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds})
	return w
}

func (w *podWrapper) deleting() *podWrapper {
	w.DeletionTimestamp = &metav1.Time{Time: now}
	return w
}

// unschedulable sets the PodScheduled=False condition the scheduler writes on a pod it cannot place.
func (w *podWrapper) unschedulable(msg string) *podWrapper {
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg})
	return w
}

// oomKilled makes the pod fail as the kernel's OOM killer ends its container.
func (w *podWrapper) oomKilled() *podWrapper {
	w.exit(137)
	w.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
	return w
}

// rejected makes the pod fail on its node before any container ran (no exit code).
func (w *podWrapper) rejected(reason, msg string) *podWrapper {
	w.phase(corev1.PodFailed)
	w.Status.Reason, w.Status.Message = reason, msg
	return w
}

// evicted makes the pod evicted by its kubelet, for node pressure.
func (w *podWrapper) evicted(msg string) *podWrapper {
	w.phase(corev1.PodFailed)
	w.Status.Reason, w.Status.Message = "Evicted", msg
	return w
}

// placed binds the pod to node at the time at, as the API server records a binding.
func (w *podWrapper) placed(node string, at time.Time) *podWrapper {
	w.Spec.NodeName = node
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
		Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)})
	return w
}

// waiting sets the training container waiting for reason, as the kubelet reports it.
func (w *podWrapper) waiting(reason, msg string) *podWrapper {
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	return w
}

func (w *podWrapper) obj() *corev1.Pod { return &w.Pod }

// gang returns the job's worker pods in phase.
func gang(job *convoy.TrainingJob, phase corev1.PodPhase) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range job.Spec.NumWorkers {
		pods = append(pods, makePod(job, mlframework.RoleWorker, i).phase(phase).obj())
	}
	return pods
}

func cond(condType string, status metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: condType, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
}

func running(at time.Time) []metav1.Condition {
	return []metav1.Condition{
		cond(convoy.ConditionAdmitted, metav1.ConditionTrue, convoy.ReasonNoQueue, at),
		cond(convoy.ConditionRunning, metav1.ConditionTrue, convoy.ReasonPodsRunning, at),
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// outcome is what a test compares of a plan: the summary a user sees and the writes.
type outcome struct {
	State           convoy.TrainingJobState
	Reasons         map[string]string // condition type -> reason, of true conditions
	RestartCount    int32
	FailureRestarts int32
	// DisruptionRestarts counts restarts for lost pods.
	DisruptionRestarts int32
	FailureReason      string
	Workers            convoy.WorkerCounts
	Create             []mlframework.Replica
	Delete             []string
	Children           bool
	DeleteJob          bool
	RequeueAfter       time.Duration
	Started            bool
	Finished           bool
}

func summarize(p plan) outcome {
	o := outcome{
		State: convoy.StateFromConditions(p.status.Conditions), Reasons: map[string]string{},
		RestartCount: p.status.RestartCount, FailureRestarts: p.status.FailureRestarts, DisruptionRestarts: p.status.DisruptionRestarts, FailureReason: p.status.FailureReason,
		Workers: p.status.Workers, Create: p.create, Delete: names(p.delete), Children: p.ensureChildren,
		DeleteJob: p.deleteJob, RequeueAfter: p.requeueAfter,
		Started: p.status.StartTime != nil, Finished: p.status.CompletionTime != nil,
	}
	for _, c := range p.status.Conditions {
		if c.Status == metav1.ConditionTrue {
			o.Reasons[c.Type] = c.Reason
		}
	}
	return o
}

// decideCase is what a reconcile observes of a job and what a user then sees of decide's plan.
type decideCase struct {
	job       *convoy.TrainingJob
	pods      []*corev1.Pod
	goneNodes map[string]bool
	// notReady are nodes the node lifecycle controller tainted NoExecute as not Ready or unreachable.
	notReady map[string]*corev1.Taint
	queue    QueueStatus
	// uncounted: the last reconcile did not create pods it counted.
	uncounted bool
	want      outcome
	// says maps condition types to a part of their message.
	says map[string]string
}

// testDecide runs decide on each case, as the phase tests do: a phase is tested by what the whole
// state machine makes of an observation that reaches it.
func testDecide(t *testing.T, cases map[string]decideCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := mlframework.For(tc.job.Spec.Framework)
			if err != nil {
				t.Fatal(err)
			}
			plan := decide(observation{job: tc.job, plugin: p, pods: tc.pods, goneNodes: tc.goneNodes, notReadyNodes: tc.notReady, queue: tc.queue, uncounted: tc.uncounted, now: now, backoff: DefaultBackoff})
			if diff := cmp.Diff(tc.want, summarize(plan), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decide (-want,+got):\n%s", diff)
			}
			for condType, part := range tc.says {
				if c := meta.FindStatusCondition(plan.status.Conditions, condType); c == nil || !strings.Contains(c.Message, part) {
					t.Errorf("condition %s = %+v, want a message that says %q", condType, c, part)
				}
			}
		})
	}
}

// twoWorkers is the job the phase tests start from (two PyTorch workers), as applied and as
// running since t0.
func twoWorkers() (job, runningJob *utiltesting.TrainingJobWrapper) {
	job = utiltesting.MakeTrainingJob("llm", "ns").Workers(2)
	return job, job.Clone().Status(convoy.TrainingJobStatus{Conditions: running(t0), StartTime: start})
}

var (
	start  = &metav1.Time{Time: t0}
	w0, w1 = mlframework.Replica{Role: mlframework.RoleWorker, Rank: 0}, mlframework.Replica{Role: mlframework.RoleWorker, Rank: 1}
	// admitted are the true conditions of a job without a queue before its gang's own.
	admitted = map[string]string{convoy.ConditionAdmitted: convoy.ReasonNoQueue}
)

// with returns m with the condition types and reasons of kv added.
func with(m map[string]string, kv ...string) map[string]string {
	out := maps.Clone(m)
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestDecideKeepsTransitionTimes(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(2).Status(convoy.TrainingJobStatus{
		Conditions: running(t0), StartTime: &metav1.Time{Time: t0}}).Obj()
	p, _ := mlframework.For(job.Spec.Framework)
	got := decide(observation{job: job, plugin: p, pods: gang(job, corev1.PodRunning), now: now, backoff: DefaultBackoff})
	got.status.State = convoy.StateFromConditions(got.status.Conditions)
	want := job.Status.DeepCopy()
	want.State = convoy.StateRunning
	want.Workers = convoy.WorkerCounts{Active: 2}
	want.Resources = &convoy.ResourcesStatus{GPUs: 2, Nodes: 1, Placement: "1 node"}
	if diff := cmp.Diff(*want, got.status, cmpopts.IgnoreFields(metav1.Condition{}, "Message")); diff != "" {
		t.Errorf("a running job's status changed on a quiet reconcile (-want,+got):\n%s", diff)
	}
}

func TestExpectations(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(3).Obj()
	w := []mlframework.Replica{{Role: mlframework.RoleWorker, Rank: 0}, {Role: mlframework.RoleWorker, Rank: 1}, {Role: mlframework.RoleWorker, Rank: 2}}
	var e expectations
	if got := e.pending(job, w, nil, now); len(got) != 3 {
		t.Fatalf("nothing created yet: pending %v, want all 3", got)
	}
	e.created(job, []string{"llm-worker-0", "llm-worker-1", "llm-worker-2"}, now)
	e.failed(job, "llm-worker-2")
	seen := []*corev1.Pod{makePod(job, mlframework.RoleWorker, 0).obj()}
	// decide asks only for the pods the cache lacks: here workers 1 and 2.
	if diff := cmp.Diff(w[2:], e.pending(job, w[1:], seen, now.Add(time.Second))); diff != "" {
		t.Errorf("pods created but not yet cached are not created again (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(w[1:], e.pending(job, w[1:], seen, now.Add(time.Minute))); diff != "" {
		t.Errorf("an expectation expires (-want,+got):\n%s", diff)
	}
	restarted := job.DeepCopy()
	restarted.Status.RestartCount = 1
	if got := e.pending(restarted, w, nil, now); len(got) != 3 {
		t.Errorf("a new restart attempt starts afresh: pending %v", got)
	}
}

func TestConditionMessagesFitTheAPI(t *testing.T) {
	long := strings.Repeat("é", maxMessage)
	got := truncate(long)
	if len(got) > maxMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "(truncated)") {
		t.Errorf("truncate of %d bytes gave %d bytes, valid UTF-8 %v, ending %q", len(long), len(got), utf8.ValidString(got), got[len(got)-20:])
	}
	if short := "the scheduler's words"; truncate(short) != short {
		t.Errorf("truncate changed a short message: %q", truncate(short))
	}
}

// A pod terminating on a node whose kubelet is not Ready is deleted without a grace period once
// its own has passed, and the job looks again when it will have.
func TestDecideForceDeletesPodsStuckOnUnreadyNodes(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "team-a").Workers(2).Obj()
	p, _ := mlframework.For(job.Spec.Framework)
	overdue := makePod(job, "worker", 0).node("dead").deleting().obj()
	overdue.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
	pending := makePod(job, "worker", 1).node("dead").deleting().obj()
	pending.DeletionTimestamp = &metav1.Time{Time: now.Add(20 * time.Second)}
	elsewhere := makePod(job, "worker", 1).node("alive").deleting().obj()
	elsewhere.Name, elsewhere.DeletionTimestamp = "llm-worker-9", &metav1.Time{Time: now.Add(-time.Second)}
	got := decide(observation{job: job, plugin: p, pods: []*corev1.Pod{overdue, pending, elsewhere},
		unreadyNodes: map[string]bool{"dead": true}, now: now, backoff: DefaultBackoff})
	if names := names(got.forceDelete); len(names) != 1 || names[0] != "llm-worker-0" {
		t.Errorf("force-deleted %v, want only llm-worker-0, past its grace period on the unready node", names)
	}
	if got.requeueAfter <= 0 || got.requeueAfter > 20*time.Second {
		t.Errorf("requeueAfter = %v, want at most 20s, when llm-worker-1's grace period ends", got.requeueAfter)
	}
}

// A pod terminating on a deleted node is deleted without a grace period at once: no kubelet will
// finish it, and the gang's restart waits for it.
func TestDecideForceDeletesPodsOfAGoneNodeAtOnce(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "team-a").Workers(2).Obj()
	p, _ := mlframework.For(job.Spec.Framework)
	onGone := makePod(job, "worker", 0).node("gone").deleting().obj()
	onGone.DeletionTimestamp = &metav1.Time{Time: now.Add(30 * time.Second)}
	elsewhere := makePod(job, "worker", 1).node("alive").deleting().obj()
	elsewhere.DeletionTimestamp = &metav1.Time{Time: now.Add(30 * time.Second)}
	got := decide(observation{job: job, plugin: p, pods: []*corev1.Pod{onGone, elsewhere},
		goneNodes: map[string]bool{"gone": true}, now: now, backoff: DefaultBackoff})
	if names := names(got.forceDelete); len(names) != 1 || names[0] != "llm-worker-0" {
		t.Errorf("force-deleted %v, want only llm-worker-0, on the gone node", names)
	}
}

// TestCompletedJobDropsItsEstimatedCompletion: once the gang completes, status.completionTime
// says when, and the estimate is gone; the measured epoch duration stays.
func TestCompletedJobDropsItsEstimatedCompletion(t *testing.T) {
	_, running := twoWorkers()
	job := running.Obj()
	job.Status.Forecast = &convoy.ForecastStatus{EstimatedCompletionTime: &metav1.Time{Time: now.Add(time.Hour)}, EpochDuration: &metav1.Duration{Duration: time.Minute}}
	p, err := mlframework.For(job.Spec.Framework)
	if err != nil {
		t.Fatal(err)
	}
	pods := []*corev1.Pod{&makePod(job, mlframework.RoleWorker, 0).exit(0).Pod, &makePod(job, mlframework.RoleWorker, 1).exit(0).Pod}
	st := decide(observation{job: job, plugin: p, pods: pods, now: now, backoff: DefaultBackoff}).status
	if st.CompletionTime == nil || st.Forecast.EstimatedCompletionTime != nil || st.Forecast.EpochDuration == nil {
		t.Errorf("completed job: completionTime %v, forecast %+v; want a completionTime, no estimated completion, the epoch duration kept", st.CompletionTime, st.Forecast)
	}
}
