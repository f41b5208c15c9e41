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
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// TestLifecycleToCompletion follows a job from apply to Completed: its PodGroup, pods, Services
// and ConfigMap appear, it is Initializing until the gang is placed, Running once kwok runs every
// pod, and Completed when every worker exits 0.
func TestLifecycleToCompletion(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	job := utiltesting.MakeTrainingJob("llm", e.ns).Workers(2).GPUs(8).Resources("4", "").
		Topology(convoy.TopologyRack, convoy.TopologyRequired).
		Monitoring(convoy.MonitoringSpec{Enabled: true}).
		Hyperparameters(convoy.Hyperparameters{LearningRate: ptr.To(3e-4), Epochs: ptr.To[int32](3)}).Obj()
	e.create(job)

	pods := e.waitPods("llm", 2, 0)
	job = e.waitState("llm", convoy.StateInitializing)
	e.wantCondition(job, convoy.ConditionAdmitted, convoy.ReasonNoQueue)
	if job.Status.StartTime == nil || job.Status.Resources == nil || job.Status.Resources.GPUs != 16 {
		t.Errorf("status = %+v, want a start time and 16 GPUs", job.Status)
	}

	pg := &schedv1alpha1.PodGroup{}
	if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "llm"}, pg); err != nil {
		t.Fatal(err)
	}
	wantSpec := schedv1alpha1.PodGroupSpec{MinMember: 2, ScheduleTimeoutSeconds: ptr.To[int32](300),
		MinResources: corev1.ResourceList{"cpu": resource.MustParse("8"), "nvidia.com/gpu": resource.MustParse("16")}}
	if diff := cmp.Diff(wantSpec, pg.Spec); diff != "" {
		t.Errorf("PodGroup spec (-want,+got):\n%s", diff)
	}
	if pg.Annotations[convoy.AnnotationTopologyLevel] != "rack" || !metav1.IsControlledBy(pg, job) {
		t.Errorf("PodGroup annotations %v, owners %v: want the topology and the job as controller", pg.Annotations, pg.OwnerReferences)
	}
	for name, pod := range pods {
		if pod.Labels[schedv1alpha1.PodGroupLabel] != "llm" || pod.Spec.SchedulerName != "convoy-scheduler" ||
			pod.Spec.Subdomain != "llm" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever || !metav1.IsControlledBy(pod, job) {
			t.Errorf("pod %s: labels %v, scheduler %q, subdomain %q, restartPolicy %s", name, pod.Labels, pod.Spec.SchedulerName, pod.Spec.Subdomain, pod.Spec.RestartPolicy)
		}
		if got := pod.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; got.Value() != 8 {
			t.Errorf("pod %s GPU limit = %s, want 8", name, got.String())
		}
		if util.EnvOf(pod, "MASTER_ADDR") != "llm-worker-0.llm."+e.ns+".svc" || util.EnvOf(pod, "PET_NNODES") != "2" {
			t.Errorf("pod %s torchrun environment: %v", name, pod.Spec.Containers[0].Env)
		}
	}
	headless, metricsSvc, cm := &corev1.Service{}, &corev1.Service{}, &corev1.ConfigMap{}
	for name, obj := range map[string]client.Object{"llm": headless, "llm-metrics": metricsSvc, "llm-config": cm} {
		if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, obj); err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(obj, job) {
			t.Errorf("%s is not controlled by the job: %v", name, obj.GetOwnerReferences())
		}
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service spec = %+v", headless.Spec)
	}
	if metricsSvc.Spec.Selector[convoy.LabelReplicaRank] != "0" || metricsSvc.Spec.Ports[0].Port != 9090 {
		t.Errorf("metrics Service spec = %+v", metricsSvc.Spec)
	}
	if cm.Data["LEARNING_RATE"] != "0.0003" || cm.Data["hyperparameters.json"] != `{"learningRate":0.0003,"epochs":3}` {
		t.Errorf("ConfigMap data = %v", cm.Data)
	}

	e.bindAll("llm")
	job = e.waitState("llm", convoy.StateRunning)
	if diff := cmp.Diff(convoy.WorkerCounts{Active: 2}, job.Status.Workers); diff != "" {
		t.Errorf("workers (-want,+got):\n%s", diff)
	}
	if r := job.Status.Resources; r.Nodes != 2 || r.Placement == "" {
		t.Errorf("resources = %+v, want 2 nodes and a placement", r)
	}
	e.eventually("trainingjob_allocated_gpus of the running gang", func() (bool, string) {
		got, _ := util.Gathered(t, ctrlmetrics.Registry, "trainingjob_allocated_gpus", map[string]string{"namespace": e.ns, "training_job": "llm"})
		return got == 16, fmt.Sprint(got)
	})

	e.finishPod("llm-worker-0", 0)
	e.finishPod("llm-worker-1", 0)
	job = e.waitState("llm", convoy.StateCompleted)
	e.wantCondition(job, convoy.ConditionCompleted, convoy.ReasonAllWorkersSucceeded)
	if job.Status.CompletionTime == nil || job.Status.Duration == "" || job.Status.Workers.Succeeded != 2 {
		t.Errorf("status = %+v, want a completion time, a duration and 2 succeeded workers", job.Status)
	}
	e.waitEvents("llm", convoy.ReasonNoQueue, convoy.ReasonPodsCreated, convoy.ReasonPodsRunning, convoy.ReasonAllWorkersSucceeded)
	if got := stateCount(t, e.ns, convoy.StateCompleted); got != 1 {
		t.Errorf("trainingjob_total{state=Completed} = %v, want 1", got)
	}
}

