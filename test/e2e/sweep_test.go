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
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/sweepsim"
	"github.com/convoy-dev/convoy/test/util"
)

// sweepTimeout bounds a whole sweep: trials of a few one-second epochs, queued, placed and run.
const sweepTimeout = 4 * time.Minute

func doubleParam(name string, lo, hi, step float64) convoy.ParameterSpec {
	fs := convoy.FeasibleSpace{Min: fmt.Sprint(lo), Max: fmt.Sprint(hi)}
	if step > 0 {
		fs.Step = fmt.Sprint(step)
	}
	return convoy.ParameterSpec{Name: name, ParameterType: convoy.ParameterDouble, FeasibleSpace: fs}
}

// sweep is a sweep of trials of workers × gpus in the test's queue whose simtrainer reports
// the objective (test/sweepsim) of the parameters x and y as its loss, over epochs epochs.
func (e *env) sweep(name string, algo convoy.AlgorithmName, objective string, epochs, workers, gpus int32, params ...convoy.ParameterSpec) *convoy.TrainingSweep {
	return &convoy.TrainingSweep{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: convoy.TrainingSweepSpec{
			Objective:  convoy.ObjectiveSpec{Type: convoy.ObjectiveMinimize, ObjectiveMetricName: "loss"},
			Algorithm:  convoy.AlgorithmSpec{AlgorithmName: algo},
			Parameters: params,
			TrialTemplate: convoy.TrialTemplate{Spec: convoy.TrainingJobSpec{
				Model: "llama-3-8b", Dataset: "s3://corpus/en", Framework: convoy.FrameworkPyTorch,
				NumWorkers: workers, GPUsPerWorker: ptr.To(gpus), Image: "trainer:1",
				Hyperparameters: &convoy.Hyperparameters{Epochs: ptr.To(epochs), AdditionalParams: map[string]string{
					sweepsim.ParamObjective: objective, "x": "${trialParameters.x}", "y": "${trialParameters.y}"}},
				// Checkpoints named in S3 need no volume on kwok's nodes: simtrainer reports their paths.
				Checkpoint: &convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}},
				Scheduling: &convoy.SchedulingSpec{Queue: "training", Topology: &convoy.TopologySpec{Level: convoy.TopologyRack}},
			}},
		},
	}
}

// createSweep creates the sweep; the test's cleanup deletes it before the queue's cleanup runs,
// so that no new trial appears while the namespace is emptied.
func (e *env) createSweep(sw *convoy.TrainingSweep) {
	e.t.Helper()
	must(e.t, e.k.Create(e.t.Context(), sw))
	e.t.Cleanup(func() { _ = e.k.Delete(context.Background(), sw) })
}

// waitSweep waits until cond holds for the sweep and returns it.
func (e *env) waitSweep(name, what string, cond func(*convoy.TrainingSweep) bool) *convoy.TrainingSweep {
	e.t.Helper()
	var sw *convoy.TrainingSweep
	util.Eventually(e.t, 500*time.Millisecond, sweepTimeout, fmt.Sprintf("sweep %s to be %s", name, what), func() (bool, string) {
		s := &convoy.TrainingSweep{}
		if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, s); err != nil {
			return false, err.Error()
		}
		sw = s
		return cond(s), fmt.Sprintf("its status: %+v", sweepStatusOf(s))
	})
	return sw
}

func sweepStatusOf(sw *convoy.TrainingSweep) any {
	if sw == nil {
		return nil
	}
	st := sw.Status.DeepCopy()
	for i := range st.TrialStatuses {
		st.TrialStatuses[i].Observations = nil
	}
	return st
}

