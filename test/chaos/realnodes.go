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

package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

// The real-node rows' gang and the node they add.
const (
	realJob     = "lost"
	realWorkers = 2
	// spareNode joins the real nodes so that the gang always has a node to move to other than
	// realstack.NodeNames[0], where CoreDNS runs: its ranks find each other through cluster DNS.
	spareNode      = "real-3"
	spareNodeIndex = 3
	// goneWithin bounds how long the old attempt's containers may outlive their node's return.
	goneWithin = 2 * time.Minute
)

// realFault takes a real node from under the gang and gives it back.
type realFault struct {
	scenario, faults string
	fail, heal       func(ctx context.Context, n *framework.RealNode) error
}

// RealNodes takes a real node of e from under a running 2-worker PyTorch gang (the digits example,
// checkpointing every epoch to a claim both nodes mount) in two ways, one after the other on one
// job: its kubelet stops, and its cable is cut. Either way its containers run on and the node
// lifecycle controller marks it NotReady once node-monitor-grace-period passes without its Lease
// renewed; the gang must run whole again on another node from its checkpoint, and once the node is
// back its old containers must be gone, having written nothing after and nothing into the new
// attempt's checkpoints. It adds spareNode to e, and deletes the job at the end.
func RealNodes(ctx context.Context, e *realstack.Env, ns string, log func(format string, args ...any)) ([]Result, error) {
	w := newWatcher(30 * time.Second)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.run(wctx, e.Cluster.Clientset)
	w.expect(ns, realJob, realWorkers)
	if err := e.StoryQueue(ctx, ns); err != nil {
		return nil, err
	}
	if err := realstack.CheckpointVolume(ctx, e.Cluster, ns, "checkpoints"); err != nil {
		return nil, err
	}
	// No node but NodeNames[1] can take the gang until the spare node joins: the first fault finds
	// it there and moves it to the spare node, the second back.
	if err := e.Apply(ctx, fmt.Sprintf(`apiVersion: convoy.dev/v1alpha1
kind: TrainingJob
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  model: mlp
  dataset: sklearn-digits
  framework: pytorch
  numWorkers: %[3]d
  gpusPerWorker: 1
  image: %[4]s
  env:
  - {name: CONVOY_EXAMPLE_EPOCH_SLEEP, value: "2"}
  resources:
    requests: {cpu: 100m, memory: 256Mi}
  hyperparameters: {epochs: 1000}
  networking: {backend: gloo}
  checkpoint:
    enabled: true
    frequency: 1
    storage: {type: pvc, claimName: checkpoints}
  scheduling:
    queue: training
    priorityClassName: normal
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - {key: kubernetes.io/hostname, operator: NotIn, values: [%[5]s]}
`, realJob, ns, realWorkers, e.Image(images.Trainer), realstack.NodeNames[0])); err != nil {
		return nil, err
	}
	defer func() {
		_ = e.Cluster.Client.Delete(context.Background(), &convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: realJob}})
	}()
	// The spare node joins once the gang is placed, while it starts.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := e.Cluster.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{convoy.LabelJobName: realJob}); err != nil {
			return false, err
		}
		return len(list.Items) == realWorkers && !slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == "" }), nil
	}); err != nil {
		return nil, fmt.Errorf("the gang of %s/%s was not placed within 3 minutes: %w", ns, realJob, err)
	}
	var joined errgroup.Group
	if e.Node(spareNode) == nil {
		joined.Go(func() error {
			began := time.Now()
			n, err := e.AddNode(ctx, spareNode, spareNodeIndex)
			if err != nil {
				return err
			}
			// The spare node has the trainer's image, as the node the gang runs on has.
			if err := e.Pull(ctx, n, images.Trainer); err != nil {
				return err
			}
			log("Real node %s joined, with the trainer's image (%.1fs)", n.Name, time.Since(began).Seconds())
			return nil
		})
	}
	_, err := waitRealJob(ctx, e, ns, "a checkpoint of the running gang", 5*time.Minute, func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateRunning && j.Status.Checkpoint != nil && j.Status.Checkpoint.Epoch >= 1
	})
	if jerr := joined.Wait(); err == nil {
		err = jerr
	}
	if err != nil {
		return nil, err
	}
	var results []Result
	for _, f := range []realFault{
		{scenario: "real node: kubelet stopped under a running gang", faults: "its kubelet SIGKILLed (containerd and containers run on, on the network)",
			fail: func(ctx context.Context, n *framework.RealNode) error {
				return e.Cluster.KillProcess(framework.Kubelet + "-" + n.Name)
			},
			heal: func(ctx context.Context, n *framework.RealNode) error { return e.RestartKubelet(ctx, n.Name) }},
		{scenario: "real node: cable cut under a running gang", faults: "its cable cut (its veth down: no API server, no other node; kubelet and containers run on)",
			fail: func(ctx context.Context, n *framework.RealNode) error { return n.Disconnect(ctx) },
			heal: func(ctx context.Context, n *framework.RealNode) error {
				if err := n.Reconnect(ctx); err != nil {
					return err
				}
				return waitNodeReady(ctx, e, n.Name)
			}},
	} {
		res, err := loseRealNode(ctx, e, w, ns, f, log)
		results = append(results, res)
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// loseRealNode runs one realFault under the job's running gang.
func loseRealNode(ctx context.Context, e *realstack.Env, w *watcher, ns string, f realFault, log func(string, ...any)) (Result, error) {
	res := Result{Scenario: f.scenario, Jobs: 1,
		Target: fmt.Sprintf("gang whole again on another node < %s after the node's NotReady, from its checkpoint; the old attempt's containers gone < %s after the node's return, "+
			"nothing written by them after and nothing of theirs in the new attempt's checkpoints; %s", seconds(wholeAgain), seconds(goneWithin), allZero)}
	job, err := waitRealJob(ctx, e, ns, "running whole", 3*time.Minute, func(j *convoy.TrainingJob) bool { return j.Status.State == convoy.StateRunning })
	if err != nil {
		return res, err
	}
	old := job.Status.RestartCount
	pods, err := attemptPods(ctx, e, ns, old)
	if err != nil {
		return res, err
	}
	var node *framework.RealNode
	var oldIDs []string
	for _, p := range pods {
		if node == nil {
			node = e.Node(p.Spec.NodeName)
		}
		if node != nil && p.Spec.NodeName == node.Name && len(p.Status.ContainerStatuses) > 0 {
			oldIDs = append(oldIDs, strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://"))
		}
	}
	if len(pods) != realWorkers || node == nil {
		res.Missed = fmt.Sprintf("%d of %d pods of attempt %d running on real nodes when the node was to be taken", len(pods), realWorkers, old)
		return res, nil
	}
	saved := job.Status.Checkpoint.Epoch
	failed := time.Now()
	if err := f.fail(ctx, node); err != nil {
		return res, err
	}
	healed := time.Time{}
	// The node comes back whatever happens: what runs after needs it.
	defer func() {
		if healed.IsZero() {
			_ = f.heal(context.Background(), node)
		}
	}()
	notReady, err := waitNotReady(ctx, e.Cluster.Client, node.Name)
	if err != nil {
		return res, err
	}
	ranOn, err := runningContainers(ctx, node, oldIDs)
	if err != nil {
		return res, err
	}
	log("%s: node %s NotReady %s after the fault; %d of the old attempt's %d containers there still run", f.scenario, node.Name, seconds(notReady.Sub(failed)), ranOn, len(oldIDs))
	moved, err := waitMovedReal(ctx, e, ns, old, node.Name)
	if err != nil {
		return res, err
	}
	whole := time.Since(notReady)
	attempt := moved[0].Labels[convoy.LabelRestartAttempt]
	log("%s: gang whole again on %s (attempt %s) %s after the NotReady", f.scenario, moved[0].Spec.NodeName, attempt, seconds(whole))
	healed = time.Now()
	if err := f.heal(ctx, node); err != nil {
		return res, err
	}
	var goneAfter time.Duration
	left := len(oldIDs)
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, goneWithin, true, func(ctx context.Context) (bool, error) {
		left, err = runningContainers(ctx, node, oldIDs)
		goneAfter = time.Since(healed)
		return err == nil && left == 0, nil
	})
	if err != nil {
		return res, err
	}
	gone := time.Now()
	log("%s: node %s back; %d of the old attempt's containers still run %s after", f.scenario, node.Name, left, seconds(goneAfter))

	// The new attempt saves a checkpoint after the old containers are gone, then every file is read.
	if _, err := waitRealJob(ctx, e, ns, "checkpointing after the old containers are gone", 2*time.Minute, func(j *convoy.TrainingJob) bool {
		return j.Status.Checkpoint != nil && j.Status.Checkpoint.Time != nil && j.Status.Checkpoint.Time.After(gone.Add(time.Second))
	}); err != nil {
		return res, err
	}
	var rank0 *corev1.Pod
	for i := range moved {
		if moved[i].Labels[convoy.LabelReplicaRank] == "0" {
			rank0 = &moved[i]
		}
	}
	if rank0 == nil {
		return res, fmt.Errorf("no pod of rank 0 in attempt %s", attempt)
	}
	logs, err := e.Kubectl(ctx, "logs", "--timestamps", "-n", ns, rank0.Name)
	if err != nil {
		return res, err
	}
	resumedFrom, epochs := readTrainerLog(logs)
	cp, err := readCheckpoints(realstack.CheckpointVolumeDir(e.Cluster, ns, "checkpoints"), "attempt-"+attempt, strconv.Itoa(int(old)), failed, gone, resumedFrom, epochs)
	if err != nil {
		return res, err
	}
	for _, why := range cp.violations {
		log("%s: %s", f.scenario, why)
	}
	resumed := slices.ContainsFunc(rank0.Spec.Containers[0].Env, func(v corev1.EnvVar) bool { return v.Name == "CONVOY_RESUME_FROM" && v.Value != "" }) &&
		resumedFrom >= int(saved)

	final := &convoy.TrainingJob{}
	lost := 0
	if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: realJob}, final); err != nil || final.Status.State == convoy.StateFailed {
		lost = 1
	}
	res.Faults = fmt.Sprintf("node %s of a running PyTorch gang of %d × 1 GPU: %s; %d of its %d containers there ran on, saving %d checkpoints in the old attempt's directory",
		node.Name, realWorkers, f.faults, ranOn, len(oldIDs), cp.oldWrites)
	res.Times = fmt.Sprintf("NotReady %s after the fault; gang whole again on %s %s after the NotReady, resumed from epoch %d (%d at the fault); old containers gone %s after the node's return",
		seconds(notReady.Sub(failed)), moved[0].Spec.NodeName, seconds(whole), resumedFrom, saved, seconds(goneAfter))
	t := w.tally(ns)
	res.Lost, res.Duplicates, res.Partial = lost, t.duplicates, t.partial
	for _, why := range t.clashes {
		log("Duplicate pod: %s", why)
	}
	res.Met = lost == 0 && t.duplicates == 0 && t.partial == 0 && resumed && left == 0 && len(cp.violations) == 0
	if !resumed {
		log("%s: attempt %s resumed from epoch %d, CONVOY_RESUME_FROM %v; epoch %d was saved before the fault", f.scenario, attempt, resumedFrom, rank0.Spec.Containers[0].Env, saved)
	}
	res.within("gang whole again", whole, wholeAgain)
	return res, nil
}

