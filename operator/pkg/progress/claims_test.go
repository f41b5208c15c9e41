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
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// unsignedToken is a JWT with claims and a signature no API server made.
func unsignedToken(claims any) string {
	enc := func(v any) string {
		raw, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(raw)
	}
	return enc(map[string]string{"alg": "RS256"}) + "." + enc(claims) + ".c2lnbmF0dXJl"
}

// podTokenClaims are the claims of a projected token for Audience bound to pod name/uid.
func podTokenClaims(namespace, name, uid string) map[string]any {
	return map[string]any{"aud": []string{Audience}, "sub": "system:serviceaccount:" + namespace + ":default",
		"kubernetes.io": map[string]any{"namespace": namespace, "pod": map[string]string{"name": name, "uid": uid},
			"serviceaccount": map[string]string{"name": "default", "uid": "sa-uid"}}}
}

func TestUnverifiedClaims(t *testing.T) {
	pod := podTokenClaims("team-a", "llm-worker-0", "pod-uid")
	with := func(change func(map[string]any)) string {
		c := podTokenClaims("team-a", "llm-worker-0", "pod-uid")
		change(c)
		return unsignedToken(c)
	}
	cases := map[string]struct {
		token   string
		want    podClaims
		wantErr string
	}{
		"a pod-bound token": {token: unsignedToken(pod),
			want: podClaims{Namespace: "team-a", Pod: "llm-worker-0", PodUID: "pod-uid"}},
		"aud as one string": {token: with(func(c map[string]any) { c["aud"] = Audience }),
			want: podClaims{Namespace: "team-a", Pod: "llm-worker-0", PodUID: "pod-uid"}},
		"random bytes":             {token: "Zm9vYmFy", wantErr: "not a JWT"},
		"four segments":            {token: unsignedToken(pod) + ".x", wantErr: "not a JWT"},
		"a header not base64url":   {token: "!!." + strings.SplitN(unsignedToken(pod), ".", 2)[1], wantErr: "header is not base64url"},
		"claims not JSON":          {token: "e30.bm90IGpzb24.c2ln", wantErr: "claims is not a JSON object"},
		"no kubernetes.io claim":   {token: unsignedToken(map[string]any{"aud": Audience, "sub": "me"}), wantErr: "no kubernetes.io claim"},
		"kubernetes.io without ns": {token: with(func(c map[string]any) { c["kubernetes.io"] = map[string]any{} }), wantErr: "no kubernetes.io claim"},
		"another audience": {token: with(func(c map[string]any) { c["aud"] = []string{"https://kubernetes.default.svc"} }),
			wantErr: "not for audience convoy.dev/progress"},
		"no audience": {token: with(func(c map[string]any) { delete(c, "aud") }), wantErr: "not for audience"},
		"bound to no pod": {token: with(func(c map[string]any) {
			c["kubernetes.io"] = map[string]any{"namespace": "team-a"}
		}), wantErr: "not bound to a pod"},
		"a pod without uid": {token: with(func(c map[string]any) {
			c["kubernetes.io"] = map[string]any{"namespace": "team-a", "pod": map[string]string{"name": "p"}}
		}), wantErr: "not bound to a pod"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := unverifiedClaims(tc.token)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), "$CONVOY_PROGRESS_TOKEN_FILE") {
					t.Errorf("error %q does not say which token to send", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("claims (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRefusedBeforeReview: tokens that cannot be the job's pod's (not a JWT, another audience,
// another namespace, a pod the job does not control) are refused without a TokenReview; the pod's
// own token is reviewed and its report recorded.
func TestRefusedBeforeReview(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := convoy.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	s, _ := fuzzServer(scheme, utiltesting.MakeTrainingJob("llm", "ns").Obj(), "")
	accept := s.tokens
	reviews := 0
	s.tokens = authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		reviews++
		return accept.AuthenticateToken(ctx, token)
	})
	otherAudience := podTokenClaims("ns", "llm-worker-0", "pod-uid")
	otherAudience["aud"] = "https://kubernetes.default.svc"
	cases := map[string]struct {
		token       string
		want        int
		wantReviews int
	}{
		"random bytes":                        {token: "dG9rZW4tMTIzNDU", want: http.StatusUnauthorized},
		"a token for another audience":        {token: unsignedToken(otherAudience), want: http.StatusUnauthorized},
		"a token of another namespace":        {token: unsignedToken(podTokenClaims("other", "llm-worker-0", "pod-uid")), want: http.StatusForbidden},
		"a token naming the pod, another uid": {token: unsignedToken(podTokenClaims("ns", "llm-worker-0", "forged")), want: http.StatusForbidden},
		"a token naming no pod of the job":    {token: unsignedToken(podTokenClaims("ns", "attacker-0", "pod-uid")), want: http.StatusForbidden},
		"the pod's own token":                 {token: fuzzPodToken, want: http.StatusNoContent, wantReviews: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reviews = 0
			req := httptest.NewRequest(http.MethodPost, JobPath("ns", "llm")+"/progress", strings.NewReader(`{"epoch": 1}`))
			req.Header.Set("Authorization", "Bearer "+tc.token)
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.want || reviews != tc.wantReviews {
				t.Errorf("answered %d %q after %d reviews, want %d after %d", rec.Code, rec.Body.String(), reviews, tc.want, tc.wantReviews)
			}
		})
	}
}