// stateCount is trainingjob_total for a namespace and state.
func stateCount(t *testing.T, namespace string, state convoy.TrainingJobState) float64 {
	t.Helper()
	v, _ := util.Gathered(t, ctrlmetrics.Registry, "trainingjob_total", map[string]string{"namespace": namespace, "state": string(state)})
	return v
}

// TestFailedWorkerRestartsGangFromCheckpoint: a checkpoint is reported, a worker fails, and the
// whole gang is recreated with restartCount 1, resuming from that checkpoint.
func TestFailedWorkerRestartsGangFromCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("ft", e.ns).Workers(2).FailurePolicy(convoy.RestartOnFailure, 3).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, ResumeFrom: "s3://models/base",
			Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}).Obj())
	pods := e.startGang("ft", 2, 0)
	if got := util.EnvOf(pods["ft-worker-0"], "CONVOY_RESUME_FROM"); got != "s3://models/base" {
		t.Errorf("first run CONVOY_RESUME_FROM = %q, want spec.checkpoint.resumeFrom", got)
	}

	e.report(pods["ft-worker-0"], "checkpoint", progress.Checkpoint{Path: "s3://ckpt/" + e.ns + "/ft/epoch-2", Epoch: 2})
	job := e.job("ft")
	if cp := job.Status.Checkpoint; cp == nil || cp.Latest != "s3://ckpt/"+e.ns+"/ft/epoch-2" || cp.Epoch != 2 || cp.Time == nil {
		t.Fatalf("status.checkpoint = %+v right after the report was acknowledged", cp)
	}
	e.eventually("the PodGroup's last-checkpoint-time", func() (bool, string) {
		pg := &schedv1alpha1.PodGroup{}
		if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "ft"}, pg); err != nil {
			return false, err.Error()
		}
		got := pg.Annotations[convoy.AnnotationLastCheckpointTime]
		return got == job.Status.Checkpoint.Time.UTC().Format(time.RFC3339), got
	})

	oldUIDs := map[string]bool{}
	for _, p := range pods {
		oldUIDs[string(p.UID)] = true
	}
	e.finishPod("ft-worker-1", 1)
	// The test's backoff is a second or less: watch the restart's event rather than the state.
	e.waitEvents("ft", convoy.ReasonPodFailed)
	pods = e.waitPods("ft", 2, 1)
	job = e.job("ft")
	if job.Status.RestartCount != 1 || job.Status.FailureRestarts != 1 {
		t.Errorf("restartCount %d, failureRestarts %d, want 1 and 1", job.Status.RestartCount, job.Status.FailureRestarts)
	}
	for name, p := range pods {
		if oldUIDs[string(p.UID)] {
			t.Errorf("pod %s was not recreated", name)
		}
		if got := util.EnvOf(p, "CONVOY_RESUME_FROM"); got != "s3://ckpt/"+e.ns+"/ft/epoch-2" {
			t.Errorf("pod %s CONVOY_RESUME_FROM = %q, want the reported checkpoint", name, got)
		}
	}
	e.bindAll("ft")
	job = e.waitState("ft", convoy.StateRunning)
	if job.Status.RestartCount != 1 {
		t.Errorf("restartCount = %d after the gang runs again, want 1", job.Status.RestartCount)
	}
}

// TestBackoffLimitExceeded: with backoffLimit 1 the second failure fails the job, the rest of the
// gang is stopped and the failed pod is kept for its logs.
func TestBackoffLimitExceeded(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("bo", e.ns).Workers(2).FailurePolicy(convoy.RestartOnFailure, 1).Obj())
	e.startGang("bo", 2, 0)
	e.finishPod("bo-worker-0", 3)
	e.startGang("bo", 2, 1)
	e.finishPod(util.WorkerPod("bo", 0, 1), 3)

	job := e.waitState("bo", convoy.StateFailed)
	c := e.wantCondition(job, convoy.ConditionFailed, convoy.ReasonBackoffLimitExceeded)
	if job.Status.FailureReason != convoy.ReasonBackoffLimitExceeded || job.Status.FailureRestarts != 1 || job.Status.CompletionTime == nil {
		t.Errorf("status = %+v", job.Status)
	}
	t.Logf("Failed: %s", c.Message)
	e.eventually("the rest of the gang to stop", func() (bool, string) {
		pods := e.pods("bo")
		_, failedKept := pods[util.WorkerPod("bo", 0, 1)]
		return len(pods) == 1 && failedKept, fmt.Sprint(len(pods), " pods")
	})
	e.waitEvents("bo", convoy.ReasonBackoffLimitExceeded)
	if got, _ := util.Gathered(t, ctrlmetrics.Registry, "trainingjob_failed_total", map[string]string{"reason": convoy.ReasonBackoffLimitExceeded}); got < 1 {
		t.Errorf("trainingjob_failed_total{reason=BackoffLimitExceeded} = %v", got)
	}
}

