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

package nodeagent

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/podgpus"
)

// Snapshot reads a node's GPUs once, without a cluster, and returns the GPUNode the agent would
// publish for it. Which pod holds each GPU comes from the kubelet's PodResources socket when it
// exists; NVML failures show in the NVMLAvailable condition, as they would in the cluster.
func Snapshot(ctx context.Context, lib nvml.Interface, nodeName, sysfsRoot, podResourcesSocket string) *convoy.GPUNode {
	obs := Observation{}
	r, err := gpuinfo.Open(lib, gpuinfo.Options{NodeName: nodeName, SysfsRoot: sysfsRoot})
	if err != nil {
		obs.InitErr = err
	} else {
		defer r.Close()
		obs.Static, obs.Samples = r.Static(), r.Sample()
		if k, err := podgpus.DialKubelet(podResourcesSocket); err == nil {
			defer k.Close()
			if h, err := k.Holders(ctx, r.IndexOfUUID); err == nil {
				obs.Holders = h
			}
		}
	}
	now := time.Now()
	var conditions []metav1.Condition
	status := BuildStatus(obs, &conditions, now)
	status.ObservedTime = ptr.To(metav1.NewTime(now.Truncate(time.Second)))
	return &convoy.GPUNode{
		TypeMeta:   metav1.TypeMeta{APIVersion: convoy.GroupVersion.String(), Kind: "GPUNode"},
		ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Status:     status,
	}
}
