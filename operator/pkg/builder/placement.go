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
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

var antiAffinityPath = field.NewPath("spec", "scheduling", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")

// ValidatePlacement returns what in the job's scheduling Convoy's scheduler would refuse for its
// gang, so that a job is turned away when it is applied rather than wait, Initializing, for a
// placement that never comes.
//
// Convoy's scheduler keeps a gang's pods apart by kubernetes.io/hostname only: a plan places the
// pods one at a time and cannot promise, say, a zone apart for each (see
// scheduler-plugin/pkg/gangplacement). A required pod anti-affinity term in spec.scheduling.affinity
// that selects any of the job's GPU workers, by any other topologyKey, is refused with the field
// and the fix. The check is what the scheduler does with the pods the operator makes, and never
// stricter: it applies only to jobs scheduled by convoy-scheduler, and leaves to the scheduler the
// terms it cannot decide here (a namespaceSelector that names labels, which needs the namespaces,
// and mismatchLabelKeys). Pod affinity among the gang's pods is not checked here: the rack, block
// and zone labels it may use are the scheduler's args, which the operator does not know.
func ValidatePlacement(job *convoy.TrainingJob, p mlframework.Plugin) field.ErrorList {
	s := job.Spec.Scheduling
	if s == nil || s.Affinity == nil || s.Affinity.PodAntiAffinity == nil || job.SchedulerName() != convoy.DefaultSchedulerName {
		return nil
	}
	terms := s.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(terms) == 0 {
		return nil
	}
	// The scheduler plans a gang's GPU pods, the workers, and counts a term as among the gang's
	// own when it selects one of them.
	var own []labels.Set
	if job.GPUsPerWorker() > 0 {
		for _, r := range p.Replicas(job) {
			if r.Role == mlframework.RoleWorker {
				own = append(own, PodLabels(job, r))
			}
		}
	}
	var errs field.ErrorList
	for i, t := range terms {
		if t.TopologyKey == corev1.LabelHostname || t.TopologyKey == "" || !selectsOwn(t, job.Namespace, own) {
			continue
		}
		errs = append(errs, field.Invalid(antiAffinityPath.Index(i).Child("topologyKey"), t.TopologyKey, fmt.Sprintf(
			"this term selects the job's own pods, and convoy-scheduler keeps a gang's pods apart by %s only: use topologyKey %s, or a labelSelector that does not select this job's pods",
			corev1.LabelHostname, corev1.LabelHostname)))
	}
	return errs
}

// selectsOwn reports whether the term selects a pod of the job's, whose label sets are own, in
// namespace: certainly, or not decided here (false).
func selectsOwn(t corev1.PodAffinityTerm, namespace string, own []labels.Set) bool {
	if len(t.MismatchLabelKeys) > 0 || t.LabelSelector == nil {
		return false
	}
	switch {
	case t.NamespaceSelector != nil:
		// {} selects every namespace; a selector with labels needs the namespaces' labels.
		if len(t.NamespaceSelector.MatchLabels) > 0 || len(t.NamespaceSelector.MatchExpressions) > 0 {
			return false
		}
	case len(t.Namespaces) > 0 && !slices.Contains(t.Namespaces, namespace):
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil {
		// The API server's validation of the pods reports a malformed selector.
		return false
	}
	// matchLabelKeys add "key in (this pod's value)" to the selector: a pod the selector picks
	// still picks itself, so they change nothing about whether the term selects the gang's own.
	return slices.ContainsFunc(own, func(l labels.Set) bool { return sel.Matches(l) })
}
