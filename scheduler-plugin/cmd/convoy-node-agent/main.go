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

// Command convoy-node-agent reads a node's GPUs through NVML and publishes them as a GPUNode, GPU
// labels, Events and metrics. As a DaemonSet it serves its own node over the real NVML library;
// with --nvml=mock:<profile> one process serves many fake nodes; with --once --print it prints what
// it would publish and needs no cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/podgpus"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

type config struct {
	kubeconfig      string
	nodeName        string
	nodes           string
	nodeSelector    string
	nvml            string
	nvmlLibrary     string
	sysfs           string
	podResources    string
	podResourcesSet bool // --pod-resources-socket was given
	metricsAddr     string
	fabricLabel     string
	faults          stringList
	poll, heartbeat time.Duration
	retry           time.Duration
	qps             float64
	burst           int
	once, print     bool
	evict           bool
}

func main() {
	klog.InitFlags(nil)
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "Kubeconfig file; the in-cluster configuration when empty.")
	flag.StringVar(&c.nodeName, "node-name", os.Getenv("NODE_NAME"), "The node to serve (the DaemonSet sets it from spec.nodeName); the host name for --once.")
	flag.StringVar(&c.nodes, "nodes", "", "Comma-separated fake nodes to serve, with --nvml=mock:<profile>.")
	flag.StringVar(&c.nodeSelector, "node-selector", "", "Label selector of the fake nodes to serve, with --nvml=mock:<profile>, for example type=kwok.")
	flag.StringVar(&c.nvml, "nvml", "real", "real: the NVIDIA driver's libnvidia-ml.so.1; mock:<profile>: a simulated server per node, profiles "+strings.Join(nvmlmock.Names(), ", ")+".")
	flag.StringVar(&c.nvmlLibrary, "nvml-library", "", "Path of libnvidia-ml.so.1; the dynamic loader's search path when empty.")
	flag.StringVar(&c.sysfs, "sysfs", "/sys", "Where to read a GPU's NUMA node when NVML cannot say (real NVML only).")
	flag.StringVar(&c.podResources, "pod-resources-socket", podgpus.DefaultPodResourcesSocket, "The kubelet's PodResources socket; without it, GPUs are assigned to the node's pods as the device plugin would. With --nvml=mock:<profile> it is read only when given, with --node-name: a real node whose kubelet's GPUs come from test/cmd/simdeviceplugin with the same profile and node name; it must exist when the agent starts.")
	flag.StringVar(&c.metricsAddr, "metrics-bind-address", ":9400", "Serves /metrics and /healthz, and /faults with mock NVML; empty disables.")
	flag.StringVar(&c.fabricLabel, "mock-fabric-label", convoy.LabelTopologyRack, "With a multi-node NVLink profile (gb200-4), nodes with the same value of this label share an NVLink fabric clique.")
	flag.Var(&c.faults, "fault", "With mock NVML, a fault to inject at start, <node>/<gpu>=<fault> (xid[:N], ecc, row-remap, lost); repeatable.")
	flag.DurationVar(&c.poll, "poll-interval", nodeagent.DefaultPollInterval, "How often each node's GPUs are read.")
	flag.DurationVar(&c.heartbeat, "heartbeat", nodeagent.DefaultHeartbeat, "How often an unchanged GPUNode status is written again (its observedTime).")
	flag.DurationVar(&c.retry, "nvml-retry-interval", nodeagent.DefaultRetryInterval, "How often NVML is retried after it failed.")
	flag.Float64Var(&c.qps, "kube-api-qps", 20, "Client-side rate limit of API requests; raise it when serving many fake nodes.")
	flag.IntVar(&c.burst, "kube-api-burst", 40, "Client-side burst of API requests.")
	flag.BoolVar(&c.evict, "evict-on-unhealthy", true, "Delete the TrainingJob pod holding a GPU when the GPU turns unhealthy, so that its gang restarts elsewhere; pods of other workloads are left alone.")
	flag.BoolVar(&c.once, "once", false, "Read NVML once, print the GPUNode it would publish as YAML (with --print) and exit; needs no cluster.")
	flag.BoolVar(&c.print, "print", false, "With --once: print the GPUNode.")
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { c.podResourcesSet = c.podResourcesSet || f.Name == "pod-resources-socket" })
	ctrllog.SetLogger(klog.NewKlogr()) // the informers log through controller-runtime

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		klog.ErrorS(err, "convoy-node-agent failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

func run(ctx context.Context, c config) error {
	var fleet *nvmlmock.Fleet
	var real nvml.Interface
	switch profile, ok := strings.CutPrefix(c.nvml, "mock:"); {
	case ok:
		var err error
		if fleet, err = nvmlmock.NewFleet(profile); err != nil {
			return err
		}
		for _, spec := range c.faults {
			node, gpu, fault, err := nvmlmock.ParseFaultFlag(spec)
			if err == nil {
				err = fleet.Inject(node, gpu, fault)
			}
			if err != nil {
				return err
			}
		}
	case c.nvml == "real":
		if len(c.faults) > 0 || c.nodes != "" || c.nodeSelector != "" {
			return errors.New("--fault, --nodes and --node-selector need --nvml=mock:<profile>")
		}
		var opts []nvml.LibraryOption
		if c.nvmlLibrary != "" {
			opts = append(opts, nvml.WithLibraryPath(c.nvmlLibrary))
		}
		real = nvml.New(opts...)
	default:
		return fmt.Errorf("--nvml=%q: want real or mock:<profile> (%s)", c.nvml, strings.Join(nvmlmock.Names(), ", "))
	}
	sysfs := c.sysfs
	if fleet != nil {
		sysfs = "" // a mock's PCI addresses mean nothing on this host
	}

	if c.once || c.print {
		if !c.once || !c.print {
			return errors.New("--once and --print go together: the agent prints one snapshot and exits")
		}
		return printSnapshot(ctx, c, real, fleet, sysfs)
	}

	opts := nodeagent.Options{
		SysfsRoot:          sysfs,
		PodResourcesSocket: c.podResources,
		PollInterval:       c.poll,
		Heartbeat:          c.heartbeat,
		RetryInterval:      c.retry,
		EvictOnUnhealthy:   c.evict,
	}
	switch {
	case fleet != nil:
		opts.NVML = func(node *corev1.Node) (nvml.Interface, error) {
			return fleet.Server(node.Name, nvmlmock.Options{FabricCluster: node.Labels[c.fabricLabel]}), nil
		}
		var err error
		if opts.PodResourcesSocket, err = mockPodResourcesSocket(c); err != nil {
			return err
		}
		switch {
		case c.nodeName != "" && c.nodes == "" && c.nodeSelector == "":
			opts.NodeName = c.nodeName
		case c.nodes != "":
			opts.Nodes = strings.Split(c.nodes, ",")
		case c.nodeSelector != "":
			sel, err := labels.Parse(c.nodeSelector)
			if err != nil {
				return fmt.Errorf("--node-selector: %w", err)
			}
			opts.NodeSelector = sel
		default:
			return errors.New("with mock NVML, say which fake nodes to serve: --nodes, --node-selector or --node-name")
		}
	default:
		if c.nodeName == "" {
			return errors.New("--node-name (or $NODE_NAME) is required: the node this agent runs on")
		}
		opts.NodeName = c.nodeName
		opts.NVML = func(*corev1.Node) (nvml.Interface, error) { return real, nil }
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts.Metrics = nodeagent.NewMetrics(reg)

	cfg, err := restConfig(c)
	if err != nil {
		return err
	}
	agent, err := nodeagent.New(cfg, opts)
	if err != nil {
		return err
	}
	if c.metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		if fleet != nil {
			mux.Handle("/faults", fleet)
		}
		srv := &http.Server{Addr: c.metricsAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Serving metrics", "address", c.metricsAddr)
			}
		}()
		defer srv.Close()
	}
	return agent.Run(ctx)
}

