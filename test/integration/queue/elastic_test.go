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
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	testingjob "sigs.k8s.io/kueue/pkg/util/testingjobs/job"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workloadslicing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/controller"
	"github.com/convoy-dev/convoy/operator/pkg/elastic"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	"github.com/convoy-dev/convoy/queue"
	"github.com/convoy-dev/convoy/test/util"
)

// cooldown is the elastic jobs' resizeCooldownSeconds, the least the API allows: a job grows no
// sooner than this after it started.
const cooldown = 30

// resizable makes job elastic, from minWorkers 1 up to its numWorkers, with the least cooldown.
func resizable(job *convoy.TrainingJob) *convoy.TrainingJob {
	job.Spec.MinWorkers = ptr.To[int32](1)
	job.Spec.Elastic = &convoy.ElasticSpec{ResizeCooldownSeconds: ptr.To[int32](cooldown)}
	return job
}

// TestElasticJobGrowsIntoFreedQuota: an elastic job (2 × 8 GPUs, minWorkers 1) in a ClusterQueue of
// 16 GPUs, half of them taken, is admitted with 1 worker. When the other job completes, the
// operator grows it to 2 through Kueue, once its cooldown has passed: a second Workload slice for 2
// workers replaces the first, whose quota it takes over; the added worker is held at Kueue's
// scheduling gate until then and joins the running gang (worker 0 is the same pod, no restart);
// status.elastic and a Resized event say so.
func TestElasticJobGrowsIntoFreedQuota(t *testing.T) {
	t.Parallel() // each waits out a cooldown in its own namespace and ClusterQueue
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 16, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	e.create(trainingJob(e.ns, "other", "q", "", 1, 8))
	other := e.startGang(e.ns, "other", 1)

	e.create(resizable(trainingJob(e.ns, "llm", "q", "", 2, 8)))
	started := e.waitJob(e.ns, "llm", "admitted with 1 worker", func(j *convoy.TrainingJob) bool {
		return !j.IsSuspended() && j.Annotations[convoy.AnnotationElasticWorkers] == "1"
	})
	if got := started.Annotations[workloadslicing.EnabledAnnotationKey]; got != workloadslicing.EnabledAnnotationValue {
		t.Errorf("annotation %s = %q, want %q: the webhook opts an elastic job into Kueue's Workload slices",
			workloadslicing.EnabledAnnotationKey, got, workloadslicing.EnabledAnnotationValue)
	}
	worker0 := e.startElasticGang("llm", 1)[0]

	e.finishPod(&other[0])
	grown := util.WaitJob(t, e.k, 100*time.Millisecond, timeout+cooldown*time.Second, client.ObjectKey{Namespace: e.ns, Name: "llm"},
		"grown to 2 workers", func(j *convoy.TrainingJob) bool {
			return j.Status.Elastic != nil && j.Status.Elastic.TargetWorkers == 2
		})
	if since := grown.Status.Elastic.LastResizeTime.Sub(grown.Status.StartTime.Time); since < cooldown*time.Second {
		t.Errorf("grew %s after it started, want no sooner than its cooldown, %ds", since, cooldown)
	}
	pods := e.startElasticGang("llm", 2)
	running := e.waitJob(e.ns, "llm", "running with 2 workers", func(j *convoy.TrainingJob) bool {
		return j.Status.Elastic.CurrentWorkers == 2 && meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionRunning)
	})
	if running.Status.RestartCount != 0 || running.Status.Elastic.ResizeCount != 1 {
		t.Errorf("restartCount %d, resizeCount %d; want 0 and 1: the gang grew without restarting",
			running.Status.RestartCount, running.Status.Elastic.ResizeCount)
	}
	if pods[0].UID != worker0.UID {
		t.Errorf("worker 0 is a new pod after the grow, want the one that ran before")
	}

	e.eventually("the grow went through Kueue: one Workload admitted for 2 workers, the old slice replaced", func() (bool, string) {
		var admitted, replaced []string
		for _, wl := range e.workloads(running) {
			switch {
			case workload.IsAdmitted(&wl) && !workload.IsFinished(&wl) && wl.Spec.PodSets[0].Count == 2:
				admitted = append(admitted, wl.Name)
			case workloadslicing.IsReplaced(wl.Status):
				replaced = append(replaced, wl.Name)
			}
		}
		return len(admitted) == 1 && len(replaced) == 1, fmt.Sprintf("admitted for 2 workers %v, replaced %v", admitted, replaced)
	})
	e.waitEvent("llm", controller.ReasonResized, "grew from 1 to 2 workers")
}

