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

// Package realnode tests Convoy on real nodes (test/e2e/realstack): real kubelets, containerd and
// containers from Convoy's images, a real PyTorch job trained, killed and resumed.
package realnode

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/publish"
	"github.com/convoy-dev/convoy/test/chaos"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

func TestMain(m *testing.M) { realstack.Main(m) }

// A user applies a 2-worker PyTorch TrainingJob: Kueue admits it, convoy-scheduler places the gang
// on both real nodes, the workers find each other through cluster DNS and train the digits example
// with gloo; a worker's process is killed; the whole gang restarts and resumes from its latest
// checkpoint, and the job completes with the accuracy it reached.
func TestPyTorchJobTrainsIsKilledAndResumesFromItsCheckpoint(t *testing.T) {
	e := realstack.Shared(t)
	ns := framework.TestNamespace(t)
	var timeline bytes.Buffer
	res, err := e.RunStory(t.Context(), ns, &timeline)
	t.Logf("Timeline:\n%s", timeline.String())
	if err != nil {
		t.Fatal(err)
	}

	nodes := map[string]bool{}
	for _, n := range res.Nodes {
		nodes[n] = true
	}
	if len(nodes) != 2 {
		t.Errorf("the gang ran on nodes %v, want both real nodes", res.Nodes)
	}
	master := ""
	for pod, g := range res.GPUs {
		if !strings.HasPrefix(g.Visible, "GPU-") || g.AllocatedTo != ns+"/"+pod {
			t.Errorf("pod %s: NVIDIA_VISIBLE_DEVICES=%q, GPUNode says allocated to %q; want a GPU UUID allocated to %s/%s", pod, g.Visible, g.AllocatedTo, ns, pod)
		}
		if strings.HasSuffix(pod, "-0") {
			master = pod
		}
	}
	if res.ResolvedMaster == "" || res.ResolvedMaster != res.PodIPs[master] {
		t.Errorf("%s's DNS name resolved to %q, want its pod IP %q", master, res.ResolvedMaster, res.PodIPs[master])
	}
	if res.ResumedFrom < 1 || int32(res.ResumedFrom) < res.KilledAtEpoch {
		t.Errorf("the restarted gang resumed from epoch %d; the job had checkpointed epoch %d before the kill", res.ResumedFrom, res.KilledAtEpoch)
	}
	// The earlier attempt's checkpoints and the job's directory are read-only in the restarted
	// gang: the pods of one attempt never write where another's do.
	want := map[string]string{"root": "Read-only file system", "resumed": "Read-only file system", "own": "written"}
	if !maps.Equal(res.Writes, want) || !strings.Contains(res.ResumeFrom, "/attempt-0/") {
		t.Errorf("writes in a restarted worker (CONVOY_RESUME_FROM %s): %v, want %v, resuming from attempt-0", res.ResumeFrom, res.Writes, want)
	}
	if res.Final.Status.State != convoy.StateCompleted {
		t.Fatalf("the job ended %s, want Completed: %+v", res.Final.Status.State, res.Final.Status.Conditions)
	}
	if res.Restarts < 1 {
		t.Errorf("status.restartCount = %d after a worker was killed, want at least 1", res.Restarts)
	}
	m := res.Final.Status.Metrics
	if m == nil || m.Accuracy == nil || *m.Accuracy < 0.85 {
		t.Errorf("status.metrics = %+v, want the accuracy the training reached (≥ 0.85)", m)
	}
	// Each rank's log shows its own training, and rank 0's final accuracy is the one in the status.
	// The restarted gang's pods are named for their attempt (<job>-worker-<rank>-r<n>).
	finalMaster := ""
	for pod, log := range res.Logs {
		rank := rankOf(pod)
		if rank == "0" {
			finalMaster = pod
		}
		if !strings.Contains(log, "rank="+rank+" ") {
			t.Errorf("kubectl logs %s has no line of rank %s:\n%s", pod, rank, log)
		}
	}
	final := regexp.MustCompile(`final accuracy=([0-9.]+)`).FindStringSubmatch(res.Logs[finalMaster])
	if final == nil {
		t.Fatalf("kubectl logs %q (rank 0) has no final accuracy:\n%s", finalMaster, res.Logs[finalMaster])
	}
	if got, _ := strconv.ParseFloat(final[1], 64); m != nil && m.Accuracy != nil && fmt.Sprintf("%.4f", got) != fmt.Sprintf("%.4f", *m.Accuracy) {
		t.Errorf("status.metrics.accuracy = %v, the log says %v", *m.Accuracy, got)
	}
}

