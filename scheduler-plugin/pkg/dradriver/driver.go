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

package dradriver

import (
	"context"
	"errors"
	"os"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

// Options configure a Driver.
type Options struct {
	// NodeName is the node the driver serves; its pool and ResourceSlice are named after it.
	NodeName string
	// GPUs are the node's GPUs (MockGPUs).
	GPUs []GPU
	// CDIDir is where the driver writes CDI specs, which the node's container runtime reads.
	CDIDir string
	// PluginDir is the driver's directory among the kubelet's plugins (its gRPC socket);
	// RegistrarDir is the kubelet's plugin registry, where the driver registers.
	PluginDir, RegistrarDir string
}

// Driver is the kubelet plugin: it publishes the node's GPUs and prepares claims on them.
type Driver struct {
	opts   Options
	cancel context.CancelCauseFunc
}

var _ kubeletplugin.DRAPlugin = &Driver{}

// Run registers the driver with the node's kubelet, publishes the node's ResourceSlice and serves
// the kubelet until ctx ends or publishing fails for good.
func Run(ctx context.Context, client kubernetes.Interface, opts Options) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d := &Driver{opts: opts, cancel: cancel}
	// The helper serves its socket in PluginDir but does not make the directory.
	if err := os.MkdirAll(opts.PluginDir, 0o750); err != nil {
		return err
	}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(opts.NodeName),
		kubeletplugin.DriverName(DriverName),
		kubeletplugin.PluginDataDirectoryPath(opts.PluginDir),
		kubeletplugin.RegistrarDirectoryPath(opts.RegistrarDir),
	)
	if err != nil {
		return err
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, d.Resources()); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Publishing the node's GPUs", "node", opts.NodeName, "driver", DriverName, "gpus", len(opts.GPUs))
	<-ctx.Done()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Resources is the node's one pool: a ResourceSlice of its GPUs.
func (d *Driver) Resources() resourceslice.DriverResources {
	devices := make([]resourcev1.Device, 0, len(d.opts.GPUs))
	for _, g := range d.opts.GPUs {
		devices = append(devices, *g.Device.DeepCopy())
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		d.opts.NodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
}

// PrepareResourceClaims writes each claim's CDI spec and returns its CDI devices. A claim that
// cannot be prepared says why in its result; the kubelet retries it.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	log := klog.FromContext(ctx)
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		p, err := Prepare(c, d.opts.NodeName, d.opts.GPUs)
		if err == nil {
			err = WriteSpec(d.opts.CDIDir, c.UID, &p.Spec)
		}
		if err != nil {
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		log.V(2).Info("Prepared claim", "claim", klog.KObj(c), "devices", len(p.Devices))
		out[c.UID] = kubeletplugin.PrepareResult{Devices: p.Devices}
	}
	return out, nil
}

// UnprepareResourceClaims removes the claims' CDI specs.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		out[c.UID] = RemoveSpec(d.opts.CDIDir, c.UID)
		klog.FromContext(ctx).V(2).Info("Unprepared claim", "claim", c)
	}
	return out, nil
}

// HandleError logs errors of the background work (publishing the ResourceSlice) and ends the
// driver on one that retrying cannot fix, so that its pod restarts and says so.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel(err)
	}
}