// hyperband is a hyperband sweep (eta 3, rungs at epochs 1 and 3, 9 epochs) of trials trials, all
// at once, over x and y in [-1, 1]. Of 4 trials at most 2 are ever among the best third at the
// first rung: fewer than eta reach the last, so each pauses there, and the best of them resumes
// from its checkpoint once nothing else runs, whatever order the trials report in. (Of more, one
// among the best on reaching a rung runs on, so a resume depends on that order.)
func (e *env) hyperband(name string, trials int32) *convoy.TrainingSweep {
	hb := e.sweep(name, convoy.AlgorithmHyperband, sweepsim.Quadratic, 9, 1, 1, doubleParam("x", -1, 1, 0), doubleParam("y", -1, 1, 0))
	hb.Spec.MaxTrialCount, hb.Spec.ParallelTrialCount = ptr.To(trials), ptr.To(trials)
	hb.Spec.Algorithm.AlgorithmSettings = []convoy.AlgorithmSetting{{Name: "eta", Value: "3"}, {Name: "min_resource", Value: "1"}}
	return hb
}

// pausedTrial waits until the sweep pauses a trial and returns its name.
func (e *env) pausedTrial(sweep string) string {
	e.t.Helper()
	paused := e.waitSweep(sweep, "pausing a trial", func(s *convoy.TrainingSweep) bool { return s.Status.PausedTrials > 0 })
	for _, tr := range paused.Status.TrialStatuses {
		if tr.State == convoy.TrialPaused {
			return tr.Name
		}
	}
	e.t.Fatalf("sweep %s counts a paused trial but lists none: %+v", sweep, sweepStatusOf(paused))
	return ""
}

// resumedTrials yields each trial of the finished sweep that was promoted and resumed from its
// checkpoint, with its TrainingJob; it fails the test when there is none.
func (e *env) resumedTrials(sw *convoy.TrainingSweep) iter.Seq2[convoy.TrialStatus, *convoy.TrainingJob] {
	e.t.Helper()
	var resumed []convoy.TrialStatus
	for _, tr := range sw.Status.TrialStatuses {
		if tr.ResumedFromEpoch > 0 {
			resumed = append(resumed, tr)
		}
	}
	if len(resumed) == 0 {
		e.t.Errorf("no trial of sweep %s was promoted and resumed from its checkpoint: %+v", sw.Name, sweepStatusOf(sw))
	}
	return func(yield func(convoy.TrialStatus, *convoy.TrainingJob) bool) {
		for _, tr := range resumed {
			if !yield(tr, e.get(tr.Name)) {
				return
			}
		}
	}
}

func (e *env) trials(sweep string) []convoy.TrainingJob {
	e.t.Helper()
	jobs := &convoy.TrainingJobList{}
	must(e.t, e.k.List(e.t.Context(), jobs, client.InNamespace(e.ns), client.MatchingLabels{convoy.LabelSweepName: sweep}))
	return jobs.Items
}

