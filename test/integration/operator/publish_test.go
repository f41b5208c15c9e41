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
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	"github.com/convoy-dev/convoy/operator/pkg/publish"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

var (
	registryOnce sync.Once
	registryAddr string
	registryErr  error
)

// registry is a CNCF Distribution registry (bin/registry) on loopback, started once for the suite.
func (e *env) registry() string {
	e.t.Helper()
	registryOnce.Do(func() { registryAddr, registryErr = e.c.StartRegistry(e.t.Context(), "") })
	if registryErr != nil {
		e.t.Fatal(registryErr)
	}
	return registryAddr
}

// writeCheckpoint writes a small checkpoint directory and returns its files by path.
func writeCheckpoint(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	weights := make([]byte, 256<<10)
	for i := range weights {
		weights[i] = byte(i * 7)
	}
	files := map[string][]byte{
		"model.safetensors":   weights,
		"config.json":         []byte(`{"hidden_size": 64}`),
		"tokenizer/vocab.txt": []byte("a\nb\nc\n"),
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// pullModel pulls ref from the registry with oras-go into a directory and returns the manifest's
// digest, the manifest and the files pulled.
func (e *env) pullModel(repository, tag string) (string, ocispec.Manifest, map[string][]byte) {
	e.t.Helper()
	digest, m, files, err := framework.PullArtifact(e.t.Context(), e.registry(), repository, tag, e.t.TempDir())
	if err != nil {
		e.t.Fatal(err)
	}
	return digest, m, files
}

func sameFiles(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("pulled %d files, pushed %d", len(got), len(want))
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("file %s pulled back with %d bytes that differ from the %d pushed", name, len(got[name]), len(data))
		}
	}
}

// TestPublishPushesACheckpointThatPullsBack: `convoy-operator publish` pushes a checkpoint
// directory to a real registry; pulled back with oras-go it has the same digest, files and
// annotations, one titled layer per file.
func TestPublishPushesACheckpointThatPullsBack(t *testing.T) {
	e := newEnv(t)
	reg := e.registry()
	dir := t.TempDir()
	want := writeCheckpoint(t, dir)
	// Credentials for the registry, as a kubernetes.io/dockerconfigjson Secret holds them (this
	// registry asks for none, so they are read but not needed).
	config := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte("trainer:secret"))
	if err := os.WriteFile(config, fmt.Appendf(nil, `{"auths": {%q: {"auth": %q}}}`, reg, auth), 0o600); err != nil {
		t.Fatal(err)
	}
	termination := filepath.Join(t.TempDir(), "termination-log")
	var stdout, stderr bytes.Buffer
	code := publish.Main(t.Context(), []string{"--checkpoint=" + dir, "--image=" + reg + "/team/llm:v1", "--plain-http",
		"--docker-config=" + config, "--termination-log=" + termination,
		"--annotation=" + publish.AnnotationJob + "=team/llm", "--annotation=" + publish.AnnotationEpoch + "=3"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("publish exited %d: %s", code, stderr.String())
	}
	var res publish.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("publish printed %q: %v", stdout.String(), err)
	}
	if msg, _ := os.ReadFile(termination); strings.TrimSpace(string(msg)) != strings.TrimSpace(stdout.String()) {
		t.Errorf("termination message %q, want the result %q", msg, stdout.String())
	}

	digest, m, got := e.pullModel("team/llm", "v1")
	if digest != res.Digest || res.Reference != reg+"/team/llm:v1" {
		t.Errorf("pulled %s, publish reported %s at %s", digest, res.Digest, res.Reference)
	}
	sameFiles(t, want, got)
	if m.ArtifactType != publish.ArtifactType || len(m.Layers) != 3 || m.Layers[0].MediaType != publish.FileMediaType {
		t.Errorf("manifest artifactType %q with %d layers of %q, want %s with 3 of %s", m.ArtifactType, len(m.Layers), m.Layers[0].MediaType, publish.ArtifactType, publish.FileMediaType)
	}
	if m.Annotations[publish.AnnotationJob] != "team/llm" || m.Annotations[publish.AnnotationEpoch] != "3" {
		t.Errorf("manifest annotations %v", m.Annotations)
	}

	for name, args := range map[string][]string{
		"a reference without a tag": {"--checkpoint=" + dir, "--image=" + reg + "/team/llm"},
		"a missing checkpoint":      {"--checkpoint=" + filepath.Join(dir, "nope"), "--image=" + reg + "/team/llm:v2"},
		"a registry nobody serves":  {"--checkpoint=" + dir, "--image=127.0.0.1:1/team/llm:v1"},
	} {
		t.Run(name, func(t *testing.T) {
			stderr.Reset()
			termination := filepath.Join(t.TempDir(), "termination-log")
			if code := publish.Main(t.Context(), append(args, "--plain-http", "--termination-log="+termination), io.Discard, &stderr); code != 1 {
				t.Errorf("publish exited %d, want 1: %s", code, stderr.String())
			}
			if msg, _ := os.ReadFile(termination); len(msg) == 0 {
				t.Error("no termination message says why")
			}
		})
	}
}

