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

package builder

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

func TestPublishPod(t *testing.T) {
	base := utiltesting.MakeTrainingJob("llm", "team-a").Workers(2).
		Checkpoint(convoy.CheckpointSpec{Enabled: true}).
		Output(convoy.ModelOutput{Image: "registry.example.com/team/llm:v1"}).
		Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "/checkpoints/team-a/llm/epoch-3", Epoch: 3}})
	opts := Options{PublishImage: "convoy-operator:v1"}
	cases := map[string]struct {
		job     *convoy.TrainingJob
		opts    Options
		wantErr string
		check   func(t *testing.T, pod *corev1.Pod)
	}{
		"the job's own claim, read-only, anonymous": {
			job: base.Clone().Obj(), opts: opts,
			check: func(t *testing.T, pod *corev1.Pod) {
				c := pod.Spec.Containers[0]
				want := []string{"publish", "--checkpoint=/checkpoints/team-a/llm/epoch-3", "--root=" + CheckpointDir, "--image=registry.example.com/team/llm:v1",
					"--annotation=dev.convoy.checkpoint=/checkpoints/team-a/llm/epoch-3", "--annotation=dev.convoy.epoch=3", "--annotation=dev.convoy.job=team-a/llm"}
				if strings.Join(c.Args, " ") != strings.Join(want, " ") {
					t.Errorf("args %q, want %q", c.Args, want)
				}
				if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != CheckpointDir || !c.VolumeMounts[0].ReadOnly ||
					pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "llm-checkpoints" {
					t.Errorf("mounts %+v, volumes %+v; want the claim llm-checkpoints read-only at %s", c.VolumeMounts, pod.Spec.Volumes, CheckpointDir)
				}
				if pod.Labels[convoy.LabelReplicaRole] != RolePublish || pod.Labels[convoy.LabelJobName] != "llm" || pod.Labels["scheduling.x-k8s.io/pod-group"] != "" {
					t.Errorf("labels %v: want the job's and role publish, not the gang's PodGroup", pod.Labels)
				}
				if pod.Spec.SchedulerName != "" || c.Image != "convoy-operator:v1" || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
					t.Errorf("scheduler %q, image %q, termination message policy %q", pod.Spec.SchedulerName, c.Image, c.TerminationMessagePolicy)
				}
				if pod.Spec.ServiceAccountName != "" || ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) {
					t.Errorf("serviceAccountName %q, automount %v: want the namespace's default without an API token", pod.Spec.ServiceAccountName, pod.Spec.AutomountServiceAccountToken)
				}
			},
		},
		"a registry the operator names plain HTTP": {
			job: base.Clone().Obj(), opts: Options{PublishImage: "convoy-operator:v1", PlainHTTPRegistries: []string{"10.0.0.1:5000", "registry.example.com"}},
			check: func(t *testing.T, pod *corev1.Pod) {
				if !slices.Contains(pod.Spec.Containers[0].Args, "--plain-http") {
					t.Errorf("args %q lack --plain-http for registry.example.com", pod.Spec.Containers[0].Args)
				}
			},
		},
		"another registry than the plain-HTTP ones": {
			job: base.Clone().Obj(), opts: Options{PublishImage: "convoy-operator:v1", PlainHTTPRegistries: []string{"registry.example.com:5000"}},
			check: func(t *testing.T, pod *corev1.Pod) {
				if slices.Contains(pod.Spec.Containers[0].Args, "--plain-http") {
					t.Errorf("args %q: --plain-http for a registry the operator does not name", pod.Spec.Containers[0].Args)
				}
			},
		},
		"the job's ServiceAccount, for workload identity": {
			job: base.Clone().ServiceAccount("trainer-irsa").Obj(), opts: opts,
			check: func(t *testing.T, pod *corev1.Pod) {
				if pod.Spec.ServiceAccountName != "trainer-irsa" || pod.Spec.AutomountServiceAccountToken != nil {
					t.Errorf("serviceAccountName %q, automount %v: want trainer-irsa with its own automount setting (nil)",
						pod.Spec.ServiceAccountName, pod.Spec.AutomountServiceAccountToken)
				}
			},
		},
		"credentials as a Docker config": {
			job: base.Clone().Output(convoy.ModelOutput{Image: "r.example/m:v1", CredentialsSecretRef: &corev1.LocalObjectReference{Name: "push"}}).Obj(), opts: opts,
			check: func(t *testing.T, pod *corev1.Pod) {
				v := pod.Spec.Volumes[len(pod.Spec.Volumes)-1]
				if v.Secret == nil || v.Secret.SecretName != "push" || v.Secret.Items[0].Key != corev1.DockerConfigJsonKey || v.Secret.Items[0].Path != "config.json" {
					t.Errorf("credentials volume %+v", v)
				}
				args := pod.Spec.Containers[0].Args
				if args[len(args)-1] != "--docker-config="+RegistryConfigDir+"/config.json" {
					t.Errorf("args %q lack --docker-config", args)
				}
				// The credentials are not in the tree the publisher reads.
				for _, m := range pod.Spec.Containers[0].VolumeMounts {
					if m.Name == v.Name && progress.Under(m.MountPath, CheckpointDir) {
						t.Errorf("credentials mounted at %s, inside the checkpoint storage %s", m.MountPath, CheckpointDir)
					}
				}
			},
		},
		"a checkpoint outside the job's storage": {
			job:  base.Clone().Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "/checkpoints/team-b/other/epoch-3", Epoch: 3}}).Obj(),
			opts: opts, wantErr: `status.checkpoint.latest "/checkpoints/team-b/other/epoch-3" is not under the job's checkpoint location /checkpoints/team-a/llm`,
		},
		"a checkpoint that climbs out with ..": {
			job:  base.Clone().Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "/checkpoints/team-a/llm/../../../var/run/secrets", Epoch: 3}}).Obj(),
			opts: opts, wantErr: "is not under the job's checkpoint location",
		},
		"no checkpoint reported": {
			job: base.Clone().Status(convoy.TrainingJobStatus{}).Obj(), opts: opts, wantErr: "the job reported no checkpoint",
		},
		"checkpoints in s3, read with the job's credentials from its prefix": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "b",
				S3Endpoint: "http://s3.example:8333", CredentialsSecretRef: &corev1.LocalObjectReference{Name: "team-a-s3"}}}).
				Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "s3://b/team-a/llm/attempt-0/epoch-3", Epoch: 3}}).Obj(),
			opts: opts,
			check: func(t *testing.T, pod *corev1.Pod) {
				readsObjects(t, pod, "s3://b/team-a/llm/attempt-0/epoch-3", "s3://b/team-a/llm", "team-a-s3")
				if podEnv(pod)["AWS_ENDPOINT_URL"] != "http://s3.example:8333" {
					t.Errorf("env %+v: want the job's endpoint", pod.Spec.Containers[0].Env)
				}
			},
		},
		"an s3 checkpoint of another prefix": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "b"}}).
				Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "s3://b/team-b/other/attempt-0/epoch-3", Epoch: 3}}).Obj(),
			opts: opts, wantErr: "is not under the job's checkpoint location s3://b/team-a/llm",
		},
		"checkpoints in gcs, read with the job's identity and Secret from its prefix": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageGCS, GCSBucket: "b",
				CredentialsSecretRef: &corev1.LocalObjectReference{Name: "gcs-emulator"}}}).ServiceAccount("trainer-gke").
				Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "gs://b/team-a/llm/attempt-0/epoch-3", Epoch: 3}}).Obj(),
			opts: opts,
			check: func(t *testing.T, pod *corev1.Pod) {
				readsObjects(t, pod, "gs://b/team-a/llm/attempt-0/epoch-3", "gs://b/team-a/llm", "gcs-emulator")
				if pod.Spec.ServiceAccountName != "trainer-gke" {
					t.Errorf("serviceAccountName %q, want the job's trainer-gke", pod.Spec.ServiceAccountName)
				}
			},
		},
		"checkpoints in azure, with the job's account and workload identity": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageAzure, AzureContainer: "c",
				AzureStorageAccount: "teamacct"}}).ServiceAccount("trainer-aks").
				Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "az://c/team-a/llm/attempt-1/epoch-3", Epoch: 3}}).Obj(),
			opts: opts,
			check: func(t *testing.T, pod *corev1.Pod) {
				readsObjects(t, pod, "az://c/team-a/llm/attempt-1/epoch-3", "az://c/team-a/llm", "")
				if podEnv(pod)["AZURE_STORAGE_ACCOUNT"] != "teamacct" || pod.Labels[AzureWorkloadIdentityLabel] != "true" {
					t.Errorf("env %+v, labels %v: want the account and Azure Workload Identity's label", pod.Spec.Containers[0].Env, pod.Labels)
				}
			},
		},
		"checkpoints read through the operator's pre-signed URLs": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageAzure, AzureContainer: "c",
				AzureAccess: convoy.AzureAccessPresigned}}).
				Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "az://c/team-a/llm/attempt-0/epoch-3", Epoch: 3}}).Obj(),
			opts: opts, wantErr: "remove spec.checkpoint.storage.s3Access, gcsAccess or azureAccess presigned",
		},
		"no image to publish with": {
			job: base.Clone().Obj(), wantErr: "--publish-image",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod, err := PublishPod(tc.job, tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, pod)
		})
	}
}

// readsObjects checks that the publish pod reads checkpoint from under root, the job's prefix,
// with the keys of the Secret named secret ("" none) as variables, into a scratch /tmp only.
func readsObjects(t *testing.T, pod *corev1.Pod, checkpoint, root, secret string) {
	t.Helper()
	c := pod.Spec.Containers[0]
	if c.Args[1] != "--checkpoint="+checkpoint || c.Args[2] != "--root="+root {
		t.Errorf("args %q, want the checkpoint %s under the job's prefix %s as --root", c.Args, checkpoint, root)
	}
	if secret != "" && (len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != secret) || secret == "" && len(c.EnvFrom) != 0 {
		t.Errorf("env from %+v, want the job's Secret %q", c.EnvFrom, secret)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp" || pod.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("mounts %+v: want only a scratch /tmp", c.VolumeMounts)
	}
}
