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