// publishJob is a one-worker job checkpointing to NFS that publishes its model to image.
func publishJob(name, ns, image string) *convoy.TrainingJob {
	return utiltesting.MakeTrainingJob(name, ns).Workers(1).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageNFS,
			NFS: &convoy.NFSStorage{Server: "nfs.example", Path: "/exports"}}}).
		Output(convoy.ModelOutput{Image: image, CredentialsSecretRef: &corev1.LocalObjectReference{Name: "registry-push"}}).Obj()
}

// completeWith reports a checkpoint (when epoch > 0) and metrics from rank 0, then ends it with 0.
func (e *env) completeWith(job string, epoch int32) *convoy.TrainingJob {
	e.t.Helper()
	pods := e.startGang(job, 1, 0)
	w0 := pods[job+"-worker-0"]
	if epoch > 0 {
		e.report(w0, "progress", progress.Report{Epoch: ptr.To(epoch), Metrics: map[string]float64{"loss": 0.25, "accuracy": 0.9}})
		e.report(w0, "checkpoint", progress.Checkpoint{Path: fmt.Sprintf("%s/epoch-%d", util.EnvOf(w0, "CONVOY_CHECKPOINT_URI"), epoch), Epoch: epoch})
	}
	e.finishPod(job+"-worker-0", 0)
	return e.waitState(job, convoy.StateCompleted)
}

// waitPublishPod waits for the job's publish pod.
func (e *env) waitPublishPod(job string) *corev1.Pod {
	e.t.Helper()
	pod := &corev1.Pod{}
	e.eventually("the publish pod of "+job, func() (bool, string) {
		err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: job + "-publish"}, pod)
		return err == nil, fmt.Sprint(err)
	})
	return pod
}

// endPublishPod ends the publish pod as its kubelet would report it: with exit code and the
// termination message the container wrote.
func (e *env) endPublishPod(pod *corev1.Pod, exitCode int32, message string) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &corev1.Pod{}
		if err := e.k.Get(e.t.Context(), client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodSucceeded
		if exitCode != 0 {
			p.Status.Phase = corev1.PodFailed
		}
		now := metav1.Now()
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.PublishContainerName, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Message: message, StartedAt: now, FinishedAt: now}}}}
		return e.k.Status().Update(e.t.Context(), p)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) waitModelCondition(job, reason string) *convoy.TrainingJob {
	e.t.Helper()
	var tj *convoy.TrainingJob
	e.eventually(fmt.Sprintf("ModelPublished %s on %s", reason, job), func() (bool, string) {
		tj = e.job(job)
		c := meta.FindStatusCondition(tj.Status.Conditions, convoy.ConditionModelPublished)
		return c != nil && c.Reason == reason, util.ConditionSummary(tj.Status.Conditions)
	})
	return tj
}

