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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// trainingJob is a PyTorch gang of workers × gpus in namespace, in LocalQueue queue at priority.
func trainingJob(namespace, name, queue, priority string, workers, gpus int32) *convoy.TrainingJob {
	job := utiltesting.MakeTrainingJob(name, namespace).Workers(workers).GPUs(gpus).
		Scheduling(convoy.SchedulingSpec{Queue: queue, PriorityClassName: priority}).Obj()
	job.UID = ""
	return job
}

// TestJobWithinQuotaRunsOnTheFlavorsNodes submits to deploy/queue's team-a LocalQueue: the job is
// suspended at once, Kueue creates its Workload (one PodSet for the workers, priority normal),
// admits it on the first flavor, H100 on-demand, and the gang's pods carry that flavor's node
// labels.
func TestJobWithinQuotaRunsOnTheFlavorsNodes(t *testing.T) {
	e := newEnv(t)
	name := framework.Unique(t, "llama")
	job := trainingJob("team-a", name, "training", "normal", 2, 8)
	e.create(job)
	// team-a is the sample's, shared by every run: the job gives its quota back at the end.
	t.Cleanup(func() { _ = e.k.Delete(context.Background(), job) })
	if !job.IsSuspended() || job.Labels[convoy.QueueNameLabel] != "training" {
		t.Errorf("created job: suspend %v, labels %v; want it suspended and labelled for Kueue", job.IsSuspended(), job.Labels)
	}

	admitted := e.waitJob("team-a", name, "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil && !j.IsSuspended() })
	want := &convoy.AdmissionStatus{ClusterQueue: "team-a", Flavors: map[string]string{"nvidia.com/gpu": "h100-on-demand"}}
	if got := admitted.Status.Admission; got.ClusterQueue != want.ClusterQueue || got.Flavors["nvidia.com/gpu"] != "h100-on-demand" {
		t.Errorf("status.admission = %+v, want %+v", got, want)
	}
	wls := e.workloads(admitted)
	if len(wls) != 1 {
		t.Fatalf("the job controls %d Workloads, want 1", len(wls))
	}
	wl := wls[0]
	if ps := wl.Spec.PodSets; len(ps) != 1 || ps[0].Name != "worker" || ps[0].Count != 2 {
		t.Errorf("Workload pod sets = %+v, want one of 2 workers", ps)
	}
	if wl.Spec.Priority == nil || *wl.Spec.Priority != 1000 || wl.Spec.PriorityClassRef == nil || wl.Spec.PriorityClassRef.Name != "normal" {
		t.Errorf("Workload priority %v (%+v), want 1000 from PriorityClass normal", wl.Spec.Priority, wl.Spec.PriorityClassRef)
	}

	for _, pod := range e.startGang("team-a", name, 2) {
		if pod.Spec.NodeSelector[convoy.LabelGPUProduct] != h100 || len(pod.Spec.NodeSelector) != 1 {
			t.Errorf("pod %s nodeSelector = %v, want the h100-on-demand flavor's labels", pod.Name, pod.Spec.NodeSelector)
		}
		if !strings.HasPrefix(pod.Spec.NodeName, "h100-od-") {
			t.Errorf("pod %s runs on %s", pod.Name, pod.Spec.NodeName)
		}
	}
}

// TestWorkloadHasOnePodSetPerRole: a TensorFlow job's workers and parameter servers are two pod sets
// of one Workload, admitted together; every role runs with the flavor's node selector.
func TestWorkloadHasOnePodSetPerRole(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 8, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	job := utiltesting.MakeTrainingJob("tf", e.ns).Framework(convoy.FrameworkTensorFlow).Workers(2).GPUs(4).ParameterServers(2).
		Resources("2", "8Gi").Queue("q").Obj()
	job.UID = ""
	e.create(job)
	admitted := e.waitJob(e.ns, "tf", "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	var sets []string
	for _, ps := range e.workloads(admitted)[0].Spec.PodSets {
		sets = append(sets, fmt.Sprintf("%s×%d", ps.Name, ps.Count))
	}
	if got := strings.Join(sets, ","); got != "worker×2,ps×2" {
		t.Errorf("pod sets %s, want worker×2,ps×2", got)
	}
	if got := admitted.Status.Admission.Flavors; got["nvidia.com/gpu"] != "h100-on-demand" || got["cpu"] != "h100-on-demand" {
		t.Errorf("status.admission.flavors = %v", got)
	}
	for _, pod := range e.startGang(e.ns, "tf", 4) {
		if pod.Spec.NodeSelector[convoy.LabelGPUProduct] != h100 {
			t.Errorf("%s pod %s nodeSelector = %v, want the flavor's", pod.Labels[convoy.LabelReplicaRole], pod.Name, pod.Spec.NodeSelector)
		}
	}
}

// TestJobOverQuotaWaitsUntilTheQuotaIsRaised: a job larger than its ClusterQueue stays Queued with
// Kueue's reason in plain words, in its condition and in kubectl describe; once the administrator
// raises the quota with kubectl patch, it is admitted and runs.
func TestJobOverQuotaWaitsUntilTheQuotaIsRaised(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 8, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	e.create(trainingJob(e.ns, "big", "q", "", 2, 8))

	queued := e.waitJob(e.ns, "big", "queued with Kueue's reason", func(j *convoy.TrainingJob) bool {
		c := condition(j, convoy.ConditionQueued)
		return c != nil && strings.Contains(c.Message, "nvidia.com/gpu")
	})
	msg := condition(queued, convoy.ConditionQueued).Message
	for _, want := range []string{`ClusterQueue "` + e.ns + `"`, "role worker needs 16 nvidia.com/gpu", "flavor h100-on-demand", "(8, borrowing included)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Queued condition %q does not say %q", msg, want)
		}
	}
	if queued.Status.State != convoy.StateQueued || len(e.pods(e.ns, "big")) != 0 {
		t.Errorf("state %s with %d pods, want Queued without pods", queued.Status.State, len(e.pods(e.ns, "big")))
	}
	if out := e.kubectl("describe", "trainingjob", "-n", e.ns, "big"); !strings.Contains(out, "more than flavor h100-on-demand can ever give it") {
		t.Errorf("kubectl describe does not show why the job waits:\n%s", out)
	}

	e.kubectl("patch", "clusterqueue", e.ns, "--type", "json",
		"-p", `[{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": 16}]`)
	e.waitJob(e.ns, "big", "admitted after the quota was raised", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && j.Status.Admission.ClusterQueue == e.ns
	})
	e.startGang(e.ns, "big", 2)
}

