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
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/operator/pkg/publish"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
)

// checkpointBucket is the bucket of the suite's S3 server; teamA and teamB may each use only their
// own prefix of it, as a platform scopes each team's credentials.
const checkpointBucket = "checkpoints"

var (
	s3Once       sync.Once
	s3Server     *framework.S3
	s3Err        error
	teamA, teamB = framework.ScopedS3Identity("team-a", checkpointBucket, "team-a"),
		framework.ScopedS3Identity("team-b", checkpointBucket, "team-b")
	// s3Platform is the operator's own identity, which may use the whole bucket: it signs the
	// URLs of jobs with s3Access presigned.
	s3Platform = framework.S3Identity{Name: "platform", AccessKey: "platformkey0", SecretKey: "platformsecret000000",
		Actions: []string{"Read:" + checkpointBucket, "Write:" + checkpointBucket, "List:" + checkpointBucket}}
)

// s3 is SeaweedFS's S3 gateway (bin/weed) on loopback, started once for the suite.
func (e *env) s3() *framework.S3 {
	e.t.Helper()
	s3Once.Do(func() {
		s3Server, s3Err = e.c.StartS3(e.t.Context(), "", []string{checkpointBucket}, teamA, teamB, s3Platform)
	})
	if s3Err != nil {
		e.t.Fatal(s3Err)
	}
	return s3Server
}

// TestSDKCheckpointsOnS3: the SDK's checkpoint tests (sdk/python/tests/test_objcheckpoint.py) run
// against the S3 server with credentials scoped to the job's prefix: save and load across a
// restart, every rank's shard committed by rank 0's manifest, a half-written checkpoint never
// loaded, retention, and another team's object refused by the server.
func TestSDKCheckpointsOnS3(t *testing.T) {
	e := newEnv(t)
	if err := exec.Command("python3", "-c", "import boto3").Run(); err != nil {
		t.Skip("python3 has no boto3 (Debian: python3-boto3): the SDK's S3 tests need it")
	}
	s := e.s3()
	foreign := "team-b/" + e.ns + "/other/attempt-0/epoch-1/manifest.json"
	if err := s.Put(t.Context(), teamB, checkpointBucket, foreign, []byte(`{"epoch": 1}`)); err != nil {
		t.Fatal(err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "python3", "-m", "unittest", "-v",
		"test_objcheckpoint.S3Checkpoints", "test_objcheckpoint.VolumeCheckpoints", "test_objcheckpoint.StoreFor")
	cmd.Dir = filepath.Join(root, "sdk", "python", "tests")
	cmd.Env = append(os.Environ(), "CONVOY_TEST_S3_ENDPOINT="+s.Endpoint, "CONVOY_TEST_S3_BUCKET="+checkpointBucket,
		"CONVOY_TEST_S3_PREFIX=team-a/"+e.ns+"/job", "CONVOY_TEST_S3_ACCESS_KEY="+teamA.AccessKey,
		"CONVOY_TEST_S3_SECRET_KEY="+teamA.SecretKey, "CONVOY_TEST_S3_FOREIGN=s3://"+checkpointBucket+"/"+foreign)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the SDK's tests failed on S3: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("test_another_jobs_prefix_is_refused (test_objcheckpoint.S3Checkpoints")) || bytes.Contains(out, []byte("skipped")) {
		t.Errorf("the SDK's S3 tests did not all run:\n%s", out)
	}
}

// sdkCheckpoint writes a one-rank checkpoint as the SDK lays it out (rank-0/ files, rank-0.json,
// manifest.json last, unless half) with put, each key relative to the checkpoint; it returns the
// files by name.
func (e *env) sdkCheckpoint(put func(key string, data []byte) error, half bool) map[string][]byte {
	e.t.Helper()
	files := writeCheckpoint(e.t, e.t.TempDir())
	must := func(err error) {
		if err != nil {
			e.t.Fatal(err)
		}
	}
	for name, data := range files {
		must(put("rank-0/"+name, data))
	}
	must(put("rank-0.json", []byte(`{"keys": []}`)))
	if !half {
		must(put("manifest.json", []byte(`{"epoch": 2, "n": 0, "world": 1, "metrics": {}}`)))
	}
	return files
}

// runPublish runs the publish container c's command in-process with env set, as the pod would, on
// checkpoint instead of the one in its args; it returns the exit code, the termination message
// and the standard error.
func (e *env) runPublish(c corev1.Container, env []string, checkpoint string) (int, string, string) {
	e.t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		e.t.Setenv(k, v)
	}
	termination := filepath.Join(e.t.TempDir(), "termination-log")
	var args []string
	for _, a := range c.Args[1:] {
		if strings.HasPrefix(a, "--checkpoint=") {
			a = "--checkpoint=" + checkpoint
		}
		args = append(args, a)
	}
	var stderr bytes.Buffer
	code := publish.Main(e.t.Context(), append(args, "--termination-log="+termination), io.Discard, &stderr)
	message, _ := os.ReadFile(termination)
	return code, string(message), stderr.String()
}

