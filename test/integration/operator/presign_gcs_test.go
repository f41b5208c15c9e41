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
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/util"
)

// TestPresignedGCSURLsOnlyForTheJobsPrefix: a job with gcsAccess presigned gets no Google
// credentials; the progress endpoint hands its pod V4 URLs signed with the operator's service
// account key, with which it writes in its attempt's directory, reads back and deletes on
// fake-gcs-server, and lists its prefix through the operator; a key of another prefix is refused
// by the operator (403 naming the job's prefix), and a multipart upload with 400. fake-gcs-server
// does not check signatures, so the test checks one URL's X-Goog-Signature itself with the
// public half of the operator's key.
func TestPresignedGCSURLsOnlyForTheJobsPrefix(t *testing.T) {
	e := newEnv(t)
	endpoint := e.startGCS()
	key, keyJSON := serviceAccountKey(t)
	e.startOperator(func(o *operator.Options) {
		o.GCSPresign = &progress.GCSAccount{KeyJSON: keyJSON, Endpoint: endpoint}
	})
	resp, err := http.Post(endpoint+"/storage/v1/b?project=platform", "application/json", strings.NewReader(`{"name": "checkpoints"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Fatalf("creating the bucket = %d", resp.StatusCode)
	}
	e.create(utiltesting.MakeTrainingJob("pg", e.ns).Workers(1).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageGCS,
			GCSBucket: "checkpoints", GCSAccess: convoy.GCSAccessPresigned}}).Obj())
	pod := e.startGang("pg", 1, 0)["pg-worker-0"]
	if util.EnvOf(pod, "CONVOY_CHECKPOINT_PRESIGN") != "1" || util.EnvOf(pod, "GOOGLE_APPLICATION_CREDENTIALS") != "" || len(pod.Spec.Containers[0].EnvFrom) != 0 {
		t.Fatalf("the pod's env %+v: want CONVOY_CHECKPOINT_PRESIGN=1 and no credentials", pod.Spec.Containers[0].Env)
	}
	presign, do := e.presigner(pod)
	own := e.ns + "/pg/attempt-0/epoch-1/manifest.json"
	if code, answer := do(progress.PresignPut, own, []byte(`{"epoch": 1}`)); code != http.StatusOK {
		t.Fatalf("PUT with the signed URL = %d %s", code, answer)
	}
	if code, answer := do(progress.PresignGet, own, nil); code != http.StatusOK || answer != `{"epoch": 1}` {
		t.Fatalf("GET with the signed URL = %d %s", code, answer)
	}
	if code, r, answer := presign(progress.PresignList, e.ns+"/pg/"); code != http.StatusOK || !slices.Equal(r.Keys, []string{own}) {
		t.Fatalf("list = %d %s, want the keys [%s]", code, answer, own)
	}
	if code, answer := do(progress.PresignDelete, own, nil); code/100 != 2 { // GCS: 204; fake-gcs-server: 200
		t.Fatalf("DELETE with the signed URL = %d %s", code, answer)
	}
	if code, answer := do(progress.PresignGet, own, nil); code != http.StatusNotFound {
		t.Fatalf("GET after the DELETE = %d %s, want 404", code, answer)
	}

	// The platform writes another job's object with its own key, as the operator signs.
	foreign := e.ns + "/pg-other/attempt-0/epoch-1/manifest.json"
	signed, err := storage.SignedURL("checkpoints", foreign, &storage.SignedURLOptions{Scheme: storage.SigningSchemeV4, GoogleAccessID: serviceAccount,
		PrivateKey: keyPEM(t, key), Method: http.MethodPut, Expires: time.Now().Add(time.Minute), Hostname: strings.TrimPrefix(endpoint, "http://"), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if code, answer := sendSigned(t, progress.PresignReply{Method: http.MethodPut, URL: signed}, []byte(`{"epoch": 1}`)); code != http.StatusOK {
		t.Fatalf("the platform's PUT of %s = %d %s", foreign, code, answer)
	}
	for _, c := range []struct {
		op, key string
		code    int
		want    string
	}{
		{progress.PresignGet, foreign, http.StatusForbidden, "may read only under its prefix gs://checkpoints/" + e.ns + "/pg/"},
		{progress.PresignList, e.ns + "/pg-other/", http.StatusForbidden, "may read only under its prefix"},
		{progress.PresignList, e.ns + "/pg", http.StatusForbidden, "may read only under its prefix"},
		{progress.PresignPut, foreign, http.StatusForbidden, "may write only under its current attempt's prefix gs://checkpoints/" + e.ns + "/pg/attempt-0/"},
		{progress.PresignDelete, foreign, http.StatusForbidden, "may write only under its current attempt's prefix"},
		{progress.PresignCreateMultipart, own, http.StatusBadRequest, "a GCS object is written in one upload"},
	} {
		if code, _, answer := presign(c.op, c.key); code != c.code || !strings.Contains(answer, c.want) {
			t.Errorf("presign %s %s = %d %s, want %d naming %q", c.op, c.key, code, answer, c.code, c.want)
		}
	}

	for _, op := range []string{progress.PresignPut, progress.PresignDelete} {
		if _, r, _ := presign(op, own); verifyV4(r.Method, r.URL, &key.PublicKey) != nil {
			t.Errorf("the signed URL of %s %s: %v", op, r.URL, verifyV4(r.Method, r.URL, &key.PublicKey))
		}
	}
	_, r, _ := presign(progress.PresignGet, own)
	if err := verifyV4(r.Method, r.URL, &key.PublicKey); err != nil {
		t.Errorf("the signed URL %s: %v", r.URL, err)
	}
	if err := verifyV4(r.Method, strings.Replace(r.URL, "/"+own+"?", "/"+foreign+"?", 1), &key.PublicKey); err == nil {
		t.Errorf("the job's signature of %s holds for %s too", own, foreign)
	}
	if err := verifyV4(http.MethodPut, r.URL, &key.PublicKey); err == nil {
		t.Errorf("the signature of a GET holds for a PUT too")
	}
	e.presignedSDK(pod, "gs://checkpoints/"+foreign)
}

// serviceAccount is the email of the operator's service account in serviceAccountKey.
const serviceAccount = "convoy-operator@platform.iam.gserviceaccount.com"

// serviceAccountKey returns an RSA key and the service account JSON key file that holds it.
func serviceAccountKey(t *testing.T) (*rsa.PrivateKey, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	file, err := json.Marshal(map[string]string{"type": "service_account", "project_id": "platform", "private_key_id": "1",
		"private_key": string(keyPEM(t, key)), "client_email": serviceAccount, "token_uri": "https://oauth2.googleapis.com/token"})
	if err != nil {
		t.Fatal(err)
	}
	return key, file
}

func keyPEM(t *testing.T, key *rsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// verifyV4 checks the X-Goog-Signature of a V4 signed URL for method against pub, as GCS does
// (https://cloud.google.com/storage/docs/authentication/signatures): RSA-SHA256 over the string to
// sign, which hashes the canonical request of the method, path, query and host (its name alone, as
// the client library signs it: Google's has no port).
func verifyV4(method, signed string, pub *rsa.PublicKey) error {
	u, err := url.Parse(signed)
	if err != nil {
		return err
	}
	q := u.Query()
	sig, err := hex.DecodeString(q.Get("X-Goog-Signature"))
	if err != nil {
		return err
	}
	q.Del("X-Goog-Signature")
	if q.Get("X-Goog-SignedHeaders") != "host" {
		return fmt.Errorf("signed headers %q, want host", q.Get("X-Goog-SignedHeaders"))
	}
	canonical := strings.Join([]string{method, u.EscapedPath(), q.Encode(), "host:" + u.Hostname(), "", "host", "UNSIGNED-PAYLOAD"}, "\n")
	_, scope, _ := strings.Cut(q.Get("X-Goog-Credential"), "/")
	hash := sha256.Sum256([]byte(canonical))
	toSign := sha256.Sum256([]byte(strings.Join([]string{"GOOG4-RSA-SHA256", q.Get("X-Goog-Date"), scope, hex.EncodeToString(hash[:])}, "\n")))
	if !strings.HasPrefix(q.Get("X-Goog-Credential"), serviceAccount+"/") {
		return fmt.Errorf("credential %q is not the operator's service account", q.Get("X-Goog-Credential"))
	}
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, toSign[:], sig)
}
