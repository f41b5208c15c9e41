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

package builder

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// NetworkPolicy is <job>, which lets the gang's pods accept connections only from pods of the same
// job, and rank 0's metrics port from anywhere (Prometheus) when spec.monitoring.enabled; what the
// pods call is left open (storage, trackers, the progress endpoint). Nil unless
// Options.JobNetworkPolicy. It takes effect with a CNI that enforces NetworkPolicy.
func NetworkPolicy(job *convoy.TrainingJob, opts Options) *networkingv1.NetworkPolicy {
	if !opts.JobNetworkPolicy {
		return nil
	}
	gang := metav1.LabelSelector{MatchLabels: JobLabels(job)}
	ingress := []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &gang}}}}
	if m := job.Spec.Monitoring; m != nil && m.Enabled {
		port := intstr.FromInt32(metricsPort(job))
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Port: &port}}})
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: objectMeta(job, job.Name, JobLabels(job)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: gang,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}