// TestLostPodsRestartWithoutSpendingBudget: a pod preempted by the scheduler, and a pod whose
// node vanished, each restart the gang without counting against backoffLimit 0.
func TestLostPodsRestartWithoutSpendingBudget(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("lost", e.ns).Workers(2).FailurePolicy(convoy.RestartOnFailure, 0).Obj())
	pods := e.startGang("lost", 2, 0)

	// Whole-gang preemption: the scheduler marks each pod and deletes it.
	for name := range pods {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pod := &corev1.Pod{}
			if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, pod); err != nil {
				return err
			}
			if pod.UID != pods[name].UID {
				return apierrors.NewNotFound(corev1.Resource("pods"), name) // already replaced by the next gang
			}
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: corev1.PodReasonPreemptionByScheduler, Message: "convoy-scheduler: preempted by team-b/urgent", LastTransitionTime: metav1.Now()})
			return e.k.Status().Update(t.Context(), pod)
		})
		if err == nil {
			err = e.k.Delete(t.Context(), pods[name], client.Preconditions{UID: &pods[name].UID})
		}
		// The operator may have deleted the rest of the gang already, once it saw the first pod go.
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	// A lost gang restarts without backoff: Restarting is too brief to watch, its event is not.
	e.waitPods("lost", 2, 1)
	job := e.job("lost")
	e.wantCondition(job, convoy.ConditionPreempted, convoy.ReasonPreempted)
	if job.Status.RestartCount != 1 || job.Status.FailureRestarts != 0 {
		t.Errorf("restartCount %d, failureRestarts %d, want 1 and 0", job.Status.RestartCount, job.Status.FailureRestarts)
	}
	e.waitEvents("lost", convoy.ReasonNodeLost, convoy.ReasonPreempted)
	pods = e.startGang("lost", 2, 1)

	// Node loss: a node of its own, deleted under a running pod.
	const node = "lost-node"
	if err := e.c.CreateNodes(t.Context(), framework.NodeSpec{Name: node, GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		// Only this gang's pods: the operator may already have replaced the second one.
		err := e.k.Delete(t.Context(), pod, client.Preconditions{UID: &pod.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	fresh := e.waitPods("lost", 2, 2) // deleted by someone else: lost as well
	for _, pod := range fresh {
		e.bind(pod, node)
	}
	e.waitState("lost", convoy.StateRunning)
	if err := e.k.Delete(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatal(err)
	}
	e.eventually("a restart after the node is gone", func() (bool, string) {
		job = e.job("lost")
		return job.Status.RestartCount == 3, fmt.Sprintf("restartCount %d, %s", job.Status.RestartCount, util.ConditionSummary(job.Status.Conditions))
	})
	if job.Status.FailureRestarts != 0 || job.Status.State == convoy.StateFailed {
		t.Errorf("lost pods spent the failure budget: %+v", job.Status)
	}
}

// TestActiveDeadline fails a running job with DeadlineExceeded and stops its pods.
func TestActiveDeadline(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("dl", e.ns).Workers(1).Deadline(3).Obj())
	e.waitPods("dl", 1, 0)
	e.bindAll("dl")
	job := e.waitState("dl", convoy.StateFailed)
	e.wantCondition(job, convoy.ConditionFailed, convoy.ReasonDeadlineExceeded)
	e.eventually("the pods to stop", func() (bool, string) { n := len(e.pods("dl")); return n == 0, fmt.Sprint(n) })
}

// TestSuspendAndResume: a job created suspended has no pods; suspending a running job deletes its
// gang; resuming starts it again, counted as a restart.
func TestSuspendAndResume(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("sus", e.ns).Workers(2).Suspend(true).Obj())
	job := e.waitState("sus", convoy.StateSuspended)
	e.wantCondition(job, convoy.ConditionSuspended, convoy.ReasonUserSuspended)
	if n := len(e.pods("sus")); n != 0 {
		t.Errorf("a suspended job has %d pods", n)
	}

	setSuspend(e, "sus", false)
	e.startGang("sus", 2, 0)
	setSuspend(e, "sus", true)
	job = e.waitState("sus", convoy.StateSuspended)
	if job.Status.StartTime != nil {
		t.Errorf("startTime = %v while suspended, want none", job.Status.StartTime)
	}
	e.eventually("the gang to be deleted", func() (bool, string) { n := len(e.pods("sus")); return n == 0, fmt.Sprint(n) })

	// The gang stopped while it ran: it restarts, as the next attempt, not against the backoff limit.
	setSuspend(e, "sus", false)
	e.startGang("sus", 2, 1)
	if st := e.job("sus").Status; st.RestartCount != 1 || st.FailureRestarts != 0 {
		t.Errorf("restartCount %d, failureRestarts %d after the resumed gang runs, want 1 and 0", st.RestartCount, st.FailureRestarts)
	}
	e.waitEvents("sus", convoy.ReasonUserSuspended, convoy.ReasonResumed)
}

func setSuspend(e *env, name string, suspend bool) {
	e.t.Helper()
	job := e.job(name)
	patch := client.MergeFrom(job.DeepCopy())
	job.Spec.Suspend = ptr.To(suspend)
	if err := e.k.Patch(e.t.Context(), job, patch); err != nil {
		e.t.Fatal(err)
	}
}

// TestProgressReports: a report with the pod's own token updates the status; another job's
// token, a token for another audience and no token are refused.
func TestProgressReports(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("mine", e.ns).Workers(1).Hyperparameters(convoy.Hyperparameters{Epochs: ptr.To[int32](10)}).Obj())
	e.create(utiltesting.MakeTrainingJob("other", e.ns).Workers(1).Obj())
	mine := e.waitPods("mine", 1, 0)["mine-worker-0"]
	other := e.waitPods("other", 1, 0)["other-worker-0"]

	e.report(mine, "progress", progress.Report{Epoch: ptr.To[int32](4), Step: ptr.To[int64](4000),
		Metrics: map[string]float64{"loss": 0.42, "accuracy": 0.81, "throughput": 1520}})
	job := e.job("mine")
	want := convoy.TrainingMetrics{Loss: ptr.To(0.42), Accuracy: ptr.To(0.81), Step: 4000, Additional: map[string]string{"throughput": "1520"}}
	if job.Status.CurrentEpoch != 4 || job.Status.TotalEpochs != 10 || job.Status.Progress != "40%" || job.Status.Metrics == nil {
		t.Fatalf("status after a report: epoch %d/%d, progress %q, metrics %v", job.Status.CurrentEpoch, job.Status.TotalEpochs, job.Status.Progress, job.Status.Metrics)
	}
	if diff := cmp.Diff(want, *job.Status.Metrics); diff != "" {
		t.Errorf("metrics (-want,+got):\n%s", diff)
	}
	e.eventually("trainingjob_current_epoch", func() (bool, string) {
		v, _ := util.Gathered(t, ctrlmetrics.Registry, "trainingjob_current_epoch", map[string]string{"namespace": e.ns, "training_job": "mine"})
		return v == 4, fmt.Sprint(v)
	})

	body := progress.Report{Epoch: ptr.To[int32](9)}
	refusals := map[string]struct {
		token string
		want  int
	}{
		"another job's pod token":               {token: e.podToken(other, progress.Audience), want: http.StatusForbidden},
		"a token for the API server's audience": {token: e.podToken(mine, "https://kubernetes.default.svc"), want: http.StatusUnauthorized},
		"no token":                              {want: http.StatusUnauthorized},
		"a forged token":                        {token: "not-a-token", want: http.StatusUnauthorized},
	}
	for name, tc := range refusals {
		t.Run(name, func(t *testing.T) {
			if code, answer := e.post(mine, "progress", tc.token, body); code != tc.want {
				t.Errorf("POST with %s = %d %s, want %d", name, code, answer, tc.want)
			} else {
				t.Logf("%d %s", code, answer)
			}
		})
	}
	if code, answer := e.post(mine, "progress", e.podToken(mine, progress.Audience), map[string]any{"epochs": 3}); code != http.StatusBadRequest {
		t.Errorf("a misspelt field = %d %s, want 400", code, answer)
	}
	if got := e.job("mine").Status.CurrentEpoch; got != 4 {
		t.Errorf("a refused report changed currentEpoch to %d", got)
	}
}