// TestBorrowedQuotaIsReclaimed: a job borrows the idle quota of another ClusterQueue of its cohort;
// when that ClusterQueue's own job arrives, the borrower is preempted, whole, and queued again.
func TestBorrowedQuotaIsReclaimed(t *testing.T) {
	e := newEnv(t)
	lenderNS := e.ns + "-lender"
	e.createNamespace(lenderNS)
	reclaim := kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyAny, WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}
	e.create(clusterQueue(e.ns, e.ns, 8, ptr.To[int64](8), nil, reclaim))
	e.create(clusterQueue(lenderNS, e.ns, 8, nil, ptr.To[int64](8), reclaim))
	e.localQueue(e.ns)
	e.create(utiltestingapi.MakeLocalQueue("q", lenderNS).ClusterQueue(lenderNS).Obj())

	e.create(trainingJob(e.ns, "borrower", "q", "normal", 2, 8))
	e.waitJob(e.ns, "borrower", "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	e.eventually("ClusterQueue "+e.ns+" to report 8 borrowed GPUs", func() (bool, string) {
		cq := &kueue.ClusterQueue{}
		if err := e.k.Get(e.t.Context(), client.ObjectKey{Name: e.ns}, cq); err != nil {
			return false, err.Error()
		}
		for _, f := range cq.Status.FlavorsReservation {
			for _, r := range f.Resources {
				if r.Name == convoy.ResourceGPU && r.Borrowed.Value() == 8 {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%+v", cq.Status.FlavorsReservation)
	})
	e.startGang(e.ns, "borrower", 2)

	e.create(trainingJob(lenderNS, "owner", "q", "normal", 1, 8))
	preempted := e.waitJob(e.ns, "borrower", "preempted and queued again", func(j *convoy.TrainingJob) bool {
		return condition(j, convoy.ConditionPreempted) != nil && j.Status.State == convoy.StateQueued
	})
	msg := condition(preempted, convoy.ConditionPreempted).Message
	for _, want := range []string{"TrainingJob " + lenderNS + "/owner", "reclamation within the cohort"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Preempted condition %q does not say %q", msg, want)
		}
	}
	e.waitJob(lenderNS, "owner", "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	if pods := e.pods(e.ns, "borrower"); len(pods) != 0 {
		t.Errorf("the reclaiming job was admitted while %d pods of the borrower remain", len(pods))
	}
	e.startGang(lenderNS, "owner", 1)
}

