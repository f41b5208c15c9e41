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

package queue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Management is Kueue's rule for which TrainingJobs are its own, as Kueue's configuration sets it
// (manageJobsWithoutQueueName, managedJobsNamespaceSelector): the operator's copy of Kueue's job
// reconciler applies it, and the operator creates no pod for such a job until its Workload is
// admitted.
type Management struct {
	// WithoutQueueName makes a job that names no LocalQueue Kueue's too, in the namespaces
	// NamespaceSelector selects.
	WithoutQueueName bool
	// NamespaceSelector selects the namespaces whose jobs without a queue name are Kueue's; nil
	// selects every namespace. With Kueue's feature gate ManagedJobsNamespaceSelectorAlwaysRespected
	// on, a job in a namespace it does not select is never Kueue's, queue name or not.
	NamespaceSelector labels.Selector
}

// ParseNamespaceSelector parses a label selector (`convoy.dev/team`, `env in (prod)`); empty
// selects every namespace (nil).
func ParseNamespaceSelector(s string) (labels.Selector, error) {
	if s == "" {
		return nil, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("namespace selector %q: %w", s, err)
	}
	return sel, nil
}

// Manages reports whether Kueue manages job, in a namespace with labels nsLabels, as Kueue's job
// reconciler (jobframework.JobReconciler) decides it.
func (m Management) Manages(job *convoy.TrainingJob, nsLabels map[string]string) bool {
	selected := m.NamespaceSelector == nil || m.NamespaceSelector.Matches(labels.Set(nsLabels))
	if features.Enabled(features.ManagedJobsNamespaceSelectorAlwaysRespected) && !selected {
		return false
	}
	if job.QueueName() != "" {
		return true
	}
	return m.WithoutQueueName && selected
}

// managesInNamespace is Manages with the namespace's labels read through c.
func (m Management) managesInNamespace(ctx context.Context, c client.Client, job *convoy.TrainingJob) (bool, error) {
	if m.NamespaceSelector == nil {
		return m.Manages(job, nil), nil
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: job.Namespace}, ns); err != nil {
		return false, fmt.Errorf("reading namespace %s for Kueue's managedJobsNamespaceSelector: %w", job.Namespace, err)
	}
	return m.Manages(job, ns.Labels), nil
}

// selector is NamespaceSelector as Kueue's jobframework takes it: every namespace when nil.
func (m Management) selector() labels.Selector {
	if m.NamespaceSelector == nil {
		return labels.Everything()
	}
	return m.NamespaceSelector
}

// ManagementOf is the Management that Kueue's configuration cfg sets. A configuration without
// managedJobsNamespaceSelector gives a nil selector (every namespace), not Kueue's default.
func ManagementOf(cfg *configapi.Configuration) (Management, error) {
	m := Management{WithoutQueueName: cfg.ManageJobsWithoutQueueName}
	if cfg.ManagedJobsNamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(cfg.ManagedJobsNamespaceSelector)
		if err != nil {
			return Management{}, fmt.Errorf("managedJobsNamespaceSelector: %w", err)
		}
		m.NamespaceSelector = sel
	}
	return m, nil
}