// TestProgressRefusesForgedAndStaleReports: what a pod of the job's namespace could try on the
// progress endpoint is refused, and the status keeps what the job's own pods reported: a look-alike
// pod carrying the job's labels, a checkpoint outside the job's location or going back, values the
// spec rules out, and a report of an earlier attempt of the gang.
func TestProgressRefusesForgedAndStaleReports(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("victim", e.ns).Workers(2).FailurePolicy(convoy.RestartOnFailure, 3).
		Hyperparameters(convoy.Hyperparameters{Epochs: ptr.To[int32](10)}).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}).Obj())
	pods := e.startGang("victim", 2, 0)
	w0 := pods["victim-worker-0"]
	loc := "s3://ckpt/" + e.ns + "/victim"
	e.report(w0, "progress", progress.Report{Epoch: ptr.To[int32](3), Metrics: map[string]float64{"accuracy": 0.5}})
	e.report(w0, "checkpoint", progress.Checkpoint{Path: loc + "/epoch-3", Epoch: 3})

	// A look-alike: a pod in the namespace with the job's labels and env, which the job did not make.
	lookalike := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "lookalike", Labels: w0.Labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "attacker", Env: w0.Spec.Containers[0].Env}}},
	}
	e.create(lookalike)

	cases := map[string]struct {
		pod  *corev1.Pod
		path string
		body any
		want int
	}{
		"forged accuracy from a look-alike pod": {lookalike, "progress",
			progress.Report{Epoch: ptr.To[int32](10), Metrics: map[string]float64{"accuracy": 0.99}}, http.StatusForbidden},
		"a checkpoint in another job's location": {w0, "checkpoint", progress.Checkpoint{Path: "s3://ckpt/" + e.ns + "/other/epoch-9", Epoch: 9}, http.StatusBadRequest},
		"a checkpoint escaping with ..":          {w0, "checkpoint", progress.Checkpoint{Path: loc + "/../other/epoch-9", Epoch: 9}, http.StatusBadRequest},
		"a checkpoint older than the latest":     {w0, "checkpoint", progress.Checkpoint{Path: loc + "/epoch-1", Epoch: 1}, http.StatusConflict},
		"an epoch past hyperparameters.epochs":   {w0, "progress", progress.Report{Epoch: ptr.To[int32](11)}, http.StatusBadRequest},
		"an accuracy above 1":                    {w0, "progress", progress.Report{Metrics: map[string]float64{"accuracy": 2}}, http.StatusBadRequest},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, answer := e.post(tc.pod, tc.path, e.podToken(tc.pod, progress.Audience), tc.body)
			if code != tc.want {
				t.Errorf("POST %s = %d %s, want %d", tc.path, code, answer, tc.want)
			} else {
				t.Logf("%d %s", code, answer)
			}
		})
	}
	if err := e.k.Get(t.Context(), client.ObjectKeyFromObject(lookalike), &corev1.Pod{}); err != nil {
		t.Fatalf("the look-alike pod is gone, so its refusal proves nothing: %v", err)
	}

	// Worker 0 of attempt 0 is held Terminating by a finalizer while the gang restarts after worker
	// 1 fails: its reports are refused once the job is at attempt 1.
	token := e.podToken(w0, progress.Audience)
	hold := "test.convoy.dev/hold"
	patchFinalizers := func(finalizers []string) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := &corev1.Pod{}
			if err := e.k.Get(t.Context(), client.ObjectKeyFromObject(w0), p); err != nil {
				return err
			}
			p.Finalizers = finalizers
			return e.k.Update(t.Context(), p)
		}); err != nil {
			t.Fatal(err)
		}
	}
	patchFinalizers([]string{hold})
	defer patchFinalizers(nil)
	e.finishPod("victim-worker-1", 1)
	e.eventually("restartCount 1", func() (bool, string) {
		n := e.job("victim").Status.RestartCount
		return n == 1, fmt.Sprint(n)
	})
	if code, answer := e.post(w0, "progress", token, progress.Report{Epoch: ptr.To[int32](9), Metrics: map[string]float64{"accuracy": 0.99}}); code != http.StatusConflict {
		t.Errorf("a report from attempt 0 with the job at attempt 1 = %d %s, want 409", code, answer)
	}

	job := e.job("victim")
	if job.Status.CurrentEpoch != 3 || job.Status.Metrics == nil || ptr.Deref(job.Status.Metrics.Accuracy, 0) != 0.5 {
		t.Errorf("status: epoch %d, metrics %+v; want epoch 3 and accuracy 0.5 as the job's own pod reported", job.Status.CurrentEpoch, job.Status.Metrics)
	}
	if cp := job.Status.Checkpoint; cp == nil || cp.Latest != loc+"/epoch-3" || cp.Epoch != 3 || cp.Attempt != 0 {
		t.Errorf("status.checkpoint = %+v, want %s/epoch-3 of attempt 0", cp, loc)
	}
}