// TestElasticGrowKueueNeverAdmitsIsWithdrawn: an elastic job (2 × 8 GPUs, minWorkers 1) runs with
// 1 worker in a ClusterQueue of 16 GPUs whose other 8 are free by its own count but lent to a job
// of another ClusterQueue of its cohort. The operator grows it to 2; the cohort has no GPU left and
// nothing reclaims, so Kueue admits the larger slice with 1 worker (partial admission). The grow
// is withdrawn: the job is back to 1 worker for Kueue and in status.elastic, the added worker is
// deleted before it ran, worker 0 runs on, no Workload of it waits, and a Resized event says why
// and that the next grow waits twice the cooldown, which it does.
func TestElasticGrowKueueNeverAdmitsIsWithdrawn(t *testing.T) {
	t.Parallel() // each waits out a cooldown in its own namespace and ClusterQueue
	e := newEnv(t)
	borrowerNS := e.ns + "-borrower"
	e.createNamespace(borrowerNS)
	e.create(clusterQueue(e.ns, e.ns, 16, nil, nil, kueue.ClusterQueuePreemption{}))
	e.create(clusterQueue(borrowerNS, e.ns, 0, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	e.create(utiltestingapi.MakeLocalQueue("q", borrowerNS).ClusterQueue(borrowerNS).Obj())
	e.create(trainingJob(e.ns, "other", "q", "", 1, 8))
	other := e.startGang(e.ns, "other", 1)
	e.create(resizable(trainingJob(e.ns, "llm", "q", "", 2, 8)))
	worker0 := e.startElasticGang("llm", 1)[0]
	e.create(trainingJob(borrowerNS, "borrower", "q", "", 1, 8))

	e.finishPod(&other[0])
	e.waitJob(borrowerNS, "borrower", "admitted on quota borrowed from "+e.ns, func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil
	})
	util.WaitJob(t, e.k, 100*time.Millisecond, timeout+cooldown*time.Second, client.ObjectKey{Namespace: e.ns, Name: "llm"},
		"grown to 2 workers", func(j *convoy.TrainingJob) bool {
			return j.Status.Elastic != nil && j.Status.Elastic.TargetWorkers == 2
		})
	withdrawn := util.WaitJob(t, e.k, 100*time.Millisecond, timeout+elastic.GrowAdmitTimeout, client.ObjectKey{Namespace: e.ns, Name: "llm"},
		"the grow withdrawn", func(j *convoy.TrainingJob) bool {
			return j.Annotations[convoy.AnnotationElasticWorkers] == "1" && j.Status.Elastic.TargetWorkers == 1
		})
	if st := withdrawn.Status; st.RestartCount != 0 || st.Elastic.ResizeCount != 0 || !meta.IsStatusConditionTrue(st.Conditions, convoy.ConditionRunning) {
		t.Errorf("restartCount %d, resizeCount %d, Running %v; want 0, 0 and true: a withdrawn grow is no resize",
			st.RestartCount, st.Elastic.ResizeCount, meta.IsStatusConditionTrue(st.Conditions, convoy.ConditionRunning))
	}
	e.eventually("the gated worker deleted, worker 0 running on", func() (bool, string) {
		live := podNames(e.pods(e.ns, "llm"))
		return len(live) == 1 && e.pods(e.ns, "llm")[0].UID == worker0.UID, fmt.Sprint(live)
	})
	e.eventually("no Workload of llm waiting, one admitted for 1 worker", func() (bool, string) {
		var admitted, waiting []string
		for _, wl := range e.workloads(withdrawn) {
			switch {
			case workload.IsFinished(&wl):
			case workload.IsAdmitted(&wl) && wl.Spec.PodSets[0].Count == 1:
				admitted = append(admitted, wl.Name)
			default:
				waiting = append(waiting, wl.Name)
			}
		}
		return len(admitted) == 1 && len(waiting) == 0, fmt.Sprintf("admitted %v, other %v", admitted, waiting)
	})
	e.waitEvent("llm", controller.ReasonResized, "withdrew the grow from 1 to 2 workers: Kueue did not admit the larger size")
	e.waitEvent("llm", controller.ReasonResized, fmt.Sprintf("the next grow waits %s", 2*cooldown*time.Second))
	if n := withdrawn.Status.Elastic.WithdrawnGrows; n != 1 {
		t.Errorf("status.elastic.withdrawnGrows = %d, want 1", n)
	}
	// The cooldown alone would grow it again within a recheck of its end: the withdrawn grow doubled it.
	regrow := withdrawn.Status.Elastic.LastResizeTime.Add(cooldown*time.Second + 6*time.Second)
	util.Consistently(t, 500*time.Millisecond, time.Until(regrow), "no grow before twice the cooldown after the withdrawal", func() (bool, string) {
		j := &convoy.TrainingJob{}
		if err := e.k.Get(t.Context(), client.ObjectKeyFromObject(withdrawn), j); err != nil {
			return false, err.Error()
		}
		return j.Annotations[convoy.AnnotationElasticWorkers] == "1", "convoy.dev/elastic-workers " + j.Annotations[convoy.AnnotationElasticWorkers]
	})
}

// waitEvent waits for an event of the job with the reason whose message contains want.
func (e *env) waitEvent(job, reason, want string) {
	e.t.Helper()
	util.WaitEvent(e.t, e.k, 100*time.Millisecond, timeout, client.ObjectKey{Namespace: e.ns, Name: job}, reason, want)
}

// TestElasticJobShrinksForAHigherPriorityJob: an elastic job (2 × 8 GPUs, minWorkers 1) runs
// whole in a ClusterQueue of 16 GPUs that does not preempt. A job of priority high for 8 GPUs
// waits there; the operator shrinks the elastic job to 1 worker instead of Kueue stopping it:
// its Workload slice counts 1 worker, its highest worker is deleted, worker 0 runs on, and the
// high-priority job is admitted into the quota it freed.
func TestElasticJobShrinksForAHigherPriorityJob(t *testing.T) {
	t.Parallel() // each waits out a cooldown in its own namespace and ClusterQueue
	e := newEnv(t)
	worker0 := e.runningElasticJob(kueue.PreemptionPolicyNever)

	e.create(trainingJob(e.ns, "high", "q", "high", 1, 8))
	shrunk := e.waitJob(e.ns, "llm", "shrunk to 1 worker", func(j *convoy.TrainingJob) bool {
		return j.Status.Elastic != nil && j.Status.Elastic.TargetWorkers == 1 && j.Status.Elastic.CurrentWorkers == 1
	})
	if shrunk.Status.RestartCount != 0 || shrunk.Status.Elastic.ResizeCount != 1 ||
		!meta.IsStatusConditionTrue(shrunk.Status.Conditions, convoy.ConditionRunning) {
		t.Errorf("restartCount %d, resizeCount %d, Running %v; want 0, 1 and true: the gang shrank without stopping",
			shrunk.Status.RestartCount, shrunk.Status.Elastic.ResizeCount, meta.IsStatusConditionTrue(shrunk.Status.Conditions, convoy.ConditionRunning))
	}
	e.eventually("worker 1 deleted, worker 0 running on", func() (bool, string) {
		var live []string
		for _, p := range e.pods(e.ns, "llm") {
			if p.DeletionTimestamp == nil {
				live = append(live, p.Name)
			}
		}
		return len(live) == 1 && live[0] == worker0.Name && e.pods(e.ns, "llm")[0].UID == worker0.UID, fmt.Sprint(live)
	})
	// Kueue's job reconciler updates the Workload slice apart from the operator's status write.
	e.eventually("Kueue accounts for the smaller gang: each live Workload of llm counts 1 worker", func() (bool, string) {
		var counts []string
		ok := true
		for _, wl := range e.workloads(shrunk) {
			if !workload.IsFinished(&wl) {
				counts = append(counts, fmt.Sprintf("%s: %d", wl.Name, wl.Spec.PodSets[0].Count))
				ok = ok && wl.Spec.PodSets[0].Count == 1
			}
		}
		return ok && len(counts) > 0, fmt.Sprint(counts)
	})
	e.waitJob(e.ns, "high", "admitted into the freed quota", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && !j.IsSuspended()
	})
	e.waitEvent("llm", controller.ReasonResized, "shrank from 2 to 1 workers")
}