// TestSweepAlgorithmsFindTheOptimum runs a sweep of each algorithm on the shifted quadratic
// (least value 0 at x=0.3, y=-0.2) at once in one queue, and checks that each finds a trial
// within its stated tolerance of the optimum, reported through the progress protocol.
func TestSweepAlgorithmsFindTheOptimum(t *testing.T) {
	e := setup(t)
	e.queue(64)
	x, y := doubleParam("x", -1, 1, 0), doubleParam("y", -1, 1, 0)
	grid := e.sweep("grid", convoy.AlgorithmGrid, sweepsim.Quadratic, 3, 1, 1, doubleParam("x", 0, 0.5, 0.25), doubleParam("y", -0.5, 0, 0.25))
	grid.Spec.MaxTrialCount, grid.Spec.ParallelTrialCount = ptr.To[int32](20), ptr.To[int32](4)
	random := e.sweep("random", convoy.AlgorithmRandom, sweepsim.Quadratic, 3, 1, 1, x, y)
	random.Spec.MaxTrialCount, random.Spec.ParallelTrialCount = ptr.To[int32](12), ptr.To[int32](4)
	tpe := e.sweep("tpe", convoy.AlgorithmTPE, sweepsim.Quadratic, 3, 1, 1, x, y)
	tpe.Spec.MaxTrialCount, tpe.Spec.ParallelTrialCount = ptr.To[int32](12), ptr.To[int32](3)
	tpe.Spec.Algorithm.AlgorithmSettings = []convoy.AlgorithmSetting{{Name: "n_startup_trials", Value: "4"}}
	hb := e.hyperband("hyperband", 9)
	resume := e.hyperband("resume", 4)

	// Tolerances: grid tries (0.25, -0.25), 0.005 from the optimum (plus the curve's noise at the
	// last epoch, under 0.003). Random, TPE and hyperband, with random_state 1 and 9 to 12 trials,
	// must come within 0.15 of it: 5% of the objective's range over the space (0 to 3.13).
	// Random's 12 draws of seed 1 come to 0.115; TPE's and hyperband's suggestions also depend
	// on the order trials finish in.
	tolerance := map[string]float64{"grid": 0.01, "random": 0.15, "tpe": 0.15, "hyperband": 0.15}
	for _, sw := range []*convoy.TrainingSweep{grid, random, tpe, hb, resume} {
		e.createSweep(sw)
	}

	// While hyperband runs, a paused trial holds no pods: its Workload is evicted and its gang gone.
	pausedName := e.pausedTrial("hyperband")
	e.waitJob(pausedName, "paused with no pods", func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateQueued && len(e.pods(pausedName)) == 0 || j.Status.IsFinished() || j.Annotations["convoy.dev/trial-paused"] == ""
	})

	for _, sw := range []*convoy.TrainingSweep{grid, random, tpe, hb} {
		done := e.waitSweep(sw.Name, "Succeeded", func(s *convoy.TrainingSweep) bool {
			return s.Status.State != convoy.SweepRunning && s.Status.State != "" && s.Status.State != convoy.SweepCreated
		})
		if done.Status.State != convoy.SweepSucceeded {
			t.Errorf("sweep %s: state %s, want Succeeded; status %+v", sw.Name, done.Status.State, sweepStatusOf(done))
			continue
		}
		b := done.Status.BestTrial
		if b == nil || math.Abs(b.Value) > tolerance[sw.Name] {
			t.Errorf("sweep %s: best trial %+v, want a loss within %g of the optimum 0", sw.Name, b, tolerance[sw.Name])
			continue
		}
		t.Logf("sweep %s: %d trials (%s), best %s %v loss %.4f", sw.Name, done.Status.Trials, done.Status.TrialsSummary, b.Name, b.ParameterAssignments, b.Value)
	}

	// Grid ran every point of its 3×3 grid and no more.
	if n := len(e.trials("grid")); n != 9 {
		t.Errorf("grid created %d trials, want the 9 points of its grid", n)
	}
	// Hyperband promoted a trial from its checkpoint: a resumed trial's TrainingJob went on from
	// the epoch it paused at, to the last epoch, after its gang was restarted.
	resumeDone := e.waitSweep("resume", "done", func(s *convoy.TrainingSweep) bool {
		return s.Status.State == convoy.SweepSucceeded || s.Status.State == convoy.SweepFailed
	})
	for tr, job := range e.resumedTrials(resumeDone) {
		if job.Status.RestartCount == 0 || job.Status.Checkpoint == nil || job.Status.Checkpoint.Epoch <= tr.ResumedFromEpoch {
			t.Errorf("trial %s resumed from epoch %d, but its job shows restartCount %d and checkpoint %+v", tr.Name, tr.ResumedFromEpoch, job.Status.RestartCount, job.Status.Checkpoint)
		}
	}
	if hbDone := e.waitSweep("hyperband", "done", func(*convoy.TrainingSweep) bool { return true }); hbDone.Status.EarlyStoppedTrials == 0 {
		t.Errorf("hyperband stopped no trial at a rung: %+v", sweepStatusOf(hbDone))
	}

	out, err := e.Kubectl(t.Context(), "get", "sweeps", "-n", e.ns)
	must(t, err)
	t.Logf("kubectl get sweeps:\n%s", out)
	if !strings.Contains(out, "TRIALS") || !strings.Contains(out, "Succeeded") {
		t.Errorf("kubectl get sweeps shows no STATE and TRIALS:\n%s", out)
	}
}

