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
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// WebhookConfigurationName is the name of deploy/kueue's MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration of TrainingJobs, into which the operator injects its CA when it
// manages the webhook's certificate.
const WebhookConfigurationName = "convoy-trainingjob-queue"

// DefaultWebhookService is deploy/kueue's Service in front of the webhook server.
const DefaultWebhookService = "convoy-operator-queue-webhook"

// cert-controller watches every Secret of the namespace and every webhook configuration (its cache
// selects no names); it writes only its Secret and the configurations it injects, and
// deploy/kueue/rbac/named_role.yaml grants those writes by name (RBAC markers cannot name objects).
// +kubebuilder:rbac:groups="",namespace=convoy-system,resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=list;watch

// setupCertRotation has open-policy-agent/cert-controller (as Kueue uses it for its own webhooks)
// keep a CA and the webhook's serving certificate in Secret opts.CertSecret, for the DNS name of
// opts.Service, and the CA in the webhook configurations. The Secret is mounted at WebhookCertDir;
// the returned channel closes once the kubelet has put the certificate there and the CA is injected.
// Every replica serves the webhook, so every replica runs the rotator, as Kueue does.
func (i *Integration) setupCertRotation(mgr ctrl.Manager) (<-chan struct{}, error) {
	ready := make(chan struct{})
	service := i.opts.WebhookService
	if service == "" {
		service = DefaultWebhookService
	}
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: i.opts.Namespace, Name: i.opts.CertSecret},
		CertDir:        i.opts.WebhookCertDir,
		CAName:         "convoy-queue-webhook-ca",
		CAOrganization: "convoy.dev",
		DNSName:        fmt.Sprintf("%s.%s.svc", service, i.opts.Namespace),
		ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.cluster.local", service, i.opts.Namespace)},
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Type: rotator.Mutating, Name: WebhookConfigurationName},
			{Type: rotator.Validating, Name: WebhookConfigurationName},
		},
		FieldOwner:            "convoy-operator",
		RequireLeaderElection: false,
		ControllerName:        "queue-webhook-cert-rotator",
	})
	if err != nil {
		return nil, fmt.Errorf("managing the queue webhook's certificate in Secret %s/%s: %w", i.opts.Namespace, i.opts.CertSecret, err)
	}
	return ready, nil
}

// certGatedServer starts the webhook server once its certificate is in place: the server reads
// tls.crt when it starts. It runs on every replica, leader or not.
type certGatedServer struct {
	webhook.Server
	ready <-chan struct{}
}

func (s certGatedServer) Start(ctx context.Context) error {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	return s.Server.Start(ctx)
}

func (certGatedServer) NeedLeaderElection() bool { return false }

// certFiles waits for a serving certificate that something else provides (cert-manager, or your
// own Secret mounted at the webhook's CertDir): until tls.crt and tls.key are there, the operator
// runs its controllers, logs what is missing once a minute, and reports not ready (readyz names
// the directory), instead of exiting. TrainingJobs the webhooks check cannot be created meanwhile:
// the API server says it cannot call the webhook.
type certFiles struct {
	dir   string
	ready chan struct{}
	// poll and nag are how often it looks and logs; 2 s and a minute unless a test sets them.
	poll, nag time.Duration
}

func newCertFiles(dir string) *certFiles {
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs") // controller-runtime's default
	}
	return &certFiles{dir: dir, ready: make(chan struct{}), poll: 2 * time.Second, nag: time.Minute}
}

func (c *certFiles) present() bool {
	for _, f := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(c.dir, f)); err != nil {
			return false
		}
	}
	return true
}

// Start closes ready once the files are there.
func (c *certFiles) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("queue-webhook")
	var lastNag time.Time
	for !c.present() {
		if time.Since(lastNag) >= c.nag {
			log.Error(nil, "No serving certificate for the TrainingJob webhooks: the API server cannot call them, so TrainingJobs cannot be created, until there is one. Create cert-manager's Certificate for it, or run the operator with --queue-webhook-cert-secret to have it make its own",
				"certDir", c.dir)
			lastNag = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.poll):
		}
	}
	close(c.ready)
	return nil
}

func (*certFiles) NeedLeaderElection() bool { return false }

// Check is a readyz check: not ready while the certificate is missing.
func (c *certFiles) Check(*http.Request) error {
	select {
	case <-c.ready:
		return nil
	default:
		return fmt.Errorf("no serving certificate (tls.crt, tls.key) in %s", c.dir)
	}
}
