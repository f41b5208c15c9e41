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

package queue

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMissingCertificateKeepsTheOperatorUpAndNotReady: without tls.crt and tls.key the readiness
// check names the directory and the webhook server does not start; once they appear, it does.
func TestMissingCertificateKeepsTheOperatorUpAndNotReady(t *testing.T) {
	dir := t.TempDir()
	c := newCertFiles(dir)
	c.poll = 10 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- c.Start(t.Context()) }()

	time.Sleep(50 * time.Millisecond)
	if err := c.Check(nil); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("readyz without a certificate = %v, want an error naming %s", err, dir)
	}
	select {
	case err := <-done:
		t.Fatalf("Start returned %v without a certificate, want it to wait", err)
	case <-c.ready:
		t.Fatal("ready without a certificate")
	default:
	}

	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-c.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("not ready 10 s after the certificate appeared")
	}
	if err := c.Check(nil); err != nil {
		t.Errorf("readyz with the certificate = %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Start() = %v", err)
	}
}

// TestClientCAErrorsNameTheFlag: a client CA file that is missing or holds no certificate is an
// error at start that names --queue-webhook-client-ca.
func TestClientCAErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.crt")
	if err := os.WriteFile(empty, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"missing":        filepath.Join(dir, "missing.crt"),
		"no certificate": empty,
	}
	for name, file := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := RequireClientCertificate(file)
			if err == nil || !strings.Contains(err.Error(), "--queue-webhook-client-ca") {
				t.Errorf("RequireClientCertificate(%s) = %v, want an error naming --queue-webhook-client-ca", file, err)
			}
		})
	}
}
