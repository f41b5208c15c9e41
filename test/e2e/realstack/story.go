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

package realstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/images"
	"github.com/convoy-dev/convoy/test/util"
)

// Story settings: a 2-worker PyTorch job of the digits example that trains long enough for a
// worker to be killed after its second checkpoint.
const (
	storyJob    = "digits"
	storyEpochs = 6
	// storyEpochSleep slows each epoch (CONVOY_EXAMPLE_EPOCH_SLEEP) so the kill lands mid-training.
	storyEpochSleep = "2"
	// storyKillAfter is the checkpointed epoch after which a worker is killed.
	storyKillAfter = 2
	storyTimeout   = 6 * time.Minute
)

// StoryResult is what the story saw, as a user sees it with kubectl.
type StoryResult struct {
	// Nodes are the nodes the gang's pods ran on, and PodIPs their addresses, by pod name, before
	// the kill.
	Nodes, PodIPs map[string]string
	// KilledPod is the worker whose process was killed, and KilledAtEpoch the job's checkpointed
	// epoch then.
	KilledPod     string
	KilledAtEpoch int32
	// ResumedFrom is the epoch the restarted workers said they resumed from.
	ResumedFrom int
	// Restarts is status.restartCount at the end.
	Restarts int32
	// Final is the job at the end.
	Final *convoy.TrainingJob
	// Logs are each pod's log at the end (`kubectl logs -l training-job=<job> --prefix`), by pod name.
	Logs map[string]string
	// ResolvedMaster is the address rank 0's DNS name resolved to in rank 1's pod.
	ResolvedMaster string
	// GPUs is, by pod, the GPU the device plugin gave it and what the node agent says of it.
	GPUs map[string]PodGPU
	// FirstStep is the time from `kubectl apply` to the first epoch logged by rank 0.
	FirstStep time.Duration
	// Writes is what writing a file gave in a restarted worker (`kubectl exec`), "written" or the
	// error, by where: "root" (CONVOY_CHECKPOINT_ROOT), "resumed" (the directory of
	// CONVOY_RESUME_FROM, an earlier attempt's) and "own" (CONVOY_CHECKPOINT_URI).
	Writes map[string]string
	// ResumeFrom is the restarted worker's CONVOY_RESUME_FROM.
	ResumeFrom string
}

// StoryQueue creates what a queue administrator would for the real nodes (NodeQueue, the flavor
// selecting LabelNodeKind) in namespace, whose Pod Security admission enforces restricted.
func (e *Env) StoryQueue(ctx context.Context, namespace string) error {
	return e.NodeQueue(ctx, namespace, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
		"real-l40s", map[string]string{LabelNodeKind: NodeKindReal})
}

// NodeQueue creates the namespace with nsLabels, the ResourceFlavor flavor of the nodes with
// nodeLabels, a ClusterQueue real-<namespace> with quota for the real nodes' GPUs, and the
// LocalQueue "training" in namespace.
func (e *Env) NodeQueue(ctx context.Context, namespace string, nsLabels map[string]string, flavor string, nodeLabels map[string]string) error {
	inline := func(m map[string]string) string {
		data, _ := json.Marshal(m)
		return string(data)
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
  labels: %[2]s
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[3]s}
spec:
  nodeLabels: %[4]s
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: real-%[1]s}
spec:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: %[1]s}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, cpu, memory]
    flavors:
    - name: %[3]s
      resources:
      - {name: nvidia.com/gpu, nominalQuota: %[5]d}
      - {name: cpu, nominalQuota: "4"}
      - {name: memory, nominalQuota: 8Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: training, namespace: %[1]s}
spec: {clusterQueue: real-%[1]s}
`, namespace, inline(nsLabels), flavor, inline(nodeLabels), GPUsPerNode*len(NodeNames))
	_, err := e.kubectlStdin(ctx, manifest, "apply", "--server-side", "-f", "-")
	return err
}

// TrainingJob is the TrainingJob the story applies, as YAML: the digits example on 2 workers of 1
// simulated GPU each, one per node, gloo, for epochs epochs of at least epochSleep seconds each,
// checkpointing every epoch to the claim "checkpoints".
func (e *Env) TrainingJob(namespace, name string, epochs int, epochSleep string) string {
	return e.trainingJob(namespace, name, epochs, epochSleep, PVCStorage, "")
}

// PVCStorage is the story's checkpoint storage, spec.checkpoint.storage as YAML: the claim
// "checkpoints" that CheckpointVolume makes.
const PVCStorage = "{type: pvc, claimName: checkpoints}"

// trainingJob is TrainingJob with the checkpoints on storage and, when model is not empty, the
// final checkpoint published to it (spec.output.model.image).
func (e *Env) trainingJob(namespace, name string, epochs int, epochSleep, storage, model string) string {
	output := ""
	if model != "" {
		output = "\n  output: {model: {image: " + model + "}}"
	}
	return fmt.Sprintf(`apiVersion: convoy.dev/v1alpha1
