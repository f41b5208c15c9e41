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
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// TestPresignedS3URLsOnlyForTheJobsPrefix: a job with s3Access presigned gets no S3 credentials;
// with its pod's token, the progress endpoint hands out URLs signed with the operator's own
// credentials, with which the pod writes in its attempt's directory, reads it back and lists its
// prefix on the S3 server; a key of another prefix is refused (403 naming the job's prefix).
func TestPresignedS3URLsOnlyForTheJobsPrefix(t *testing.T) {
	e := newEnv(t)
	s := e.s3()
	e.startOperator(func(o *operator.Options) {
		o.S3Presign = &aws.Config{Region: s.Region, BaseEndpoint: aws.String(s.Endpoint),
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: s3Platform.AccessKey, SecretAccessKey: s3Platform.SecretKey}, nil
			})}
	})
	e.create(utiltesting.MakeTrainingJob("ps", e.ns).Workers(1).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3,
			S3Bucket: checkpointBucket, S3Access: convoy.S3AccessPresigned}}).Obj())
	var pod = e.startGang("ps", 1, 0)["ps-worker-0"]
	if util.EnvOf(pod, "CONVOY_CHECKPOINT_PRESIGN") != "1" || util.EnvOf(pod, "AWS_ACCESS_KEY_ID") != "" || len(pod.Spec.Containers[0].EnvFrom) != 0 {
		t.Fatalf("the pod's env %+v: want CONVOY_CHECKPOINT_PRESIGN=1 and no credentials", pod.Spec.Containers[0].Env)
	}
	presign, do := e.presigner(pod)
	own := e.ns + "/ps/attempt-0/epoch-1/manifest.json"
	if code, answer := do(progress.PresignPut, own, []byte(`{"epoch": 1}`)); code != http.StatusOK {
		t.Fatalf("PUT with the pre-signed URL = %d %s", code, answer)
	}
	if code, answer := do(progress.PresignGet, own, nil); code != http.StatusOK || answer != `{"epoch": 1}` {
		t.Fatalf("GET with the pre-signed URL = %d %s", code, answer)
	}
	if code, answer := do(progress.PresignList, e.ns+"/ps/", nil); code != http.StatusOK || !strings.Contains(answer, "<Key>"+own+"</Key>") {
		t.Fatalf("list with the pre-signed URL = %d %s, want %s", code, answer, own)
	}

	foreign := "team-b/" + e.ns + "/other/attempt-0/epoch-1/manifest.json"
	if err := s.Put(t.Context(), teamB, checkpointBucket, foreign, []byte(`{"epoch": 1}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ op, key, want string }{
		{progress.PresignGet, foreign, "may read only under its prefix s3://" + checkpointBucket + "/" + e.ns + "/ps/"},
		{progress.PresignList, "team-b/", "may read only under its prefix"},
		{progress.PresignList, e.ns + "/ps", "may read only under its prefix"},
		{progress.PresignPut, e.ns + "/ps-other/attempt-0/x", "may write only under its current attempt's prefix s3://" + checkpointBucket + "/" + e.ns + "/ps/attempt-0/"},
		{progress.PresignDelete, foreign, "may write only under its current attempt's prefix"},
	} {
		if code, _, answer := presign(c.op, c.key); code != http.StatusForbidden || !strings.Contains(answer, c.want) {
			t.Errorf("presign %s %s = %d %s, want 403 naming %q", c.op, c.key, code, answer, c.want)
		}
	}
	if code, _, answer := presign(progress.PresignGet, own); code != http.StatusOK {
		t.Errorf("presign get %s = %d %s after the refusals", own, code, answer)
	}
	if code, _ := e.progressClient(pod, "")("presign", "", progress.PresignRequest{Op: progress.PresignGet, Key: own}); code != http.StatusUnauthorized {
		t.Errorf("presign without a token = %d, want 401", code)
	}

	e.presignedSDK(pod, "s3://"+checkpointBucket+"/"+foreign)
}

// presigner returns, for the pod, presign (POST .../presign with its token: the status, the reply
// and the answer's text) and do (presign, then send the request to the signed URL: the status and
// the body).
func (e *env) presigner(pod *corev1.Pod) (func(op, key string) (int, progress.PresignReply, string), func(op, key string, body []byte) (int, string)) {
	t := e.t
	send, token := e.progressClient(pod, ""), e.podToken(pod, progress.Audience)
	presign := func(op, key string) (int, progress.PresignReply, string) {
		code, answer := send("presign", token, progress.PresignRequest{Op: op, Key: key})
		r := progress.PresignReply{}
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(answer), &r); err != nil {
				t.Fatalf("presign %s %s answered %s: %v", op, key, answer, err)
			}
		}
		return code, r, answer
	}
	do := func(op, key string, body []byte) (int, string) {
		code, r, answer := presign(op, key)
		if code != http.StatusOK {
			t.Fatalf("presign %s %s = %d %s, want 200", op, key, code, answer)
		}
		return sendSigned(t, r, body)
	}
	return presign, do
}

// sendSigned sends body to the signed URL of r (an Azure put as a block blob).
func sendSigned(t *testing.T, r progress.PresignReply, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), r.Method, r.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("x-ms-blob-type", "BlockBlob")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got)
}

// presignedSDK runs the SDK's pre-signed store as the pod uses it
// (sdk/python/tests/test_objcheckpoint.py Presigned): save, retention and load through the
// operator's URLs, and foreign, another job's object, refused.
func (e *env) presignedSDK(pod *corev1.Pod, foreign string) {
	t := e.t
	dir, cm := t.TempDir(), &corev1.ConfigMap{}
	if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: pod.Labels[convoy.LabelJobName] + "-config"}, cm); err != nil {
		t.Fatal(err)
	}
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(tokenFile, []byte(e.podToken(pod, progress.Audience)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, []byte(cm.Data["progress-ca.crt"]), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "python3", "-m", "unittest", "-v", "test_objcheckpoint.Presigned")
	cmd.Dir = filepath.Join(root, "sdk", "python", "tests")
	cmd.Env = append(os.Environ(), "CONVOY_TEST_PRESIGN_URL="+util.EnvOf(pod, "CONVOY_PROGRESS_URL"), "CONVOY_TEST_PRESIGN_TOKEN_FILE="+tokenFile,
		"CONVOY_TEST_PRESIGN_CA_FILE="+caFile, "CONVOY_TEST_PRESIGN_ROOT="+util.EnvOf(pod, "CONVOY_CHECKPOINT_ROOT"),
		"CONVOY_TEST_PRESIGN_FOREIGN="+foreign)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("test_checkpoints_save_and_load_without_credentials_or_boto3")) || bytes.Contains(out, []byte("skipped")) {
		t.Fatalf("the SDK's pre-signed store test: %v\n%s", err, out)
	}
}

// TestPresignedAzureSASOnlyForTheJobsPrefix: a job with azureAccess presigned gets no Azure
// credentials; the progress endpoint hands its pod blob URLs with a SAS of the operator's account
// (Azurite, which verifies SAS), with which it writes in its attempt's directory and reads back,
// and lists its prefix through the operator. A key of another prefix is refused by the operator,
// and Azurite refuses the job's own SAS on a sibling blob or for another operation.
func TestPresignedAzureSASOnlyForTheJobsPrefix(t *testing.T) {
	e := newEnv(t)
	account := e.startAzurite()
	e.startOperator(func(o *operator.Options) {
		o.AzurePresign = &progress.AzureAccount{Name: account.Name, Key: account.Key, BlobEndpoint: account.BlobEndpoint}
	})
	admin := azureAdmin(t, account)
	if _, err := admin.CreateContainer(t.Context(), "checkpoints", nil); err != nil {
		t.Fatal(err)
	}
	e.create(utiltesting.MakeTrainingJob("pa", e.ns).Workers(1).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageAzure,
			AzureContainer: "checkpoints", AzureAccess: convoy.AzureAccessPresigned}}).Obj())
	pod := e.startGang("pa", 1, 0)["pa-worker-0"]
	if util.EnvOf(pod, "CONVOY_CHECKPOINT_PRESIGN") != "1" || util.EnvOf(pod, "AZURE_STORAGE_KEY") != "" || len(pod.Spec.Containers[0].EnvFrom) != 0 {
		t.Fatalf("the pod's env %+v: want CONVOY_CHECKPOINT_PRESIGN=1 and no credentials", pod.Spec.Containers[0].Env)
	}
	presign, do := e.presigner(pod)
	own := e.ns + "/pa/attempt-0/epoch-1/manifest.json"
	if code, answer := do(progress.PresignPut, own, []byte(`{"epoch": 1}`)); code != http.StatusCreated {
		t.Fatalf("PUT with the SAS URL = %d %s", code, answer)
	}
	if code, answer := do(progress.PresignGet, own, nil); code != http.StatusOK || answer != `{"epoch": 1}` {
		t.Fatalf("GET with the SAS URL = %d %s", code, answer)
	}
	if code, r, answer := presign(progress.PresignList, e.ns+"/pa/"); code != http.StatusOK || !slices.Equal(r.Keys, []string{own}) {
		t.Fatalf("list = %d %s, want the keys [%s]", code, answer, own)
	}

	foreign := e.ns + "/pa-other/attempt-0/epoch-1/manifest.json"
	if _, err := admin.UploadBuffer(t.Context(), "checkpoints", foreign, []byte(`{"epoch": 1}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ op, key, want string }{
		{progress.PresignGet, foreign, "may read only under its prefix az://checkpoints/" + e.ns + "/pa/"},
		{progress.PresignList, e.ns + "/pa", "may read only under its prefix"},
		{progress.PresignPut, foreign, "may write only under its current attempt's prefix az://checkpoints/" + e.ns + "/pa/attempt-0/"},
		{progress.PresignDelete, foreign, "may write only under its current attempt's prefix"},
	} {
		if code, _, answer := presign(c.op, c.key); code != http.StatusForbidden || !strings.Contains(answer, c.want) {
			t.Errorf("presign %s %s = %d %s, want 403 naming %q", c.op, c.key, code, answer, c.want)
		}
	}
	// Azurite checks each SAS: signed for the job's blob and one operation, it opens nothing else.
	_, r, _ := presign(progress.PresignGet, own)
	sibling := r
	sibling.URL = strings.Replace(r.URL, "/"+own+"?", "/"+foreign+"?", 1)
	if code, answer := sendSigned(t, sibling, nil); code != http.StatusForbidden || sibling.URL == r.URL {
		t.Errorf("GET of a sibling prefix's blob with the job's SAS = %d %s, want 403", code, answer)
	}
	overwrite := r
	overwrite.Method = http.MethodPut
	if code, answer := sendSigned(t, overwrite, []byte("overwritten")); code != http.StatusForbidden {
		t.Errorf("PUT with a read SAS = %d %s, want 403", code, answer)
	}
	e.presignedSDK(pod, "az://checkpoints/"+foreign)
}

// azureAdmin is a client of the account signing with its key (SharedKey), as the platform's.
func azureAdmin(t *testing.T, account framework.AzureAccount) *azblob.Client {
	t.Helper()
	cred, err := azblob.NewSharedKeyCredential(account.Name, account.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azblob.NewClientWithSharedKeyCredential(account.BlobEndpoint+"/", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