// TestSweepEarlyStoppingFreesQuotaForTheNextTrial: trials of 2 workers × 8 GPUs in a queue of
// 16 GPUs run one at a time; the median rule stops a losing trial, which frees its GPUs and
// quota at once, and the trial queued behind it is admitted.
func TestSweepEarlyStoppingFreesQuotaForTheNextTrial(t *testing.T) {
	e := setup(t)
	e.queue(16)
	// Grid order: x=1 (loss 0.49) first, then x=3 (7.29), then x=0.3 (the optimum, 0). Trial 1
	// runs once trial 0 succeeded and is stopped at epoch 4 while trial 2 waits for its quota.
	// From epoch 4 on, the curve's noise (test/sweepsim) is far below the 0.49 between trial 2
	// and trial 0, so the median rule keeps trial 2.
	xs := convoy.ParameterSpec{Name: "x", ParameterType: convoy.ParameterDiscrete, FeasibleSpace: convoy.FeasibleSpace{List: []string{"1", "3", "0.3"}}}
	ys := convoy.ParameterSpec{Name: "y", ParameterType: convoy.ParameterDiscrete, FeasibleSpace: convoy.FeasibleSpace{List: []string{"-0.2"}}}
	sw := e.sweep("median", convoy.AlgorithmGrid, sweepsim.Quadratic, 6, 2, 8, xs, ys)
	sw.Spec.ParallelTrialCount = ptr.To[int32](1)
	sw.Spec.EarlyStopping = &convoy.EarlyStoppingSpec{AlgorithmName: convoy.EarlyStoppingMedian, AlgorithmSettings: []convoy.AlgorithmSetting{
		{Name: "min_trials_required", Value: "1"}, {Name: "start_step", Value: "4"}}}
	e.createSweep(sw)
	// Once trial 1 runs (after trial 0), two trials at a time: trial 2 waits in the queue.
	e.waitState("median-1", convoy.StateRunning)
	patch := client.MergeFrom(sw.DeepCopy())
	sw.Spec.ParallelTrialCount = ptr.To[int32](2)
	must(t, e.k.Patch(t.Context(), sw, patch))

	// Never more than one trial admitted at once: the quota holds one 16-GPU gang.
	stopWatch := make(chan struct{})
	maxAdmitted := make(chan int, 1)
	go func() {
		most := 0
		for {
			select {
			case <-stopWatch:
				maxAdmitted <- most
				return
			case <-time.After(300 * time.Millisecond):
			}
			wls := &kueue.WorkloadList{}
			if err := e.k.List(context.Background(), wls, client.InNamespace(e.ns)); err != nil {
				continue
			}
			n := 0
			for _, wl := range wls.Items {
				if meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) && !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
					n++
				}
			}
			most = max(most, n)
		}
	}()

	stopped := e.waitJob("median-1", "early-stopped", func(j *convoy.TrainingJob) bool { return j.Status.IsFinished() })
	if c := meta.FindStatusCondition(stopped.Status.Conditions, convoy.ConditionCompleted); stopped.Status.State != convoy.StateCompleted || c == nil || c.Reason != convoy.ReasonEarlyStopped {
		t.Fatalf("median-1 (x=3) is %s, want Completed with reason EarlyStopped; %s", stopped.Status.State, util.JobSummary(stopped))
	}
	if stopped.Status.CurrentEpoch >= 6 {
		t.Errorf("median-1 ran all %d epochs; the median rule should have stopped it", stopped.Status.CurrentEpoch)
	}
	// Its gang is gone and the next trial, queued behind it, is admitted and runs.
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, p := range e.pods("median-1") {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("median-1's pods still hold their GPUs after it stopped: %v", podNames(e.pods("median-1")))
	}
	// Kueue admits median-2 only once median-1's Workload finished with it.
	next := e.waitJob("median-2", "admitted", func(j *convoy.TrainingJob) bool {
		return meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionAdmitted)
	})
	if admitted := meta.FindStatusCondition(next.Status.Conditions, convoy.ConditionAdmitted); admitted.LastTransitionTime.Before(stopped.Status.CompletionTime) {
		t.Errorf("median-2 was admitted at %v, before median-1 stopped at %v", admitted.LastTransitionTime, stopped.Status.CompletionTime)
	}

	done := e.waitSweep("median", "Succeeded", func(s *convoy.TrainingSweep) bool { return s.Status.State == convoy.SweepSucceeded })
	close(stopWatch)
	if most := <-maxAdmitted; most > 1 {
		t.Errorf("%d trials were admitted at once; the 16-GPU quota holds one 2×8-GPU trial", most)
	}
	if done.Status.EarlyStoppedTrials != 1 || done.Status.FailedTrials != 0 || done.Status.SucceededTrials != 2 {
		t.Errorf("trials: %d succeeded, %d early-stopped, %d failed; want 2, 1, 0: %+v", done.Status.SucceededTrials, done.Status.EarlyStoppedTrials, done.Status.FailedTrials, sweepStatusOf(done))
	}
	if b := done.Status.BestTrial; b == nil || b.Name != "median-2" {
		t.Errorf("best trial %+v, want median-2 (x=0.3, the optimum)", b)
	}
	// The sweep's cost is its trials' summed: here GPU-hours, as no price list is installed.
	var summed float64
	e.waitSweep("median", "its trials' GPU-hours summed", func(s *convoy.TrainingSweep) bool {
		trials := &convoy.TrainingJobList{}
		if err := e.k.List(t.Context(), trials, client.InNamespace(e.ns), client.MatchingLabels{convoy.LabelSweepName: "median"}); err != nil {
			return false
		}
		summed = 0
		for _, j := range trials.Items {
			if j.Status.Cost != nil {
				summed += j.Status.Cost.GPUHours
			}
		}
		return summed > 0 && s.Status.Cost != nil && math.Abs(s.Status.Cost.GPUHours-summed) < 1e-6
	})
	// A deleted trial's GPU-hours were spent: the sweep's cost keeps them.
	gone := e.get("median-1")
	if gone.Status.Cost == nil || gone.Status.Cost.GPUHours == 0 {
		t.Fatalf("median-1 ran but shows no cost: %+v", gone.Status.Cost)
	}
	must(t, e.k.Delete(t.Context(), gone))
	kept := e.waitSweep("median", "median-1 deleted, its cost kept", func(s *convoy.TrainingSweep) bool {
		return !slices.ContainsFunc(s.Status.TrialStatuses, func(tr convoy.TrialStatus) bool { return tr.Name == "median-1" }) &&
			s.Status.DeletedTrialsCost != nil
	})
	if d := kept.Status.DeletedTrialsCost; math.Abs(d.GPUHours-gone.Status.Cost.GPUHours) > 1e-6 || math.Abs(kept.Status.Cost.GPUHours-summed) > 1e-6 {
		t.Errorf("after deleting median-1 (%.6f GPU-h) the sweep shows cost %+v, deleted trials %+v; want the %.6f GPU-h summed before",
			gone.Status.Cost.GPUHours, kept.Status.Cost, d, summed)
	}
	events, err := e.Kubectl(t.Context(), "get", "events", "-n", e.ns, "--field-selector", "involvedObject.name=median", "-o", "custom-columns=REASON:.reason,MESSAGE:.message")
	must(t, err)
	if !strings.Contains(events, "TrialEarlyStopped") || !strings.Contains(events, "median-1") {
		t.Errorf("no TrialEarlyStopped event for median-1:\n%s", events)
	}
}

