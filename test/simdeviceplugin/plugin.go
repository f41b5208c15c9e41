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
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Defaults of Options.
const (
	DefaultResourceName  = convoy.ResourceGPU
	DefaultCheckInterval = time.Second
	// registerTimeout bounds one Register call; the kubelet dials the plugin back within it.
	registerTimeout = 10 * time.Second
)

// Options configure a Plugin.
type Options struct {
	// PluginDir is the kubelet's device-plugin directory: the kubelet serves its Registration API on
	// kubelet.sock there, and the plugin serves on Endpoint there. pluginapi.DevicePluginPath when
	// empty.
	PluginDir string
	// Endpoint is the file name of the plugin's socket in PluginDir; Endpoint(ResourceName) when
	// empty.
	Endpoint string
	// ResourceName is the extended resource the plugin advertises; DefaultResourceName when empty.
	ResourceName string
	// GPUs are the node's mocked GPUs (see GPUs).
	GPUs []GPU
	// NUMA reports each GPU's NUMA node to the kubelet's topology manager.
	NUMA bool
	// CheckInterval is how often the plugin looks for a restarted kubelet (a new kubelet.sock, its
	// own socket removed); DefaultCheckInterval when zero.
	CheckInterval time.Duration
	// Log receives the plugin's logs; klog.Background() when unset.
	Log klog.Logger
}

// Endpoint is the default socket file name for resource: convoy-sim-nvidia-com-gpu.sock for
// nvidia.com/gpu.
func Endpoint(resource string) string {
	return "convoy-sim-" + strings.NewReplacer("/", "-", ".", "-").Replace(resource) + ".sock"
}

// Plugin is a device plugin serving mocked GPUs to the kubelet: it serves the DevicePlugin API
// on a unix socket in the kubelet's device-plugin directory and registers it with the kubelet,
// again whenever the kubelet restarts.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	opts    Options
	socket  string // the plugin's socket
	kubelet string // the kubelet's Registration socket
	devices []*pluginapi.Device
	index   indexOf
	log     klog.Logger
	done    chan struct{} // closed when Run returns: ends the ListAndWatch streams

	// Run's state.
	server     *grpc.Server
	registered os.FileInfo // the kubelet.sock registered with; nil when not registered
	lastErr    string      // the last registration error logged
	waiting    bool        // kubelet.sock is missing, and that was logged
}