kind: TrainingJob
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  model: mlp
  dataset: sklearn-digits
  framework: pytorch
  numWorkers: 2
  gpusPerWorker: 1
  image: %[3]s
  env:
  - {name: CONVOY_EXAMPLE_EPOCH_SLEEP, value: "%[4]s"}
  resources:
    requests: {cpu: 100m, memory: 256Mi}
  hyperparameters: {epochs: %[5]d}
  networking: {backend: gloo}
  checkpoint:
    enabled: true
    frequency: 1
    storage: %[6]s
  failurePolicy: {restartPolicy: OnFailure, backoffLimit: 3}%[7]s
  scheduling:
    queue: training
    priorityClassName: normal
    topology: {level: rack}
    # One worker per node, so that the gang spans both real nodes.
    affinity:
      podAntiAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels: {convoy.dev/job-name: %[1]s}
`, name, namespace, e.Image(images.Trainer), epochSleep, epochs, storage, output)
}

// Apply runs `kubectl apply -f -` with manifest.
func (e *Env) Apply(ctx context.Context, manifest string) error {
	_, err := e.kubectlStdin(ctx, manifest, "apply", "-f", "-")
	return err
}

// RunStory tells the real-node story in namespace and writes its timeline to w: the job is queued
// by Kueue and placed whole by convoy-scheduler on both real nodes; it trains and reports progress;
// one worker's process is killed with SIGKILL through containerd; the whole gang restarts and
// resumes from its latest checkpoint; the job completes with the accuracy it reached.
func (e *Env) RunStory(ctx context.Context, namespace string, w io.Writer) (*StoryResult, error) {
	return e.RunStoryOn(ctx, namespace, PVCStorage, "", w)
}

// RunStoryOn is RunStory with the checkpoints on storage (spec.checkpoint.storage as YAML); on
// object storage the writes in a restarted worker are not tried (StoryResult.Writes is empty).
// With model (spec.output.model.image), the completed job publishes its final checkpoint there
// and the story ends when the ModelPublished condition says how that went.
func (e *Env) RunStoryOn(ctx context.Context, namespace, storage, model string, w io.Writer) (*StoryResult, error) {
	ctx, cancel := context.WithTimeout(ctx, storyTimeout)
	defer cancel()
	began := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(w, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := e.StoryQueue(ctx, namespace); err != nil {
		return nil, err
	}
	if err := CheckpointVolume(ctx, e.Cluster, namespace, "checkpoints"); err != nil {
		return nil, err
	}
	say("Queue %s/training (ClusterQueue real-%s, %d GPUs on the real nodes) and the claim checkpoints are ready", namespace, namespace, GPUsPerNode*len(NodeNames))

	res := &StoryResult{Nodes: map[string]string{}, PodIPs: map[string]string{}, Logs: map[string]string{}}
	applied := time.Now()
	if err := e.Apply(ctx, e.trainingJob(namespace, storyJob, storyEpochs, storyEpochSleep, storage, model)); err != nil {
		return nil, err
	}
	say("kubectl apply: TrainingJob %s (pytorch, 2 workers × 1 GPU, gloo, %d epochs)", storyJob, storyEpochs)

	if _, err := e.waitJob(ctx, namespace, "Running", func(j *convoy.TrainingJob) bool { return j.Status.State == convoy.StateRunning }); err != nil {
		return nil, err
	}
	pods, err := e.pods(ctx, namespace)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		res.Nodes[p.Name], res.PodIPs[p.Name] = p.Spec.NodeName, p.Status.PodIP
	}
	say("Admitted by Kueue, placed whole by convoy-scheduler, Running: %s", describePods(pods))

	// Rank 0's DNS name is its hostname's, the same in every restart attempt (its pod's name is not).
	if res.ResolvedMaster, err = e.resolve(ctx, namespace, pods[1].Name, fmt.Sprintf("%s.%s.%s.svc", pods[0].Spec.Hostname, storyJob, namespace)); err != nil {
		return nil, err
	}
	say("Cluster DNS: %s.%s.%s.svc resolves to %s in %s", pods[0].Spec.Hostname, storyJob, namespace, res.ResolvedMaster, pods[1].Name)
	if res.GPUs, err = e.allocatedGPUs(ctx, namespace, pods); err != nil {
		return nil, err
	}
	for _, p := range pods {
		g := res.GPUs[p.Name]
		say("%s: NVIDIA_VISIBLE_DEVICES=%s from the device plugin; GPUNode %s has it allocated to %s", p.Name, g.Visible, p.Spec.NodeName, g.AllocatedTo)
	}

	first, err := e.waitLog(ctx, namespace, pods[0].Name, regexp.MustCompile(`epoch=1/`))
	if err != nil {
		return nil, err
	}
	res.FirstStep = first.Sub(applied)
	say("First epoch logged by %s %.1fs after kubectl apply", pods[0].Name, res.FirstStep.Seconds())

	job, err := e.waitJob(ctx, namespace, fmt.Sprintf("checkpointed at epoch %d", storyKillAfter), func(j *convoy.TrainingJob) bool {
		return j.Status.Checkpoint != nil && j.Status.Checkpoint.Epoch >= storyKillAfter
	})
	if err != nil {
		return nil, err
	}
	say("kubectl get tj: %s", e.summary(ctx, namespace))

	victim := pods[len(pods)-1]
	res.KilledPod, res.KilledAtEpoch = victim.Name, job.Status.Checkpoint.Epoch
	if err := e.KillContainer(ctx, &victim); err != nil {
		return nil, err
	}
	say("SIGKILL to the training process of %s on %s (latest checkpoint: epoch %d)", victim.Name, victim.Spec.NodeName, res.KilledAtEpoch)

	if _, err := e.waitJob(ctx, namespace, "Restarting", func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateRestarting || j.Status.RestartCount > 0
	}); err != nil {
		return nil, err
	}
	say("The gang restarts whole: kubectl get tj: %s", e.summary(ctx, namespace))

	restarted, err := e.waitNewGang(ctx, namespace, pods)
	if err != nil {
		return nil, err
	}
	resumed := regexp.MustCompile(`resumed from epoch (\d+)`)
	if _, err := e.waitLog(ctx, namespace, restarted[0].Name, resumed); err != nil {
		return nil, err
	}
	logs, _ := e.Kubectl(ctx, "logs", "-n", namespace, restarted[0].Name)
	if m := resumed.FindStringSubmatch(logs); m != nil {
		res.ResumedFrom, _ = strconv.Atoi(m[1])
	}
	say("Running again on %s: %s resumed from epoch %d", describePods(restarted), restarted[0].Name, res.ResumedFrom)
	if storage != PVCStorage {
		res.ResumeFrom = util.EnvOf(&restarted[0], "CONVOY_RESUME_FROM")
		say("%s resumed from CONVOY_RESUME_FROM=%s", restarted[0].Name, res.ResumeFrom)
	} else if res.Writes, res.ResumeFrom, err = e.checkpointWrites(ctx, namespace, restarted[0].Name); err != nil {
		return nil, err
	} else {
		say("In %s, a write in CONVOY_CHECKPOINT_ROOT: %s; next to CONVOY_RESUME_FROM %s: %s; in CONVOY_CHECKPOINT_URI: %s",
			restarted[0].Name, res.Writes["root"], res.ResumeFrom, res.Writes["resumed"], res.Writes["own"])
	}

	job, err = e.waitJob(ctx, namespace, "Completed", func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateCompleted || j.Status.State == convoy.StateFailed
	})
	if err != nil {
		return nil, err
	}
	if model != "" {
		say("kubectl get tj: %s", e.summary(ctx, namespace))
		if job, err = e.waitJob(ctx, namespace, "published or not", func(j *convoy.TrainingJob) bool {
			c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionModelPublished)
			return c != nil && c.Reason != convoy.ReasonPublishing
		}); err != nil {
			return nil, err
		}
		say("%s", meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionModelPublished).Message)
	}
	res.Final, res.Restarts = job, job.Status.RestartCount
	// Every rank's log at once, by the label the TrainingJob design documents.
	out, err := e.Kubectl(ctx, "logs", "-n", namespace, "-l", convoy.LabelTrainingJob+"="+storyJob, "--prefix", "--tail=-1")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(out, "\n") {
		// [pod/<name>/<container>] <line>
		prefix, text, ok := strings.Cut(line, "] ")
		if pod, _, found := strings.Cut(strings.TrimPrefix(prefix, "[pod/"), "/"); ok && found {
			res.Logs[pod] += text + "\n"
		}
	}
	say("kubectl get tj: %s", e.summary(ctx, namespace))
	for _, p := range restarted {
		say("kubectl logs -l %s=%s: %s: %s", convoy.LabelTrainingJob, storyJob, p.Name, lastLine(res.Logs[p.Name]))
	}
	return res, nil
}

// PodGPU is a pod's simulated GPU as the container and the node agent's GPUNode see it.
type PodGPU struct {
	// Visible is the container's NVIDIA_VISIBLE_DEVICES.
	Visible string
	// AllocatedTo is status.gpus[].allocatedTo of the GPUNode's GPU with that UUID.
	AllocatedTo string
}

// resolve looks name up from inside pod, with the pod's resolv.conf (cluster DNS).
func (e *Env) resolve(ctx context.Context, namespace, pod, name string) (string, error) {
	out, err := e.Kubectl(ctx, "exec", "-n", namespace, pod, "--", "python3", "-c",
		"import socket, sys; print(socket.gethostbyname(sys.argv[1]))", name)
	return strings.TrimSpace(out), err
}

// checkpointWrites writes a file, and removes it, in pod's checkpoint root, in the directory of the
// checkpoint it resumed from and in its own attempt's directory; it returns what each write gave
// and CONVOY_RESUME_FROM.
func (e *Env) checkpointWrites(ctx context.Context, namespace, pod string) (map[string]string, string, error) {
	const probe = `import json, os
