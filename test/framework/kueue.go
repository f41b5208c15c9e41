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

package framework

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The Kueue release the framework runs, built unmodified from the module go.mod pins (a test checks
// that KueueVersion is that version).
const (
	KueueModule  = "sigs.k8s.io/kueue"
	KueueVersion = "v0.17.0"
	// KueueManager is the Kueue controller manager's binary and process name.
	KueueManager = "kueue"
	// Kueuectl is kueuectl, named as the kubectl plugin it is: `kubectl kueue ...` finds it on PATH.
	Kueuectl = "kubectl-kueue"
	// KueueNamespace is where Kueue's release manifests put it.
	KueueNamespace = "kueue-system"
)

// KueueLDFlags stamp the Kubernetes and Kueue versions into the Kueue binaries.
var KueueLDFlags = strings.Join([]string{VersionLDFlags, "-X sigs.k8s.io/kueue/pkg/version.GitVersion=" + KueueVersion}, " ")

// KueueOptions configure StartKueue.
type KueueOptions struct {
	// ConfigFile is Kueue's Configuration (config.kueue.x-k8s.io/v1beta2), for example
	// deploy/kueue/controller_manager_config.yaml. It must list integrations.frameworks: only their
	// webhooks are registered. StartKueue keeps the file's settings except the addresses, the
	// certificate directory and leader election, which a local process needs its own of.
	ConfigFile string
	// FeatureGates ("Name=bool") are added to the configuration's featureGates, after
	// VisibilityOnDemand=false.
	FeatureGates []string
	// Args are added to the manager's command line, for example "--zap-log-level=3".
	Args []string
}

// Kueue is a Kueue manager StartKueue started.
type Kueue struct {
	// WebhookURL is the base URL of its webhook server, which the API server calls.
	WebhookURL string
	// MetricsURL is its HTTPS metrics endpoint (a ServiceAccount token with metrics-reader RBAC
	// reads it, as in a cluster).
	MetricsURL string
}

// StartKueue installs Kueue's release manifests, rendered from the pinned module's
// config/default with kubectl kustomize, and runs the Kueue manager built from the same module as
// a process of the cluster, as its own ServiceAccount with Kueue's RBAC. It returns once Kueue is
// ready (its webhooks answer).
//
// What the release's Deployment would do differently is done here, nothing else:
//   - The API server reaches Kueue's webhook and conversion endpoints by URL on 127.0.0.1 instead
//     of through kueue-webhook-service, whose endpoints could not be a loopback address.
//   - Kueue keeps its default internal certificate management (which also serves its metrics with
//     a self-signed certificate, so no metrics certificate is needed at /etc/kueue/metrics/certs).
//     Its rotator finds the certificate in the Secret kueue-webhook-server-cert valid and keeps it;
//     StartKueue puts it there from the cluster's PKI, valid for the Service's DNS name and for
//     127.0.0.1, and writes it to the certificate directory as the kubelet mounts the Secret.
//   - The visibility API server is off (VisibilityOnDemand=false): its APIService would point at a
//     Service nobody serves, which breaks discovery.
func (c *Cluster) StartKueue(ctx context.Context, opts KueueOptions) (*Kueue, error) {
	if err := CheckBinaries(c.BinDir, KueueManager, "kubectl"); err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	moduleDir, err := ModuleDir(ctx, root, KueueModule)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.StateDir, KueueManager)
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	probeAddr, metricsAddr, webhookPort := hostPort(ports[0]), hostPort(ports[1]), ports[2]
	k := &Kueue{WebhookURL: "https://" + hostPort(webhookPort), MetricsURL: "https://" + metricsAddr + "/metrics"}

	cfg, err := os.ReadFile(opts.ConfigFile)
	if err != nil {
		return nil, err
	}
	gates := append([]string{"VisibilityOnDemand=false"}, opts.FeatureGates...)
	cfg, frameworks, names, err := localKueueConfig(cfg, probeAddr, metricsAddr, webhookPort, certDir, gates)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.ConfigFile, err)
	}
	configFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configFile, cfg, 0o644); err != nil {
		return nil, err
	}

	ca, serving, err := kueueCertificates(names.service + "." + KueueNamespace + ".svc")
	if err != nil {
		return nil, err
	}
	for file, data := range map[string][]byte{"tls.crt": serving.certPEM, "tls.key": serving.keyPEM} {
		if err := os.WriteFile(filepath.Join(certDir, file), data, 0o600); err != nil {
			return nil, err
		}
	}

	manifests, err := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), "kustomize", filepath.Join(moduleDir, "config", "default")).Output()
	if err != nil {
		return nil, fmt.Errorf("rendering Kueue's config/default with kubectl kustomize: %w", exitDetail(err))
	}
	objs, err := decodeObjects(manifests)
	if err != nil {
		return nil, fmt.Errorf("reading Kueue's manifests: %w", err)
	}
	keep := func(path string) bool { return kueueWebhookEnabled(path, frameworks) }
	var crds []string
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Deployment", "Service", "APIService", "ConfigMap":
			continue
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, crd); err != nil {
				return nil, err
			}
			if cv := crd.Spec.Conversion; cv != nil && cv.Webhook != nil && cv.Webhook.ClientConfig != nil && cv.Webhook.ClientConfig.Service != nil {
				cv.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
					URL: localURL(k.WebhookURL, cv.Webhook.ClientConfig.Service.Path), CABundle: ca.certPEM}
			}
			if err := c.apply(ctx, crd); err != nil {
				return nil, fmt.Errorf("installing CRD %s: %w", crd.Name, err)
			}
			crds = append(crds, crd.Name)
			continue
		case "Secret":
			if obj.GetName() == names.secret {
				data := map[string]any{}
				for key, value := range map[string][]byte{"ca.crt": ca.certPEM, "ca.key": ca.keyPEM, "tls.crt": serving.certPEM, "tls.key": serving.keyPEM} {
					data[key] = base64.StdEncoding.EncodeToString(value)
				}
				obj.Object["data"] = data
			}
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			if err := localWebhooks(obj, k.WebhookURL, ca.certPEM, keep); err != nil {
				return nil, err
			}
		}
		if err := c.serverSideApply(ctx, obj); err != nil {
			return nil, fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, name := range crds {
		if err := c.waitEstablished(ctx, name); err != nil {
			return nil, err
		}
	}

	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, KueueNamespace, "kueue-controller-manager")
	if err != nil {
		return nil, err
	}
	args := append([]string{"--config=" + configFile, "--kubeconfig=" + kubeconfig}, opts.Args...)
	if err := c.StartProcess(KueueManager, KueueManager, args, nil); err != nil {
		return nil, err
	}
	if err := c.WaitHealthy(ctx, KueueManager, "http://"+probeAddr+"/readyz"); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: KueueNamespace, Name: names.secret}, secret); err != nil {
		return nil, err
	}
	if !bytes.Equal(secret.Data["ca.crt"], ca.certPEM) {
		return nil, fmt.Errorf("the certificate rotator of Kueue replaced the certificate in Secret %s/%s, which the API server cannot use on 127.0.0.1; see %s",
			KueueNamespace, names.secret, c.logFile(KueueManager))
	}
	return k, nil
}