// checkpointFiles is what readCheckpoints found.
type checkpointFiles struct {
	// oldWrites are the files of the old attempt's directory written during the fault.
	oldWrites int
	// violations say what the old attempt wrote where it must not.
	violations []string
}

var epochFile = regexp.MustCompile(`^epoch-(\d+)\.pt$`)

// readCheckpoints reads the job's checkpoint directory on the claim's host directory dir. Every
// file in another attempt's directory than newDir (attempt-<n> of the new attempt) must predate
// gone, when the old attempt's containers were gone; every checkpoint in newDir must be one the new attempt's rank 0 logged
// (epochs, by epoch, the time of its log line): of an epoch after resumedFrom, and written after
// that line.
func readCheckpoints(dir, newDir, oldAttempt string, failed, gone time.Time, resumedFrom int, epochs map[int]time.Time) (checkpointFiles, error) {
	var cp checkpointFiles
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		mtime := info.ModTime()
		in := filepath.Base(filepath.Dir(path))
		if in == "attempt-"+oldAttempt && mtime.After(failed) {
			cp.oldWrites++
		}
		if !strings.HasPrefix(in, "attempt-") {
			// Every attempt's rank 0 rewrites the root's list of checkpoints (the SDK's retention).
			return nil
		}
		if in != newDir {
			if mtime.After(gone) {
				cp.violations = append(cp.violations, fmt.Sprintf("%s written at %s, after the old containers were gone", rel, mtime.Format(time.RFC3339Nano)))
			}
			return nil
		}
		m := epochFile.FindStringSubmatch(d.Name())
		if m == nil {
			// A checkpoint being written under a temporary name.
			return nil
		}
		epoch, _ := strconv.Atoi(m[1])
		logged, ok := epochs[epoch]
		switch {
		case epoch <= resumedFrom:
			cp.violations = append(cp.violations, fmt.Sprintf("%s in the new attempt's directory: an epoch before the one it resumed after, %d", rel, resumedFrom))
		case !ok:
			cp.violations = append(cp.violations, fmt.Sprintf("%s in the new attempt's directory: an epoch its rank 0 never logged", rel))
		case mtime.Before(logged.Add(-time.Second)):
			cp.violations = append(cp.violations, fmt.Sprintf("%s in the new attempt's directory written at %s, before its rank 0 logged that epoch at %s",
				rel, mtime.Format(time.RFC3339Nano), logged.Format(time.RFC3339Nano)))
		}
		return nil
	})
	return cp, err
}

