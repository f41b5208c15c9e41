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

package realelastic

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/framework"
)

// An elastic PyTorch job (spec.elastic, minWorkers 1, numWorkers 2, a whole node's GPUs a worker)
// is applied while a filler job holds the second node: it starts on 1 worker. The filler ends and
// the job grows to 2 (torchrun's c10d rendezvous takes the new worker in); a higher-priority job
// arrives in the ClusterQueue, which preempts lower priorities, and the job shrinks back to 1
// instead of being preempted, the newcomer running on the freed node; the job completes.
// Its status and events say each change, and its rank 0's log shows every epoch trained once, in
// order, the world resuming from the latest checkpoint at each rendezvous. Each job's rank 0 waits
// after each epoch while a hold file is on the checkpoint volume (CONVOY_EXAMPLE_HOLD_FILE,
// answering the operator's checkpoint requests meanwhile), so that each change comes between two
// epochs whatever the machine's speed.
func TestElasticPyTorchJobGrowsAndShrinks(t *testing.T) {
	e := realstack.Shared(t)
	ctx := t.Context()
	ns := framework.TestNamespace(t)
	began := time.Now()
	say := func(format string, args ...any) {
		t.Logf("[%6.1fs] %s", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := e.StoryQueue(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// The queue administrator lets higher priorities preempt, as deploy/queue's ClusterQueues do:
	// the urgent job still gets its GPUs by a shrink (convoy.dev/shrink-first), not a preemption.
	if out, err := e.Kubectl(ctx, "patch", "clusterqueue", "real-"+ns, "--type=merge", "-p",
		`{"spec":{"preemption":{"withinClusterQueue":"LowerPriority"}}}`); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := realstack.CheckpointVolume(ctx, e.Cluster, ns, "checkpoints"); err != nil {
		t.Fatal(err)
	}
	// The platform team grants the namespace priority class high, which the urgent job uses.
	if out, err := e.Kubectl(ctx, "annotate", "namespace", ns, "convoy.dev/priority-classes=low,normal,high", "--overwrite"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// hold creates the hold file of job, in the job's directory on the volume, and returns it.
	hold := func(job string) string {
		dir := filepath.Join(realstack.CheckpointVolumeDir(e.Cluster, ns, "checkpoints"), ns, job)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "hold")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	release := func(path string) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	get := func(ctx context.Context, name string) (*convoy.TrainingJob, error) {
		job := &convoy.TrainingJob{}
		return job, e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
	}
	const elastic = "elastic"
	var job *convoy.TrainingJob
	var widths []int32 // status.elastic.currentWorkers as seen, each change once
	waitJob := func(name, what string, done func(*convoy.TrainingJob) bool) *convoy.TrainingJob {
		t.Helper()
		var j *convoy.TrainingJob
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			if j, err = get(ctx, name); err != nil {
				return false, err
			}
			if name == elastic && j.Status.Elastic != nil && j.Status.Elastic.CurrentWorkers > 0 &&
				(len(widths) == 0 || widths[len(widths)-1] != j.Status.Elastic.CurrentWorkers) {
				widths = append(widths, j.Status.Elastic.CurrentWorkers)
			}
			return done(j), nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v; job %s: state %s, elastic %+v, conditions %+v\n%s", what, err, name, j.Status.State, j.Status.Elastic, j.Status.Conditions, logsOf(ctx, e, ns, name))
		}
		say("%s: kubectl get tj: %s", what, summaryOf(ctx, e, ns))
		return j
	}
	workers := func(n int32) func(*convoy.TrainingJob) bool {
		return func(j *convoy.TrainingJob) bool {
			return j.Status.State == convoy.StateRunning && j.Status.Elastic != nil && j.Status.Elastic.CurrentWorkers == n
		}
	}
	checkpointed := func(epoch int32) func(*convoy.TrainingJob) bool {
		return func(j *convoy.TrainingJob) bool {
			return j.Status.Checkpoint != nil && j.Status.Checkpoint.Epoch >= epoch
		}
	}
	ended := func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateCompleted || j.Status.State == convoy.StateFailed
	}

	fillerHold := hold("filler")
	if err := e.Cluster.Client.Create(ctx, storyJob(e, ns, "filler", 1, 2, "normal", "/checkpoints/"+ns+"/filler/hold", false)); err != nil {
		t.Fatal(err)
	}
	waitJob("filler", "the filler holds a node", func(j *convoy.TrainingJob) bool { return j.Status.State == convoy.StateRunning })

	elasticHold := hold(elastic)
	if err := e.Cluster.Client.Create(ctx, storyJob(e, ns, elastic, 2, elasticEpochs, "normal", "/checkpoints/"+ns+"/"+elastic+"/hold", true)); err != nil {
		t.Fatal(err)
	}
	waitJob(elastic, "the elastic job runs on 1 worker", workers(1))
	waitJob(elastic, "an epoch on 1 worker", checkpointed(1))

	release(fillerHold)
	if j := waitJob("filler", "the filler ends", ended); j.Status.State != convoy.StateCompleted {
		t.Fatalf("the filler ended %s, want Completed", j.Status.State)
	}
	waitJob(elastic, "the elastic job grows to 2 workers", workers(2))
	grown := waitJob(elastic, "an epoch on 2 workers", func(j *convoy.TrainingJob) bool {
		return strings.Contains(logsOf(ctx, e, ns, elastic), fmt.Sprintf("rank=0 world=%d starts at epoch ", 2*realstack.GPUsPerNode)) && checkpointed(2)(j)
	})
	twoWorkerEpoch := grown.Status.Checkpoint.Epoch

	if err := e.Cluster.Client.Create(ctx, storyJob(e, ns, "urgent", 1, 1, "high", "", false)); err != nil {
		t.Fatal(err)
	}
	waitJob(elastic, "the elastic job shrinks to 1 worker for a higher-priority job", workers(1))
	waitJob("urgent", "the higher-priority job runs", func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateRunning || j.Status.State == convoy.StateCompleted
	})
	if out, err := e.Kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=TrainingJob,involvedObject.name=urgent",
		"-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`); err != nil || !strings.Contains(out, "ShrinkFirst: Kueue would preempt") {
		t.Errorf("no ShrinkFirst event of the urgent job (%v):\n%s", err, out)
	}

	release(elasticHold)
	job = waitJob(elastic, "the elastic job ends", ended)
	logs := logsOf(ctx, e, ns, elastic)
	t.Logf("rank 0 of %s:\n%s", elastic, rankZero(logs))
	if job.Status.State != convoy.StateCompleted {
		t.Fatalf("the elastic job ended %s, want Completed: %+v", job.Status.State, job.Status.Conditions)
	}

	// What kubectl get tj -o yaml shows: two resizes, a throughput measured at each size.
	if want := []int32{1, 2, 1}; !slices.Equal(widths, want) {
		t.Errorf("status.elastic.currentWorkers went %v, want %v", widths, want)
	}
	el := job.Status.Elastic
	if el == nil || el.ResizeCount != 2 {
		t.Errorf("status.elastic = %+v, want resizeCount 2", el)
	} else {
		var sizes []int32
		for _, s := range el.Throughput {
			if s.SamplesPerSecond > 0 {
				sizes = append(sizes, s.Workers)
			}
		}
		if slices.Sort(sizes); !slices.Equal(sizes, []int32{1, 2}) {
			t.Errorf("status.elastic.throughput = %+v, want samples per second measured on 1 and on 2 workers", el.Throughput)
		}
	}
	if job.Status.Checkpoint == nil || job.Status.Checkpoint.Epoch != elasticEpochs {
		t.Errorf("status.checkpoint = %+v, want epoch %d", job.Status.Checkpoint, elasticEpochs)
	}
	// kubectl get events: the growth and the shrink, each with its reason.
	events, err := e.Kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=TrainingJob,involvedObject.name="+elastic,
		"-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	// The shrink waited for the checkpoint it asked for (rank 0 answers while held).
	for _, want := range []string{"Resized: grew from 1 to 2 workers", "Resized: shrank from 2 to 1 workers at checkpoint "} {
		if !strings.Contains(events, want) {
			t.Errorf("no event of the job says %q:\n%s", want, events)
		}
	}

	// kubectl logs: rank 0 trained on 1, then 2, then 1 worker (a process per GPU each), each
	// rendezvous resuming after the latest checkpoint, and every epoch once, in order. A worker's
	// processes share its log, where one's line may run on after another's.
	var starts [][2]int
	for _, m := range regexp.MustCompile(`rank=0 world=(\d+) starts at epoch (\d+)`).FindAllStringSubmatch(logs, -1) {
		w, _ := strconv.Atoi(m[1])
		ep, _ := strconv.Atoi(m[2])
		starts = append(starts, [2]int{w, ep})
	}
	g := realstack.GPUsPerNode
	if want := [][2]int{{g, 1}, {2 * g, int(twoWorkerEpoch)}, {g, int(twoWorkerEpoch) + 1}}; !slices.Equal(starts, want) {
		t.Errorf("rank 0's rendezvous (world, first epoch): %v, want %v", starts, want)
	}
	var epochs []int
	for _, m := range regexp.MustCompile(`rank=0 epoch=(\d+)/`).FindAllStringSubmatch(logs, -1) {
		ep, _ := strconv.Atoi(m[1])
		epochs = append(epochs, ep)
	}
	want := []int{}
	for ep := 1; ep <= elasticEpochs; ep++ {
		want = append(want, ep)
	}
	if !slices.Equal(epochs, want) {
		t.Errorf("rank 0 logged epochs %v, want %v", epochs, want)
	}
	say("The story took %.1fs", time.Since(began).Seconds())
}

