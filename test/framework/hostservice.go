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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ExposeHostService makes a process that listens on NodeGatewayIP:hostPort reachable from pods on
// real nodes as the Service namespace/name, port: a Service without a selector and an
// EndpointSlice with the host's address, the way a cluster reaches a component that runs outside
// it. kube-proxy on each real node routes the Service's address to the host.
func (c *Cluster) ExposeHostService(ctx context.Context, namespace, name string, port, hostPort int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: int32(port), Protocol: corev1.ProtocolTCP}}},
	}
	if err := c.Client.Create(ctx, svc); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating Service %s/%s: %w", namespace, name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-host", Labels: map[string]string{
			discoveryv1.LabelServiceName: name,
			discoveryv1.LabelManagedBy:   "convoy-test-framework",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{NodeGatewayIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(hostPort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := c.Client.Create(ctx, slice); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating EndpointSlice %s/%s: %w", namespace, slice.Name, err)
	}
	return nil
}