var (
	resumedLine = regexp.MustCompile(`resumed from epoch (\d+)`)
	epochLine   = regexp.MustCompile(`rank=0 epoch=(\d+)/`)
)

// readTrainerLog reads rank 0's `kubectl logs --timestamps`: the epoch it resumed from and when
// it logged each epoch.
func readTrainerLog(logs string) (resumedFrom int, epochs map[int]time.Time) {
	epochs = map[int]time.Time{}
	s := bufio.NewScanner(strings.NewReader(logs))
	for s.Scan() {
		stamp, line, _ := strings.Cut(s.Text(), " ")
		if m := resumedLine.FindStringSubmatch(line); m != nil {
			resumedFrom, _ = strconv.Atoi(m[1])
		}
		if m := epochLine.FindStringSubmatch(line); m != nil {
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if n, _ := strconv.Atoi(m[1]); err == nil {
				epochs[n] = at
			}
		}
	}
	return resumedFrom, epochs
}

// runningContainers counts the containers of ids that containerd on n runs.
func runningContainers(ctx context.Context, n *framework.RealNode, ids []string) (int, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.ContainerdSocket, "--namespace", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ctr tasks ls on %s: %w: %s", n.Name, err, lastLines(string(out)))
	}
	running := 0
	for _, line := range strings.Split(string(out), "\n") {
		// TASK PID STATUS
		if f := strings.Fields(line); len(f) == 3 && f[2] == "RUNNING" && slices.Contains(ids, f[0]) {
			running++
		}
	}
	return running, nil
}