// TestElasticJobShrinksInsteadOfBeingPreempted: an elastic job of priority low (2 × 8 GPUs,
// minWorkers 1) runs whole in a ClusterQueue of 16 GPUs that preempts lower priorities. A job of
// priority high for 8 GPUs comes: its Workload's preemption gate holds Kueue back, the elastic job
// shrinks to 1 worker without a restart or an eviction, the high job is admitted into the quota it
// freed, and an event on it says so. A second high job for 8 GPUs finds nothing left to shrink:
// its gate opens at once and Kueue preempts the elastic job whole, as without the gate.
func TestElasticJobShrinksInsteadOfBeingPreempted(t *testing.T) {
	t.Parallel() // each waits out a cooldown in its own namespace and ClusterQueue
	e := newEnv(t)
	worker0 := e.runningElasticJob(kueue.PreemptionPolicyLowerPriority)

	e.create(trainingJob(e.ns, "high", "q", "high", 1, 8))
	e.waitJob(e.ns, "high", "admitted into the quota the shrink freed", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && !j.IsSuspended()
	})
	shrunk := e.wantShrunkNotPreempted("llm", worker0)
	e.waitEvent("high", queue.ReasonShrinkFirst, "elastic jobs shrink instead ("+e.ns+"/llm from 2 to 1 workers)")

	e.create(trainingJob(e.ns, "high2", "q", "high", 1, 8))
	e.waitJob(e.ns, "high2", "admitted once Kueue preempted llm", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && !j.IsSuspended()
	})
	evicted := false
	for _, wl := range e.workloads(shrunk) {
		c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
		evicted = evicted || c != nil && c.Status == metav1.ConditionTrue && c.Reason == kueue.WorkloadEvictedByPreemption
	}
	if !evicted {
		t.Errorf("no Workload of llm evicted by preemption; want Kueue to preempt it whole once it could shrink no further")
	}
}