// TestProgressFloodIsRefusedBeforeReview: a flood of tokens that cannot be the job's pod's (random
// strings, forged tokens naming another namespace or a pod the job does not control, the real token
// of another job's pod) from 4 hostile addresses is refused without a single TokenReview, and
// answered 429 past each address's rate, while the job's own pod has its reports recorded.
func TestProgressFloodIsRefusedBeforeReview(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("flooded", e.ns).Workers(1).Obj())
	e.create(utiltesting.MakeTrainingJob("bystander", e.ns).Workers(1).Obj())
	pod := e.waitPods("flooded", 1, 0)["flooded-worker-0"]
	bystander := e.waitPods("bystander", 1, 0)["bystander-worker-0"]
	tokens := []func() string{
		util.RandomToken,
		func() string { return util.ForgedProgressToken("someone-else", pod.Name, string(pod.UID)) },
		func() string { return util.ForgedProgressToken(e.ns, pod.Name, util.RandomToken()) },
		func() string { return util.ForgedProgressToken(e.ns, "attacker-0", util.RandomToken()) },
		func() string { return e.podToken(bystander, progress.Audience) },
	}
	token := e.podToken(pod, progress.Audience)

	// 400 requests from 20 connections at once, as hostile pods at 127.0.0.2-5 would send them: each
	// address has 50 let through at once, and is refused past 10 a second.
	const flood, senders = 400, 20
	var sends []func(path, token string, body any) (int, string)
	for i := range senders {
		sends = append(sends, e.progressClient(pod, fmt.Sprintf("127.0.0.%d", 2+i%4)))
	}
	before := e.tokenReviews()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := s; i < flood; i += senders {
				code, _ := sends[s]("progress", tokens[i%len(tokens)](), body0())
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	for epoch := range int32(3) {
		if code, answer := e.post(pod, "progress", token, progress.Report{Epoch: ptr.To(epoch + 1)}); code != http.StatusNoContent {
			t.Errorf("the pod's report of epoch %d during the flood = %d %s, want 204", epoch+1, code, answer)
		}
	}
	wg.Wait()
	got := e.tokenReviews() - before
	t.Logf("%d requests with tokens not of the job's pod: answers %v; %v TokenReviews", flood, codes, got)
	if got != 1 {
		t.Errorf("the flood and the pod's 3 reports made %v TokenReviews, want 1 (the pod's token)", got)
	}
	for code := range codes {
		if code != http.StatusUnauthorized && code != http.StatusForbidden && code != http.StatusTooManyRequests {
			t.Errorf("%d requests of the flood were answered %d, want 401, 403 or 429", codes[code], code)
		}
	}
	if codes[http.StatusUnauthorized]+codes[http.StatusForbidden] < 4*50 || codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("answers %v: want each address's first 50 refused for their tokens, and 429 past its rate", codes)
	}
}

