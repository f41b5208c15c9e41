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

// Command convoy-operator runs Convoy's TrainingJob operator: the TrainingJob controller and the
// progress endpoint training code reports to. LOG_LEVEL sets the log level: debug, info (the
// default), error, or a number of verbosity levels.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"go.uber.org/zap/zapcore"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/controller"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	"github.com/convoy-dev/convoy/operator/pkg/publish"
	"github.com/convoy-dev/convoy/queue"
)

func main() {
	// The publish pod of a completed job with spec.output.model runs this image as
	// `convoy-operator publish`.
	if len(os.Args) > 1 && os.Args[1] == "publish" {
		ctx := ctrl.SetupSignalHandler()
		os.Exit(publish.Main(ctx, os.Args[2:], os.Stdout, os.Stderr))
	}
	opts := operator.Defaults
	opts.Namespace = cmp.Or(os.Getenv("POD_NAMESPACE"), opts.Namespace)
	var qps float64
	var burst int
	flag.StringVar(&opts.Namespace, "namespace", opts.Namespace, "The operator's namespace, for its leader-election Lease and progress certificate Secret (default $POD_NAMESPACE).")
	flag.StringVar(&opts.MetricsAddr, "metrics-bind-address", opts.MetricsAddr, "Address of the Prometheus metrics endpoint; 0 disables it.")
	flag.BoolVar(&opts.JobNetworkPolicy, "job-network-policy", opts.JobNetworkPolicy, "Give every TrainingJob a NetworkPolicy <job> that lets its pods accept connections only from its own gang (and rank 0's metrics port from anywhere); it takes effect with a CNI that enforces NetworkPolicy. false: pods accept connections from anywhere.")
	metricsSecure := flag.Bool("metrics-secure", true, "Serve the metrics over HTTPS to callers the API server authenticates and authorizes for GET /metrics; false serves plain HTTP to anyone.")
	flag.StringVar(&opts.ProbeAddr, "health-probe-bind-address", opts.ProbeAddr, "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&opts.PprofAddr, "pprof-bind-address", opts.PprofAddr, "Address of Go's /debug/pprof profiles, served over plain HTTP to anyone (bind it to 127.0.0.1); empty serves none.")
	flag.BoolVar(&opts.LeaderElection, "leader-elect", true, "Elect a leader so that one replica reconciles at a time.")
	flag.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits, after the leader's last renewal, before it takes the Lease.")
	flag.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew its Lease before it stops leading.")
	flag.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "How often the replicas try to take or renew the Lease.")
	flag.StringVar(&opts.ProgressAddr, "progress-bind-address", opts.ProgressAddr, "Address of the HTTPS progress endpoint.")
	flag.StringVar(&opts.ProgressURL, "progress-url", opts.ProgressURL, "URL of the progress endpoint as pods reach it (its Service).")
	flag.StringVar(&opts.ProgressCertDir, "progress-cert-dir", "", "Directory with tls.crt, tls.key and ca.crt for the progress endpoint; empty keeps a self-signed certificate in a Secret.")
	flag.StringVar(&opts.ProgressSecret, "progress-secret", opts.ProgressSecret, "Secret in --namespace holding the self-signed progress certificate.")
	flag.StringVar(&opts.PublishImage, "publish-image", "", "Image of the pod that publishes a completed job's spec.output.model (it runs `convoy-operator publish`); empty: the operator's own image, read from its pod $POD_NAME.")
	plainHTTP := flag.String("plain-http-registries", "", "Comma-separated registries (host[:port], as in spec.output.model.image) that publish pods push to over plain HTTP instead of HTTPS, as containerd's registry configuration names them. Empty: every push uses HTTPS.")
	flag.StringVar(&opts.PriceList, "price-list", opts.PriceList, "ConfigMap in --namespace with the prices of GPUs, CPU and memory that status.cost and spec.budget use (docs/operations.md); - prices nothing.")
	opts.PodName = os.Getenv("POD_NAME")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", opts.MaxConcurrentReconciles, "TrainingJobs reconciled at once.")
	flag.Float64Var(&qps, "kube-api-qps", 100, "Sustained requests per second to the API server.")
	flag.IntVar(&burst, "kube-api-burst", 200, "Burst of requests to the API server.")
	kueue := flag.String("kueue", "auto", "Run TrainingJobs that name a queue through Kueue: true, false, or auto (when the API server serves Kueue's Workloads).")
	var queueOpts queue.Options
	flag.StringVar(&queueOpts.WebhookAddr, "queue-webhook-bind-address", queue.DefaultWebhookAddr, "Address of the TrainingJob admission webhook that keeps queued jobs suspended until Kueue admits them.")
	flag.StringVar(&queueOpts.WebhookCertDir, "queue-webhook-cert-dir", "", "Directory with the webhook's tls.crt and tls.key (default /tmp/k8s-webhook-server/serving-certs).")
	flag.StringVar(&queueOpts.CertSecret, "queue-webhook-cert-secret", "", "Secret in --namespace where the operator keeps the webhook's CA and certificate itself and injects the CA into the webhook configurations; mount it at --queue-webhook-cert-dir. Empty: the certificate comes from elsewhere (cert-manager).")
	flag.StringVar(&queueOpts.WebhookClientCA, "queue-webhook-client-ca", "", "File of CA certificates: the webhook then accepts only callers with a client certificate they signed, the API server given one by its admission configuration (queue/README.md). Empty: any caller that reaches the port.")
	flag.StringVar(&queueOpts.WebhookService, "queue-webhook-service", queue.DefaultWebhookService, "Service in --namespace in front of the webhook, whose DNS name the managed certificate is for.")
	flag.BoolVar(&queueOpts.WaitForPodsReady, "kueue-wait-for-pods-ready", false, "Report the gang's readiness to Kueue; set it when Kueue's configuration sets waitForPodsReady.")
	flag.BoolVar(&queueOpts.Management.WithoutQueueName, "kueue-manage-jobs-without-queue-name", false, "TrainingJobs that name no queue are Kueue's too, in the namespaces --kueue-managed-jobs-namespace-selector selects: they wait for the namespace's LocalQueue \"default\". Set it as Kueue's configuration sets manageJobsWithoutQueueName.")
	nsSelector := flag.String("kueue-managed-jobs-namespace-selector", "", "Label selector of the namespaces where --kueue-manage-jobs-without-queue-name applies (e.g. convoy.dev/team); empty: every namespace. Set it as Kueue's configuration sets managedJobsNamespaceSelector.")
	kueueGates := flag.String("kueue-feature-gates", "", "Kueue feature gates for Kueue's job reconciler in the operator, as Kueue's configuration sets featureGates (e.g. ManagedJobsNamespaceSelectorAlwaysRespected=false).")
	var kueueQPS float64
	flag.Float64Var(&kueueQPS, "kueue-api-qps", 50, "Sustained requests per second of Kueue's job reconciler, apart from --kube-api-qps.")
	flag.IntVar(&queueOpts.Burst, "kueue-api-burst", 100, "Burst of requests of Kueue's job reconciler.")
	noticeTaints := flag.String("reclaim-notice-taints", strings.Join(convoy.DefaultReclaimNoticeTaints, ","), "Comma-separated node taint keys that announce a node's removal (a spot interruption, a provisioner's disruption): every gang with a pod on such a node checkpoints and moves first, without spending backoffLimit. Empty: none.")
	noticeConditions := flag.String("reclaim-notice-conditions", "", "Comma-separated node condition types that announce a node's removal while True, as --reclaim-notice-taints does.")
	cordonNotice := flag.Bool("cordon-is-notice", true, "A cordoned node (kubectl cordon or drain) is a notice too: its gangs checkpoint and move off it. false: gangs stay on cordoned nodes.")
	flag.Func("spot-node-label", "A node label key=value that marks spot nodes, default "+convoy.DefaultSpotNodeLabel.String()+" (Karpenter's); repeat it for more. spec.scheduling.capacity spot selects the first, as deploy/queue's spot flavors must; on-demand excludes each; status.cost prices a node with one as spot.", func(s string) error {
		l, err := convoy.ParseSpotNodeLabel(s)
		opts.SpotNodeLabels = append(opts.SpotNodeLabels, l)
		return err
	})
	flag.BoolVar(&opts.DisruptionBudget, "gang-disruption-budget", opts.DisruptionBudget, "Give every TrainingJob a PodDisruptionBudget <job> that refuses evictions of its running gang, so that kubectl drain waits while the gang checkpoints and moves off the cordoned node. false: drains evict the gang at once. Ignored with --cordon-is-notice=false.")
	s3Presign := flag.Bool("s3-presign", false, "Sign S3 URLs for the pods of TrainingJobs with spec.checkpoint.storage.s3Access presigned, each for its own prefix, with the operator's own S3 credentials, endpoint and region (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from a Secret in its namespace, or its own workload identity; AWS_ENDPOINT_URL, AWS_REGION).")
	azurePresign := flag.Bool("azure-presign", false, "Sign Azure Blob SAS for the pods of TrainingJobs with spec.checkpoint.storage.azureAccess presigned, each for its own prefix, with the operator's own storage account key (AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY from a Secret in its namespace; AZURE_STORAGE_BLOB_ENDPOINT for another endpoint than the account's).")
	gcsPresign := flag.Bool("gcs-presign", false, "Sign GCS V4 URLs for the pods of TrainingJobs with spec.checkpoint.storage.gcsAccess presigned, each for its own prefix, with the operator's own service account key (the JSON key file GOOGLE_APPLICATION_CREDENTIALS names, from a Secret in its namespace; STORAGE_EMULATOR_HOST for an emulator).")
	flag.Parse()
	opts.ReclaimNotice = controller.ReclaimNotice{Taints: commaList(*noticeTaints), Conditions: commaList(*noticeConditions), IgnoreCordon: !*cordonNotice}
	opts.InsecureMetrics = !*metricsSecure
	opts.PlainHTTPRegistries = commaList(*plainHTTP)
	queueOpts.MaxConcurrentReconciles = opts.MaxConcurrentReconciles
	queueOpts.Namespace = opts.Namespace
	queueOpts.QPS = float32(kueueQPS)
	var err error
	if queueOpts.Management.NamespaceSelector, err = queue.ParseNamespaceSelector(*nsSelector); err != nil {
		fmt.Fprintln(os.Stderr, "--kueue-managed-jobs-namespace-selector:", err)
		os.Exit(2)
	}
	if err := utilfeature.DefaultMutableFeatureGate.Set(*kueueGates); err != nil {
		fmt.Fprintln(os.Stderr, "--kueue-feature-gates:", err)
		os.Exit(2)
	}

	level, err := logLevel(os.Getenv("LOG_LEVEL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.Level(level)))
	log := ctrl.Log.WithName("setup")

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(qps), burst
	ctx := ctrl.SetupSignalHandler()
	if *s3Presign {
		c, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			log.Error(err, "Loading the S3 credentials for --s3-presign")
			os.Exit(2)
		}
		opts.S3Presign = &c
	}
	if *azurePresign {
		opts.AzurePresign = &progress.AzureAccount{Name: os.Getenv("AZURE_STORAGE_ACCOUNT"), Key: os.Getenv("AZURE_STORAGE_KEY"),
			BlobEndpoint: os.Getenv("AZURE_STORAGE_BLOB_ENDPOINT")}
		if opts.AzurePresign.Name == "" || opts.AzurePresign.Key == "" {
			log.Error(errors.New("AZURE_STORAGE_ACCOUNT or AZURE_STORAGE_KEY is empty"), "Loading the Azure account for --azure-presign")
			os.Exit(2)
		}
	}
	if *gcsPresign {
		key, err := os.ReadFile(os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"))
		if err != nil {
			log.Error(err, "Reading the service account key GOOGLE_APPLICATION_CREDENTIALS names for --gcs-presign")
			os.Exit(2)
		}
		opts.GCSPresign = &progress.GCSAccount{KeyJSON: key, Endpoint: os.Getenv("STORAGE_EMULATOR_HOST")}
		if e := opts.GCSPresign.Endpoint; e != "" && !strings.Contains(e, "://") {
			opts.GCSPresign.Endpoint = "http://" + e // host:port, as the Google clients read it
		}
	}
	withKueue, err := useKueue(*kueue, cfg)
	if err != nil {
		log.Error(err, "Deciding whether to use Kueue")
		os.Exit(2)
	}
	if withKueue {
		opts.Queue = queue.New(queueOpts)
	}
	mgr, err := operator.New(ctx, cfg, opts)
	if err != nil {
		log.Error(err, "Setting up the operator")
		os.Exit(1)
	}
	log.Info("Starting the operator", "progressURL", opts.ProgressURL, "leaderElection", opts.LeaderElection, "kueue", withKueue)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Running the operator")
		os.Exit(1)
	}
}

// commaList splits a comma-separated flag value, dropping empty items; never nil, so that an empty
// flag means none rather than the defaults.
func commaList(s string) []string {
	out := []string{}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// logLevel parses LOG_LEVEL, in any case: debug, info, warn, error, or a verbosity N (log.V(N)
// lines show).
func logLevel(s string) (zapcore.Level, error) {
	switch s = strings.ToLower(strings.TrimSpace(s)); s {
	case "", "info":
		return zapcore.InfoLevel, nil
	case "debug":
		return zapcore.DebugLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return zapcore.Level(-n), nil
	}
	return 0, fmt.Errorf("LOG_LEVEL=%q: use debug, info, warn, error or a verbosity number such as 2", s)
}

// useKueue parses --kueue; auto asks the API server whether Kueue is installed.
func useKueue(flagValue string, cfg *rest.Config) (bool, error) {
	switch flagValue {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "auto":
		return queue.KueueInstalled(cfg)
	}
	return false, fmt.Errorf("--kueue=%q: use true, false or auto", flagValue)
}
