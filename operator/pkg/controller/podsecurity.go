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

package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// podOptions are the builder's options for the job's pods: the operator's, and the Pod Security
// level the job's namespace enforces.
func (r *Reconciler) podOptions(ctx context.Context, job *convoy.TrainingJob) (builder.Options, error) {
	return OptionsInNamespace(ctx, r.Client, job.Namespace, r.Options)
}

// OptionsInNamespace returns opts with the Pod Security level namespace enforces (its label
// pod-security.kubernetes.io/enforce), read through c.
func OptionsInNamespace(ctx context.Context, c client.Reader, namespace string, opts builder.Options) (builder.Options, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return opts, client.IgnoreNotFound(err)
	}
	opts.EnforcedPodSecurity = builder.EnforcedPodSecurity(&ns)
	return opts, nil
}

// podSecurityChanged passes a namespace's updates that change the Pod Security level it enforces:
// its jobs' pods are built for that level, and their status says which level they meet. The watch
// also keeps the namespaces in the cache from the start, so that reading one never starts an
// informer while the manager stops.
var podSecurityChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetLabels()[api.EnforceLevelLabel] != e.ObjectNew.GetLabels()[api.EnforceLevelLabel]
	},
}

// jobsInNamespace maps a namespace to its TrainingJobs.
func (r *Reconciler) jobsInNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	var jobs convoy.TrainingJobList
	if err := r.Client.List(ctx, &jobs, client.InNamespace(ns.GetName())); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(jobs.Items))
	for _, j := range jobs.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&j)})
	}
	return out
}