// TestElasticJobShrinksForAKueueBatchJob: the same for a job of another kind. An elastic job (2 × 8
// GPUs, minWorkers 1, priority low) runs whole in a ClusterQueue of 16 GPUs that preempts lower
// priorities, when a batch/Job of priority high for 8 GPUs comes through Kueue's own batch/Job
// integration. Its Workload is created with the gate convoy.dev/shrink-first (deploy/kueue's
// webhook), so the elastic job shrinks to 1 worker, worker 0 running on and nothing evicted, and
// the Job is admitted into the quota that frees, with a ShrinkFirst event saying so.
func TestElasticJobShrinksForAKueueBatchJob(t *testing.T) {
	t.Parallel() // each waits out a cooldown in its own namespace and ClusterQueue
	e := newEnv(t)
	worker0 := e.runningElasticJob(kueue.PreemptionPolicyLowerPriority)

	e.create(testingjob.MakeJob("urgent", e.ns).Queue("q").PriorityClass("high").RequestAndLimit(convoy.ResourceGPU, "8").Obj())
	e.eventually("the batch/Job admitted by Kueue", func() (bool, string) {
		job := &batchv1.Job{}
		if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: "urgent"}, job); err != nil {
			return false, err.Error()
		}
		return !ptr.Deref(job.Spec.Suspend, true), "suspended"
	})
	e.wantShrunkNotPreempted("llm", worker0)
	e.waitEvent("urgent", queue.ReasonShrinkFirst, "elastic jobs shrink instead ("+e.ns+"/llm from 2 to 1 workers)")
}

// runningElasticJob makes a ClusterQueue of 16 GPUs that preempts within itself by policy, and
// LocalQueue "q" to it, and runs elastic job "llm" there (2 × 8 GPUs, minWorkers 1, priority
// low) whole; it returns worker 0.
func (e *env) runningElasticJob(policy kueue.PreemptionPolicy) corev1.Pod {
	e.t.Helper()
	e.create(clusterQueue(e.ns, "", 16, nil, nil, kueue.ClusterQueuePreemption{WithinClusterQueue: policy}))
	e.localQueue(e.ns)
	e.create(resizable(trainingJob(e.ns, "llm", "q", "low", 2, 8)))
	return e.startElasticGang("llm", 2)[0]
}

