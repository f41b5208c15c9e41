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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

const (
	// CDIKind is the kind of the CDI devices the driver writes, as NVIDIA's driver names its
	// claim devices: vendor k8s.gpu.nvidia.com, class claim.
	CDIKind = "k8s.gpu.nvidia.com/claim"
	// EnvVisibleDevices is what a container of the claim sees: its GPUs' UUIDs, comma-separated in
	// index order, as the NVIDIA container toolkit and Convoy's simulated device plugin set it.
	EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	// DefaultCDIDir is where container runtimes read CDI specs by default.
	DefaultCDIDir = "/var/run/cdi"
)

// Prepared is one prepared claim: its CDI spec and, per allocated device of this node, the result
// the kubelet gets.
type Prepared struct {
	Spec    cdispec.Spec
	Devices []kubeletplugin.Device
}

// Prepare computes what preparing claim on node means: one CDI device per request, named
// <claim UID>-<request>, that sets NVIDIA_VISIBLE_DEVICES to the UUIDs of the request's GPUs
// (gpus by device name). A container that uses the request gets that CDI device through the
// request's first GPU. Devices of other drivers or nodes are not the driver's; a device that is no
// GPU of the node is an error.
func Prepare(claim *resourcev1.ResourceClaim, node string, gpus []GPU) (*Prepared, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("ResourceClaim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	byName := map[string]GPU{}
	for _, g := range gpus {
		byName[g.Device.Name] = g
	}
	p := &Prepared{Spec: cdispec.Spec{Kind: CDIKind}}
	visible := map[string][]string{} // by request
	var requests []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != DriverName || r.Pool != node {
			continue
		}
		g, ok := byName[r.Device]
		if !ok {
			return nil, fmt.Errorf("ResourceClaim %s/%s: device %s of pool %s is no GPU of this node", claim.Namespace, claim.Name, r.Device, r.Pool)
		}
		d := kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device}
		if _, seen := visible[r.Request]; !seen {
			requests = append(requests, r.Request)
			d.CDIDeviceIDs = []string{CDIKind + "=" + cdiName(claim.UID, r.Request)}
		}
		visible[r.Request] = append(visible[r.Request], g.UUID)
		p.Devices = append(p.Devices, d)
	}
	for _, req := range requests {
		uuids := visible[req]
		slices.SortFunc(uuids, func(a, b string) int { return indexOfUUID(gpus, a) - indexOfUUID(gpus, b) })
		p.Spec.Devices = append(p.Spec.Devices, cdispec.Device{
			Name:           cdiName(claim.UID, req),
			ContainerEdits: cdispec.ContainerEdits{Env: []string{EnvVisibleDevices + "=" + strings.Join(uuids, ",")}},
		})
	}
	v, err := cdispec.MinimumRequiredVersion(&p.Spec)
	if err != nil {
		return nil, err
	}
	p.Spec.Version = v
	return p, nil
}

func indexOfUUID(gpus []GPU, uuid string) int {
	return slices.IndexFunc(gpus, func(g GPU) bool { return g.UUID == uuid })
}

// cdiName is a CDI device name unique to the claim and request: the claim UID is never reused,
// so no runtime's cached spec can be taken for it.
func cdiName(claim types.UID, request string) string {
	// A subrequest is "<request>/<subrequest>"; CDI names allow no slash.
	return string(claim) + "-" + strings.ReplaceAll(request, "/", "_")
}

// SpecPath is the file of claim's CDI spec in dir.
func SpecPath(dir string, claim types.UID) string {
	return filepath.Join(dir, "k8s.gpu.nvidia.com-claim_"+string(claim)+".json")
}

// WriteSpec writes the prepared claim's CDI spec into dir, atomically: a runtime never reads half
// a spec.
func WriteSpec(dir string, claim types.UID, spec *cdispec.Spec) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), SpecPath(dir, claim))
}

// RemoveSpec removes claim's CDI spec from dir; a spec already gone is no error.
func RemoveSpec(dir string, claim types.UID) error {
	if err := os.Remove(SpecPath(dir, claim)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
