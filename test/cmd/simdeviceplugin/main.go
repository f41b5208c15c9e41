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

// Command simdeviceplugin is a device plugin for tests: it advertises nvidia.com/gpu to a real
// kubelet from one of Convoy's mock NVML profiles, the device IDs being the mocked GPUs' UUIDs for
// the node, so that the node agent with the same --nvml and --node-name reads the kubelet's
// PodResources API on that node. See test/simdeviceplugin.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/test/simdeviceplugin"
)

func main() {
	klog.InitFlags(nil)
	opts := simdeviceplugin.Options{}
	var nodeName, nvml string
	flag.StringVar(&opts.PluginDir, "device-plugin-dir", pluginapi.DevicePluginPath, "The kubelet's device-plugin directory: its Registration socket kubelet.sock is there, and the plugin serves its socket there.")
	flag.StringVar(&nodeName, "node-name", os.Getenv("NODE_NAME"), "The node whose mocked GPUs to advertise: it seeds their UUIDs, as in the node agent.")
	flag.StringVar(&nvml, "nvml", "", "mock:<profile>, the node agent's mock NVML profile: "+strings.Join(nvmlmock.Names(), ", ")+".")
	flag.StringVar(&opts.ResourceName, "resource-name", simdeviceplugin.DefaultResourceName, "The extended resource to advertise.")
	flag.StringVar(&opts.Endpoint, "endpoint", "", "The file name of the plugin's socket in --device-plugin-dir; convoy-sim-<resource-name with / and . as ->.sock when empty.")
	flag.BoolVar(&opts.NUMA, "numa", true, "Report each GPU's NUMA node from the profile; turn it off when the kubelet's topology manager must not see NUMA nodes the host lacks.")
	flag.DurationVar(&opts.CheckInterval, "check-interval", simdeviceplugin.DefaultCheckInterval, "How often to look for a restarted kubelet and register again.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, nodeName, nvml); err != nil {
		klog.ErrorS(err, "simdeviceplugin failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

func run(ctx context.Context, opts simdeviceplugin.Options, nodeName, nvml string) error {
	profile, err := simdeviceplugin.ParseNVML(nvml)
	if err != nil {
		return err
	}
	if opts.GPUs, err = simdeviceplugin.GPUs(profile, nodeName); err != nil {
		return err
	}
	opts.Log = klog.Background().WithValues("node", nodeName, "profile", profile)
	p, err := simdeviceplugin.New(opts)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}