// wantShrunkNotPreempted checks that elastic job name (2 workers, minWorkers 1) shrank once to 1
// worker, still Running, with no restart, no Workload evicted and worker0 running on; it returns
// the job.
func (e *env) wantShrunkNotPreempted(name string, worker0 corev1.Pod) *convoy.TrainingJob {
	e.t.Helper()
	// The operator writes the job's status apart from the Workload that let the other job in.
	shrunk := e.waitJob(e.ns, name, "shrunk to 1 worker", func(j *convoy.TrainingJob) bool {
		return j.Status.Elastic != nil && j.Status.Elastic.TargetWorkers == 1 && j.Status.Elastic.ResizeCount > 0
	})
	if st := shrunk.Status; st.RestartCount != 0 || st.Elastic.ResizeCount != 1 ||
		!meta.IsStatusConditionTrue(st.Conditions, convoy.ConditionRunning) {
		e.t.Errorf("%s's status %+v; want restartCount 0, target 1 worker, resizeCount 1 and Running: shrunk, not preempted", name, st)
	}
	for _, wl := range e.workloads(shrunk) {
		if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
			e.t.Errorf("%s's Workload %s was evicted (%s: %s); want it shrunk", name, wl.Name, c.Reason, c.Message)
		}
	}
	if p := e.pods(e.ns, name); len(p) == 0 || p[0].UID != worker0.UID {
		e.t.Errorf("%s's pods %v; want worker 0 running on", name, podNames(p))
	}
	return shrunk
}

// TestElasticJobShrinksOnlyForAFlavorTheWaitingJobCanUse: a ClusterQueue that preempts lower
// priorities has two GPU flavors, H100 (8 GPUs) then A100 (16). An elastic job pinned to A100 (2 × 8
// GPUs, minWorkers 1, priority low) and a job pinned to H100 (1 × 8, low) run there. A job of
// priority high pinned to H100 comes to wait for 8 GPUs: shrinking the elastic job would free A100
// GPUs it cannot use, so the elastic job keeps both workers, the gate opens at once, Kueue preempts
// the H100 job, and the high-priority job is admitted.
func TestElasticJobShrinksOnlyForAFlavorTheWaitingJobCanUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	quota := func(flavor, gpus string) kueue.FlavorQuotas {
		return *utiltestingapi.MakeFlavorQuotas(flavor).Resource(convoy.ResourceGPU, gpus).
			Resource(corev1.ResourceCPU, "1000").Resource(corev1.ResourceMemory, "10Ti").Obj()
	}
	e.create(utiltestingapi.MakeClusterQueue(e.ns).ResourceGroup(quota("h100-on-demand", "8"), quota("a100-on-demand", "16")).
		Preemption(kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}).Obj())
	e.localQueue(e.ns)
	pinned := func(job *convoy.TrainingJob, product string) *convoy.TrainingJob {
		job.Spec.Scheduling.NodeSelector = map[string]string{convoy.LabelGPUProduct: product}
		return job
	}
	e.create(pinned(resizable(trainingJob(e.ns, "llm", "q", "low", 2, 8)), "NVIDIA-A100-SXM4-80GB"))
	e.startElasticGang("llm", 2)
	e.create(pinned(trainingJob(e.ns, "h100", "q", "low", 1, 8), "NVIDIA-H100-80GB-HBM3"))
	e.startGang(e.ns, "h100", 1)

	e.create(pinned(trainingJob(e.ns, "high", "q", "high", 1, 8), "NVIDIA-H100-80GB-HBM3"))
	e.waitJob(e.ns, "high", "admitted once Kueue preempted the H100 job", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && !j.IsSuspended()
	})
	if llm := e.job(e.ns, "llm"); llm.WorkerCount() != 2 || llm.Status.Elastic != nil && llm.Status.Elastic.ResizeCount != 0 {
		t.Errorf("llm has %d workers, status.elastic %+v; want 2 and no resize: its A100 GPUs are of no use to the H100 job", llm.WorkerCount(), llm.Status.Elastic)
	}
	if _, asked := e.job(e.ns, "llm").ElasticShrinkTo(); asked {
		t.Errorf("llm was asked to shrink; its A100 GPUs are of no use to the H100 job")
	}
}