// elasticEpochs is the elastic job's epochs: one on 1 worker, one on 2, the rest on 1 again.
const elasticEpochs = 4

// storyJob is the story's TrainingJob (realstack's, checkpoints on the claim "checkpoints") with
// workers workers of a whole node's GPUs each, one a node, at priority, whose rank 0 waits after
// each epoch while holdFile (when not empty) exists; elastic between 1 and workers with elastic.
func storyJob(e *realstack.Env, ns, name string, workers int32, epochs int, priority, holdFile string, elastic bool) *convoy.TrainingJob {
	job := &convoy.TrainingJob{}
	if err := yaml.Unmarshal([]byte(e.TrainingJob(ns, name, epochs, "0")), job); err != nil {
		panic(err) // realstack's YAML is a TrainingJob
	}
	s := &job.Spec
	s.NumWorkers, s.GPUsPerWorker = workers, ptr.To(int32(realstack.GPUsPerNode))
	if elastic {
		s.MinWorkers, s.Elastic = ptr.To(int32(1)), &convoy.ElasticSpec{ResizeCooldownSeconds: ptr.To(int32(30))}
	}
	s.Scheduling.PriorityClassName = priority
	s.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("768Mi") // torchrun's agent and its worker
	s.Env = append(s.Env,
		corev1.EnvVar{Name: "CONVOY_EXAMPLE_HOLD_FILE", Value: holdFile},
		// A rendezvous waits 2 s for more workers (not 30); torchrun looks for new ones every second.
		corev1.EnvVar{Name: "PET_RDZV_CONF", Value: "last_call_timeout=2"},
		corev1.EnvVar{Name: "PET_MONITOR_INTERVAL", Value: "1"})
	return job
}

// logsOf is `kubectl logs` of every pod of job, by its label.
func logsOf(ctx context.Context, e *realstack.Env, ns, job string) string {
	out, err := e.Kubectl(ctx, "logs", "-n", ns, "-l", convoy.LabelTrainingJob+"="+job, "--tail=-1")
	if err != nil {
		return fmt.Sprintf("kubectl logs: %v", err)
	}
	return out
}

// rankZero is the lines of rank 0 in logs.
func rankZero(logs string) string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.HasPrefix(line, "rank=0 ") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// summaryOf is `kubectl get tj -o wide` in ns, one line a job.
func summaryOf(ctx context.Context, e *realstack.Env, ns string) string {
	out, err := e.Kubectl(ctx, "get", "tj", "-n", ns, "-o", "wide", "--no-headers")
	if err != nil {
		return err.Error()
	}
	return "\n\t" + strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(out), "\n", " | ")), " ")
}
