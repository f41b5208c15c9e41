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
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of the control-plane processes, as StartProcess knows them and as their logs are named.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Kwok              = "kwok"
	// DefaultScheduler is the control plane's kube-scheduler, which a cluster with real nodes runs
	// as default-scheduler for the pods that name no scheduler.
	DefaultScheduler = "kube-scheduler"
)

// ServiceClusterIPRange is the cluster's Service address range.
const ServiceClusterIPRange = "10.0.0.0/24"

// PodCIDR is the range kwok gives fake pods their addresses from.
const PodCIDR = "10.244.0.1/16"

// DefaultStartTimeout bounds Start when Options.StartTimeout is zero.
const DefaultStartTimeout = 2 * time.Minute

// Options configure Start. The zero value is a complete cluster in a temporary directory.
type Options struct {
	// StateDir holds certificates, kubeconfigs, etcd's data and the component logs. When empty,
	// Start creates a temporary directory that Stop removes. When set, Start replaces what it
	// owns there from an earlier run and Stop leaves it in place.
	StateDir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kwok. When empty, DefaultBinDir.
	BinDir string
	// ControlPlaneBinDir, when set, holds the kube-apiserver and kube-controller-manager to run
	// instead of BinDir's. When empty, $CONVOY_CONTROL_PLANE_BIN (EnvControlPlaneBin).
	ControlPlaneBinDir string
	// AddToScheme registers more API types (Convoy's, Kueue's) with the Client's scheme, which
	// always has client-go's types and apiextensions/v1.
	AddToScheme []func(*runtime.Scheme) error
	// APIServerArgs, ControllerManagerArgs and KwokArgs are appended to each component's default
	// flags; a repeated flag overrides the default.
	APIServerArgs         []string
	ControllerManagerArgs []string
	KwokArgs              []string
	// WithoutKwok leaves kwok out, for callers whose nodes are plain Node objects that no kwok
	// manages. kwok watches every bound pod whether or not it manages the pod's node, and each
	// time the API server drops that watch as too slow, kwok watches again from resourceVersion 0
	// and is sent every bound pod anew: under a burst of bindings that costs the API server more
	// than the bindings themselves.
	WithoutKwok bool
	// WithoutControllerManager leaves kube-controller-manager out, for callers that run no pods
	// and need no controllers: no namespace gets a default ServiceAccount, so pods are refused.
	// It spares the test on a GPU machine carrying a binary it does not use.
	WithoutControllerManager bool
	// RealNodes prepares the cluster for real nodes (StartRealNode): it creates NodeBridge, and the
	// API server also listens on NodeGatewayIP, advertises it in the kubernetes Service, and reaches
	// kubelets by their InternalIP with a client certificate; kube-scheduler runs as the cluster's
	// default-scheduler, for the Deployments of an in-cluster install; a node that stops renewing
	// its Lease is NotReady after 20 s (node-monitor-grace-period), not 40 s. It needs root.
	RealNodes bool
	// WorkloadAPI serves Kubernetes' own gang API, the Workloads and PodGroups of
	// scheduling.k8s.io/v1beta1 (its version in --runtime-config, the GenericWorkload feature gate
	// on the API server and the controller manager), on a 1.37 control plane; 1.36 has none.
	WorkloadAPI bool
	// StartTimeout bounds Start; DefaultStartTimeout when zero.
	StartTimeout time.Duration
	// Log receives a line per component as it becomes ready; nil discards them.
	Log io.Writer
}

// Cluster is a running local control plane: etcd, kube-apiserver, kube-controller-manager and
// kwok, each a child process that Stop ends. Its methods are safe for concurrent use.
type Cluster struct {
	// StateDir holds pki/, kubeconfigs/, etcd/ and logs/ (one <process>.log per process).
	StateDir string
	// BinDir is where the control-plane binaries came from; StartProcess looks there first.
	BinDir string
	// ControlPlaneBinDir is where kube-apiserver and kube-controller-manager came from: BinDir
	// unless Options.ControlPlaneBinDir or $CONVOY_CONTROL_PLANE_BIN named another.
	ControlPlaneBinDir string
	// KubeconfigPath is an admin (system:masters) kubeconfig, <StateDir>/kubeconfig.
	KubeconfigPath string
	// RESTConfig is the admin configuration, with client-side rate limits raised for tests.
	RESTConfig *rest.Config
	// Scheme is the Client's scheme.
	Scheme *runtime.Scheme
	// Client is an admin controller-runtime client.
	Client client.Client
	// Clientset is an admin client-go clientset.
	Clientset kubernetes.Interface

	pki            *pki
	removeStateDir bool
	// apiPort is the API server's secure port; realNodes says it also listens on NodeGatewayIP.
	apiPort   int
	realNodes bool
	// cleanups run after Stop has ended every process, last added first.
	cleanups []func() error

	mu      sync.Mutex
	procs   map[string]*proc
	order   []*proc
	ended   map[string]*proc // by name, the last process StopProcess or KillProcess ended
	stopped bool
}

