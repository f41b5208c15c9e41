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

// Command convoy-dra-driver is a DRA driver for simulated GPUs: on a node whose GPUs are the node
// agent's mock NVML profile, it publishes them as devices of NVIDIA's driver (gpu.nvidia.com) in
// the node's ResourceSlice and prepares the claims allocated to them with CDI specs that give the
// containers their GPUs' UUIDs. Run it as a DaemonSet (deploy/dra-driver) on nodes whose GPUs no
// device plugin advertises.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/dradriver"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
)

func main() {
	klog.InitFlags(nil)
	var kubeconfig, nvml string
	opts := dradriver.Options{}
	flag.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig file; the in-cluster configuration when empty.")
	flag.StringVar(&opts.NodeName, "node-name", os.Getenv("NODE_NAME"), "The node to serve (the DaemonSet sets it from spec.nodeName): its pool, and the seed of its mock GPUs' UUIDs.")
	flag.StringVar(&nvml, "nvml", "", "mock:<profile>, the node agent's mock NVML profile of the node's GPUs: "+strings.Join(nvmlmock.Names(), ", ")+".")
	flag.StringVar(&opts.CDIDir, "cdi-dir", dradriver.DefaultCDIDir, "Where to write the claims' CDI specs: a directory the node's container runtime reads CDI specs from.")
	flag.StringVar(&opts.PluginDir, "plugin-dir", path.Join(kubeletplugin.KubeletPluginsDir, dradriver.DriverName), "The driver's directory among the kubelet's plugins, for its socket.")
	flag.StringVar(&opts.RegistrarDir, "registrar-dir", kubeletplugin.KubeletRegistryDir, "The kubelet's plugin registration directory.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, kubeconfig, nvml, opts); err != nil {
		klog.ErrorS(err, "convoy-dra-driver failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

func run(ctx context.Context, kubeconfig, nvml string, opts dradriver.Options) error {
	profile, ok := strings.CutPrefix(nvml, "mock:")
	if !ok || profile == "" {
		return fmt.Errorf("--nvml=%q: want mock:<profile> (%s); the driver serves simulated GPUs only", nvml, strings.Join(nvmlmock.Names(), ", "))
	}
	var err error
	if opts.GPUs, err = dradriver.MockGPUs(profile, opts.NodeName); err != nil {
		return err
	}
	cfg, err := rest.InClusterConfig()
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return dradriver.Run(klog.NewContext(ctx, klog.Background().WithValues("node", opts.NodeName)), client, opts)
}
