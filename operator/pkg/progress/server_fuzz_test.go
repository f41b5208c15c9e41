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

package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/operator/pkg/testing/apivalidation"
)

// FuzzReport posts an arbitrary body, as the job's own pod, to the progress or checkpoint endpoint
// of a job whose spec (epochs, checkpoint location) the fuzzer picks too. Whatever the body, the
// server answers 204 or a 4xx, and what it records keeps to the spec: an epoch within the job's
// epochs, an accuracy between 0 and 1, a checkpoint under the job's checkpoint location, and a
// status the API server accepts.
func FuzzReport(f *testing.F) {
	crd, err := apivalidation.TrainingJobs()
	if err != nil {
		f.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := convoy.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, checkpoint bool, body []byte, epochs uint16, location string) {
		job := utiltesting.MakeTrainingJob("llm", "ns").Obj()
		if epochs > 0 {
			job.Spec.Hyperparameters = &convoy.Hyperparameters{Epochs: ptr.To(int32(epochs))}
		}
		endpoint := "progress"
		if checkpoint {
			endpoint = "checkpoint"
		}
		s, c := fuzzServer(scheme, job, location)
		req := httptest.NewRequest(http.MethodPost, JobPath("ns", "llm")+"/"+endpoint, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fuzzPodToken)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			if rec.Code < 400 || rec.Code >= 500 {
				t.Fatalf("answered %d %q, want 204 or a 4xx", rec.Code, rec.Body.String())
			}
			return
		}
		got := &convoy.TrainingJob{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(job), got); err != nil {
			t.Fatal(err)
		}
		if errs := crd.UpdateStatus(got, job); len(errs) > 0 {
			t.Errorf("recorded a status the API server refuses: %v", errs.ToAggregate())
		}
		st := got.Status
		if checkpoint {
			cp := &Checkpoint{}
			if err := json.Unmarshal(body, cp); err != nil {
				t.Fatalf("accepted a checkpoint that is not JSON: %v", err)
			}
			if location != "" && !cleanlyUnder(st.Checkpoint.Latest, location) {
				t.Errorf("recorded checkpoint %q outside the job's location %q", st.Checkpoint.Latest, location)
			}
			if epochs > 0 && st.Checkpoint.Epoch > int32(epochs) {
				t.Errorf("recorded a checkpoint of epoch %d, past spec.hyperparameters.epochs %d", st.Checkpoint.Epoch, epochs)
			}
			return
		}
		r := &Report{}
		if err := json.Unmarshal(body, r); err != nil {
			t.Fatalf("accepted a report that is not JSON: %v", err)
		}
		bound := int32(math.MaxInt32)
		switch {
		case r.TotalEpochs != nil:
			bound = *r.TotalEpochs
		case epochs > 0:
			bound = int32(epochs)
		}
		if st.CurrentEpoch < 0 || st.CurrentEpoch > bound {
			t.Errorf("recorded epoch %d, outside 0..%d", st.CurrentEpoch, bound)
		}
		if m := st.Metrics; m != nil && m.Accuracy != nil && !(*m.Accuracy >= 0 && *m.Accuracy <= 1) {
			t.Errorf("recorded accuracy %v, outside [0, 1]", *m.Accuracy)
		}
		if b := st.Best; b != nil && (math.IsNaN(b.Value) || math.IsInf(b.Value, 0)) {
			t.Errorf("recorded best %s %v", b.Name, b.Value)
		}
	})
}

// fuzzPodToken is the token of pod ns/llm-worker-0, which fuzzServer accepts.
var fuzzPodToken = unsignedToken(podTokenClaims("ns", "llm-worker-0", "pod-uid"))

// fuzzServer is a progress server in front of a fake client holding job and its pod llm-worker-0,
// whose token (fuzzPodToken) the server accepts.
func fuzzServer(scheme *runtime.Scheme, job *convoy.TrainingJob, location string) (*Server, client.Client) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "llm-worker-0", Namespace: "ns", UID: "pod-uid",
		Labels:          map[string]string{convoy.LabelRestartAttempt: "0"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, convoy.GroupVersion.WithKind("TrainingJob"))}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job.DeepCopy(), pod).WithStatusSubresource(&convoy.TrainingJob{}).Build()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := &Server{Client: c, APIReader: c, Clock: clk, CheckpointURI: func(*convoy.TrainingJob) string { return location }}
	s.setupOnce.Do(func() {
		s.tokens = authenticator.TokenFunc(func(_ context.Context, token string) (*authenticator.Response, bool, error) {
			return &authenticator.Response{User: &user.DefaultInfo{Name: "system:serviceaccount:ns:default",
				Extra: map[string][]string{extraPodName: {pod.Name}, extraPodUID: {string(pod.UID)}}}}, token == fuzzPodToken, nil
		})
		s.clients = newClientLimits(clk)
	})
	return s, c
}

// cleanlyUnder reports whether p, once its "." and ".." segments are resolved, is dir or below it.
func cleanlyUnder(p, dir string) bool {
	scheme, rest, ok := strings.Cut(dir, "://")
	if ok {
		var found bool
		if p, found = strings.CutPrefix(p, scheme+"://"); !found {
			return false
		}
		dir = rest
	}
	cp, cd := path.Clean("/"+p), path.Clean("/"+dir)
	return cp == cd || strings.HasPrefix(cp, strings.TrimSuffix(cd, "/")+"/")
}