func waitRealJob(ctx context.Context, e *realstack.Env, ns, what string, timeout time.Duration, cond func(*convoy.TrainingJob) bool) (*convoy.TrainingJob, error) {
	job := &convoy.TrainingJob{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: realJob}, job); err != nil {
			return false, err
		}
		if job.Status.State == convoy.StateFailed {
			return false, fmt.Errorf("the job failed: %+v", job.Status.Conditions)
		}
		return cond(job), nil
	})
	if err != nil {
		events, _ := e.Kubectl(context.Background(), "get", "events", "-n", ns, "--sort-by=.lastTimestamp")
		return job, fmt.Errorf("waiting for %s/%s %s: %w; state %s, conditions %+v\nevents:\n%s", ns, realJob, what, err, job.Status.State, job.Status.Conditions, events)
	}
	return job, nil
}

// attemptPods returns the running pods of the job's restart attempt.
func attemptPods(ctx context.Context, e *realstack.Env, ns string, attempt int32) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := e.Cluster.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{
		convoy.LabelJobName: realJob, convoy.LabelRestartAttempt: strconv.Itoa(int(attempt))}); err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// waitMovedReal waits until every pod of an attempt after old runs, none on node, and returns them.
func waitMovedReal(ctx context.Context, e *realstack.Env, ns string, old int32, node string) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		job := &convoy.TrainingJob{}
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: realJob}, job); err != nil {
			return false, err
		}
		if job.Status.RestartCount <= old {
			return false, nil
		}
		p, err := attemptPods(ctx, e, ns, job.Status.RestartCount)
		if err != nil {
			return false, err
		}
		pods = p
		return len(p) == realWorkers && !slices.ContainsFunc(p, func(p corev1.Pod) bool { return p.Spec.NodeName == node }), nil
	})
	if err != nil {
		events, _ := e.Kubectl(context.Background(), "get", "events", "-n", ns, "--sort-by=.lastTimestamp")
		return nil, fmt.Errorf("the gang was not whole again off node %s within 5 minutes: %w\nevents:\n%s", node, err, events)
	}
	return pods, nil
}

// waitNodeReady waits until the node is Ready again.
func waitNodeReady(ctx context.Context, e *realstack.Env, name string) error {
	return retry(ctx, 3*time.Minute, func() error {
		ready, err := nodeReady(ctx, e.Cluster.Client, name)
		if err == nil && !ready {
			err = fmt.Errorf("node %s not Ready again 3 minutes after its return", name)
		}
		return err
	})
}

func lastLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}
