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
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/features"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
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
	// CertSecret, when set, is the Secret in Namespace where the operator keeps the webhook's CA
	// and serving certificate itself (certs.go); it must be mounted at WebhookCertDir. When empty,
	// the certificate in WebhookCertDir comes from elsewhere (cert-manager, or your own).
	CertSecret string
	// WebhookClientCA, when set, is a file of CA certificates: the webhook server then accepts only
	// callers presenting a client certificate one of them signed, the API server given one by its
	// AdmissionConfiguration (README.md). Read when the operator starts.
	WebhookClientCA string
	// Namespace is the operator's namespace, where CertSecret and WebhookService live.
	Namespace string
	// WebhookService is the Service in front of the webhook server, the name its certificate is
	// for; DefaultWebhookService when empty.
	WebhookService string
	// Management is which jobs are Kueue's: it must match manageJobsWithoutQueueName and
	// managedJobsNamespaceSelector in Kueue's configuration. Zero: the jobs that name a queue.
	Management Management
	// WaitForPodsReady must be true when Kueue's configuration sets waitForPodsReady: the job
	// reconciler then reports the gang's PodsReady condition on its Workload.
	WaitForPodsReady bool
	// MaxConcurrentReconciles is how many TrainingJobs Kueue's job reconciler handles at once;
	// DefaultMaxConcurrentReconciles when zero.
	MaxConcurrentReconciles int
	// QPS and Burst limit the requests of Kueue's job reconciler, apart from the operator's own:
	// creating the gangs of admitted jobs must not hold back the Workloads of new ones. Kueue's
	// defaults for its own integrations (50 and 100) when zero.
	QPS   float32
	Burst int
}

// DefaultMaxConcurrentReconciles matches the operator's TrainingJob controller.
const DefaultMaxConcurrentReconciles = 16

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
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if opts.QPS == 0 {
		opts.QPS, opts.Burst = 50, 100
	}
	return &Integration{opts: opts}
}

// Owned is the kind of object whose changes carry Kueue's verdict on a job: its Workload.
func (i *Integration) Owned() client.Object { return &kueue.Workload{} }

// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=localqueues;resourceflavors;workloadpriorityclasses;clusterqueues;admissionchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager adds Kueue's API types to mgr's scheme, then registers the Workload owner index,
// Kueue's generic job reconciler for TrainingJobs, the dispatch controller of a MultiKueue manager
// and the admission webhook server.
func (i *Integration) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := kueue.AddToScheme(mgr.GetScheme()); err != nil {
		return err
	}
	i.client = mgr.GetClient()
	// Reads come from the manager's cache; writes have a rate limit of their own.
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.QPS, cfg.Burst, cfg.RateLimiter = i.opts.QPS, i.opts.Burst, nil
	kc, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		Cache: &client.CacheOptions{Reader: mgr.GetCache()}})
	if err != nil {
		return err
	}
	if err := jobframework.SetupWorkloadOwnerIndex(ctx, mgr.GetFieldIndexer(), GVK); err != nil {
		return fmt.Errorf("indexing Workloads by their TrainingJob: %w", err)
	}
	if features.Enabled(features.ElasticJobsViaWorkloadSlices) {
		// Kueue finds the pods of an elastic job's Workload slice by it, to start them.
		if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, indexer.WorkloadSliceNameKey, indexer.IndexPodWorkloadSliceName); err != nil {
			return fmt.Errorf("indexing pods by their Workload slice: %w", err)
		}
		// and by their owner, where none carries the slice's name yet.
		if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, indexer.OwnerReferenceUID, indexer.IndexOwnerUID); err != nil {
			return fmt.Errorf("indexing pods by their owner: %w", err)
		}
	}
	opts := []jobframework.Option{jobframework.WithManagerName("convoy-operator"),
		jobframework.WithManageJobsWithoutQueueName(i.opts.Management.WithoutQueueName),
		jobframework.WithManagedJobsNamespaceSelector(i.opts.Management.selector())}
	if i.opts.WaitForPodsReady {
		opts = append(opts, jobframework.WithWaitForPodsReady(&configapi.WaitForPodsReady{}))
	}
	named := func(b *ctrlbuilder.Builder, _ client.Client) *ctrlbuilder.Builder {
		// The operator's own TrainingJob controller already has the kind's default name.
		b = b.Named(ControllerName).
			WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: i.opts.MaxConcurrentReconciles}).
			WithEventFilter(predicate.Funcs{
				CreateFunc: func(e event.CreateEvent) bool { return !i.waitsForClaimTemplate(ctx, e.Object) },
				UpdateFunc: func(e event.UpdateEvent) bool {
					oldJob, ok := e.ObjectOld.(*convoy.TrainingJob)
					newJob, _ := e.ObjectNew.(*convoy.TrainingJob)
					return !ok || newJob == nil || changedForKueue(oldJob, newJob) && !i.waitsForClaimTemplate(ctx, newJob)
				},
			}).
			// The job's ResourceClaimTemplate, once made, lets Kueue make the job's Workload.
			Watches(&resourcev1.ResourceClaimTemplate{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(),
				&convoy.TrainingJob{}, handler.OnlyControllerOwner()))
		if features.Enabled(features.ElasticJobsViaWorkloadSlices) {
			// Kueue starts the pods of an elastic job's admitted Workload slice (removes their
			// scheduling gate) when it looks at the job, from the cache: each gated pod that comes
			// into it is worth a look, whatever the job's status says by then.
			b = b.Watches(&corev1.Pod{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &convoy.TrainingJob{}, handler.OnlyControllerOwner()),
				ctrlbuilder.WithPredicates(predicate.NewPredicateFuncs(elasticGated)))
		}
		return b
	}
	if GatesPreemption() {
		// Kueue preempts for a TrainingJob only once the PreemptionGate controller lets it.
		kc = gatingClient{kc}
	}
	r, err := jobframework.NewGenericReconcilerFactory(func() jobframework.GenericJob { return &Job{} }, named)(
		ctx, kc, mgr.GetFieldIndexer(), mgr.GetEventRecorderFor(ControllerName), opts...) //nolint:staticcheck // Kueue's jobframework takes a record.EventRecorder
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := i.setupDispatch(mgr); err != nil {
		return err
	}
	if err := (&Forecaster{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if features.Enabled(features.ElasticJobsViaWorkloadSlices) {
		resizer := &Resizer{Client: mgr.GetClient()}
		if err := resizer.SetupWithManager(mgr); err != nil {
			return err
		}
		if GatesPreemption() {
			gate := &PreemptionGate{Resizer: resizer, Recorder: mgr.GetEventRecorder("trainingjob-preemption-gate")}
			if err := gate.SetupWithManager(mgr); err != nil {
				return err
			}
		}
	}
	return i.setupWebhook(mgr)
}

// waitsForClaimTemplate reports whether obj is a queued TrainingJob with spec.gpu whose
// ResourceClaimTemplate the operator has not made yet. Kueue's job reconciler leaves it alone
// until then: Kueue refuses a Workload whose template it cannot read with a Requeued condition
// False that stays in the Workload's status, and its queue never takes back a Workload that
// carries one, however much quota frees up.
func (i *Integration) waitsForClaimTemplate(ctx context.Context, obj client.Object) bool {
	job, ok := obj.(*convoy.TrainingJob)
	if !ok || !(*Job)(job).IsSuspended() || !job.DeletionTimestamp.IsZero() || job.Status.IsFinished() || job.ManagedElsewhere() ||
		builder.GPUClaimTemplate(job) == nil {
		return false
	}
	err := i.client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: builder.GPUClaimTemplateName(job)}, &resourcev1.ResourceClaimTemplate{})
	return apierrors.IsNotFound(err)
}