// The story again with the checkpoints on S3 (SeaweedFS on the node bridge, credentials scoped to
// the namespace's prefix, a Secret of the job): every rank uploads its shard and rank 0 commits it;
// after the kill the restarted gang resumes from the previous attempt's committed checkpoint on
// S3 (the epoch continues) and writes under its own attempt's prefix. The completed job publishes
// its final checkpoint from S3 to the registry (plain HTTP, as the operator's
// --plain-http-registries names it), which serves both ranks' shards with the bytes on S3.
func TestPyTorchJobCheckpointsToS3AndResumesFromIt(t *testing.T) {
	e := realstack.Shared(t)
	ns := framework.TestNamespace(t)
	id := framework.ScopedS3Identity(ns, "checkpoints", ns)
	s, err := e.Cluster.StartS3(t.Context(), framework.NodeGatewayIP, []string{"checkpoints"}, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StoryQueue(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kubectl(t.Context(), "create", "secret", "generic", "s3", "-n", ns,
		"--from-literal=AWS_ACCESS_KEY_ID="+id.AccessKey, "--from-literal=AWS_SECRET_ACCESS_KEY="+id.SecretKey); err != nil {
		t.Fatal(err)
	}
	var timeline bytes.Buffer
	model := realstack.Registry + "/" + ns + "/digits:v1"
	res, err := e.RunStoryOn(t.Context(), ns, fmt.Sprintf("{type: s3, s3Bucket: checkpoints, s3Endpoint: %q, credentialsSecretRef: {name: s3}}", s.Endpoint), model, &timeline)
	t.Logf("Timeline:\n%s", timeline.String())
	if err != nil {
		t.Fatal(err)
	}
	prefix := "s3://checkpoints/" + ns + "/digits/"
	if res.ResumedFrom < 1 || int32(res.ResumedFrom) < res.KilledAtEpoch || !strings.HasPrefix(res.ResumeFrom, prefix+"attempt-0/epoch-") {
		t.Errorf("the restarted gang resumed from epoch %d (CONVOY_RESUME_FROM %s); the job had checkpointed epoch %d on %sattempt-0 before the kill",
			res.ResumedFrom, res.ResumeFrom, res.KilledAtEpoch, prefix)
	}
	job := res.Final
	if job.Status.State != convoy.StateCompleted || job.Status.Checkpoint == nil || !strings.HasPrefix(job.Status.Checkpoint.Latest, prefix+"attempt-") ||
		strings.HasPrefix(job.Status.Checkpoint.Latest, prefix+"attempt-0/") {
		t.Fatalf("the job ended %s with status.checkpoint %+v; want Completed, the latest checkpoint on S3 under a later attempt's prefix", job.Status.State, job.Status.Checkpoint)
	}
	// The committed checkpoint holds both ranks' shards.
	out, err := s.Client(s.Admin).ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: ptr.To("checkpoints"),
		Prefix: ptr.To(strings.TrimPrefix(job.Status.Checkpoint.Latest, "s3://checkpoints/") + "/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	shards := map[string][]byte{}
	for _, o := range out.Contents {
		name := path.Base(path.Dir(*o.Key)) + "/" + path.Base(*o.Key)
		keys = append(keys, name)
		if path.Base(*o.Key) == "model.pt" {
			if shards[name], err = s.Get(t.Context(), s.Admin, "checkpoints", *o.Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, want := range []string{"rank-0/model.pt", "rank-1/model.pt"} {
		if !slices.Contains(keys, want) {
			t.Errorf("the checkpoint %s holds %v, want %s", job.Status.Checkpoint.Latest, keys, want)
		}
	}
	if c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionModelPublished); c == nil || c.Reason != convoy.ReasonModelPublished ||
		job.Status.Model == nil || job.Status.Model.Checkpoint != job.Status.Checkpoint.Latest {
		t.Fatalf("ModelPublished %+v, status.model %+v; want the final checkpoint %s published to %s", c, job.Status.Model, job.Status.Checkpoint.Latest, model)
	}
	digest, m, files, err := framework.PullArtifact(t.Context(), realstack.Registry, ns+"/digits", "v1", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if digest != job.Status.Model.Digest || m.ArtifactType != publish.ArtifactType {
		t.Errorf("the registry serves %s of type %s; status.model.digest is %s, want type %s", digest, m.ArtifactType, job.Status.Model.Digest, publish.ArtifactType)
	}
	for name, data := range shards {
		if !bytes.Equal(files[name], data) {
			t.Errorf("the artifact's %s has %d bytes, unlike the %d on S3 (artifact files: %v)", name, len(files[name]), len(data), slices.Sorted(maps.Keys(files)))
		}
	}
}

// Each of Convoy's images, pulled from the registry by a real kubelet, starts as its non-root user
// and runs its binary: the node agent reads its (mock) GPUs once and prints the GPUNode, the others
// print their flags.
func TestConvoyImagesStartOnARealNode(t *testing.T) {
	e := realstack.Shared(t)
	ns := framework.TestNamespace(t)
	ctx := t.Context()
	if err := e.Cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args []string
		want string
	}{
		images.Operator:  {args: []string{"--help"}, want: "progress-url"},
		images.Scheduler: {args: []string{"--help"}, want: "--config"},
		images.NodeAgent: {args: []string{"--once", "--print", "--nvml=mock:" + realstack.Profile, "--node-name=" + realstack.NodeNames[0]}, want: realstack.GPUProduct},
		images.Kueue:     {args: []string{"--help"}, want: "config"},
	}
	for name, tc := range cases {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{
				NodeName:      realstack.NodeNames[0],
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: e.Image(name), Args: tc.args}},
			},
		}
		if err := e.Cluster.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var pod corev1.Pod
			err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
					return false, err
				}
				return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
			})
			logs, _ := e.Kubectl(ctx, "logs", "-n", ns, name)
			if err != nil || pod.Status.Phase != corev1.PodSucceeded {
				t.Fatalf("pod of image %s: phase %s (%v), want Succeeded; its status: %+v\nlogs:\n%s", e.Image(name), pod.Status.Phase, err, pod.Status.ContainerStatuses, logs)
			}
			if !strings.Contains(logs, tc.want) {
				t.Errorf("kubectl logs of image %s has no %q:\n%s", name, tc.want, logs)
			}
			if id := pod.Status.ContainerStatuses[0].ImageID; !strings.Contains(id, "sha256:") {
				t.Errorf("image ID %q, want a digest from the registry", id)
			}
		})
	}
}