// TestSweepFailsAfterMaxFailedTrials: trials whose workers exit 1 fail; the third failure is
// more than maxFailedTrialCount 2 and fails the sweep.
func TestSweepFailsAfterMaxFailedTrials(t *testing.T) {
	e := setup(t)
	e.queue(16)
	sw := e.sweep("failing", convoy.AlgorithmRandom, sweepsim.Fail, 3, 1, 1, doubleParam("x", 0, 1, 0), doubleParam("y", 0, 1, 0))
	sw.Spec.MaxTrialCount, sw.Spec.ParallelTrialCount, sw.Spec.MaxFailedTrialCount = ptr.To[int32](10), ptr.To[int32](1), ptr.To[int32](2)
	sw.Spec.TrialTemplate.Spec.FailurePolicy = &convoy.FailurePolicy{RestartPolicy: convoy.RestartNever}
	e.createSweep(sw)
	done := e.waitSweep("failing", "Failed", func(s *convoy.TrainingSweep) bool { return s.Status.State == convoy.SweepFailed })
	c := meta.FindStatusCondition(done.Status.Conditions, convoy.SweepConditionFailed)
	if c == nil || c.Reason != convoy.SweepReasonMaxFailedTrialsReached || done.Status.FailedTrials != 3 {
		t.Errorf("sweep failed with %+v after %d failed trials, want MaxFailedTrialsReached after 3", c, done.Status.FailedTrials)
	}
	if n := len(e.trials("failing")); n != 3 {
		t.Errorf("%d trials were created, want no more after the third failure", n)
	}

	// Deleting the sweep deletes its trials (the garbage collector follows their owner references).
	must(t, e.k.Delete(t.Context(), sw))
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return len(e.trials("failing")) == 0, nil
	})
	if err != nil {
		t.Errorf("the deleted sweep's trials are still there: %d", len(e.trials("failing")))
	}
}

