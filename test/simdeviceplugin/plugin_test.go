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
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registration is what the fake kubelet saw of one Register call, and what the plugin then
// answered on the endpoint it named.
type registration struct {
	Request  *pluginapi.RegisterRequest
	Options  *pluginapi.DevicePluginOptions
	Devices  []*pluginapi.Device
	Allocate *pluginapi.AllocateResponse
}

// fakeKubelet serves the Registration API as the kubelet's device manager does: on Register it
// dials the plugin's endpoint in its directory, asks for its options and its first device list,
// and allocates the first device.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir string
	got chan registration
	err chan error
}

func (k *fakeKubelet) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	reg, err := k.dialBack(ctx, req)
	if err != nil {
		k.err <- err
		return nil, err
	}
	k.got <- reg
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) dialBack(ctx context.Context, req *pluginapi.RegisterRequest) (registration, error) {
	reg := registration{Request: req}
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, req.GetEndpoint()), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return reg, err
	}
	defer conn.Close()
	c := pluginapi.NewDevicePluginClient(conn)
	if reg.Options, err = c.GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		return reg, err
	}
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.ListAndWatch(streamCtx, &pluginapi.Empty{})
	if err != nil {
		return reg, err
	}
	first, err := stream.Recv()
	if err != nil {
		return reg, err
	}
	reg.Devices = first.GetDevices()
	if len(reg.Devices) == 0 {
		return reg, errors.New("no devices listed")
	}
	reg.Allocate, err = c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{reg.Devices[0].GetID()}},
	}})
	return reg, err
}

// start serves kubelet.sock in k.dir until the returned function stops it, which removes it.
func (k *fakeKubelet) start(t *testing.T) (stop func()) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(k.dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, k)
	go func() { _ = srv.Serve(ln) }()
	return srv.Stop
}

func (k *fakeKubelet) wait(t *testing.T, what string) registration {
	t.Helper()
	select {
	case reg := <-k.got:
		return reg
	case err := <-k.err:
		t.Fatalf("%s: the fake kubelet could not use the plugin: %v", what, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no registration within 20s", what)
	}
	return registration{}
}

func (k *fakeKubelet) none(t *testing.T, what string, d time.Duration) {
	t.Helper()
	select {
	case reg := <-k.got:
		t.Fatalf("%s: unexpected registration %v", what, reg.Request)
	case err := <-k.err:
		t.Fatalf("%s: %v", what, err)
	case <-time.After(d):
	}
}

// TestPluginRegistersWithTheKubelet runs the plugin's gRPC server against a fake Registration
// server: it registers once kubelet.sock appears, with its resource name and endpoint, serves
// its devices there, and registers again when kubelet.sock is re-created, and when a restarting
// kubelet removes every socket in the directory (the plugin then serves its socket again).
func TestPluginRegistersWithTheKubelet(t *testing.T) {
	dir := t.TempDir()
	gpus, err := GPUs("h100-8", "node-a")
	if err != nil {
		t.Fatal(err)
	}
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

	k := &fakeKubelet{dir: dir, got: make(chan registration, 8), err: make(chan error, 8)}
	k.none(t, "before kubelet.sock exists", 100*time.Millisecond)
	stop := k.start(t)

	want := registration{
		Request: &pluginapi.RegisterRequest{
			Version:      pluginapi.Version,
			Endpoint:     "convoy-sim-nvidia-com-gpu.sock",
			ResourceName: "nvidia.com/gpu",
			Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
		},
		Options: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
		Devices: Devices(gpus, true),
		Allocate: &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{
			{Envs: map[string]string{EnvVisibleDevices: gpus[0].UUID}},
		}},
	}
	check := func(what string) {
		t.Helper()
		if diff := cmp.Diff(want, k.wait(t, what), ignoreProtoState); diff != "" {
			t.Errorf("%s: registration (-want +got):\n%s", what, diff)
		}
		k.none(t, what+", then", 100*time.Millisecond)
	}
	check("first registration")

	// A kubelet.sock re-created: the plugin's own socket stays.
	stop()
	stop = k.start(t)
	check("kubelet.sock re-created")

	// A restarting kubelet empties the directory, its own socket included, then serves again.
	stop()
	if err := os.Remove(p.Socket()); err != nil {
		t.Fatal(err)
	}
	stop = k.start(t)
	defer stop()
	check("directory emptied")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	done <- nil // for the deferred wait
	if _, err := os.Stat(p.Socket()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("plugin socket after Run: %v, want it removed", err)
	}
}

// TestRunFailsWithoutItsDirectory checks that Run reports a socket it cannot serve at start.
func TestRunFailsWithoutItsDirectory(t *testing.T) {
	p, err := New(Options{PluginDir: filepath.Join(t.TempDir(), "missing"), GPUs: testGPUs, Log: ktesting.NewLogger(t, ktesting.NewConfig())})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("Run in a missing directory succeeded")
	}
}