// TestElasticJobShrinksAtACheckpoint: an elastic job that checkpoints (2 × 8 GPUs, minWorkers 1)
// runs whole in a ClusterQueue of 16 GPUs that does not preempt, when a job of priority high for
// 8 GPUs comes to wait there. Before its highest worker goes, the gang is asked for a checkpoint
// (status and the replies to its progress reports say so) and keeps both workers and its quota;
// once it reports one (epoch 7, after its periodic epoch 5) it shrinks to 1 worker, the Resized
// event names that checkpoint, and the high-priority job is admitted.
func TestElasticJobShrinksAtACheckpoint(t *testing.T) {
	t.Parallel() // each waits out a cooldown in its own namespace and ClusterQueue
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 16, nil, nil, kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyNever}))
	e.localQueue(e.ns)
	e.create(resizable(checkpointingJob(e.ns, "llm", "low", 600)))
	pods := e.startElasticGang("llm", 2)
	uri := util.EnvOf(&pods[0], "CONVOY_CHECKPOINT_URI")
	e.reportCheckpoint(&pods[0], progress.Checkpoint{Path: uri + "/epoch-5", Epoch: 5})

	e.create(trainingJob(e.ns, "high", "q", "high", 1, 8))
	asked := e.waitJob(e.ns, "llm", "asked to checkpoint", func(j *convoy.TrainingJob) bool {
		return meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionCheckpointRequested)
	})
	if msg := condition(asked, convoy.ConditionCheckpointRequested).Message; !strings.Contains(msg, "shrinks from 2 to 1 workers") {
		t.Errorf("CheckpointRequested does not say the gang shrinks: %q", msg)
	}
	if r := e.reportProgress(&pods[0], progress.Report{Epoch: ptr.To[int32](7)}); !r.CheckpointRequested {
		t.Errorf("reply to a progress report of the gang = %+v, want a checkpoint request", r)
	}
	time.Sleep(2 * time.Second) // long enough for Kueue to admit the waiting job, were the quota free
	if live := e.pods(e.ns, "llm"); len(live) != 2 || live[1].DeletionTimestamp != nil {
		t.Errorf("the gang's workers %v, want both running on until it checkpoints", podNames(live))
	}
	if high := e.job(e.ns, "high"); high.Status.Admission != nil {
		t.Errorf("the high-priority job was admitted while the gang checkpoints")
	}

	e.reportCheckpoint(&pods[0], progress.Checkpoint{Path: uri + "/epoch-7", Epoch: 7})
	shrunk := e.waitJob(e.ns, "llm", "shrunk to 1 worker", func(j *convoy.TrainingJob) bool {
		return j.Status.Elastic != nil && j.Status.Elastic.TargetWorkers == 1
	})
	if c := meta.FindStatusCondition(shrunk.Status.Conditions, convoy.ConditionCheckpointRequested); c == nil || c.Status != metav1.ConditionFalse || c.Reason != convoy.ReasonCheckpointSaved {
		t.Errorf("CheckpointRequested = %+v, want False %s", c, convoy.ReasonCheckpointSaved)
	}
	e.waitEvent("llm", controller.ReasonResized, "shrank from 2 to 1 workers at checkpoint "+uri+"/epoch-7 (epoch 7)")
	e.waitJob(e.ns, "high", "admitted into the freed quota", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && !j.IsSuspended()
	})
}

