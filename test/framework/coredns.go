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

package framework

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

//go:embed manifests/coredns.yaml
var coreDNSManifest string

// InstallCoreDNS runs CoreDNS from image as kube-system's kube-dns Deployment on the real node
// nodeName, behind the Service at ClusterDNSIP that the kubelets name in every pod's resolv.conf,
// and waits until it is ready. Pods then resolve Services and a headless Service's pods
// (<pod>.<service>.<namespace>.svc) as in any cluster.
func (c *Cluster) InstallCoreDNS(ctx context.Context, image, nodeName string) error {
	manifest := strings.NewReplacer("IMAGE", image, "NODE", nodeName, "CLUSTER_DNS_IP", ClusterDNSIP).Replace(coreDNSManifest)
	objs, err := decodeObjects([]byte(manifest))
	if err != nil {
		return fmt.Errorf("decoding the CoreDNS manifest: %w", err)
	}
	for _, obj := range objs {
		if err := c.serverSideApply(ctx, obj); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return c.poll(ctx, Kubelet+"-"+nodeName, func() (bool, error) {
		var d appsv1.Deployment
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "coredns"}, &d); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return d.Status.ReadyReplicas > 0, nil
	})
}