// RequireClientCertificate returns the TLS option that makes a server accept only clients whose
// certificate a CA of caFile signed.
func RequireClientCertificate(caFile string) (func(*tls.Config), error) {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("the webhook's client CA (--queue-webhook-client-ca): %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("the webhook's client CA (--queue-webhook-client-ca) %s holds no PEM certificate", caFile)
	}
	return func(c *tls.Config) {
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}, nil
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
	wo := webhook.Options{Host: host, Port: port, CertDir: i.opts.WebhookCertDir}
	if i.opts.WebhookClientCA != "" {
		requireClientCert, err := RequireClientCertificate(i.opts.WebhookClientCA)
		if err != nil {
			return err
		}
		wo.TLSOpts = append(wo.TLSOpts, requireClientCert)
	}
	srv := webhook.NewServer(wo)
	// A job may come right after its namespace, or after the label that makes the namespace a
	// team's: the webhook reads namespaces from the API server, not from the cache.
	whClient, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		Cache: &client.CacheOptions{Reader: mgr.GetCache(), DisableFor: []client.Object{&corev1.Namespace{}}}})
	if err != nil {
		return err
	}
	wh := &Webhook{Client: whClient, Management: i.opts.Management}
	srv.Register(MutatePath, admission.WithDefaulter[*convoy.TrainingJob](mgr.GetScheme(), wh))
	srv.Register(ValidatePath, admission.WithValidator[*convoy.TrainingJob](mgr.GetScheme(), wh))
	srv.Register(PlacementPath, admission.WithValidator[*convoy.TrainingJob](mgr.GetScheme(), PlacementWebhook{}))
	srv.Register(ChildrenPath, admission.WithValidator[*convoy.TrainingJob](mgr.GetScheme(), ChildrenWebhook{Client: mgr.GetClient()}))
	srv.Register(GatePath, admission.WithDefaulter[*kueue.Workload](mgr.GetScheme(), GateWebhook{Client: mgr.GetClient()}))
	started := srv.StartedChecker()
	if i.opts.CertSecret == "" {
		files := newCertFiles(i.opts.WebhookCertDir)
		if err := mgr.Add(files); err != nil {
			return err
		}
		if err := mgr.Add(certGatedServer{Server: srv, ready: files.ready}); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("queue-webhook-certificate", files.Check); err != nil {
			return err
		}
	} else {
		ready, err := i.setupCertRotation(mgr)
		if err != nil {
			return err
		}
		if err := mgr.Add(certGatedServer{Server: srv, ready: ready}); err != nil {
			return err
		}
	}
	return mgr.AddReadyzCheck("queue-webhook", started)
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

// SetActive sets spec.active of the job's Workload. False makes Kueue evict the job, which
// suspends it and releases its quota, and keeps it from being admitted again; true queues it
// again. A sweep pauses and promotes its hyperband trials this way: a trial with a queue cannot
// be paused through spec.suspend, which Kueue reverts while the Workload is admitted.
func (i *Integration) SetActive(ctx context.Context, job *convoy.TrainingJob, active bool) error {
	wls := &kueue.WorkloadList{}
	if err := i.client.List(ctx, wls, client.InNamespace(job.Namespace),
		client.MatchingFields{jobframework.OwnerReferenceIndexKey(GVK): job.Name}); err != nil {
		return err
	}
	found := false
	for j := range wls.Items {
		wl := &wls.Items[j]
		if !metav1.IsControlledBy(wl, job) {
			continue
		}
		found = true
		if ptr.Deref(wl.Spec.Active, true) == active {
			continue
		}
		patch := client.MergeFrom(wl.DeepCopy())
		wl.Spec.Active = ptr.To(active)
		if err := i.client.Patch(ctx, wl, patch); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("TrainingJob %s/%s has no Workload yet", job.Namespace, job.Name)
	}
	return nil
}