// New returns a plugin for opts.GPUs. Run serves it.
func New(opts Options) (*Plugin, error) {
	if len(opts.GPUs) == 0 {
		return nil, errors.New("simdeviceplugin: no GPUs to advertise")
	}
	if opts.PluginDir == "" {
		opts.PluginDir = pluginapi.DevicePluginPath
	}
	if opts.ResourceName == "" {
		opts.ResourceName = DefaultResourceName
	}
	if opts.Endpoint == "" {
		opts.Endpoint = Endpoint(opts.ResourceName)
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.Log.GetSink() == nil {
		opts.Log = klog.Background()
	}
	return &Plugin{
		opts:    opts,
		socket:  filepath.Join(opts.PluginDir, opts.Endpoint),
		kubelet: filepath.Join(opts.PluginDir, filepath.Base(pluginapi.KubeletSocket)),
		devices: Devices(opts.GPUs, opts.NUMA),
		index:   newIndexOf(opts.GPUs),
		log:     opts.Log.WithName("simdeviceplugin").WithValues("resource", opts.ResourceName),
		done:    make(chan struct{}),
	}, nil
}

// Socket returns the path of the plugin's socket.
func (p *Plugin) Socket() string { return p.socket }

// Run serves the plugin until ctx ends (call it once), then stops serving and removes its socket. It registers
// with the kubelet as soon as kubelet.sock exists, and again when the kubelet restarts: a new
// kubelet.sock, or the plugin's own socket gone (a starting kubelet empties the directory), which
// it then serves again. A failed registration is retried every CheckInterval. Run fails only when
// it cannot serve its socket at start.
func (p *Plugin) Run(ctx context.Context) error {
	defer p.stop()
	defer close(p.done) // first: the ListAndWatch streams end before the server stops
	if err := p.serve(); err != nil {
		return err
	}
	p.log.Info("Serving mocked GPUs", "socket", p.socket, "devices", len(p.devices))
	tick := time.NewTicker(p.opts.CheckInterval)
	defer tick.Stop()
	for {
		p.check(ctx)
		select {
		case <-ctx.Done():
			p.log.Info("Stopping", "socket", p.socket)
			return nil
		case <-tick.C:
		}
	}
}

// check serves the socket again when it is gone and registers when the kubelet.sock registered
// with changed.
func (p *Plugin) check(ctx context.Context) {
	if _, err := os.Stat(p.socket); err != nil || p.server == nil {
		if p.server != nil {
			p.log.Info("Plugin socket removed, as a starting kubelet does: serving it again", "socket", p.socket)
		}
		p.stop()
		if err := p.serve(); err != nil {
			p.logOnce(err, "Serving the plugin socket failed: retrying")
			return
		}
		p.registered = nil
	}
	fi, err := os.Stat(p.kubelet)
	if err != nil {
		if !p.waiting {
			p.log.Info("Waiting for the kubelet's registration socket", "kubeletSocket", p.kubelet)
		}
		p.registered, p.waiting = nil, true
		return
	}
	p.waiting = false
	if p.registered != nil && os.SameFile(p.registered, fi) && p.registered.ModTime().Equal(fi.ModTime()) {
		return
	}
	if p.registered != nil {
		p.log.Info("Kubelet socket re-created: registering again", "kubeletSocket", p.kubelet)
	}
	if err := p.register(ctx); err != nil {
		p.logOnce(err, "Registering with the kubelet failed: retrying", "kubeletSocket", p.kubelet)
		return
	}
	p.registered, p.lastErr = fi, ""
	p.log.Info("Registered with the kubelet", "kubeletSocket", p.kubelet, "endpoint", p.opts.Endpoint)
}

// logOnce logs err unless it is the last error logged, so that a kubelet away for a while gives
// one line, not one per check.
func (p *Plugin) logOnce(err error, msg string, kv ...any) {
	if err.Error() == p.lastErr {
		return
	}
	p.lastErr = err.Error()
	p.log.Error(err, msg, kv...)
}

// serve listens on the plugin's socket, replacing a stale one, and serves the DevicePlugin API.
func (p *Plugin) serve() error {
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the stale plugin socket: %w", err)
	}
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		return fmt.Errorf("serving the device plugin: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() {
		if err := srv.Serve(ln); err != nil {
			p.log.Error(err, "Serving the device plugin stopped", "socket", p.socket)
		}
	}()
	p.server = srv
	return nil
}

// stop stops serving, which closes the listener and so removes the socket, and removes it in case
// it was not.
func (p *Plugin) stop() {
	if p.server == nil {
		return
	}
	p.server.Stop()
	p.server = nil
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.log.Error(err, "Removing the plugin socket", "socket", p.socket)
	}
}

// register calls the kubelet's Registration.Register for the plugin's socket.
func (p *Plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+p.kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.opts.Endpoint,
		ResourceName: p.opts.ResourceName,
		Options:      pluginOptions,
	})
	return err
}

// pluginOptions: no PreStartContainer; GetPreferredAllocation, lowest index first.
var pluginOptions = &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}

// GetDevicePluginOptions returns the plugin's options.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return pluginOptions, nil
}

// ListAndWatch sends the GPUs, all healthy, and keeps the stream open until the kubelet closes it
// or the plugin stops: mocked GPUs never change.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	p.log.V(2).Info("Sent the device list", "devices", len(p.devices))
	select {
	case <-stream.Context().Done():
	case <-p.done:
	}
	return nil
}

// GetPreferredAllocation prefers the lowest GPU indices; see Preferred.
func (p *Plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return p.index.Preferred(req)
}

// Allocate sets NVIDIA_VISIBLE_DEVICES in each container; see indexOf.Allocate.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp, err := p.index.Allocate(req)
	if err != nil {
		p.log.Error(err, "Refusing an allocation")
		return nil, err
	}
	for _, c := range resp.ContainerResponses {
		p.log.Info("Allocated GPUs", "visibleDevices", c.Envs[EnvVisibleDevices])
	}
	return resp, nil
}

// PreStartContainer does nothing; the plugin does not ask for it.
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
