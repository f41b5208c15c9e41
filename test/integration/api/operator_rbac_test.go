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
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// TestOperatorWritesOnlyItsOwnWebhooksAndSecrets: with deploy/operator/rbac and deploy/kueue/rbac
// applied, the operator's ServiceAccount updates its own webhook configurations and the two
// Secrets of its certificates, and lists what cert-controller watches, but may change no other
// webhook configuration and no other Secret of its namespace. (It may read Secrets: see
// operator/README.md.)
func TestOperatorWritesOnlyItsOwnWebhooksAndSecrets(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "convoy-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := util.ApplyKustomization(ctx, c, filepath.Join(root, "deploy", "operator", "rbac"), "rbac-test"); err != nil {
		t.Fatalf("applying deploy/operator/rbac: %v", err)
	}
	for _, f := range []string{"role.yaml", "named_role.yaml", "role_binding.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "deploy", "kueue", "rbac", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := util.ApplyYAML(ctx, c.Client, data, "rbac-test"); err != nil {
			t.Fatalf("applying deploy/kueue/rbac/%s: %v", f, err)
		}
	}

	sideEffects := admissionregistrationv1.SideEffectClassNone
	webhook := func(name string) []admissionregistrationv1.ValidatingWebhook {
		return []admissionregistrationv1.ValidatingWebhook{{
			Name: name + ".convoy.dev", AdmissionReviewVersions: []string{"v1"}, SideEffects: &sideEffects,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/" + name)},
			// It matches nothing, so that it calls nothing.
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"never": name}},
		}}
	}
	ours := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "convoy-trainingjob-queue"}, Webhooks: webhook("ours")}
	theirs := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "another-product"}, Webhooks: webhook("theirs")}
	progress := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "convoy-system", Name: "convoy-operator-progress-tls"}}
	queueCert := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "convoy-system", Name: "convoy-operator-queue-webhook-tls"}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "convoy-system", Name: "someone-elses"}}
	for _, obj := range []client.Object{ours, theirs, progress, queueCert, other} {
		if err := c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, obj := range []client.Object{ours, theirs} {
			_ = c.Client.Delete(ctx, obj)
		}
	})

	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:convoy-system:convoy-operator",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:convoy-system", "system:authenticated"},
	}
	op, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	dry := client.DryRunAll
	update := func(obj client.Object) func() error {
		return func() error {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			return op.Update(ctx, obj, dry)
		}
	}

	allowed := map[string]func() error{
		// What the operator does when it starts: its progress certificate.
		"creating the progress Secret": func() error {
			if err := op.Create(ctx, progress.DeepCopy(), dry); !apierrors.IsAlreadyExists(err) {
				return err
			}
			return nil // past authorization
		},
		"reading the progress Secret": func() error {
			return op.Get(ctx, client.ObjectKeyFromObject(progress), &corev1.Secret{})
		},
		// What cert-controller does: it watches Secrets of the namespace and webhook configurations,
		// and writes its Secret and the CA into the configurations it injects.
		"listing the namespace's Secrets": func() error {
			return op.List(ctx, &corev1.SecretList{}, client.InNamespace("convoy-system"))
		},
		"listing webhook configurations": func() error {
			return op.List(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{})
		},
		"updating the queue webhook's Secret":    update(queueCert.DeepCopy()),
		"updating its own webhook configuration": update(ours.DeepCopy()),
		"updating the progress Secret":           update(progress.DeepCopy()),
	}
	for name, do := range allowed {
		t.Run(name, func(t *testing.T) {
			if err := do(); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}

	refused := map[string]func() error{
		"updating another webhook configuration":   update(theirs.DeepCopy()),
		"deleting its own webhook configuration":   func() error { return op.Delete(ctx, ours.DeepCopy(), dry) },
		"updating another Secret of its namespace": update(other.DeepCopy()),
		"deleting another Secret of its namespace": func() error { return op.Delete(ctx, other.DeepCopy(), dry) },
	}
	for name, do := range refused {
		t.Run(name, func(t *testing.T) {
			err := do()
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "system:serviceaccount:convoy-system:convoy-operator") {
				t.Errorf("got %v, want the operator's ServiceAccount forbidden", err)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