// TestProgressReviewsShareANamespaceBudget: tokens forged for the namespace's own pod pass the
// early checks and cost TokenReviews, but from the namespace's budget only: past it they are
// answered 429 saying so, while a pod of another namespace has its report recorded.
func TestProgressReviewsShareANamespaceBudget(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	other := e.inNamespace(e.ns + "-other")
	e.create(utiltesting.MakeTrainingJob("hostile", e.ns).Workers(1).Obj())
	other.create(utiltesting.MakeTrainingJob("quiet", other.ns).Workers(1).Obj())
	hostile := e.waitPods("hostile", 1, 0)["hostile-worker-0"]
	quiet := other.waitPods("quiet", 1, 0)["quiet-worker-0"]

	// 200 forged tokens from 8 connections at 4 addresses, 50 each: the per-client burst.
	const flood, senders = 200, 8
	var sends []func(path, token string, body any) (int, string)
	for i := range senders {
		sends = append(sends, e.progressClient(hostile, fmt.Sprintf("127.0.0.%d", 3+i%4)))
	}
	before := e.tokenReviews()
	began := time.Now()
	var mu sync.Mutex
	codes, budget := map[int]int{}, 0
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := s; i < flood; i += senders {
				code, answer := sends[s]("progress", util.ForgedProgressToken(e.ns, hostile.Name, string(hostile.UID)), body0())
				mu.Lock()
				codes[code]++
				if code == http.StatusTooManyRequests && strings.Contains(answer, "namespace "+e.ns) {
					budget++
				}
				mu.Unlock()
			}
		})
	}
	other.report(quiet, "progress", body0())
	wg.Wait()
	elapsed := time.Since(began)
	got := e.tokenReviews() - before
	// What the namespace's budget lets through: a burst of 40, then 10 a second; and the quiet pod's.
	allowed := 40 + 10*elapsed.Seconds() + 1
	t.Logf("%d forged tokens of the namespace's own pod in %v: answers %v; %v TokenReviews", flood, elapsed.Round(time.Millisecond), codes, got)
	if got > allowed {
		t.Errorf("%d forged tokens in %v made %v TokenReviews, want at most %.0f", flood, elapsed.Round(time.Millisecond), got, allowed)
	}
	if budget == 0 || codes[http.StatusUnauthorized] == 0 || codes[http.StatusTooManyRequests]+codes[http.StatusUnauthorized] != flood {
		t.Errorf("answers %v, %d of them 429 for the namespace's budget; want 401 (reviewed and refused) and 429 (past the budget) only", codes, budget)
	}
}

// TestSquattersAreNeverAdopted: a pod that takes the name of a job's pod <job>-worker-0 before the
// job exists is left alone and never used; the job says so in its ChildConflict condition and a
// Warning event, and goes on once it is deleted.
func TestSquattersAreNeverAdopted(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	squatter := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "squat-worker-0"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "attacker"}}}}
	e.create(squatter)
	e.create(utiltesting.MakeTrainingJob("squat", e.ns).Workers(2).Obj())

	e.eventually("squat's ChildConflict condition", func() (bool, string) {
		c := meta.FindStatusCondition(e.job("squat").Status.Conditions, convoy.ConditionChildConflict)
		if c == nil {
			return false, "none"
		}
		return c.Status == metav1.ConditionTrue && c.Reason == convoy.ReasonNameTaken && strings.Contains(c.Message, "Pod "+e.ns+"/squat-worker-0"), c.Message
	})
	e.waitEvents("squat", convoy.ReasonNameTaken)
	got := &corev1.Pod{}
	if err := e.k.Get(t.Context(), client.ObjectKeyFromObject(squatter), got); err != nil {
		t.Fatalf("squatter: %v", err)
	}
	if len(got.OwnerReferences) != 0 || got.DeletionTimestamp != nil {
		t.Errorf("squatter was adopted or deleted: owners %v, deletion %v", got.OwnerReferences, got.DeletionTimestamp)
	}

	// Once the squatter is gone, the job makes its own pod and the condition turns false.
	if err := e.k.Delete(t.Context(), squatter, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	e.eventually("squat's own worker-0", func() (bool, string) {
		p := e.pods("squat")["squat-worker-0"]
		if p == nil {
			return false, "none"
		}
		return metav1.IsControlledBy(p, e.job("squat")), fmt.Sprint(p.OwnerReferences)
	})
	e.eventually("ChildConflict false", func() (bool, string) {
		c := meta.FindStatusCondition(e.job("squat").Status.Conditions, convoy.ConditionChildConflict)
		return c != nil && c.Status == metav1.ConditionFalse, fmt.Sprint(c)
	})
}

// TestRefusedPodsShowInStatus: a ResourceQuota that refuses the gang's second pod shows in the
// job's Initializing condition with the API server's own words and a Warning event, instead of a
// status saying the gang waits for the scheduler; once the quota is raised the gang is created.
func TestRefusedPodsShowInStatus(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "one-pod"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}
	e.create(quota)
	written := e.statusWrites()
	e.create(utiltesting.MakeTrainingJob("quota", e.ns).Workers(2).Obj())
	e.eventually("Initializing with PodCreationFailed", func() (bool, string) {
		c := meta.FindStatusCondition(e.job("quota").Status.Conditions, convoy.ConditionInitializing)
		if c == nil {
			return false, "none"
		}
		return c.Reason == convoy.ReasonPodCreationFailed && strings.Contains(c.Message, "exceeded quota"), c.Reason + ": " + c.Message
	})
	if job := e.job("quota"); job.Status.Reason != convoy.ReasonPodCreationFailed {
		t.Errorf("status.reason = %q, want %s for kubectl get's REASON column", job.Status.Reason, convoy.ReasonPodCreationFailed)
	}
	e.waitEvents("quota", convoy.ReasonPodCreationFailed)
	for _, st := range written() {
		if c := meta.FindStatusCondition(st.Conditions, convoy.ConditionInitializing); c != nil && c.Reason == convoy.ReasonPodCreationFailed && st.Workers.Pending > 1 {
			t.Errorf("a status saying %s counts %d pending pods, one of two created", c.Reason, st.Workers.Pending)
		}
	}

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.k.Get(t.Context(), client.ObjectKeyFromObject(quota), quota); err != nil {
			return err
		}
		quota.Spec.Hard[corev1.ResourcePods] = resource.MustParse("10")
		return e.k.Update(t.Context(), quota)
	}); err != nil {
		t.Fatal(err)
	}
	e.startGang("quota", 2, 0)
}