// kueueNames are the names Kueue's internal certificate management uses.
type kueueNames struct{ service, secret string }

// localKueueConfig rewrites Kueue's configuration for a process on loopback, with gates ("Name=bool")
// added to its featureGates (Kueue refuses featureGates and --feature-gates together), and returns
// the integrations it enables.
func localKueueConfig(data []byte, probeAddr, metricsAddr string, webhookPort int, certDir string, gates []string) ([]byte, []string, kueueNames, error) {
	names := kueueNames{service: "kueue-webhook-service", secret: "kueue-webhook-server-cert"}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, nil, names, err
	}
	if cfg["kind"] != "Configuration" {
		return nil, nil, names, fmt.Errorf("not a Kueue Configuration (kind %v)", cfg["kind"])
	}
	section := func(key string) map[string]any {
		m, _ := cfg[key].(map[string]any)
		if m == nil {
			m = map[string]any{}
			cfg[key] = m
		}
		return m
	}
	if ns, ok := cfg["namespace"].(string); ok && ns != KueueNamespace {
		return nil, nil, names, fmt.Errorf("namespace %q: Kueue's manifests install it in %s", ns, KueueNamespace)
	}
	icm := section("internalCertManagement")
	if enable, ok := icm["enable"].(bool); ok && !enable {
		return nil, nil, names, errors.New("internalCertManagement.enable is false: the local cluster relies on Kueue managing its certificates")
	}
	if s, ok := icm["webhookServiceName"].(string); ok && s != "" {
		names.service = s
	}
	if s, ok := icm["webhookSecretName"].(string); ok && s != "" {
		names.secret = s
	}
	var frameworks []string
	if integrations, ok := cfg["integrations"].(map[string]any); ok {
		list, _ := integrations["frameworks"].([]any)
		for _, f := range list {
			frameworks = append(frameworks, fmt.Sprint(f))
		}
	}
	if len(frameworks) == 0 {
		return nil, nil, names, errors.New("integrations.frameworks is empty: list the integrations whose webhooks Kueue should serve")
	}
	section("health")["healthProbeBindAddress"] = probeAddr
	section("metrics")["bindAddress"] = metricsAddr
	wh := section("webhook")
	wh["host"], wh["port"], wh["certDir"] = "127.0.0.1", webhookPort, certDir
	section("leaderElection")["leaderElect"] = false
	delete(cfg, "pprofBindAddress")
	for _, g := range gates {
		name, value, _ := strings.Cut(g, "=")
		on, err := strconv.ParseBool(value)
		if err != nil {
			return nil, nil, names, fmt.Errorf("feature gate %q: %w", g, err)
		}
		section("featureGates")[name] = on
	}
	out, err := yaml.Marshal(cfg)
	return out, frameworks, names, err
}

var webhookPath = regexp.MustCompile(`^/(?:mutate|validate)-(.*)-([^-]+)-([^-]+)$`)