// TestHighPriorityJobPreemptsAWholeGangThatResumesFromItsCheckpoint: in a full ClusterQueue a
// high-priority job preempts a running low-priority gang. The victim says who preempted it and why
// and waits in the queue; its quota is released only once every one of its pods is gone, however
// long they take to stop; when room returns it is admitted again and resumes from the checkpoint it
// reported.
func TestHighPriorityJobPreemptsAWholeGangThatResumesFromItsCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 16, nil, nil, kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}))
	e.localQueue(e.ns)

	e.create(trainingJob(e.ns, "low", "q", "low", 2, 8))
	e.waitJob(e.ns, "low", "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	pods := e.startGang(e.ns, "low", 2)
	checkpoint := "s3://ckpt/" + e.ns + "/low/epoch-3"
	e.reportCheckpoint(&pods[0], progress.Checkpoint{Path: checkpoint, Epoch: 3})
	e.waitJob(e.ns, "low", "to record the checkpoint", func(j *convoy.TrainingJob) bool {
		return j.Status.Checkpoint != nil && j.Status.Checkpoint.Latest == checkpoint
	})

	// The victim's pods take their time to stop: until they do, its GPUs are not free.
	release := e.holdPodDeletions()
	e.create(trainingJob(e.ns, "high", "q", "high", 2, 8))
	preempted := e.waitJob(e.ns, "low", "preempted", func(j *convoy.TrainingJob) bool {
		return condition(j, convoy.ConditionPreempted) != nil && j.Status.State == convoy.StateQueued
	})
	if w := preempted.Status.Workers; w.Active != 2 {
		t.Errorf("status.workers of the preempted job = %+v, want its 2 stopping pods counted", w)
	}
	if !strings.Contains(condition(preempted, convoy.ConditionQueued).Message, "the gang is stopping") {
		t.Errorf("Queued condition while the gang stops: %q", condition(preempted, convoy.ConditionQueued).Message)
	}
	time.Sleep(2 * time.Second) // long enough for Kueue to admit the preemptor, were the quota free
	if high := e.job(e.ns, "high"); high.Status.Admission != nil || !high.IsSuspended() {
		t.Errorf("the preemptor was admitted while every pod of the victim still runs: %+v", high.Status.Admission)
	}
	release()
	msg := condition(preempted, convoy.ConditionPreempted).Message
	for _, want := range []string{"TrainingJob " + e.ns + "/high", "priority class high, 10000", "prioritization in the ClusterQueue"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Preempted condition %q does not say %q", msg, want)
		}
	}
	e.waitJob(e.ns, "high", "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	if left := e.pods(e.ns, "low"); len(left) != 0 {
		t.Errorf("the preemptor was admitted while %d pods of the victim remain: %v", len(left), podNames(left))
	}
	if out := e.kubectl("describe", "trainingjob", "-n", e.ns, "low"); !strings.Contains(out, "preempted by TrainingJob "+e.ns+"/high") {
		t.Errorf("kubectl describe does not say who preempted the job:\n%s", out)
	}
	e.startGang(e.ns, "high", 2)

	// Room returns when the preemptor completes: the victim is admitted again and every pod resumes
	// from its checkpoint.
	for _, pod := range e.pods(e.ns, "high") {
		e.finishPod(&pod)
	}
	e.waitState(e.ns, "high", convoy.StateCompleted)
	resumed := e.startGang(e.ns, "low", 2)
	for _, pod := range resumed {
		if got := util.EnvOf(&pod, "CONVOY_RESUME_FROM"); got != checkpoint {
			t.Errorf("pod %s CONVOY_RESUME_FROM = %q, want %q", pod.Name, got, checkpoint)
		}
	}
	low := e.job(e.ns, "low")
	if c := condition(low, convoy.ConditionPreempted); c != nil {
		t.Errorf("the running job still shows Preempted: %+v", c)
	}
	if st := low.Status; st.RestartCount != 1 || st.FailureRestarts != 0 {
		t.Errorf("restartCount %d, failureRestarts %d after the preempted gang runs again, want 1 and 0", st.RestartCount, st.FailureRestarts)
	}
	for _, pod := range resumed {
		if got := pod.Labels[convoy.LabelRestartAttempt]; got != "1" {
			t.Errorf("pod %s of the resumed gang has attempt %q, want 1", pod.Name, got)
		}
	}
}

