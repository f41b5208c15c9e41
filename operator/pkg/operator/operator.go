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

// Package operator wires the TrainingJob and TrainingSweep reconcilers and the progress endpoint into a
// controller-runtime manager. The binary's main and the integration tests share it, so the tests
// run the operator as it is deployed.
package operator

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/controller"
	"github.com/convoy-dev/convoy/operator/pkg/cost"
	"github.com/convoy-dev/convoy/operator/pkg/metrics"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	"github.com/convoy-dev/convoy/operator/pkg/sweep"
)

// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=convoy-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Options configure the operator. The zero value of a field takes the default in Defaults.
type Options struct {
	// Namespace is the operator's own namespace: its leader-election Lease and progress certificate live there.
	Namespace string
	// MetricsAddr and ProbeAddr are the manager's metrics and health endpoints; "0" disables one.
	MetricsAddr string
	ProbeAddr   string
	// PprofAddr serves Go's /debug/pprof profiles over plain HTTP; "" (the default) serves none.
	PprofAddr string
	// InsecureMetrics serves the metrics over plain HTTP to anyone. By default they are served over
	// HTTPS (a self-signed certificate) to callers whose bearer token the API server authenticates
	// and authorizes for GET /metrics, as kube-scheduler's are.
	InsecureMetrics bool
	// LeaderElection makes one replica reconcile at a time.
	LeaderElection   bool
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election (controller-runtime's
	// 15 s, 10 s and 2 s when zero): a standby takes over at most LeaseDuration plus RetryPeriod
	// after a leader dies without releasing its Lease.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ProgressAddr is where the progress endpoint listens, unless ProgressListener is given.
	ProgressAddr     string
	ProgressListener net.Listener
	// ProgressURL is the endpoint's address as pods reach it.
	ProgressURL string
	// ProgressCertDir holds tls.crt, tls.key and ca.crt for the endpoint; when empty the operator
	// keeps a self-signed certificate in the Secret ProgressSecret.
	ProgressCertDir string
	ProgressSecret  string
	// MaxConcurrentReconciles is how many jobs are reconciled at once.
	MaxConcurrentReconciles int
	// JobNetworkPolicy gives every job a NetworkPolicy that lets its pods accept connections only
	// from its own gang (builder.NetworkPolicy).
	JobNetworkPolicy bool
	// DisruptionBudget gives every job a PodDisruptionBudget that makes the Eviction API refuse to
	// evict its running gang (builder.DisruptionBudget), so that kubectl drain waits while the gang
	// checkpoints and moves off the cordoned node. It needs a cordon to be a notice: with
	// ReclaimNotice.IgnoreCordon no job gets one, since nothing would move the gang.
	DisruptionBudget bool
	// PublishImage is the image of the pod that publishes a completed job's model (the operator's
	// own, which has `convoy-operator publish`). Empty: the image of the operator's pod PodName.
	PublishImage string
	// PodName is the operator's own pod in Namespace ($POD_NAME), whose image PublishImage defaults to.
	PodName string
	// PlainHTTPRegistries are the registries (host[:port]) publish pods push to over plain HTTP:
	// the platform's, as containerd's registry configuration names them, never a job's choice.
	PlainHTTPRegistries []string
	// PriceList is the ConfigMap in Namespace with the administrator's prices (cost.DefaultPriceList
	// when empty); "-" prices nothing.
	PriceList string
	// Backoff spaces gang restarts after failures.
	Backoff controller.Backoff
	// ReclaimNotice says which node taints and conditions announce a node's removal: the gangs
	// there checkpoint and move first. controller.DefaultReclaimNotice when zero.
	ReclaimNotice controller.ReclaimNotice
	// SpotNodeLabels mark spot nodes, builder.Options.SpotNodeLabels.
	SpotNodeLabels []convoy.SpotNodeLabel
	// WrapClient, when set, wraps the reconciler's client; tests use it to interrupt the operator.
	WrapClient func(client.Client) client.Client
	// SkipNameValidation lets one process start the operator more than once, as tests do.
	SkipNameValidation bool
	// S3Presign, when set, are the S3 credentials, endpoint and region with which the progress
	// endpoint signs URLs for the pods of jobs with spec.checkpoint.storage.s3Access presigned.
	S3Presign *aws.Config
	// AzurePresign, when set, is the storage account whose key signs SAS for the pods of jobs with
	// spec.checkpoint.storage.azureAccess presigned.
	AzurePresign *progress.AzureAccount
	// GCSPresign, when set, is the service account whose key signs GCS URLs for the pods of jobs
	// with spec.checkpoint.storage.gcsAccess presigned.
	GCSPresign *progress.GCSAccount
	// Queue reports what the queueing system says of jobs that name a queue; a ManagedQueue (the
	// Kueue integration in queue/) also runs its controllers and webhook in the manager. Nil leaves
	// queued jobs with generic messages.
	Queue controller.Queue
}

// Defaults are the Options of a deployed operator.
var Defaults = Options{
	Namespace:               "convoy-system",
	MetricsAddr:             ":8443",
	ProbeAddr:               ":8081",
	LeaderElectionID:        "convoy-operator.convoy.dev",
	ProgressAddr:            ":9443",
	ProgressURL:             "https://convoy-operator.convoy-system.svc:9443",
	ProgressSecret:          "convoy-operator-progress-tls",
	PriceList:               cost.DefaultPriceList,
	MaxConcurrentReconciles: 16,
	Backoff:                 controller.DefaultBackoff,
	DisruptionBudget:        true,
	JobNetworkPolicy:        true,
}

// Scheme has every type the operator reads or writes.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, convoy.AddToScheme, schedv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// New returns a manager running the TrainingJob controller and the progress endpoint.
func New(ctx context.Context, cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	applyDefaults(&opts)
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	progressURL, err := url.Parse(opts.ProgressURL)
	if err != nil || progressURL.Scheme != "https" || progressURL.Hostname() == "" {
		return nil, fmt.Errorf("progress URL %q must be an https URL with a host", opts.ProgressURL)
	}
	cert, err := progressCertificate(ctx, cfg, scheme, opts, progressURL.Hostname())
	if err != nil {
		return nil, err
	}
	tlsConfig, err := cert.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("progress certificate: %w", err)
	}

	workloadAPI, err := ServesWorkloadAPI(cfg)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  controller.CacheOptions(opts.ReclaimNotice, workloadAPI),
		// The scheduling.k8s.io/v1beta1 Workloads and PodGroups are unstructured (builder.WorkloadGVK).
		Client:                        client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:                       metricsOptions(opts),
		HealthProbeBindAddress:        opts.ProbeAddr,
		PprofBindAddress:              opts.PprofAddr,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 nonZero(opts.LeaseDuration),
		RenewDeadline:                 nonZero(opts.RenewDeadline),
		RetryPeriod:                   nonZero(opts.RetryPeriod),
		Controller:                    config.Controller{SkipNameValidation: ptr.To(opts.SkipNameValidation)},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if opts.ProgressCertDir != "" {
		// A certificate from a directory (cert-manager's Secret, mounted) is reloaded when it rotates.
		watcher, err := certwatcher.New(filepath.Join(opts.ProgressCertDir, "tls.crt"), filepath.Join(opts.ProgressCertDir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("progress certificate: %w", err)
		}
		tlsConfig.Certificates, tlsConfig.GetCertificate = nil, watcher.GetCertificate
		if err := mgr.Add(watcher); err != nil { // on every replica: it needs no leader election
			return nil, err
		}
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}

	recorder := eventRecorder{mgr.GetEventRecorder("convoy-operator")}
	c := mgr.GetClient()
	if opts.WrapClient != nil {
		c = opts.WrapClient(c)
	}
	var prices *cost.Book
	if opts.PriceList != "-" {
		book, priceCache, err := cost.NewBook(ctx, mgr, cfg, types.NamespacedName{Namespace: opts.Namespace, Name: opts.PriceList})
		if err != nil {
			return nil, err
		}
		pl := &cost.PriceListReconciler{Book: book, Recorder: recorder}
		if err := pl.SetupWithManager(mgr, priceCache); err != nil {
			return nil, err
		}
		prices = book
	}
	r := &controller.Reconciler{
		Client:    c,
		APIReader: mgr.GetAPIReader(),
		Recorder:  recorder,
		Metrics:   metrics.NewRecorder(),
		Options: builder.Options{ProgressURL: opts.ProgressURL, ProgressCA: cert.CAPEM, JobNetworkPolicy: opts.JobNetworkPolicy,
			DisruptionBudget: opts.DisruptionBudget && !opts.ReclaimNotice.IgnoreCordon, PublishImage: publishImage(ctx, mgr.GetAPIReader(), opts),
			SpotNodeLabels: opts.SpotNodeLabels, WorkloadAPI: workloadAPI, PlainHTTPRegistries: opts.PlainHTTPRegistries},
		Backoff: opts.Backoff,
		Queue:   opts.Queue,
		Notice:  opts.ReclaimNotice,
		Prices:  prices,
	}
	if err := r.SetupWithManager(ctx, mgr, opts.MaxConcurrentReconciles); err != nil {
		return nil, err
	}

	sweeps := &sweep.Reconciler{Client: c, Recorder: eventRecorder{mgr.GetEventRecorder(sweep.Name)}}
	if w, ok := opts.Queue.(sweep.WorkloadActivator); ok {
		sweeps.Workloads = w
	}
	if err := sweeps.SetupWithManager(mgr); err != nil {
		return nil, err
	}

	listener := opts.ProgressListener
	if listener == nil {
		if listener, err = net.Listen("tcp", opts.ProgressAddr); err != nil {
			return nil, fmt.Errorf("progress endpoint: %w", err)
		}
	}
	if err := mgr.Add(&progress.Server{Listener: listener, TLS: tlsConfig, Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		CheckpointURI: builder.CheckpointURI, AttemptCheckpointURI: builder.AttemptCheckpointURI, S3Presign: opts.S3Presign, AzurePresign: opts.AzurePresign, GCSPresign: opts.GCSPresign, Recorder: recorder}); err != nil {
		return nil, err
	}
	return mgr, nil
}

func applyDefaults(o *Options) {
	d := Defaults
	or := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	or(&o.Namespace, d.Namespace)
	or(&o.MetricsAddr, d.MetricsAddr)
	or(&o.ProbeAddr, d.ProbeAddr)
	or(&o.LeaderElectionID, d.LeaderElectionID)
	or(&o.ProgressAddr, d.ProgressAddr)
	or(&o.ProgressURL, d.ProgressURL)
	or(&o.ProgressSecret, d.ProgressSecret)
	or(&o.PriceList, d.PriceList)
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = d.MaxConcurrentReconciles
	}
	if o.Backoff == (controller.Backoff{}) {
		o.Backoff = d.Backoff
	}
}