// Start starts a control plane and waits until it is ready: the API server answers /readyz, the
// controller manager /healthz and the default ServiceAccount exists, so pods can be created (unless
// opts.WithoutControllerManager), and kwok runs (unless opts.WithoutKwok). ctx bounds only the start; the processes run until Stop. On error
// everything started is stopped again and the error quotes the end of the failing component's log.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	began := time.Now()
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	if opts.BinDir == "" {
		if opts.BinDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	if opts.ControlPlaneBinDir == "" {
		opts.ControlPlaneBinDir = os.Getenv(EnvControlPlaneBin)
	}
	if opts.ControlPlaneBinDir == "" {
		opts.ControlPlaneBinDir = opts.BinDir
	} else if opts.ControlPlaneBinDir, err = filepath.Abs(opts.ControlPlaneBinDir); err != nil {
		return nil, err
	}
	binaries, controlPlane := []string{Etcd}, []string{APIServer}
	if !opts.WithoutControllerManager {
		controlPlane = append(controlPlane, ControllerManager)
	}
	if !opts.WithoutKwok {
		binaries = append(binaries, Kwok)
	}
	if err := CheckBinaries(opts.BinDir, binaries...); err != nil {
		return nil, err
	}
	if err := CheckBinaries(opts.ControlPlaneBinDir, controlPlane...); err != nil {
		return nil, err
	}
	c = &Cluster{BinDir: opts.BinDir, ControlPlaneBinDir: opts.ControlPlaneBinDir, procs: map[string]*proc{}}
	if opts.StateDir == "" {
		if c.StateDir, err = os.MkdirTemp("", "convoy-cluster-"); err != nil {
			return nil, err
		}
		c.removeStateDir = true
	} else {
		if c.StateDir, err = filepath.Abs(opts.StateDir); err != nil {
			return nil, err
		}
		running, err := RunningProcesses(c.StateDir)
		if err != nil {
			return nil, err
		}
		if len(running) > 0 {
			return nil, fmt.Errorf("a cluster still runs in %s (%s pid %d): stop it first", c.StateDir, running[0].Name, running[0].Pid)
		}
		if err := resetStateDir(c.StateDir); err != nil {
			return nil, err
		}
	}
	c.KubeconfigPath = filepath.Join(c.StateDir, "kubeconfig")
	defer func() {
		if err != nil {
			// Keep the logs of a failed start: the error quotes only their end.
			c.removeStateDir = false
			_ = c.Stop()
			err = fmt.Errorf("starting the local control plane (state and logs in %s): %w", c.StateDir, err)
			c = nil
		}
	}()

	if err := c.start(ctx, opts, logw); err != nil {
		return c, err
	}
	version, err := c.Clientset.Discovery().ServerVersion()
	if err != nil {
		return c, err
	}
	fmt.Fprintf(logw, "Control plane (Kubernetes %s, %s) ready in %.1fs; KUBECONFIG=%s\n",
		version.GitVersion, c.ControlPlaneBinDir, time.Since(began).Seconds(), c.KubeconfigPath)
	return c, nil
}