// TestNewGangWritesItsStatusOnce: a new job's status is written once, counting the pods being
// created as pending: their arrival writes nothing more (each write is an API request, and an
// event to every watcher of the job).
func TestNewGangWritesItsStatusOnce(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	written := e.statusWrites()
	e.create(utiltesting.MakeTrainingJob("once", e.ns).Workers(4).Obj())
	e.waitPods("once", 4, 0)
	writes := func() (bool, string) {
		pending := []int32{}
		for _, st := range written() {
			pending = append(pending, st.Workers.Pending)
		}
		return len(pending) == 1 && pending[0] == 4, fmt.Sprintf("writes with pending %v, want one with 4", pending)
	}
	e.eventually("the job's status", writes)
	util.Consistently(t, 100*time.Millisecond, 2*time.Second, "the job's status after its pods arrived", writes)
}

// statusWrites watches the namespace's TrainingJobs and returns what the statuses written since say.
func (e *env) statusWrites() func() []convoy.TrainingJobStatus {
	e.t.Helper()
	wc, err := client.NewWithWatch(e.c.RESTConfig, client.Options{Scheme: e.c.Scheme})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := wc.Watch(e.t.Context(), &convoy.TrainingJobList{}, client.InNamespace(e.ns))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
	var mu sync.Mutex
	var written []convoy.TrainingJobStatus
	go func() {
		for ev := range w.ResultChan() {
			if job, ok := ev.Object.(*convoy.TrainingJob); ok && ev.Type == watch.Modified {
				mu.Lock()
				written = append(written, job.Status)
				mu.Unlock()
			}
		}
	}()
	return func() []convoy.TrainingJobStatus {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(written)
	}
}

// TestProgressTokensReviewedOnce: a worker reporting again and again with its token costs one
// TokenReview, not one a report.
func TestProgressTokensReviewedOnce(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("often", e.ns).Workers(1).Hyperparameters(convoy.Hyperparameters{Epochs: ptr.To[int32](10)}).Obj())
	pod := e.waitPods("often", 1, 0)["often-worker-0"]
	token := e.podToken(pod, progress.Audience)
	before := e.tokenReviews()
	for epoch := range int32(5) {
		if code, answer := e.post(pod, "progress", token, progress.Report{Epoch: ptr.To(epoch + 1)}); code != http.StatusNoContent {
			t.Fatalf("report %d = %d %s, want 204", epoch+1, code, answer)
		}
	}
	if got := e.tokenReviews() - before; got != 1 {
		t.Errorf("5 reports with one token made %v TokenReviews, want 1", got)
	}
	if got := e.job("often").Status.CurrentEpoch; got != 5 {
		t.Errorf("currentEpoch %d after 5 reports, want 5", got)
	}
}

// TestTargetAccuracyCompletesEarly: a reported accuracy at the target completes the job and stops
// the gang.
func TestTargetAccuracyCompletesEarly(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("acc", e.ns).Workers(2).TargetAccuracy(0.9).Obj())
	pods := e.startGang("acc", 2, 0)
	e.report(pods["acc-worker-0"], "progress", progress.Report{Epoch: ptr.To[int32](3), Metrics: map[string]float64{"accuracy": 0.85}})
	if got := e.job("acc").Status.State; got != convoy.StateRunning {
		t.Fatalf("state %s below the target accuracy, want Running", got)
	}
	e.report(pods["acc-worker-0"], "progress", progress.Report{Epoch: ptr.To[int32](4), Metrics: map[string]float64{"accuracy": 0.93}})
	job := e.waitState("acc", convoy.StateCompleted)
	e.wantCondition(job, convoy.ConditionCompleted, convoy.ReasonTargetAccuracy)
	e.eventually("the gang to stop", func() (bool, string) { n := len(e.pods("acc")); return n == 0, fmt.Sprint(n) })
	if code, _ := e.post(pods["acc-worker-0"], "progress", "irrelevant", body0()); code != http.StatusUnauthorized && code != http.StatusConflict {
		t.Errorf("a report after completion = %d", code)
	}
}

// TestEarlyStopping completes a job whose reported loss stopped improving for the patience.
func TestEarlyStopping(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("es", e.ns).Workers(1).Patience(2).Obj())
	pod := e.startGang("es", 1, 0)["es-worker-0"]
	for epoch, loss := range []float64{0.9, 0.5, 0.6, 0.55} {
		e.report(pod, "progress", progress.Report{Epoch: ptr.To(int32(epoch + 1)), Metrics: map[string]float64{"loss": loss}})
		if epoch < 3 {
			if got := e.job("es").Status.State; got != convoy.StateRunning {
				t.Fatalf("state %s at epoch %d, want Running", got, epoch+1)
			}
		}
	}
	job := e.waitState("es", convoy.StateCompleted)
	c := e.wantCondition(job, convoy.ConditionCompleted, convoy.ReasonEarlyStopping)
	if b := job.Status.Best; b == nil || b.Name != "loss" || b.Value != 0.5 || b.Epoch != 2 {
		t.Errorf("status.best = %+v, want loss 0.5 at epoch 2", b)
	}
	t.Logf("Completed: %s", c.Message)
}

func body0() progress.Report { return progress.Report{Epoch: ptr.To[int32](5)} }

