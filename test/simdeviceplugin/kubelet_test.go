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

package simdeviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	kubeletplugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

// deviceManager stands for the kubelet's device manager behind its real registration server
// (kubeletplugin.NewServer, the code the kubelet runs): it empties the directory at start, as
// the kubelet does, and reports what the connected plugin lists and allocates.
type deviceManager struct {
	dir     string
	devices chan []*pluginapi.Device
	plugins chan kubeletplugin.DevicePlugin
}

func (m *deviceManager) CleanupPluginDirectory(_ klog.Logger, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *deviceManager) PluginConnected(_ context.Context, _ string, p kubeletplugin.DevicePlugin) error {
	m.plugins <- p
	return nil
}

func (m *deviceManager) PluginDisconnected(klog.Logger, string) {}

func (m *deviceManager) PluginListAndWatchReceiver(_ klog.Logger, _ string, resp *pluginapi.ListAndWatchResponse) {
	m.devices <- resp.GetDevices()
}

// start runs a kubelet's registration server on kubelet.sock, as the kubelet starts it.
func (m *deviceManager) start(t *testing.T) kubeletplugin.Server {
	t.Helper()
	s, err := kubeletplugin.NewServer(klog.TODO(), filepath.Join(m.dir, "kubelet.sock"), m, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(klog.TODO()); err != nil {
		t.Fatal(err)
	}
	return s
}

// connected waits for the plugin to connect and list its devices, and allocates the first.
func (m *deviceManager) connected(t *testing.T, what string) (kubeletplugin.DevicePlugin, []*pluginapi.Device) {
	t.Helper()
	var p kubeletplugin.DevicePlugin
	select {
	case p = <-m.plugins:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no plugin connected within 20s", what)
	}
	select {
	case devs := <-m.devices:
		return p, devs
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no device list within 20s", what)
	}
	return nil, nil
}

// TestPluginWithTheKubeletsRegistrationServer runs the plugin against the kubelet's own device
// plugin registration server, across a kubelet restart that empties the directory.
func TestPluginWithTheKubeletsRegistrationServer(t *testing.T) {
	dir := t.TempDir()
	gpus, err := GPUs("h100-8", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	m := &deviceManager{dir: dir, devices: make(chan []*pluginapi.Device, 8), plugins: make(chan kubeletplugin.DevicePlugin, 8)}
	kubelet := m.start(t)
	defer func() { _ = kubelet.Stop(klog.TODO()) }()

	p, err := New(Options{PluginDir: dir, GPUs: gpus, NUMA: true, CheckInterval: 20 * time.Millisecond, Log: ktesting.NewLogger(t, ktesting.NewConfig())})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the plugin stopped with %v, want nil once its context ends", err)
		}
	}()

	check := func(what string) {
		t.Helper()
		plugin, devs := m.connected(t, what)
		if plugin.Resource() != "nvidia.com/gpu" || plugin.SocketPath() != p.Socket() {
			t.Errorf("%s: connected %s at %s, want nvidia.com/gpu at %s", what, plugin.Resource(), plugin.SocketPath(), p.Socket())
		}
		if diff := cmp.Diff(Devices(gpus, true), devs, ignoreProtoState); diff != "" {
			t.Errorf("%s: devices (-want +got):\n%s", what, diff)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := plugin.API().Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
			{DevicesIds: []string{gpus[5].UUID, gpus[4].UUID}},
		}})
		if err != nil {
			t.Fatalf("%s: Allocate: %v", what, err)
		}
		want := &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{
			{Envs: map[string]string{EnvVisibleDevices: gpus[4].UUID + "," + gpus[5].UUID}},
		}}
		if diff := cmp.Diff(want, resp, ignoreProtoState); diff != "" {
			t.Errorf("%s: Allocate (-want +got):\n%s", what, diff)
		}
	}
	check("first start")

	if err := kubelet.Stop(klog.TODO()); err != nil {
		t.Fatal(err)
	}
	kubelet = m.start(t) // empties the directory, the plugin's socket included
	check("after a kubelet restart")
}