func (c *Cluster) start(ctx context.Context, opts Options, logw io.Writer) error {
	var err error
	pkiDir := filepath.Join(c.StateDir, "pki")
	if c.pki, err = newPKI(pkiDir, "ca"); err != nil {
		return err
	}
	// The aggregation layer's CA: kube-apiserver proxies to extension API servers with a client
	// certificate from it, and they trust the user headers of requests that carry one.
	frontProxyCA, err := newPKI(pkiDir, "front-proxy-ca")
	if err != nil {
		return err
	}
	frontProxy, err := frontProxyCA.client("front-proxy-client", "front-proxy-client")
	if err != nil {
		return err
	}
	serving, err := c.pki.serving(APIServer)
	if err != nil {
		return err
	}
	admin, err := c.pki.client("admin", "convoy-admin", "system:masters")
	if err != nil {
		return err
	}
	kcm, err := c.pki.client(ControllerManager, "system:kube-controller-manager")
	if err != nil {
		return err
	}
	kwok, err := c.pki.client(Kwok, "kwok", "system:masters")
	if err != nil {
		return err
	}
	saKey, saPub, err := c.pki.serviceAccountKey()
	if err != nil {
		return err
	}
	ports, err := FreePorts(6)
	if err != nil {
		return err
	}
	etcdPort, etcdPeerPort, apiPort, kcmPort, kwokPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	apiURL := "https://" + hostPort(apiPort)
	c.apiPort = apiPort

	began := time.Now()
	etcdURL := "http://" + hostPort(etcdPort)
	peerURL := "http://" + hostPort(etcdPeerPort)
	if err := c.StartProcess(Etcd, Etcd, []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.StateDir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		// A test cluster's data need not survive a power cut; fsync dominates etcd's latency.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}, nil); err != nil {
		return err
	}
	if err := c.WaitHealthy(ctx, Etcd, etcdURL+"/health"); err != nil {
		return err
	}
	fmt.Fprintf(logw, "etcd ready at %s (%.1fs)\n", etcdURL, time.Since(began).Seconds())

	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir=" + filepath.Join(c.StateDir, APIServer),
		"--client-ca-file=" + c.pki.caFile(),
		"--tls-cert-file=" + serving.certFile,
		"--tls-private-key-file=" + serving.keyFile,
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--authorization-mode=Node,RBAC",
		"--enable-aggregator-routing=true",
		"--requestheader-client-ca-file=" + frontProxyCA.caFile(),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + frontProxy.certFile,
		"--proxy-client-key-file=" + frontProxy.keyFile,
		"--allow-privileged=true",
		"--profiling=false",
	}
	if opts.RealNodes {
		kubeletClient, err := c.pki.client("kube-apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters")
		if err != nil {
			return err
		}
		if err := setupNodeBridge(ctx); err != nil {
			return err
		}
		c.realNodes = true
		c.addCleanup(func() error { teardownNodeNetwork(context.Background()); return nil })
		apiArgs = append(apiArgs,
			// Real nodes reach the API server on the bridge; pods through the kubernetes Service,
			// whose endpoint is the advertised address.
			"--bind-address=0.0.0.0",
			"--advertise-address="+NodeGatewayIP,
			"--kubelet-preferred-address-types=InternalIP",
			"--kubelet-client-certificate="+kubeletClient.certFile,
			"--kubelet-client-key="+kubeletClient.keyFile,
		)
	} else {
		apiArgs = append(apiArgs,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			// The default reconciler writes the advertise address into the kubernetes Endpoints and
			// complains every 10 s that it is a loopback address.
			"--endpoint-reconciler-type=none",
		)
	}
	workloadAPI, err := c.servesWorkloadAPI(ctx, opts)
	if err != nil {
		return err
	}
	if workloadAPI {
		apiArgs = append(apiArgs, "--runtime-config=scheduling.k8s.io/v1beta1=true", "--feature-gates=GenericWorkload=true")
	}
	if err := c.StartProcess(APIServer, filepath.Join(c.ControlPlaneBinDir, APIServer), append(apiArgs, opts.APIServerArgs...), nil); err != nil {
		return err
	}
	c.RESTConfig = &rest.Config{
		Host: apiURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.pki.caPEM,
			CertData: admin.certPEM,
			KeyData:  admin.keyPEM,
		},
		// Tests create fleets of nodes and pods in bursts; client-go's default of 5 QPS would
		// dominate their run time.
		QPS:   200,
		Burst: 400,
	}
	// As admin: anonymous requests are forbidden until the RBAC bootstrap policy is in place.
	adminTransport, err := rest.TransportFor(c.RESTConfig)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, APIServer, apiURL+"/readyz", adminTransport); err != nil {
		return err
	}
	fmt.Fprintf(logw, "kube-apiserver ready at %s (%.1fs)\n", apiURL, time.Since(began).Seconds())

	if err := writeCertKubeconfig(c.KubeconfigPath, apiURL, c.pki.caPEM, admin); err != nil {
		return err
	}
	if err := c.setupClients(opts.AddToScheme); err != nil {
		return err
	}
	kcmKubeconfig := filepath.Join(c.StateDir, "kubeconfigs", ControllerManager+".kubeconfig")
	kwokKubeconfig := filepath.Join(c.StateDir, "kubeconfigs", Kwok+".kubeconfig")
	if err := writeCertKubeconfig(kcmKubeconfig, apiURL, c.pki.caPEM, kcm); err != nil {
		return err
	}
	if err := writeCertKubeconfig(kwokKubeconfig, apiURL, c.pki.caPEM, kwok); err != nil {
		return err
	}

	kcmArgs := []string{
		"--kubeconfig=" + kcmKubeconfig,
		"--authentication-kubeconfig=" + kcmKubeconfig,
		"--authorization-kubeconfig=" + kcmKubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", kcmPort),
		"--cert-dir=" + filepath.Join(c.StateDir, ControllerManager),
		"--leader-elect=false",
		// Each controller acts as its own ServiceAccount with the bootstrap RBAC roles, as in a
		// kubeadm cluster.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + c.pki.caFile(),
		"--cluster-signing-cert-file=" + c.pki.caFile(),
		"--cluster-signing-key-file=" + c.pki.caKeyFile(),
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"--profiling=false",
	}
	if opts.RealNodes {
		// The lost-node stories measure Convoy from the NotReady on, and wait less for it.
		kcmArgs = append(kcmArgs, "--node-monitor-grace-period=20s")
	}
	if !opts.WithoutControllerManager {
		if workloadAPI {
			kcmArgs = append(kcmArgs, "--feature-gates=GenericWorkload=true")
		}
		if err := c.StartProcess(ControllerManager, filepath.Join(c.ControlPlaneBinDir, ControllerManager), append(kcmArgs, opts.ControllerManagerArgs...), nil); err != nil {
			return err
		}
	}

	if opts.RealNodes {
		sched, err := c.pki.client(DefaultScheduler, "system:kube-scheduler")
		if err != nil {
			return err
		}
		schedKubeconfig := filepath.Join(c.StateDir, "kubeconfigs", DefaultScheduler+".kubeconfig")
		if err := writeCertKubeconfig(schedKubeconfig, apiURL, c.pki.caPEM, sched); err != nil {
			return err
		}
		if err := c.StartProcess(DefaultScheduler, DefaultScheduler, []string{
			"--kubeconfig=" + schedKubeconfig,
			"--authentication-kubeconfig=" + schedKubeconfig,
			"--authorization-kubeconfig=" + schedKubeconfig,
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", schedPort),
			"--leader-elect=false",
			"--profiling=false",
		}, nil); err != nil {
			return err
		}
	}

	if !opts.WithoutKwok {
		kwokArgs := []string{
			"--kubeconfig=" + kwokKubeconfig,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeAnnotationValue,
			"--cidr=" + PodCIDR,
			"--node-ip=127.0.0.1",
			// Renew node Leases, as a kubelet does, instead of rewriting node status for heartbeats.
			"--node-lease-duration-seconds=40",
			// kwok serves /healthz only when it has an address; the server starts after its controllers.
			"--server-address=" + hostPort(kwokPort),
		}
		kwokEnv := []string{
			// kwok reads ~/.kwok/kwok.yaml when it exists; point it at an empty directory instead.
			"KWOK_WORKDIR=" + filepath.Join(c.StateDir, Kwok),
		}
		if !slices.ContainsFunc(opts.KwokArgs, func(arg string) bool { return strings.HasPrefix(arg, "--config") }) {
			// kwok has no stages of its own: without a config it refuses to start.
			stages, err := KwokArgs(ctx)
			if err != nil {
				return err
			}
			kwokArgs = append(kwokArgs, stages...)
		}
		if err := c.StartProcess(Kwok, Kwok, append(kwokArgs, opts.KwokArgs...), kwokEnv); err != nil {
			return err
		}
	}
	if !opts.WithoutControllerManager {
		if err := c.WaitHealthy(ctx, ControllerManager, fmt.Sprintf("https://%s/healthz", hostPort(kcmPort))); err != nil {
			return err
		}
		fmt.Fprintf(logw, "kube-controller-manager ready (%.1fs)\n", time.Since(began).Seconds())
	}
	if opts.RealNodes {
		if err := c.WaitHealthy(ctx, DefaultScheduler, fmt.Sprintf("https://%s/healthz", hostPort(schedPort))); err != nil {
			return err
		}
		fmt.Fprintf(logw, "kube-scheduler ready (%.1fs)\n", time.Since(began).Seconds())
	}
	if !opts.WithoutKwok {
		if err := c.WaitHealthy(ctx, Kwok, fmt.Sprintf("http://%s/healthz", hostPort(kwokPort))); err != nil {
			return err
		}
		fmt.Fprintf(logw, "kwok ready (%.1fs)\n", time.Since(began).Seconds())
	}
	if opts.WithoutControllerManager {
		return nil
	}
	// Pods are rejected until the serviceaccount controller has created their namespace's default
	// ServiceAccount.
	if err := c.poll(ctx, ControllerManager, func() (bool, error) {
		_, err := c.Clientset.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return fmt.Errorf("waiting for the default ServiceAccount: %w", err)
	}
	return nil
}