// TestTTLDeletesFinishedJob: ttlSecondsAfterFinished deletes the job, which leaves its children to
// the garbage collector, and its metric series go.
func TestTTLDeletesFinishedJob(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("ttl", e.ns).Workers(1).TTL(1).Obj())
	uid := e.job("ttl").UID
	e.startGang("ttl", 1, 0)
	e.finishPod("ttl-worker-0", 0)
	e.waitEvents("ttl", convoy.ReasonAllWorkersSucceeded)
	e.eventually("the job to be deleted", func() (bool, string) {
		err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "ttl"}, &convoy.TrainingJob{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// kube-controller-manager's garbage collector takes the pod; it learns of a CRD's kinds only
	// every 30 s, too slow to wait for here: check the pod is the deleted job's dependent.
	for _, pod := range e.pods("ttl") {
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != uid || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("pod %s is not a dependent of the deleted job: %v", pod.Name, pod.OwnerReferences)
		}
	}
	e.eventually("its metric series to go", func() (bool, string) {
		_, found := util.Gathered(t, ctrlmetrics.Registry, "trainingjob_current_epoch", map[string]string{"namespace": e.ns, "training_job": "ttl"})
		return !found, "still exported"
	})
}

// TestOperatorRestartMidCreation: the operator dies after creating some of a gang's pods; the
// next one completes the gang with no duplicate and no orphan.
func TestOperatorRestartMidCreation(t *testing.T) {
	e := newEnv(t)
	var created atomic.Int32
	first := e.startOperator(func(o *operator.Options) {
		o.WrapClient = func(c client.Client) client.Client { return &dyingClient{Client: c, created: &created, after: 3} }
	})
	e.create(utiltesting.MakeTrainingJob("crash", e.ns).Workers(8).Obj())
	e.eventually("3 pods from the first operator", func() (bool, string) { n := len(e.pods("crash")); return n == 3, fmt.Sprint(n) })
	first.stop()
	if n := len(e.pods("crash")); n >= 8 {
		t.Fatalf("the first operator created all %d pods before it stopped: the test did not interrupt it", n)
	}

	e.startOperator()
	pods := e.waitPods("crash", 8, 0)
	job := e.job("crash")
	all := &corev1.PodList{}
	if err := e.k.List(t.Context(), all, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 8 {
		t.Errorf("%d pods in the namespace, want 8", len(all.Items))
	}
	for _, p := range all.Items {
		if !metav1.IsControlledBy(&p, job) {
			t.Errorf("pod %s is not controlled by the job: %v", p.Name, p.OwnerReferences)
		}
	}
	for i := range 8 {
		if _, ok := pods[fmt.Sprintf("crash-worker-%d", i)]; !ok {
			t.Errorf("no pod crash-worker-%d", i)
		}
	}
	pgs := &schedv1alpha1.PodGroupList{}
	if err := e.k.List(t.Context(), pgs, client.InNamespace(e.ns)); err != nil || len(pgs.Items) != 1 {
		t.Errorf("%d PodGroups (%v), want 1", len(pgs.Items), err)
	}
	e.bindAll("crash")
	e.waitState("crash", convoy.StateRunning)
}

// dyingClient stops creating pods after a number of attempts, as an operator killed mid-reconcile
// would; created counts the attempts.
type dyingClient struct {
	client.Client
	created *atomic.Int32
	after   int32
}

func (c *dyingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*corev1.Pod); ok && c.created.Add(1) > c.after {
		return fmt.Errorf("operator killed")
	}
	return c.Client.Create(ctx, obj, opts...)
}

// TestFrameworkChildren: an MPI job gets its SSH Secret (status.sshSecretName) and hostfile; an
// MXNet job its scheduler and servers in the same gang.
func TestFrameworkChildren(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("hvd", e.ns).Framework(convoy.FrameworkMPI).Workers(2).GPUs(4).Obj())
	e.create(utiltesting.MakeTrainingJob("mx", e.ns).Framework(convoy.FrameworkMXNet).Workers(2).ParameterServers(1).Obj())

	pods := e.waitPods("hvd", 2, 0)
	secret := &corev1.Secret{}
	if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: e.job("hvd").Status.SSHSecretName}, secret); err != nil {
		t.Fatalf("the SSH Secret status.sshSecretName: %v", err)
	}
	if secret.Type != corev1.SecretTypeSSHAuth || len(secret.Data["ssh-privatekey"]) == 0 || len(secret.Data["ssh-publickey"]) == 0 {
		t.Errorf("SSH Secret type %s with keys %d/%d bytes", secret.Type, len(secret.Data["ssh-privatekey"]), len(secret.Data["ssh-publickey"]))
	}
	if got := pods["hvd-worker-1"].Spec.Containers[0].Command; !cmp.Equal(got, []string{"/usr/sbin/sshd", "-De"}) {
		t.Errorf("worker 1 command = %v, want sshd", got)
	}
	cm := &corev1.ConfigMap{}
	if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "hvd-config"}, cm); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("hvd-worker-0.hvd.%s.svc slots=4\nhvd-worker-1.hvd.%s.svc slots=4\n", e.ns, e.ns); cm.Data["hostfile"] != want {
		t.Errorf("hostfile = %q, want %q", cm.Data["hostfile"], want)
	}

	mx := e.waitPods("mx", 4, 0)
	roles := map[string]string{}
	for name, p := range mx {
		roles[name] = p.Labels[convoy.LabelReplicaRole] + "/" + util.EnvOf(p, "DMLC_ROLE")
	}
	want := map[string]string{"mx-scheduler": "scheduler/scheduler", "mx-ps-0": "ps/server", "mx-worker-0": "worker/worker", "mx-worker-1": "worker/worker"}
	if diff := cmp.Diff(want, roles); diff != "" {
		t.Errorf("MXNet roles (-want,+got):\n%s", diff)
	}
	pg := &schedv1alpha1.PodGroup{}
	if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "mx"}, pg); err != nil || pg.Spec.MinMember != 4 {
		t.Errorf("MXNet PodGroup minMember = %d (%v), want 4", pg.Spec.MinMember, err)
	}
}