// kueueWebhookEnabled reports whether the webhook at path belongs to Kueue's own API or to one of
// the enabled integrations ("batch/job", "pod", "jobset.x-k8s.io/jobset", ...). A webhook of a
// disabled integration would fail closed: Kueue answers 404 on its path.
func kueueWebhookEnabled(path string, frameworks []string) bool {
	m := webhookPath.FindStringSubmatch(path)
	if m == nil {
		return false
	}
	// Paths spell the group with dashes for dots ("kueue-x-k8s-io"), which cannot be undone.
	dashed := func(group string) string { return strings.ReplaceAll(group, ".", "-") }
	if m[1] == dashed("kueue.x-k8s.io") {
		return true
	}
	builtin := map[string]string{"pod": "", "deployment": "apps", "statefulset": "apps"}
	for _, f := range frameworks {
		group, kind, found := strings.Cut(f, "/")
		if !found {
			group, kind = builtin[f], f
		}
		if m[1] == dashed(group) && m[3] == kind {
			return true
		}
	}
	return false
}

// ApplyLocalWebhooks applies the webhook configurations among the YAML documents in data (other
// kinds are skipped) with every webhook's clientConfig pointed at baseURL plus the path of its
// Service reference and trusting caPEM: how the API server reaches a component that runs as a
// local process rather than behind a Service. keep, when not nil, drops the webhooks whose path
// it returns false for.
func (c *Cluster) ApplyLocalWebhooks(ctx context.Context, data []byte, baseURL string, caPEM []byte, keep func(path string) bool) error {
	objs, err := decodeObjects(data)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if k := obj.GetKind(); k != "MutatingWebhookConfiguration" && k != "ValidatingWebhookConfiguration" {
			continue
		}
		if err := localWebhooks(obj, baseURL, caPEM, keep); err != nil {
			return err
		}
		if err := c.serverSideApply(ctx, obj); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// localWebhooks rewrites a webhook configuration in place; see ApplyLocalWebhooks.
func localWebhooks(obj *unstructured.Unstructured, baseURL string, caPEM []byte, keep func(path string) bool) error {
	hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
	if err != nil {
		return err
	}
	var kept []any
	for _, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			return fmt.Errorf("%s %s: a webhook is not an object", obj.GetKind(), obj.GetName())
		}
		cc := &admissionregistrationv1.WebhookClientConfig{}
		raw, _ := hook["clientConfig"].(map[string]any)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, cc); err != nil {
			return err
		}
		if cc.Service == nil {
			return fmt.Errorf("%s %s: webhook %v has no Service reference", obj.GetKind(), obj.GetName(), hook["name"])
		}
		if keep != nil && !keep(ptr.Deref(cc.Service.Path, "/")) {
			continue
		}
		local, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&admissionregistrationv1.WebhookClientConfig{
			URL: localURL(baseURL, cc.Service.Path), CABundle: caPEM})
		if err != nil {
			return err
		}
		hook["clientConfig"] = local
		kept = append(kept, hook)
	}
	return unstructured.SetNestedSlice(obj.Object, kept, "webhooks")
}

// localURL is where a Service reference's path is served at baseURL instead.
func localURL(baseURL string, path *string) *string {
	return ptr.To(strings.TrimSuffix(baseURL, "/") + ptr.Deref(path, "/"))
}

// serverSideApply applies obj as the framework's field manager, taking over fields others own.
func (c *Cluster) serverSideApply(ctx context.Context, obj *unstructured.Unstructured) error {
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	return c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("convoy-test-framework"), client.ForceOwnership)
}

// decodeObjects decodes multi-document YAML into objects, skipping empty documents.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
}

// kueueCertificates makes the CA and serving certificate Kueue's certificate rotator accepts as
// its own: an RSA CA named kueue-ca (the rotator checks the name and reads a PKCS #1 key) and a
// serving certificate for the webhook Service's DNS name, and for 127.0.0.1, where the API server
// reaches it here.
func kueueCertificates(serviceDNSName string) (ca, serving *keyPair, err error) {
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	caDER, caCert, err := sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "kueue-ca", Organization: []string{"kueue"}},
		DNSNames:              []string{"kueue-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, caKey.Public(), nil, caKey)
	if err != nil {
		return nil, nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	der, _, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: serviceDNSName},
		DNSNames:    []string{serviceDNSName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, key.Public(), caCert, caKey)
	if err != nil {
		return nil, nil, err
	}
	ca = &keyPair{certPEM: pemBlock("CERTIFICATE", caDER), keyPEM: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caKey))}
	serving = &keyPair{certPEM: pemBlock("CERTIFICATE", der), keyPEM: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))}
	return ca, serving, nil
}

// IssueServingCertificate writes tls.crt and tls.key for a server on 127.0.0.1 and localhost into
// dir, signed by the cluster's CA, and returns that CA's PEM for a caBundle: for webhooks of
// components run as local processes or in the test process.
func (c *Cluster) IssueServingCertificate(name, dir string) ([]byte, error) {
	kp, err := c.pki.serving(name)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for file, data := range map[string][]byte{"tls.crt": kp.certPEM, "tls.key": kp.keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
			return nil, err
		}
	}
	return slices.Clone(c.pki.caPEM), nil
}

func exitDetail(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}