// TestDeletingAQueuedJobRemovesItsWorkload: the Workload of a job that waits goes with the job.
func TestDeletingAQueuedJobRemovesItsWorkload(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 8, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	e.create(trainingJob(e.ns, "waiting", "q", "", 4, 8))
	job := e.waitJob(e.ns, "waiting", "queued", func(j *convoy.TrainingJob) bool { return j.Status.State == convoy.StateQueued })
	e.eventually("the job's Workload", func() (bool, string) { return len(e.workloads(job)) == 1, "" })

	if err := e.k.Delete(e.t.Context(), job); err != nil {
		t.Fatal(err)
	}
	e.eventually("the Workload to be deleted", func() (bool, string) {
		list := &kueue.WorkloadList{}
		if err := e.k.List(e.t.Context(), list, client.InNamespace(e.ns)); err != nil {
			return false, err.Error()
		}
		var names []string
		for _, wl := range list.Items {
			names = append(names, fmt.Sprintf("%s (finalizers %v)", wl.Name, wl.Finalizers))
		}
		return len(list.Items) == 0, strings.Join(names, ", ")
	})
}

// TestKueuectlListsTrainingJobWorkloads: kueuectl, built from the pinned Kueue module and run as a
// kubectl plugin, lists a TrainingJob's Workload with its job type, job name and queue.
func TestKueuectlListsTrainingJobWorkloads(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 8, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	e.create(trainingJob(e.ns, "listed", "q", "", 1, 8))
	e.create(trainingJob(e.ns, "pending", "q", "", 2, 8))
	e.waitJob(e.ns, "listed", "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	e.waitJob(e.ns, "pending", "queued", func(j *convoy.TrainingJob) bool { return j.Status.State == convoy.StateQueued })

	out := e.kubectl("kueue", "list", "workload", "-n", e.ns)
	// NAME, JOB TYPE, JOB NAME, LOCALQUEUE, CLUSTERQUEUE, STATUS, ... of each Workload, by job name.
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 6 {
			rows[f[2]] = f[1:6]
		}
	}
	for job, status := range map[string]string{"listed": "ADMITTED", "pending": "PENDING"} {
		want := []string{"trainingjob", job, "q", e.ns, status}
		if got := rows[job]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("kubectl kueue list workload: JOB TYPE..STATUS of %s = %v, want %v:\n%s", job, got, want, out)
		}
	}
	if out := e.kubectl("kueue", "list", "workload", "-n", e.ns, "--for", "trainingjob/pending"); !strings.Contains(out, "pending") || strings.Contains(out, "listed") {
		t.Errorf("kubectl kueue list workload --for trainingjob/pending:\n%s", out)
	}
}