// TestModelPublishedWhenJobCompletes: a completed job with spec.output.model gets a publish pod
// (the operator's image, the checkpoint storage read-only, the credentials Secret as Docker
// config, outside the gang); the pod's command, run here in-process against a real registry
// over a copy of the checkpoint, pushes it, and its termination message becomes status.model
// with a Normal event, the job staying Completed.
func TestModelPublishedWhenJobCompletes(t *testing.T) {
	e := newEnv(t)
	reg := e.registry()
	e.startOperator(func(o *operator.Options) { o.PublishImage = "convoy-operator:test" })
	image := reg + "/" + e.ns + "/pub:v1"
	e.create(publishJob("pub", e.ns, image))
	e.completeWith("pub", 2)

	pod := e.waitPublishPod("pub")
	if !metav1.IsControlledBy(pod, e.job("pub")) || pod.Labels[convoy.LabelReplicaRole] != builder.RolePublish || pod.Spec.SchedulerName == convoy.DefaultSchedulerName {
		t.Errorf("publish pod: owner %v, labels %v, scheduler %q", pod.OwnerReferences, pod.Labels, pod.Spec.SchedulerName)
	}
	c := pod.Spec.Containers[0]
	// The first attempt's checkpoint directory, CONVOY_CHECKPOINT_URI.
	checkpoint := "/checkpoints/" + e.ns + "/pub/attempt-0/epoch-2"
	for _, want := range []string{"publish", "--checkpoint=" + checkpoint, "--root=" + builder.CheckpointDir, "--image=" + image, "--docker-config=" + builder.RegistryConfigDir + "/config.json",
		"--annotation=" + publish.AnnotationEpoch + "=2", "--annotation=" + publish.AnnotationJob + "=" + e.ns + "/pub"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("publish pod args %q lack %q", c.Args, want)
		}
	}
	if c.Image != "convoy-operator:test" {
		t.Errorf("publish pod image %q, want the operator's", c.Image)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if m, ok := mounts[builder.CheckpointDir]; !ok || !m.ReadOnly {
		t.Errorf("checkpoint storage mount %+v, want %s read-only", m, builder.CheckpointDir)
	}
	if _, ok := mounts[builder.RegistryConfigDir]; !ok {
		t.Errorf("no credentials mounted at %s: %v", builder.RegistryConfigDir, c.VolumeMounts)
	}
	e.waitModelCondition("pub", convoy.ReasonPublishing)

	// The pod's command in-process: /checkpoints is a temporary directory here, and the registry
	// plain HTTP on loopback.
	root := t.TempDir()
	want := writeCheckpoint(t, filepath.Join(root, e.ns, "pub", "attempt-0", "epoch-2"))
	termination := filepath.Join(t.TempDir(), "termination-log")
	var args []string
	for _, a := range c.Args[1:] {
		if strings.HasPrefix(a, "--docker-config=") {
			continue
		}
		a = strings.Replace(a, "--checkpoint="+builder.CheckpointDir, "--checkpoint="+root, 1)
		args = append(args, strings.Replace(a, "--root="+builder.CheckpointDir, "--root="+root, 1))
	}
	var stderr bytes.Buffer
	if code := publish.Main(t.Context(), append(args, "--plain-http", "--termination-log="+termination), io.Discard, &stderr); code != 0 {
		t.Fatalf("the publish pod's command exited %d: %s", code, stderr.String())
	}
	message, err := os.ReadFile(termination)
	if err != nil {
		t.Fatal(err)
	}
	e.endPublishPod(pod, 0, string(message))

	job := e.waitModelCondition("pub", convoy.ReasonModelPublished)
	digest, m, got := e.pullModel(e.ns+"/pub", "v1")
	if job.Status.Model == nil || job.Status.Model.Digest != digest || job.Status.Model.Reference != image || job.Status.Model.Checkpoint != checkpoint {
		t.Errorf("status.model = %+v, want %s at %s from %s", job.Status.Model, digest, image, checkpoint)
	}
	sameFiles(t, want, got)
	var metrics map[string]any
	if err := json.Unmarshal([]byte(m.Annotations[publish.AnnotationMetrics]), &metrics); err != nil || metrics["accuracy"] != 0.9 {
		t.Errorf("metrics annotation %q: %v", m.Annotations[publish.AnnotationMetrics], err)
	}
	if job.Status.State != convoy.StateCompleted {
		t.Errorf("state %s after publishing, want Completed", job.Status.State)
	}
	e.waitEvents("pub", convoy.ReasonModelPublished)
}