// TestElasticJobGivesGrownWorkersBackToAJobOfItsPriority: an elastic job (3 × 8 GPUs, minWorkers
// 1) in a ClusterQueue of 32 GPUs that does not preempt, 16 of them taken, is admitted with 2
// workers. A job of the same priority for 8 GPUs waits there meanwhile and takes none of them: the
// elastic job keeps the size Kueue admitted it with, through the resizer's look at the end of its
// cooldown. When the other job completes, the waiting one is admitted and the elastic job grows to
// 3 into the GPUs left. A second job of the same priority for 8 GPUs then comes to wait: the
// elastic job gives back the worker it grew (a Resized event, status.elastic), worker 0 running on,
// and that job is admitted and runs.
func TestElasticJobGivesGrownWorkersBackToAJobOfItsPriority(t *testing.T) {
	t.Parallel() // each waits out a cooldown in its own namespace and ClusterQueue
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 32, nil, nil, kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyNever}))
	e.localQueue(e.ns)
	e.create(trainingJob(e.ns, "other", "q", "", 2, 8))
	other := e.startGang(e.ns, "other", 2)
	e.create(resizable(trainingJob(e.ns, "llm", "q", "", 3, 8)))
	worker0 := e.startElasticGang("llm", 2)[0]

	e.create(trainingJob(e.ns, "first", "q", "", 1, 8))
	started := e.waitJob(e.ns, "llm", "started", func(j *convoy.TrainingJob) bool { return j.Status.StartTime != nil })
	// The resizer looks at the job on its changes and when its cooldown ends.
	util.Consistently(t, 200*time.Millisecond, time.Until(started.Status.StartTime.Add((cooldown+5)*time.Second)),
		"the elastic job keeping the size Kueue admitted it with for a waiting job of its priority", func() (bool, string) {
			llm, first := e.job(e.ns, "llm"), e.job(e.ns, "first")
			_, asked := llm.ElasticShrinkTo()
			return llm.WorkerCount() == 2 && !asked && first.Status.Admission == nil,
				fmt.Sprintf("llm: %d workers, asked to shrink %v; first admitted %v", llm.WorkerCount(), asked, first.Status.Admission != nil)
		})

	for i := range other {
		e.finishPod(&other[i])
	}
	e.startGang(e.ns, "first", 1)
	e.waitJob(e.ns, "llm", "grown to 3 workers", func(j *convoy.TrainingJob) bool {
		return j.Status.Elastic.TargetWorkers == 3
	})
	e.startElasticGang("llm", 3)

	e.create(trainingJob(e.ns, "second", "q", "", 1, 8))
	shrunk := e.waitJob(e.ns, "llm", "shrunk back to 2 workers", func(j *convoy.TrainingJob) bool {
		return j.Status.Elastic.TargetWorkers == 2 && j.Status.Elastic.CurrentWorkers == 2
	})
	if st := shrunk.Status; st.RestartCount != 0 || st.Elastic.ResizeCount != 2 || !meta.IsStatusConditionTrue(st.Conditions, convoy.ConditionRunning) {
		t.Errorf("restartCount %d, resizeCount %d, Running %v; want 0, 2 and true: the gang grew and shrank without stopping",
			st.RestartCount, st.Elastic.ResizeCount, meta.IsStatusConditionTrue(st.Conditions, convoy.ConditionRunning))
	}
	e.waitEvent("llm", controller.ReasonResized, "shrank from 3 to 2 workers")
	e.startGang(e.ns, "second", 1)
	e.eventually("workers 0 and 1 of llm running on", func() (bool, string) {
		var live []corev1.Pod
		for _, p := range e.pods(e.ns, "llm") {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		return len(live) == 2 && live[0].UID == worker0.UID, fmt.Sprint(podNames(live))
	})
}

// startElasticGang waits for the n pods of an elastic job, each started by Kueue (its scheduling
// gate gone) only once the Workload slice that counts it is admitted, places those not yet placed
// and waits for them to run and for the job to show Running with n workers: only a running job
// shrinks for another, and one still starting is preempted whole. It returns the pods in worker
// order.
func (e *env) startElasticGang(job string, n int) []corev1.Pod {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%d pods of %s started by Kueue", n, job), func() (bool, string) {
		var live, gated []string
		for _, p := range e.pods(e.ns, job) {
			if p.DeletionTimestamp == nil {
				live = append(live, p.Name)
				if len(p.Spec.SchedulingGates) > 0 {
					gated = append(gated, p.Name)
				}
			}
		}
		return len(live) == n && len(gated) == 0, fmt.Sprintf("live %v, gated %v", live, gated)
	})
	for _, pod := range e.pods(e.ns, job) {
		if pod.Spec.NodeName == "" {
			e.bind(&pod, e.nodeFor(&pod))
		}
	}
	e.eventually(fmt.Sprintf("%d pods of %s running", n, job), func() (bool, string) {
		pods := e.pods(e.ns, job)
		up := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				up++
			}
		}
		return up == n, fmt.Sprintf("%d running", up)
	})
	e.waitJob(e.ns, job, fmt.Sprintf("Running with %d workers", n), func(j *convoy.TrainingJob) bool {
		return j.Status.Elastic != nil && j.Status.Elastic.CurrentWorkers == int32(n) &&
			meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionRunning)
	})
	pods := e.pods(e.ns, job)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}