// TestQueueNameAndLabelAgree: spec.scheduling.queue and the kueue.x-k8s.io/queue-name label name
// the same LocalQueue, spec.scheduling.queue winning; a job without a queue is none of Kueue's.
func TestQueueNameAndLabelAgree(t *testing.T) {
	e := newEnv(t)
	ctx := e.t.Context()

	both := trainingJob(e.ns, "both", "a", "", 1, 1)
	both.Labels = map[string]string{convoy.QueueNameLabel: "b"}
	err := e.k.Create(ctx, both)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `names LocalQueue "b" but spec.scheduling.queue names "a"`) {
		t.Errorf("creating a job whose label and spec.scheduling.queue disagree: %v, want it refused", err)
	}

	labelled := trainingJob(e.ns, "labelled", "", "", 1, 1)
	labelled.Labels = map[string]string{convoy.QueueNameLabel: "q"}
	e.create(labelled)
	if labelled.Spec.Scheduling.Queue != "q" || !labelled.IsSuspended() {
		t.Errorf("a job with only the label: spec.scheduling.queue %q, suspend %v; want q and suspended", labelled.Spec.Scheduling.Queue, labelled.IsSuspended())
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := e.job(e.ns, "labelled")
		j.Labels[convoy.QueueNameLabel] = "other"
		return e.k.Update(ctx, j)
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "change spec.scheduling.queue instead") {
		t.Errorf("changing only the label: %v, want it refused", err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := e.job(e.ns, "labelled")
		j.Spec.Scheduling.Queue = "other"
		return e.k.Update(ctx, j)
	})
	if err != nil {
		t.Errorf("changing spec.scheduling.queue of a suspended job: %v", err)
	} else if got := e.job(e.ns, "labelled").Labels[convoy.QueueNameLabel]; got != "other" {
		t.Errorf("after spec.scheduling.queue changed, the label is %q, want other", got)
	}

	plain := trainingJob(e.ns, "plain", "", "", 1, 1)
	e.create(plain)
	if plain.IsSuspended() || plain.Labels[convoy.QueueNameLabel] != "" {
		t.Errorf("a job without a queue: suspend %v, labels %v; want it left alone", plain.IsSuspended(), plain.Labels)
	}
	job := e.waitJob(e.ns, "plain", "admitted without a queue", func(j *convoy.TrainingJob) bool {
		c := condition(j, convoy.ConditionAdmitted)
		return c != nil && c.Reason == convoy.ReasonNoQueue
	})
	if wls := e.workloads(job); len(wls) != 0 {
		t.Errorf("a job without a queue has Workloads %v", wls)
	}
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// finishPod ends a pod's training container with exit code 0, as its kubelet would report it.
func (e *env) finishPod(pod *corev1.Pod) {
	e.t.Helper()
	if err := util.EndPod(e.t.Context(), e.k, client.ObjectKeyFromObject(pod), 0); err != nil {
		e.t.Fatalf("finishing pod %s: %v", pod.Name, err)
	}
}