def write(d):
    try:
        with open(os.path.join(d, ".write-probe"), "w"):
            pass
    except OSError as e:
        return e.strerror
    os.remove(os.path.join(d, ".write-probe"))
    return "written"
env = os.environ
print(json.dumps({"resume": env["CONVOY_RESUME_FROM"], "root": write(env["CONVOY_CHECKPOINT_ROOT"]),
    "resumed": write(os.path.dirname(env["CONVOY_RESUME_FROM"])), "own": write(env["CONVOY_CHECKPOINT_URI"])}))`
	out, err := e.Kubectl(ctx, "exec", "-n", namespace, pod, "--", "python3", "-c", probe)
	if err != nil {
		return nil, "", err
	}
	// kubectl's output is combined: the JSON is the last line.
	out = strings.TrimSpace(out)
	writes := map[string]string{}
	if err := json.Unmarshal([]byte(out[strings.LastIndex(out, "\n")+1:]), &writes); err != nil {
		return nil, "", fmt.Errorf("the write probe in %s printed %q: %w", pod, out, err)
	}
	resume := writes["resume"]
	delete(writes, "resume")
	return writes, resume, nil
}

// allocatedGPUs reads each pod's NVIDIA_VISIBLE_DEVICES and, once the node agent has published it,
// who its node's GPUNode says holds that GPU.
func (e *Env) allocatedGPUs(ctx context.Context, namespace string, pods []corev1.Pod) (map[string]PodGPU, error) {
	gpus := map[string]PodGPU{}
	for _, p := range pods {
		// The trainer image has Python, not coreutils.
		out, err := e.Kubectl(ctx, "exec", "-n", namespace, p.Name, "--", "python3", "-c",
			"import os; print(os.environ['NVIDIA_VISIBLE_DEVICES'])")
		if err != nil {
			return nil, err
		}
		g := PodGPU{Visible: strings.TrimSpace(out)}
		err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			node := &convoy.GPUNode{}
			if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
				return false, nil
			}
			for _, d := range node.Status.GPUs {
				if d.UUID == g.Visible && d.AllocatedTo != "" {
					g.AllocatedTo = d.AllocatedTo
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return nil, fmt.Errorf("GPUNode %s never showed GPU %s of pod %s as allocated: %w", p.Spec.NodeName, g.Visible, p.Name, err)
		}
		gpus[p.Name] = g
	}
	return gpus, nil
}

func describePods(pods []corev1.Pod) string {
	parts := make([]string, 0, len(pods))
	for _, p := range pods {
		parts = append(parts, p.Name+" on "+p.Spec.NodeName+" ("+p.Status.PodIP+")")
	}
	return strings.Join(parts, ", ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// summary is the job's line of `kubectl get tj`.
func (e *Env) summary(ctx context.Context, namespace string) string {
	out, err := e.Kubectl(ctx, "get", "tj", "-n", namespace, storyJob, "--no-headers")
	if err != nil {
		return err.Error()
	}
	return strings.Join(strings.Fields(out), " ")
}

func (e *Env) waitJob(ctx context.Context, namespace, what string, cond func(*convoy.TrainingJob) bool) (*convoy.TrainingJob, error) {
	return e.waitJobNamed(ctx, namespace, storyJob, what, cond)
}

func (e *Env) waitJobNamed(ctx context.Context, namespace, name, what string, cond func(*convoy.TrainingJob) bool) (*convoy.TrainingJob, error) {
	var job *convoy.TrainingJob
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		j := &convoy.TrainingJob{}
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, j); err != nil {
			return false, nil
		}
		job = j
		if j.Status.State == convoy.StateFailed && !cond(j) {
			return false, fmt.Errorf("the job failed: %+v", j.Status.Conditions)
		}
		return cond(j), nil
	})
	if err != nil {
		var status any
		if job != nil {
			status = job.Status
		}
		return nil, fmt.Errorf("waiting for %s to be %s: %w; its status: %+v", name, what, err, status)
	}
	return job, nil
}

// pods returns the job's pods by name once all are Running.
func (e *Env) pods(ctx context.Context, namespace string) ([]corev1.Pod, error) {
	return e.podsOf(ctx, namespace, storyJob)
}

// podsOf returns the pods of the 2-worker job name by name once both are Running.
func (e *Env) podsOf(ctx context.Context, namespace, name string) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := e.Cluster.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{convoy.LabelJobName: name}); err != nil {
			return false, nil
		}
		pods = list.Items
		slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return len(pods) == 2 && running == 2, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for both workers to run: %w (%s)", err, describePods(pods))
	}
	return pods, nil
}

// waitNewGang waits until the job's pods are Running again with other UIDs than old's.
func (e *Env) waitNewGang(ctx context.Context, namespace string, old []corev1.Pod) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := e.pods(ctx, namespace)
		if err != nil {
			return false, err
		}
		for _, q := range p {
			if slices.ContainsFunc(old, func(o corev1.Pod) bool { return o.UID == q.UID }) {
				return false, nil
			}
		}
		pods = p
		return true, nil
	})
	return pods, err
}

// waitLog waits until pod's log has a line matching re and returns when it was seen.
func (e *Env) waitLog(ctx context.Context, namespace, pod string, re *regexp.Regexp) (time.Time, error) {
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		out, err := e.Kubectl(ctx, "logs", "-n", namespace, pod)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = out
		return re.MatchString(out), nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("waiting for %q in the log of %s: %w; the log:\n%s", re, pod, err, last)
	}
	return time.Now(), nil
}

// KillContainer sends SIGKILL to the pod's container process through its node's containerd, as
// the kernel's OOM killer or a crash would end it.
func (e *Env) KillContainer(ctx context.Context, pod *corev1.Pod) error {
	node := e.Node(pod.Spec.NodeName)
	if node == nil || len(pod.Status.ContainerStatuses) == 0 {
		return fmt.Errorf("pod %s is not running on a real node", pod.Name)
	}
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	out, err := exec.CommandContext(ctx, "ctr", "--address", node.ContainerdSocket, "--namespace", "k8s.io",
		"task", "kill", "--signal", "SIGKILL", id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr task kill %s: %w: %s", id, err, out)
	}
	return nil
}

func (e *Env) kubectlStdin(ctx context.Context, stdin string, args ...string) (string, error) {
	return util.KubectlStdin(ctx, e.Cluster, stdin, args...)
}