// Kueue is installed from deploy/kueue with `kubectl apply --server-side -k` and Convoy with `helm
// install` of deploy/helm/convoy, as the README says (test/e2e/realstack/install.go): each runs as
// a Deployment of its image from the registry,
// Convoy's two replicas per component with one leader; the operator made the queue webhook's
// certificate and injected its CA, and the API server reaches the webhook through its Service.
func TestInstalledFromDeployRunsInTheCluster(t *testing.T) {
	e := realstack.Shared(t)
	ctx := t.Context()
	for _, tc := range []struct {
		namespace, name, image, lease string
		replicas                      int32
	}{
		{stack.Namespace, stack.Operator, images.Operator, "convoy-operator.convoy.dev", 2},
		{stack.Namespace, stack.Scheduler, images.Scheduler, "convoy-scheduler", 2},
		{framework.KueueNamespace, "kueue-controller-manager", images.Kueue, "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{}
			if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: tc.namespace, Name: tc.name}, d); err != nil {
				t.Fatal(err)
			}
			if d.Status.ReadyReplicas != tc.replicas {
				t.Errorf("Deployment %s/%s has %d ready replicas, want %d", tc.namespace, tc.name, d.Status.ReadyReplicas, tc.replicas)
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != e.Image(tc.image) {
				t.Errorf("Deployment %s/%s runs image %s, want %s from the local registry", tc.namespace, tc.name, got, e.Image(tc.image))
			}
			if tc.lease == "" {
				return
			}
			lease := &coordinationv1.Lease{}
			if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: tc.namespace, Name: tc.lease}, lease); err != nil {
				t.Fatalf("leader election Lease: %v", err)
			}
			pods := &corev1.PodList{}
			if err := e.Cluster.Client.List(ctx, pods, client.InNamespace(tc.namespace), client.MatchingLabels{"app.kubernetes.io/name": tc.name}); err != nil {
				t.Fatal(err)
			}
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			leader := false
			for _, p := range pods.Items {
				if strings.HasPrefix(holder, p.Name) && p.Status.Phase == corev1.PodRunning {
					leader = true
				}
			}
			if !leader {
				t.Errorf("Lease %s is held by %q, which is none of the running pods of %s", tc.lease, holder, tc.name)
			}
		})
	}

	t.Run("queue webhook", func(t *testing.T) {
		secret := &corev1.Secret{}
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: "convoy-operator-queue-webhook-tls"}, secret); err != nil {
			t.Fatal(err)
		}
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Name: "convoy-trainingjob-queue"}, mutating); err != nil {
			t.Fatal(err)
		}
		ca := secret.Data["ca.crt"]
		if len(ca) == 0 || !bytes.Equal(mutating.Webhooks[0].ClientConfig.CABundle, ca) {
			t.Errorf("the webhook's caBundle is not the CA the operator keeps in its Secret (%d bytes there)", len(ca))
		}
		// The mutating webhook copies spec.scheduling.queue into Kueue's label: the API server
		// called it through its Service.
		ns := framework.TestNamespace(t)
		if err := e.Cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		job := &convoy.TrainingJob{}
		if err := yaml.Unmarshal([]byte(e.TrainingJob(ns, "webhook-check", 1, "0")), job); err != nil {
			t.Fatal(err)
		}
		delete(job.Labels, kueueQueueLabel)
		if err := e.Cluster.Client.Create(ctx, job, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		if got := job.Labels[kueueQueueLabel]; got != job.Spec.Scheduling.Queue {
			t.Errorf("a job naming queue %q was created with label %s=%q; the queue webhook did not answer", job.Spec.Scheduling.Queue, kueueQueueLabel, got)
		}
	})
}