// TestModelPublishFailuresKeepTheJobCompleted: a job that reported no checkpoint, and one whose
// publish pod failed, say why in ModelPublished and a Warning event, and stay Completed.
func TestModelPublishFailuresKeepTheJobCompleted(t *testing.T) {
	e := newEnv(t)
	e.startOperator(func(o *operator.Options) { o.PublishImage = "convoy-operator:test" })
	e.create(publishJob("nockpt", e.ns, "registry.example.com/team/nockpt:v1"))
	e.create(publishJob("denied", e.ns, "registry.example.com/team/denied:v1"))

	e.completeWith("nockpt", 0)
	job := e.waitModelCondition("nockpt", convoy.ReasonPublishFailed)
	if c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionModelPublished); c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "reported no checkpoint") {
		t.Errorf("ModelPublished = %+v, want False saying no checkpoint was reported", c)
	}
	if job.Status.State != convoy.StateCompleted || job.Status.Model != nil {
		t.Errorf("state %s, status.model %+v; want Completed and no model", job.Status.State, job.Status.Model)
	}
	if _, ok := e.pods("nockpt")["nockpt-publish"]; ok {
		t.Error("a publish pod was created without a checkpoint to publish")
	}
	e.waitEvents("nockpt", convoy.ReasonPublishFailed)

	e.completeWith("denied", 1)
	pod := e.waitPublishPod("denied")
	const why = "pushing to registry.example.com/team/denied:v1: response status code 401: unauthorized"
	e.endPublishPod(pod, 1, why)
	job = e.waitModelCondition("denied", convoy.ReasonPublishFailed)
	if c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionModelPublished); !strings.Contains(c.Message, why) {
		t.Errorf("ModelPublished message %q, want the pod's words %q", c.Message, why)
	}
	if job.Status.State != convoy.StateCompleted || job.Status.Model != nil {
		t.Errorf("state %s, status.model %+v; want Completed and no model", job.Status.State, job.Status.Model)
	}
	e.waitEvents("denied", convoy.ReasonPublishFailed)
}

// TestModelPublishRechecksTheCheckpoint: a status.checkpoint.latest written by hand (anyone who may
// write the job's status) outside the job's checkpoint location is refused before a publish pod
// starts: ModelPublished says so with a Warning event, and no pod reads it.
func TestModelPublishRechecksTheCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.startOperator(func(o *operator.Options) { o.PublishImage = "convoy-operator:test" })
	e.create(publishJob("forged", e.ns, "registry.example.com/team/forged:v1"))
	pods := e.startGang("forged", 1, 0)
	w0 := pods["forged-worker-0"]
	e.report(w0, "checkpoint", progress.Checkpoint{Path: util.EnvOf(w0, "CONVOY_CHECKPOINT_URI") + "/epoch-1", Epoch: 1})
	forged := "/checkpoints/" + e.ns + "/forged/../../../var/run/secrets/convoy.dev/registry/config.json"
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := e.job("forged")
		job.Status.Checkpoint.Latest = forged
		return e.k.Status().Update(t.Context(), job)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.finishPod("forged-worker-0", 0)
	e.waitState("forged", convoy.StateCompleted)
	job := e.waitModelCondition("forged", convoy.ReasonPublishFailed)
	if c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionModelPublished); !strings.Contains(c.Message, "is not under the job's checkpoint location") {
		t.Errorf("ModelPublished message %q, want the forged checkpoint refused", c.Message)
	}
	if _, ok := e.pods("forged")["forged-publish"]; ok {
		t.Error("a publish pod was created for a checkpoint outside the job's location")
	}
	e.waitEvents("forged", convoy.ReasonPublishFailed)
}

// TestTTLWaitsForThePublish: a job whose ttlSecondsAfterFinished has passed is kept, with its
// publish pod, while the model is pushed, and deleted once the push has ended.
func TestTTLWaitsForThePublish(t *testing.T) {
	e := newEnv(t)
	e.startOperator(func(o *operator.Options) { o.PublishImage = "convoy-operator:test" })
	tj := publishJob("quick", e.ns, "registry.example.com/team/quick:v1")
	tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	e.create(tj)
	e.completeWith("quick", 1)
	pod := e.waitPublishPod("quick")
	e.waitModelCondition("quick", convoy.ReasonPublishing)
	util.Consistently(t, 100*time.Millisecond, 3*time.Second, "the publishing job and its publish pod to stay", func() (bool, string) {
		job := &convoy.TrainingJob{}
		err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "quick"}, job)
		return err == nil && job.DeletionTimestamp == nil, fmt.Sprint(err)
	})
	e.endPublishPod(pod, 0, `{"reference": "registry.example.com/team/quick:v1", "digest": "sha256:`+strings.Repeat("a", 64)+`"}`)
	e.eventually("the job to be deleted once published", func() (bool, string) {
		err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "quick"}, &convoy.TrainingJob{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
