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

package operator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestJobNetworkPolicyKeepsTheGangToItself: by default (--job-network-policy), a job gets a NetworkPolicy
// of its own name, controlled by it, that lets its pods accept connections only from the job's
// pods, and rank 0's metrics port from anywhere, for Prometheus. What the pods call stays open.
func TestJobNetworkPolicyKeepsTheGangToItself(t *testing.T) {
	e := newEnv(t)
	e.startOperator(func(o *operator.Options) { o.JobNetworkPolicy = operator.Defaults.JobNetworkPolicy })
	job := utiltesting.MakeTrainingJob("isolated", e.ns).Workers(2).GPUs(1).Monitoring(convoy.MonitoringSpec{Enabled: true}).Obj()
	e.create(job)
	e.waitPods("isolated", 2, 0)
	job = e.waitState("isolated", convoy.StateInitializing)

	np := &networkingv1.NetworkPolicy{}
	if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "isolated"}, np); err != nil {
		t.Fatalf("the job's NetworkPolicy: %v", err)
	}
	if !metav1.IsControlledBy(np, job) {
		t.Errorf("NetworkPolicy owners %v, want the job as controller", np.OwnerReferences)
	}
	gang := metav1.LabelSelector{MatchLabels: map[string]string{convoy.LabelJobName: "isolated"}}
	metrics := intstr.FromInt32(9090)
	want := networkingv1.NetworkPolicySpec{
		PodSelector: gang,
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &gang}}},
			{Ports: []networkingv1.NetworkPolicyPort{{Port: &metrics}}},
		},
	}
	// The API server defaults each port's protocol to TCP.
	for i := range np.Spec.Ingress {
		for j := range np.Spec.Ingress[i].Ports {
			np.Spec.Ingress[i].Ports[j].Protocol = nil
		}
	}
	if diff := cmp.Diff(want, np.Spec); diff != "" {
		t.Errorf("NetworkPolicy spec (-want,+got):\n%s", diff)
	}
}