// mockPodResourcesSocket is the PodResources socket the agent reads with mock NVML: none for fake
// nodes, which have no kubelet, unless --pod-resources-socket is given for the one node of
// --node-name, a real node whose kubelet advertises the mock GPUs through test/cmd/simdeviceplugin
// (same profile and node name, so the device IDs are the mock GPUs' UUIDs). The agent dials it once
// per node when NVML opens, so it must exist at start: a missing one is an error, not a silent
// fallback to simulated assignments.
func mockPodResourcesSocket(c config) (string, error) {
	if !c.podResourcesSet || c.podResources == "" {
		return "", nil
	}
	if c.nodes != "" || c.nodeSelector != "" || c.nodeName == "" {
		return "", errors.New("--pod-resources-socket with mock NVML reads one real node's kubelet: give --node-name, not --nodes or --node-selector")
	}
	if _, err := os.Stat(c.podResources); err != nil {
		return "", fmt.Errorf("--pod-resources-socket: %w (start the agent once the kubelet serves it)", err)
	}
	return c.podResources, nil
}

func restConfig(c config) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading the client configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(c.qps), c.burst
	cfg.UserAgent = "convoy-node-agent"
	return cfg, nil
}

func printSnapshot(ctx context.Context, c config, real nvml.Interface, fleet *nvmlmock.Fleet, sysfs string) error {
	node := c.nodeName
	if node == "" {
		var err error
		if node, err = os.Hostname(); err != nil {
			return err
		}
	}
	lib := real
	if fleet != nil {
		lib = fleet.Server(node, nvmlmock.Options{})
	}
	obj := nodeagent.Snapshot(ctx, lib, node, sysfs, c.podResources)
	out, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	gfd := nodeagent.GFDLabels(&obj.Status)
	keys := make([]string, 0, len(gfd))
	for k := range gfd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Println("# Node labels the agent would set where no other field manager owns them:")
	for _, k := range keys {
		fmt.Printf("#   %s=%s\n", k, gfd[k])
	}
	fmt.Print(string(out))
	return nil
}
