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

package util

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"time"

	"github.com/convoy-dev/convoy/operator/pkg/progress"
)

// ForgedProgressToken is a JWT shaped as a projected ServiceAccount token for the progress
// audience, bound to pod namespace/name with uid, and signed by no one: what a tenant can make
// without the API server.
func ForgedProgressToken(namespace, pod, uid string) string {
	enc := func(v any) string {
		raw, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(raw)
	}
	return enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." +
		enc(map[string]any{"aud": []string{progress.Audience}, "sub": "system:serviceaccount:" + namespace + ":default",
			"kubernetes.io": map[string]any{"namespace": namespace, "pod": map[string]string{"name": pod, "uid": uid}}}) + "." +
		RandomToken()
}

// RandomToken is a random bearer token that no one issued.
func RandomToken() string { return rand.Text() }

// ProgressTransport is an HTTP transport to the progress endpoint that trusts roots and, when
// source is set, sends from that local address (as 127.0.0.2 on the loopback), so that each
// simulated pod is its own client address to the endpoint's per-client limit.
func ProgressTransport(roots *x509.CertPool, source string) *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	if source != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DialContext: dialer.DialContext, MaxIdleConnsPerHost: 64}
}
