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

package podgpus

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// DefaultPodResourcesSocket is where the kubelet serves the PodResources API.
const DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// Kubelet reads which GPUs the kubelet gave each pod through its PodResources API.
type Kubelet struct {
	conn   *grpc.ClientConn
	client podresourcesv1.PodResourcesListerClient
}

// DialKubelet connects to the PodResources socket. It fails when the socket does not exist, as on
// a fake node; the connection itself is made lazily by gRPC.
func DialKubelet(socket string) (*Kubelet, error) {
	if _, err := os.Stat(socket); err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to the kubelet's PodResources API at %s: %w", socket, err)
	}
	return &Kubelet{conn: conn, client: podresourcesv1.NewPodResourcesListerClient(conn)}, nil
}

// Close closes the connection.
func (k *Kubelet) Close() error { return k.conn.Close() }

// Holders lists the pods the kubelet gave nvidia.com/gpu devices to. Device IDs are GPU UUIDs
// (with a "::<replica>" suffix when the device plugin shares GPUs) or, with the plugin's index
// strategy, GPU indices; indexOf maps UUIDs to indices. IDs of other devices (MIG instances) are
// skipped. When several pods share a GPU, the first by name is its holder.
func (k *Kubelet) Holders(ctx context.Context, indexOf func(uuid string) (int, bool)) (Holders, error) {
	resp, err := k.client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing pod resources from the kubelet: %w", err)
	}
	pods := resp.GetPodResources()
	sort.Slice(pods, func(a, b int) bool {
		return pods[a].GetNamespace()+"/"+pods[a].GetName() < pods[b].GetNamespace()+"/"+pods[b].GetName()
	})
	holders := Holders{}
	for _, p := range pods {
		key := p.GetNamespace() + "/" + p.GetName()
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				if d.GetResourceName() != convoy.ResourceGPU {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					i, ok := deviceIndex(id, indexOf)
					if ok && holders[i] == "" {
						holders[i] = key
					}
				}
			}
		}
	}
	return holders, nil
}

func deviceIndex(id string, indexOf func(string) (int, bool)) (int, bool) {
	id, _, _ = strings.Cut(id, "::")
	if i, err := strconv.Atoi(id); err == nil {
		return i, i >= 0
	}
	return indexOf(id)
}
