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

package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/convoy-dev/convoy/queue"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// TestWebhookAcceptsOnlyTheAPIServer: a webhook server with the operator's
// --queue-webhook-client-ca is called by an API server whose AdmissionConfiguration gives it a
// client certificate (the kubeconfig queue/README.md shows), and refuses a caller without a
// certificate or with one another CA signed. The API server here presents its front-proxy client
// certificate, and the webhook trusts the front-proxy CA.
func TestWebhookAcceptsOnlyTheAPIServer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pkiDir := filepath.Join(dir, "cluster", "pki")
	kubeconfig := filepath.Join(dir, "admission-kubeconfig.yaml")
	admissionConfig := filepath.Join(dir, "admission.yaml")
	for file, data := range map[string]string{
		kubeconfig: fmt.Sprintf("apiVersion: v1\nkind: Config\nusers:\n- name: \"*\"\n  user:\n    client-certificate: %s\n    client-key: %s\n",
			filepath.Join(pkiDir, "front-proxy-client.crt"), filepath.Join(pkiDir, "front-proxy-client.key")),
		admissionConfig: fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %s
`, kubeconfig),
	} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := framework.Start(ctx, framework.Options{
		StateDir:                 filepath.Join(dir, "cluster"),
		APIServerArgs:            []string{"--admission-control-config-file=" + admissionConfig},
		WithoutKwok:              true,
		WithoutControllerManager: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })

	addr, err := util.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	host, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	certDir := filepath.Join(dir, "webhook")
	caPEM, err := c.IssueServingCertificate("webhook", certDir)
	if err != nil {
		t.Fatal(err)
	}
	requireClientCert, err := queue.RequireClientCertificate(filepath.Join(pkiDir, "front-proxy-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	srv := webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir, TLSOpts: []func(*tls.Config){requireClientCert}})
	srv.Register("/validate", &webhook.Admission{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		if req.Name == "refused" {
			return admission.Denied("the webhook was called")
		}
		return admission.Allowed("")
	})})
	srvCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() { _ = srv.Start(srvCtx) }()

	if err := c.Client.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "client-cert"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "client-cert.convoy.dev", AdmissionReviewVersions: []string{"v1"},
			SideEffects:   ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + "/validate"), CABundle: caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	configMap := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}}
	}
	// The API server's call reaches the handler: its denial comes back.
	util.EventuallyErr(t, 100*time.Millisecond, 30*time.Second, "the API server to call the webhook with its client certificate", func() (bool, error) {
		err := c.Client.Create(ctx, configMap("refused"))
		return err != nil && strings.Contains(err.Error(), "the webhook was called"), err
	})
	if err := c.Client.Create(ctx, configMap("allowed")); err != nil {
		t.Errorf("a ConfigMap the webhook allows: %v", err)
	}

	// Anyone else who reaches the port is refused at the TLS handshake.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	review := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","name":"x","operation":"CREATE"}}`)
	otherCA, err := tls.X509KeyPair(c.RESTConfig.CertData, c.RESTConfig.KeyData) // the cluster's CA signed it
	if err != nil {
		t.Fatal(err)
	}
	for name, cert := range map[string]*tls.Certificate{"no client certificate": {}, "a client certificate of another CA": &otherCA} {
		t.Run(name, func(t *testing.T) {
			// Sent whatever CAs the server asks for.
			present := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, GetClientCertificate: present, MinVersion: tls.VersionTLS12}}}
			resp, err := hc.Post("https://"+addr+"/validate", "application/json", bytes.NewReader(review))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("answered %s, want the TLS handshake refused", resp.Status)
			}
			if !strings.Contains(err.Error(), "tls:") {
				t.Errorf("got %v, want a TLS refusal", err)
			}
		})
	}
}