// progressCertificate loads the endpoint's certificate from its directory or, without one, from
// the Secret shared by the replicas, read before the manager's cache exists.
func progressCertificate(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts Options, host string) (*progress.Certificate, error) {
	if opts.ProgressCertDir != "" {
		return progress.LoadCertificate(opts.ProgressCertDir)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return progress.EnsureCertificate(ctx, c, opts.Namespace, opts.ProgressSecret, host)
}

// nonZero is d, or nil (the manager's default) when d is zero.
func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

// metricsOptions serve the metrics as Options say: by default over HTTPS, to callers the API
// server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview).
func metricsOptions(opts Options) metricsserver.Options {
	if opts.InsecureMetrics {
		return metricsserver.Options{BindAddress: opts.MetricsAddr}
	}
	return metricsserver.Options{BindAddress: opts.MetricsAddr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
}

// publishImage is opts.PublishImage, else the image the operator's own pod runs (by digest where
// the kubelet reported one), else "" (publishing then fails, saying why).
func publishImage(ctx context.Context, r client.Reader, opts Options) string {
	if opts.PublishImage != "" || opts.PodName == "" {
		return opts.PublishImage
	}
	pod := &corev1.Pod{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.PodName}, pod); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Reading the operator's own pod for its image; models cannot be published without --publish-image")
		return ""
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == pod.Spec.Containers[0].Name && strings.Contains(c.ImageID, "@sha256:") {
			return c.ImageID // the very image running, whatever its tag points at later
		}
	}
	return pod.Spec.Containers[0].Image
}

// ServesWorkloadAPI reports whether the API server serves Kubernetes' own gang API, the Workloads
// and PodGroups of scheduling.k8s.io/v1beta1 (Kubernetes 1.37 with the GenericWorkload feature gate
// and that version in --runtime-config). The operator asks once, at start.
func ServesWorkloadAPI(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	gv := builder.PodGroupGVK.GroupVersion().String()
	list, err := dc.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gv, err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Kind] = true
	}
	return served[builder.WorkloadGVK.Kind] && served[builder.PodGroupGVK.Kind], nil
}
