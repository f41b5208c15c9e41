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
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// DisruptionBudget is <job>, a PodDisruptionBudget over the gang's pods with minAvailable the
// whole gang: the Eviction API refuses (429) to evict a pod of a running gang, so that kubectl
// drain, which retries every 5 s, waits while the operator has the gang checkpoint and moves it
// off the cordoned node; the drain then finds the pod gone. Deletions (the operator's restarts,
// Kueue's and convoy-scheduler's preemptions, which delete) are not held back by a budget. An
// integer minAvailable, unlike maxUnavailable, needs no scale subresource on the pods' owner.
// Nil unless Options.DisruptionBudget.
func DisruptionBudget(job *convoy.TrainingJob, p mlframework.Plugin, opts Options) *policyv1.PodDisruptionBudget {
	if !opts.DisruptionBudget {
		return nil
	}
	gang := intstr.FromInt32(int32(len(p.Replicas(job))))
	// The gang's pods of every attempt, not the publish pod: the PodGroup's label alone. Its one
	// key is what kube-controller-manager's disruption controller matches every pod event of the
	// namespace against, for each budget there.
	selector := map[string]string{schedv1alpha1.PodGroupLabel: job.Name}
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: objectMeta(job, job.Name, JobLabels(job)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &gang,
			Selector:     &metav1.LabelSelector{MatchLabels: selector},
		},
	}
}
