package queue

import (
	"context"
	"fmt"

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

// +kubebuilder:rbac:groups="",namespace=convoy-system,resources=secrets,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch;update;patch

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