// TestHyperbandWithoutAQueuePausesThroughSuspend: a hyperband sweep whose trials name no queue
// (a cluster without Kueue's quota for them) pauses a trial at its rung through spec.suspend: the
// trial shows Suspended and holds no pods; a promoted trial resumes from its checkpoint.
func TestHyperbandWithoutAQueuePausesThroughSuspend(t *testing.T) {
	e := setup(t)
	e.namespace()
	hb := e.hyperband("unqueued", 4)
	hb.Spec.TrialTemplate.Spec.Scheduling.Queue = ""
	e.createSweep(hb)

	name := e.pausedTrial("unqueued")
	// Until it is promoted or stopped, the paused trial is suspended with its gang gone.
	j := e.waitJob(name, "suspended with no pods", func(j *convoy.TrainingJob) bool {
		return j.Status.IsFinished() || j.Annotations["convoy.dev/trial-paused"] == "" ||
			ptr.Deref(j.Spec.Suspend, false) && j.Status.State == convoy.StateSuspended && len(e.pods(name)) == 0
	})
	t.Logf("paused trial %s: suspend %v, state %s, %d pods", name, ptr.Deref(j.Spec.Suspend, false), j.Status.State, len(e.pods(name)))

	done := e.waitSweep("unqueued", "done", func(s *convoy.TrainingSweep) bool {
		return s.Status.State == convoy.SweepSucceeded || s.Status.State == convoy.SweepFailed
	})
	if done.Status.State != convoy.SweepSucceeded {
		t.Fatalf("sweep unqueued: state %s, want Succeeded; status %+v", done.Status.State, sweepStatusOf(done))
	}
	for tr, job := range e.resumedTrials(done) {
		// It trained on past the epoch it resumed from (a trial paused again at a later rung and
		// then stopped at the sweep's end stays suspended, finished).
		if !job.Status.IsFinished() || job.Status.State == convoy.StateFailed || job.Status.Checkpoint == nil || job.Status.Checkpoint.Epoch <= tr.ResumedFromEpoch {
			t.Errorf("trial %s resumed from epoch %d, but its job is %s (%s) with checkpoint %+v", tr.Name, tr.ResumedFromEpoch, job.Status.State, job.Status.Reason, job.Status.Checkpoint)
		}
	}
}
