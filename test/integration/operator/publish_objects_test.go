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
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/operator/pkg/publish"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestModelPublishedFromGCS: a job checkpointing to GCS (fake-gcs-server, named by the job's
// Secret as STORAGE_EMULATOR_HOST) gets a publish pod with the training pods' storage environment;
// its command, run in-process with that environment, publishes the latest complete checkpoint from
// the job's prefix, never a half-written one nor another job's (see publishesFromObjects).
func TestModelPublishedFromGCS(t *testing.T) {
	e := newEnv(t)
	endpoint := e.startGCS()
	t.Setenv("STORAGE_EMULATOR_HOST", endpoint)
	gcs, err := storage.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer gcs.Close()
	bucket := gcs.Bucket("checkpoints")
	if err := bucket.Create(t.Context(), "platform", nil); err != nil {
		t.Fatal(err)
	}
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gcs-emulator", Namespace: e.ns},
		StringData: map[string]string{"STORAGE_EMULATOR_HOST": endpoint}})
	e.publishesFromObjects("pubgcs", "gs://checkpoints", &convoy.CheckpointStorage{Type: convoy.StorageGCS, GCSBucket: "checkpoints",
		CredentialsSecretRef: &corev1.LocalObjectReference{Name: "gcs-emulator"}}, func(key string, data []byte) error {
		w := bucket.Object(key).NewWriter(t.Context())
		if _, err := w.Write(data); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	})
}

// TestModelPublishedFromAzure: a job checkpointing to Azure Blob Storage (Azurite, which checks
// each request's SharedKey signature) with the account key in its Secret gets a publish pod with
// the training pods' storage environment; its command, run in-process with that environment,
// publishes the latest complete checkpoint from the job's prefix, never a half-written one nor
// another job's (see publishesFromObjects).
func TestModelPublishedFromAzure(t *testing.T) {
	e := newEnv(t)
	account := e.startAzurite()
	admin := azureAdmin(t, account)
	if _, err := admin.CreateContainer(t.Context(), "checkpoints", nil); err != nil {
		t.Fatal(err)
	}
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "azurite-key", Namespace: e.ns},
		StringData: map[string]string{"AZURE_STORAGE_KEY": account.Key, "AZURE_STORAGE_BLOB_ENDPOINT": account.BlobEndpoint}})
	e.publishesFromObjects("pubaz", "az://checkpoints", &convoy.CheckpointStorage{Type: convoy.StorageAzure, AzureContainer: "checkpoints",
		AzureStorageAccount: account.Name, CredentialsSecretRef: &corev1.LocalObjectReference{Name: "azurite-key"}}, func(key string, data []byte) error {
		_, err := admin.UploadBuffer(t.Context(), "checkpoints", key, data, nil)
		return err
	})
}

// publishesFromObjects runs job, checkpointing to storage, whose bucket is bucketURI and whose
// objects put writes by key, to completion with a checkpoint of epoch 2, and runs its publish
// pod's command in-process with the pod's environment (its variables and its Secrets' keys): a
// half-written checkpoint of the job is refused, and so is another job's, whose prefix begins as
// the job's does, named as it is or climbing to it with ".."; the complete one is pushed, pulls
// back with the same files, and becomes status.model.
func (e *env) publishesFromObjects(job, bucketURI string, store *convoy.CheckpointStorage, put func(key string, data []byte) error) {
	t := e.t
	reg := e.registry()
	e.startOperator(func(o *operator.Options) {
		o.PublishImage, o.PlainHTTPRegistries = "convoy-operator:test", []string{reg}
	})
	e.create(utiltesting.MakeTrainingJob(job, e.ns).Workers(1).Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: store}).
		Output(convoy.ModelOutput{Image: reg + "/" + e.ns + "/" + job + ":v1"}).Obj())
	tj := e.completeWith(job, 2)
	root := bucketURI + "/" + e.ns + "/" + job
	checkpoint := root + "/attempt-0/epoch-2"
	if tj.Status.Checkpoint == nil || tj.Status.Checkpoint.Latest != checkpoint {
		t.Fatalf("status.checkpoint %+v, want %s", tj.Status.Checkpoint, checkpoint)
	}
	pod := e.waitPublishPod(job)
	c := pod.Spec.Containers[0]
	if !slices.Contains(c.Args, "--root="+root) || len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != store.CredentialsSecretRef.Name {
		t.Fatalf("publish pod args %q, env from %+v: want --root=%s and the job's Secret", c.Args, c.EnvFrom, root)
	}
	env := e.podEnv(pod)
	at := func(uri string) func(string, []byte) error {
		prefix := strings.TrimPrefix(uri, bucketURI+"/")
		return func(key string, data []byte) error { return put(prefix+"/"+key, data) }
	}
	half := root + "/attempt-0/epoch-1"
	e.sdkCheckpoint(at(half), true)
	if code, _, stderr := e.runPublish(c, env, half); code != 1 || !strings.Contains(stderr, "never completely written") {
		t.Errorf("publishing a half-written checkpoint exited %d: %s; want 1, not written completely", code, stderr)
	}
	foreign := root + "-other/attempt-0/epoch-2"
	e.sdkCheckpoint(at(foreign), false)
	for uri, want := range map[string]string{
		foreign: "is not under " + root,
		root + "/../" + job + "-other/attempt-0/epoch-2": "is not a checkpoint URI",
	} {
		if code, _, stderr := e.runPublish(c, env, uri); code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("publishing another job's checkpoint %s exited %d: %s; want 1, %q", uri, code, stderr, want)
		}
	}
	want := e.sdkCheckpoint(at(checkpoint), false)
	code, message, stderr := e.runPublish(c, env, checkpoint)
	if code != 0 {
		t.Fatalf("the publish pod's command exited %d: %s", code, stderr)
	}
	e.endPublishPod(pod, 0, message)
	tj = e.waitModelCondition(job, convoy.ReasonModelPublished)
	digest, m, got := e.pullModel(e.ns+"/"+job, "v1")
	if tj.Status.Model == nil || tj.Status.Model.Digest != digest || tj.Status.Model.Checkpoint != checkpoint {
		t.Errorf("status.model = %+v, want %s from %s", tj.Status.Model, digest, checkpoint)
	}
	sameFiles(t, want, got)
	if m.Annotations[publish.AnnotationCheckpoint] != checkpoint {
		t.Errorf("annotations %v, want the checkpoint %s", m.Annotations, checkpoint)
	}
}

// podEnv is the environment of pod's first container as the kubelet gives it: its Secrets' keys,
// then its variables.
func (e *env) podEnv(pod *corev1.Pod) []string {
	e.t.Helper()
	var env []string
	c := pod.Spec.Containers[0]
	for _, from := range c.EnvFrom {
		s := &corev1.Secret{}
		if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: pod.Namespace, Name: from.SecretRef.Name}, s); err != nil {
			e.t.Fatal(err)
		}
		for k, v := range s.Data {
			env = append(env, k+"="+string(v))
		}
	}
	for _, v := range c.Env {
		if v.ValueFrom == nil {
			env = append(env, v.Name+"="+v.Value)
		}
	}
	return env
}