// TestModelPublishedFromS3: a job checkpointing to S3 gets a publish pod that reads its final
// checkpoint with the job's own credentials from the job's prefix (no volume); its command, run
// in-process with those credentials, pushes the checkpoint's files, which pull back the same. A
// half-written checkpoint is not published, nor one the credentials may not read.
func TestModelPublishedFromS3(t *testing.T) {
	e := newEnv(t)
	s, reg := e.s3(), e.registry()
	e.startOperator(func(o *operator.Options) {
		o.PublishImage, o.PlainHTTPRegistries = "convoy-operator:test", []string{reg}
	})
	image := reg + "/" + e.ns + "/pubs3:v1"
	job := utiltesting.MakeTrainingJob("pubs3", e.ns).Workers(1).ServiceAccount("trainer-identity").
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: checkpointBucket,
			S3Endpoint: s.Endpoint, Prefix: "team-a/" + e.ns + "/pubs3", CredentialsSecretRef: &corev1.LocalObjectReference{Name: "team-a-s3"}}}).
		Output(convoy.ModelOutput{Image: image}).Obj()
	e.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer-identity", Namespace: e.ns}})
	e.create(job)
	tj := e.completeWith("pubs3", 2)
	checkpoint := "s3://" + checkpointBucket + "/team-a/" + e.ns + "/pubs3/attempt-0/epoch-2"
	if tj.Status.Checkpoint == nil || tj.Status.Checkpoint.Latest != checkpoint {
		t.Fatalf("status.checkpoint %+v, want %s", tj.Status.Checkpoint, checkpoint)
	}
	pod := e.waitPublishPod("pubs3")
	c := pod.Spec.Containers[0]
	root := "s3://" + checkpointBucket + "/team-a/" + e.ns + "/pubs3"
	if !slices.Contains(c.Args, "--root="+root) || len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != "team-a-s3" {
		t.Fatalf("publish pod args %q, env from %+v: want --root=%s and the job's credentials", c.Args, c.EnvFrom, root)
	}
	// The job's identity reads the bucket; the registry the operator names plain HTTP gets no TLS.
	if pod.Spec.ServiceAccountName != "trainer-identity" || !slices.Contains(c.Args, "--plain-http") {
		t.Errorf("publish pod runs as %q with args %q; want the job's ServiceAccount trainer-identity and --plain-http for %s", pod.Spec.ServiceAccountName, c.Args, reg)
	}

	// The pod's command in-process, with the environment the pod gets: the job's credentials.
	run := func(id framework.S3Identity, checkpointArg string) (int, string, string) {
		return e.runPublish(c, append(s.Env(id), "AWS_EC2_METADATA_DISABLED=true"), checkpointArg)
	}
	put := func(uri string) func(string, []byte) error {
		prefix := strings.TrimPrefix(uri, "s3://"+checkpointBucket+"/")
		return func(key string, data []byte) error {
			return s.Put(t.Context(), teamA, checkpointBucket, prefix+"/"+key, data)
		}
	}
	half := root + "/attempt-0/epoch-1"
	e.sdkCheckpoint(put(half), true)
	if code, _, stderr := run(teamA, half); code != 1 || !strings.Contains(stderr, "never completely written") {
		t.Errorf("publishing a half-written checkpoint exited %d: %s; want 1, not written completely", code, stderr)
	}
	want := e.sdkCheckpoint(put(checkpoint), false)
	if code, _, stderr := run(teamB, checkpoint); code != 1 || !strings.Contains(stderr, "AccessDenied") {
		t.Errorf("publishing with another team's credentials exited %d: %s; want 1, AccessDenied", code, stderr)
	}
	code, message, stderr := run(teamA, checkpoint)
	if code != 0 {
		t.Fatalf("the publish pod's command exited %d: %s", code, stderr)
	}
	e.endPublishPod(pod, 0, message)
	tj = e.waitModelCondition("pubs3", convoy.ReasonModelPublished)
	digest, m, got := e.pullModel(e.ns+"/pubs3", "v1")
	if tj.Status.Model == nil || tj.Status.Model.Digest != digest || tj.Status.Model.Checkpoint != checkpoint {
		t.Errorf("status.model = %+v, want %s from %s", tj.Status.Model, digest, checkpoint)
	}
	sameFiles(t, want, got)
	if m.Annotations[publish.AnnotationCheckpoint] != checkpoint {
		t.Errorf("annotations %v, want the checkpoint %s", m.Annotations, checkpoint)
	}
}