const kueueQueueLabel = "kueue.x-k8s.io/queue-name"

// Two jobs whose containers can never start, side by side: a typo in the image name (the kubelet
// cannot pull it) and checkpoint credentials naming a Secret that does not exist (the kubelet's
// CreateContainerConfigError). Each says so in its status with the kubelet's words within seconds
// (Initializing, reason ContainersNotStarting, and a Warning event), and once
// failurePolicy.startupTimeoutSeconds has passed it fails with StartupTimeout: its pods are deleted
// and its Kueue Workload is finished, so the GPUs and the quota are free again.
func TestUnpullableImageIsExplainedAndReleased(t *testing.T) {
	e := realstack.Shared(t)
	ns := framework.TestNamespace(t)
	if err := e.StoryQueue(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	image := realstack.Registry + "/convoy/no-such-image:typo"
	for _, tc := range []struct {
		name, spec, want string
	}{
		{"typo", "image: " + image, image},
		{"no-secret", "image: " + e.Image(images.Trainer) + `
  checkpoint:
    enabled: true
    storage: {type: s3, s3Bucket: ckpt, credentialsSecretRef: {name: aws-keys}}`, `secret "aws-keys" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			explainedAndReleased(t, e, ns, tc.name, tc.spec, tc.want)
		})
	}
}

// explainedAndReleased applies job name with spec added, whose containers cannot start, and
// checks that its status and events carry want, the kubelet's words, and that it then fails with
// StartupTimeout and lets go of its pods and quota.
func explainedAndReleased(t *testing.T, e *realstack.Env, ns, name, spec, want string) {
	ctx := t.Context()
	applied := time.Now()
	if err := e.Apply(ctx, fmt.Sprintf(`apiVersion: convoy.dev/v1alpha1
kind: TrainingJob
metadata: {name: %s, namespace: %s}
spec:
  model: mlp
  dataset: sklearn-digits
  framework: pytorch
  numWorkers: 2
  gpusPerWorker: 1
  resources:
    requests: {cpu: 100m, memory: 64Mi}
  failurePolicy: {startupTimeoutSeconds: 30}
  scheduling: {queue: training, priorityClassName: normal}
  %s
`, name, ns, spec)); err != nil {
		t.Fatal(err)
	}
	job := &convoy.TrainingJob{}
	get := func(ctx context.Context) error {
		return e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := get(ctx); err != nil {
			return false, err
		}
		return job.Status.Reason == convoy.ReasonContainersNotStarting, nil
	})
	if err != nil {
		t.Fatalf("the job never said why its containers do not start: state %s, reason %q, conditions %+v", job.Status.State, job.Status.Reason, job.Status.Conditions)
	}
	c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionInitializing)
	t.Logf("%.1fs after kubectl apply: %s: %s", time.Since(applied).Seconds(), c.Reason, c.Message)
	if !strings.Contains(c.Message, want) {
		t.Errorf("the Initializing message does not carry the kubelet's words %q: %q", want, c.Message)
	}
	events, err := e.Kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=TrainingJob,involvedObject.name="+name+",type=Warning,reason="+convoy.ReasonContainersNotStarting, "--no-headers")
	if err != nil || strings.TrimSpace(events) == "" {
		t.Errorf("no Warning event %s on the job (%v): %q", convoy.ReasonContainersNotStarting, err, events)
	}

	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := get(ctx); err != nil {
			return false, err
		}
		return job.Status.State == convoy.StateFailed, nil
	})
	if err != nil || job.Status.FailureReason != convoy.ReasonStartupTimeout {
		t.Fatalf("the job did not fail with %s after startupTimeoutSeconds: state %s, failureReason %q (%v)", convoy.ReasonStartupTimeout, job.Status.State, job.Status.FailureReason, err)
	}
	t.Logf("%.1fs after kubectl apply: Failed, %s", time.Since(applied).Seconds(), job.Status.FailureReason)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := e.Cluster.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{convoy.LabelJobName: name}); err != nil {
			return false, err
		}
		workloads := &kueue.WorkloadList{}
		if err := e.Cluster.Client.List(ctx, workloads, client.InNamespace(ns)); err != nil {
			return false, err
		}
		finished := false
		for _, w := range workloads.Items {
			if metav1.IsControlledBy(&w, job) {
				finished = meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished)
			}
		}
		return len(pods.Items) == 0 && finished, nil
	})
	if err != nil {
		t.Errorf("the failed job's pods are not all gone or its Workload is not finished (quota held): %v", err)
	}
}

// The leaders of the operator and of the scheduler die (SIGKILL through containerd, as a crash
// would; their Leases are not released): once the Lease expires a new leader takes it, the standby
// replica or the killed one's restarted container. The time it took is logged.
func TestLeaderFailover(t *testing.T) {
	e := realstack.Shared(t)
	ctx := t.Context()
	for _, tc := range []struct{ deployment, lease string }{
		{stack.Operator, "convoy-operator.convoy.dev"},
		{stack.Scheduler, "convoy-scheduler"},
	} {
		t.Run(tc.deployment, func(t *testing.T) {
			key := client.ObjectKey{Namespace: stack.Namespace, Name: tc.lease}
			lease := &coordinationv1.Lease{}
			if err := e.Cluster.Client.Get(ctx, key, lease); err != nil {
				t.Fatal(err)
			}
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			pods := &corev1.PodList{}
			if err := e.Cluster.Client.List(ctx, pods, client.InNamespace(stack.Namespace), client.MatchingLabels{"app.kubernetes.io/name": tc.deployment}); err != nil {
				t.Fatal(err)
			}
			var leader *corev1.Pod
			for i := range pods.Items {
				if strings.HasPrefix(holder, pods.Items[i].Name+"_") {
					leader = &pods.Items[i]
				}
			}
			if leader == nil {
				t.Fatalf("no pod of %s holds Lease %s (holder %q)", tc.deployment, tc.lease, holder)
			}
			killed := time.Now()
			if err := e.KillContainer(ctx, leader); err != nil {
				t.Fatal(err)
			}
			var took time.Duration
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				if err := e.Cluster.Client.Get(ctx, key, lease); err != nil {
					return false, err
				}
				now := ptr.Deref(lease.Spec.HolderIdentity, "")
				took = time.Since(killed)
				// A new identity leads: the standby, or the killed leader's restarted container,
				// whichever took the expired Lease first.
				return now != "" && now != holder, nil
			})
			if err != nil {
				t.Fatalf("no new leader took Lease %s within a minute of the leader's death (holder %q): %v", tc.lease, ptr.Deref(lease.Spec.HolderIdentity, ""), err)
			}
			t.Logf("%s: leader %s killed; %s leads %.1fs later", tc.deployment, leader.Name, ptr.Deref(lease.Spec.HolderIdentity, ""), took.Seconds())
		})
	}
}

// A real node is taken from under a running gang, its kubelet stopped, then its cable cut (test/chaos
// RealNodes): each time the gang runs whole again on another node from its latest checkpoint, and
// once the node is back the old attempt's containers there are gone, having written nothing after
// and nothing into the new attempt's checkpoints. It logs each fault's row of `make chaos`'s table;
// a time over its target is logged, not failed on (`make chaos` fails on it). It adds a third real
// node, which stays.
func TestGangOnALostNodeRestartsElsewhereFromItsCheckpoint(t *testing.T) {
	e := realstack.Shared(t)
	results, err := chaos.RealNodes(t.Context(), e, framework.TestNamespace(t), t.Logf)
	var table strings.Builder
	if perr := chaos.Print(&table, results); perr != nil {
		t.Error(perr)
	}
	t.Logf("make chaos's rows:\n%s", table.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range results {
		switch {
		case res.Missed != "":
			t.Errorf("%s: the fault did not land: %s", res.Scenario, res.Missed)
		case !res.Met:
			t.Errorf("%s: %s; got %s (lost %d, duplicate pods %d, partial gangs %d)", res.Scenario, res.Target, res.Times, res.Lost, res.Duplicates, res.Partial)
		case len(res.Slow) > 0:
			t.Logf("%s: over its target (a measure, not a test): %s", res.Scenario, strings.Join(res.Slow, "; "))
		}
	}
}

// A user applies a 2-worker PyTorch job asking for its GPUs through spec.gpu on two real nodes whose
// simulated GPUs are DRA devices (deploy/dra-driver's driver, containerd 2 with CDI, no device
// plugin): Kueue admits it against the nvidia.com/gpu quota, convoy-scheduler places one worker on
// each node, each worker's claim is allocated a GPU of its node, the kubelet has the driver prepare
// it, the container sees that GPU's UUID, and the job completes.
func TestPyTorchJobRunsOnDRAAllocatedGPUs(t *testing.T) {
	e := realstack.Shared(t)
	began := time.Now()
	if err := e.StartDRANodes(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("DRA nodes %v Ready, their ResourceSlices published (%.1fs)", realstack.DRANodeNames, time.Since(began).Seconds())
	ns := framework.TestNamespace(t)
	var timeline bytes.Buffer
	res, err := e.RunDRAStory(t.Context(), ns, &timeline)
	t.Logf("Timeline:\n%s", timeline.String())
	if err != nil {
		pods, _ := e.Kubectl(t.Context(), "get", "pods,resourceclaims", "-n", ns, "-o", "wide")
		events, _ := e.Kubectl(t.Context(), "get", "events", "-n", ns, "--sort-by=.lastTimestamp")
		logs, _ := e.Kubectl(t.Context(), "logs", "-n", stack.Namespace, "-l", "app.kubernetes.io/name=convoy-dra-driver", "--tail=30", "--prefix")
		t.Fatalf("%v\n%s\nevents:\n%s\nDRA drivers:\n%s", err, pods, events, logs)
	}
	if res.Final.Status.State != convoy.StateCompleted {
		t.Fatalf("the job ended %s, want Completed: %+v", res.Final.Status.State, res.Final.Status.Conditions)
	}
	if res.QuotaGPUs != 2 {
		t.Errorf("Kueue's admission uses %d nvidia.com/gpu of the quota, want 2 (2 workers × 1 DRA GPU)", res.QuotaGPUs)
	}
	nodes := map[string]bool{}
	for _, w := range res.Workers {
		nodes[w.Node] = true
		if !slices.Contains(realstack.DRANodeNames, w.Node) {
			t.Errorf("%s ran on %s, want a DRA node %v", w.Pod, w.Node, realstack.DRANodeNames)
		}
		if len(w.Devices) != 1 || !strings.HasPrefix(w.Devices[0], w.Node+"/gpu-") || len(w.UUIDs) != 1 {
			t.Errorf("%s on %s: claim %s has devices %v (uuids %v), want one GPU of its node", w.Pod, w.Node, w.Claim, w.Devices, w.UUIDs)
			continue
		}
		if w.Visible != w.UUIDs[0] {
			t.Errorf("%s: the container sees NVIDIA_VISIBLE_DEVICES=%q, want its claim's GPU %s", w.Pod, w.Visible, w.UUIDs[0])
		}
		if rank := rankOf(w.Pod); !strings.Contains(w.Log, "rank="+rank+" ") {
			t.Errorf("kubectl logs %s has no line of rank %s:\n%s", w.Pod, rank, w.Log)
		}
	}
	if len(nodes) != 2 {
		t.Errorf("the gang ran on %v, want both DRA nodes", nodes)
	}
}

// rankOf is the rank in a gang pod's name: <job>-worker-<rank>, or <job>-worker-<rank>-r<attempt>
// for a restart attempt.
func rankOf(pod string) string {
	pod = regexp.MustCompile(`-r[0-9]+$`).ReplaceAllString(pod, "")
	return pod[strings.LastIndex(pod, "-")+1:]
}