func (c *Cluster) setupClients(addToScheme []func(*runtime.Scheme) error) error {
	c.Scheme = runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme}, addToScheme...) {
		if err := add(c.Scheme); err != nil {
			return err
		}
	}
	var err error
	if c.Client, err = client.New(c.RESTConfig, client.Options{Scheme: c.Scheme}); err != nil {
		return err
	}
	c.Clientset, err = kubernetes.NewForConfig(c.RESTConfig)
	return err
}

// resetStateDir removes what an earlier Start left in dir, and nothing else.
func resetStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"pki", "kubeconfigs", "kubeconfig", "etcd", "logs", PidsFile,
		APIServer, ControllerManager, Kwok} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// addCleanup registers f to run in Stop after every process has ended.
func (c *Cluster) addCleanup(f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleanups = append(c.cleanups, f)
}

// KeepStateDir stops Stop from removing a temporary state directory, for example to keep the
// logs of a failed test run.
func (c *Cluster) KeepStateDir() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeStateDir = false
}

// Stopped reports whether Stop has been called.
func (c *Cluster) Stopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// Stop ends every process the cluster started, last started first: SIGTERM to its process group,
// SIGKILL after a grace period, then it waits for the process to be reaped. It removes a temporary
// state directory. The error lists the processes that had exited before Stop, with the end of
// their logs. Calling Stop again does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	order, cleanups := c.order, c.cleanups
	c.mu.Unlock()

	var errs []error
	for i := len(order) - 1; i >= 0; i-- {
		p := order[i]
		select {
		case <-p.done:
			errs = append(errs, fmt.Errorf("%s exited before Stop (%v); end of %s:\n%s",
				p.Name, p.err, p.LogFile, LogTail(p.LogFile, logTailLines)))
		default:
		}
		p.stop(stopGrace)
	}
	for i := len(cleanups) - 1; i >= 0; i-- {
		if err := cleanups[i](); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(filepath.Join(c.StateDir, PidsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	c.mu.Lock()
	remove := c.removeStateDir
	c.mu.Unlock()
	if remove {
		if err := os.RemoveAll(c.StateDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// servesWorkloadAPI reports whether opts.WorkloadAPI is asked for and the control plane's
// kube-apiserver (its --version) is 1.37 or later.
// KubectlEnv is the environment for kubectl (and helm) run against c as its admin: the process's
// own with KUBECONFIG set to KubeconfigPath and KUBECACHEDIR to <StateDir>/kubectl-cache. kubectl
// caches discovery per host:port under ~/.kube/cache for hours; a later cluster on a reused port
// would otherwise resolve names from another cluster's APIs, e.g. "workload" to a 1.37 cluster's
// scheduling.k8s.io Workloads, which a 1.36 API server answers with NotFound.
func (c *Cluster) KubectlEnv() []string {
	return append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath, "KUBECACHEDIR="+filepath.Join(c.StateDir, "kubectl-cache"))
}

func (c *Cluster) servesWorkloadAPI(ctx context.Context, opts Options) (bool, error) {
	if !opts.WorkloadAPI {
		return false, nil
	}
	out, err := exec.CommandContext(ctx, filepath.Join(c.ControlPlaneBinDir, APIServer), "--version").Output()
	if err != nil {
		return false, fmt.Errorf("%s --version: %w", APIServer, err)
	}
	// "Kubernetes v1.37.2"
	v, err := version.ParseGeneric(strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes "))
	if err != nil {
		return false, fmt.Errorf("%s --version: %w", APIServer, err)
	}
	return v.AtLeast(version.MajorMinor(1, 37)), nil
}