// TestJobWithMinWorkersRunsWithTheWorkersTheQuotaAllows: a job of 4 × 8 GPUs with minWorkers 2
// in a ClusterQueue of 24 GPUs is admitted by Kueue with 3 workers (partial admission); it runs
// with 3 pods, its framework told of 3, and numWorkers shows 3. Deactivated, it asks for 4 again.
// Without minWorkers the same job waits for quota for all 4.
func TestJobWithMinWorkersRunsWithTheWorkersTheQuotaAllows(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 24, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	job := trainingJob(e.ns, "elastic", "q", "", 4, 8)
	job.Spec.MinWorkers = ptr.To[int32](2)
	e.create(job)

	admitted := e.waitJob(e.ns, "elastic", "admitted with 3 workers", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && !j.IsSuspended() && j.Spec.NumWorkers == 3
	})
	wl := e.workloads(admitted)[0]
	if ps := wl.Spec.PodSets[0]; ps.Count != 4 || ps.MinCount == nil || *ps.MinCount != 2 {
		t.Errorf("Workload worker pod set: count %d, minCount %v; want 4 and 2", ps.Count, ps.MinCount)
	}
	if a := wl.Status.Admission; a == nil || a.PodSetAssignments[0].Count == nil || *a.PodSetAssignments[0].Count != 3 {
		t.Errorf("Workload admission = %+v, want 3 workers", a)
	}
	for _, pod := range e.startGang(e.ns, "elastic", 3) {
		if got := util.EnvOf(&pod, "WORLD_SIZE"); got != "3" {
			t.Errorf("pod %s has WORLD_SIZE %q, want 3", pod.Name, got)
		}
	}

	e.kubectl("patch", "workloads.kueue.x-k8s.io", "-n", e.ns, wl.Name, "--type", "merge", "-p", `{"spec":{"active":false}}`)
	e.waitJob(e.ns, "elastic", "suspended and asking for 4 workers again", func(j *convoy.TrainingJob) bool {
		return j.IsSuspended() && j.Spec.NumWorkers == 4
	})

	whole := trainingJob(e.ns, "whole", "q", "", 4, 8)
	e.create(whole)
	e.waitJob(e.ns, "whole", "queued for lack of quota", func(j *convoy.TrainingJob) bool {
		c := condition(j, convoy.ConditionQueued)
		return c != nil && strings.Contains(c.Message, "nvidia.com/gpu") && j.IsSuspended() && j.Spec.NumWorkers == 4
	})
}

// TestPodsRefusedPastTheStartupTimeoutReleaseTheQuota: the namespace's ResourceQuota lets one of
// the admitted gang's two pods be created. The job says why in its status at once and, once
// startupTimeoutSeconds has passed, fails with StartupTimeout: its pod is deleted, its Workload
// finishes, and the ClusterQueue's quota goes to the next job.
func TestPodsRefusedPastTheStartupTimeoutReleaseTheQuota(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 8, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	e.create(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "one-pod"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}})
	refused := utiltesting.MakeTrainingJob("refused", e.ns).Workers(2).GPUs(4).Queue("q").StartupTimeout(15).Obj()
	refused.UID = ""
	e.create(refused)

	e.waitJob(e.ns, "refused", "PodCreationFailed in its status", func(j *convoy.TrainingJob) bool {
		c := condition(j, convoy.ConditionInitializing)
		return c != nil && c.Reason == convoy.ReasonPodCreationFailed && strings.Contains(c.Message, "exceeded quota")
	})
	failed := e.waitState(e.ns, "refused", convoy.StateFailed)
	c := condition(failed, convoy.ConditionFailed)
	if failed.Status.FailureReason != convoy.ReasonStartupTimeout || c == nil || !strings.Contains(c.Message, "could not be created") ||
		!strings.Contains(c.Message, "exceeded quota") {
		t.Errorf("failed with %q: %v; want %s saying which pods could not be created and the API server's words", failed.Status.FailureReason, c, convoy.ReasonStartupTimeout)
	}
	e.eventually("the refused job's pod deleted and its Workload finished", func() (bool, string) {
		pods := e.pods(e.ns, "refused")
		wls := e.workloads(failed)
		finished := len(wls) == 1 && apimeta.IsStatusConditionTrue(wls[0].Status.Conditions, kueue.WorkloadFinished)
		return len(pods) == 0 && finished, fmt.Sprintf("%d pods, workloads %d, finished %v", len(pods), len(wls), finished)
	})

	// The ClusterQueue holds 8 GPUs: the next job of 8 is admitted only if the failed one let go.
	next := utiltesting.MakeTrainingJob("next", e.ns).Workers(1).GPUs(8).Queue("q").Obj()
	next.UID = ""
	e.create(next)
	e.waitJob(e.ns, "next", "admitted on the quota the failed job released", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
}
