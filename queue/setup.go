package queue

import (
	"context"
	"fmt"
	"net"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/controller"
)

// ControllerName names Kueue's job reconciler for TrainingJobs in the operator's logs and metrics,
// and is the source of its events.
const ControllerName = "trainingjob-kueue"

// Options configure the integration.
type Options struct {
	// WebhookAddr is host:port of the admission webhook server; ":9444" by default.
	WebhookAddr string
	// WebhookCertDir holds the webhook server's tls.crt and tls.key; controller-runtime's default
	// (/tmp/k8s-webhook-server/serving-certs) when empty.
	WebhookCertDir string
	// WaitForPodsReady must be true when Kueue's configuration sets waitForPodsReady: the job
	// reconciler then reports the gang's PodsReady condition on its Workload.
	WaitForPodsReady bool
}

// DefaultWebhookAddr is where the webhook server listens by default; the operator's progress
// endpoint has 9443.
const DefaultWebhookAddr = ":9444"

// Integration is the Kueue integration of the operator: Kueue's job reconciler for TrainingJobs,
// the admission webhook, and the controller.Queue that reports Kueue's verdict in job status.
type Integration struct {
	opts   Options
	client client.Client
}

var _ controller.ManagedQueue = &Integration{}

// New returns the integration; the TrainingJob reconciler sets it up with its manager.
func New(opts Options) *Integration {
	if opts.WebhookAddr == "" {
		opts.WebhookAddr = DefaultWebhookAddr
	}
	return &Integration{opts: opts}
}

// Owned is the kind of object whose changes carry Kueue's verdict on a job: its Workload.
func (i *Integration) Owned() client.Object { return &kueue.Workload{} }

// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=localqueues;resourceflavors;workloadpriorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager adds Kueue's API types to mgr's scheme, then registers the Workload owner index,
// Kueue's generic job reconciler for TrainingJobs and the admission webhook server.
func (i *Integration) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := kueue.AddToScheme(mgr.GetScheme()); err != nil {
		return err
	}
	i.client = mgr.GetClient()
	if err := jobframework.SetupWorkloadOwnerIndex(ctx, mgr.GetFieldIndexer(), GVK); err != nil {
		return fmt.Errorf("indexing Workloads by their TrainingJob: %w", err)
	}
	opts := []jobframework.Option{jobframework.WithManagerName("convoy-operator")}
	if i.opts.WaitForPodsReady {
		opts = append(opts, jobframework.WithWaitForPodsReady(&configapi.WaitForPodsReady{}))
	}
	named := func(b *ctrlbuilder.Builder, _ client.Client) *ctrlbuilder.Builder {
		// The operator's own TrainingJob controller already has the kind's default name.
		return b.Named(ControllerName)
	}
	r, err := jobframework.NewGenericReconcilerFactory(func() jobframework.GenericJob { return &Job{} }, named)(
		ctx, mgr.GetClient(), mgr.GetFieldIndexer(), mgr.GetEventRecorderFor(ControllerName), opts...)
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	return i.setupWebhook(mgr)
}

func (i *Integration) setupWebhook(mgr ctrl.Manager) error {
	host, portText, err := net.SplitHostPort(i.opts.WebhookAddr)
	if err != nil {
		return fmt.Errorf("webhook address %q: %w", i.opts.WebhookAddr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("webhook address %q: %w", i.opts.WebhookAddr, err)
	}
	srv := webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: i.opts.WebhookCertDir})
	wh := &Webhook{Client: mgr.GetClient()}
	srv.Register(MutatePath, admission.WithCustomDefaulter(mgr.GetScheme(), &convoy.TrainingJob{}, wh))
	srv.Register(ValidatePath, admission.WithCustomValidator(mgr.GetScheme(), &convoy.TrainingJob{}, wh))
	if err := mgr.Add(srv); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("queue-webhook", srv.StartedChecker())
}

// KueueInstalled reports whether the API server serves Kueue's Workloads (kueue.x-k8s.io/v1beta2).
func KueueInstalled(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	resources, err := dc.ServerResourcesForGroupVersion(kueue.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the API server for %s: %w", kueue.GroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "workloads" {
			return true, nil
		}
	}
	return false, nil
}
