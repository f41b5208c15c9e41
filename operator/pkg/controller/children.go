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
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// ensureChildren creates the job's ConfigMap, Services, NetworkPolicy, PodDisruptionBudget and
// PodGroups when the cache does not hold them, and updates them when they drifted from what the
// builders return. A reconcile that finds them in place makes no API call. None of them needs
// another, so they are written at once: a new job's reconcile waits one round trip for them, not
// one each. The SSH Secret is only created, when pods are about to be.
func (r *Reconciler) ensureChildren(ctx context.Context, job *convoy.TrainingJob, plugin mlframework.Plugin, creatingPods bool) error {
	var children []func() error
	cm := builder.ConfigMap(job, plugin, r.Options)
	children = append(children, func() error {
		return ensure(ctx, r, job, cm, &corev1.ConfigMap{}, func(want, have *corev1.ConfigMap) bool {
			if maps.Equal(want.Data, have.Data) {
				return false
			}
			have.Data = want.Data
			return true
		})
	})
	services := []*corev1.Service{builder.HeadlessService(job)}
	if s := builder.MetricsService(job); s != nil {
		services = append(services, s)
	}
	for _, svc := range services {
		children = append(children, func() error {
			return ensure(ctx, r, job, svc, &corev1.Service{}, func(want, have *corev1.Service) bool {
				if equality.Semantic.DeepEqual(want.Spec.Selector, have.Spec.Selector) &&
					equality.Semantic.DeepEqual(want.Spec.Ports, have.Spec.Ports) &&
					want.Spec.PublishNotReadyAddresses == have.Spec.PublishNotReadyAddresses {
					return false
				}
				have.Spec.Selector, have.Spec.Ports = want.Spec.Selector, want.Spec.Ports
				have.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
				return true
			})
		})
	}
	if np := builder.NetworkPolicy(job, r.Options); np != nil {
		children = append(children, func() error {
			return ensure(ctx, r, job, np, &networkingv1.NetworkPolicy{}, func(want, have *networkingv1.NetworkPolicy) bool {
				if equality.Semantic.DeepEqual(want.Spec, have.Spec) {
					return false
				}
				have.Spec = want.Spec
				return true
			})
		})
	}
	pdb := builder.DisruptionBudget(job, plugin, r.Options)
	children = append(children, func() error { return r.ensureDisruptionBudget(ctx, job, pdb) })
	pg := builder.PodGroup(job, builder.Pods(job, plugin, r.Options), r.Options)
	children = append(children, func() error {
		return ensure(ctx, r, job, pg, &schedv1alpha1.PodGroup{}, func(want, have *schedv1alpha1.PodGroup) bool {
			changed := false
			if !equality.Semantic.DeepEqual(want.Spec, have.Spec) {
				have.Spec = want.Spec
				changed = true
			}
			for k, v := range want.Annotations {
				if have.Annotations[k] != v {
					if have.Annotations == nil {
						have.Annotations = map[string]string{}
					}
					have.Annotations[k] = v
					changed = true
				}
			}
			return changed
		})
	})
	if r.Options.WorkloadAPI {
		// Their specs are immutable: they are created, never updated.
		for _, want := range []*unstructured.Unstructured{builder.Workload(job, pg.Spec.MinMember), builder.UpstreamPodGroup(job, pg.Spec.MinMember)} {
			children = append(children, func() error {
				have := &unstructured.Unstructured{}
				have.SetGroupVersionKind(want.GroupVersionKind())
				return ensure(ctx, r, job, want, have, func(_, _ *unstructured.Unstructured) bool { return false })
			})
		}
	}
	// The first error in the order above, whichever came first: a job with two children taken
	// names the same one each time.
	errs := make([]error, len(children))
	var wg sync.WaitGroup
	for i, child := range children {
		wg.Go(func() { errs[i] = child() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if creatingPods && plugin.NeedsSSHKeys() {
		return r.ensureSSHSecret(ctx, job)
	}
	return nil
}

// ensureSSHSecret gives the job the SSH Secret its pods mount, before they are created. The
// operator never reads a Secret: its role grants create alone. The Secret gets a name the API
// server generates, which no one can take first, and status.sshSecretName records it before any
// pod mounts it. The recorded Secret is kept, so a restarted gang keeps the keys its launcher may
// have cached; a dry-run create of its name (create rights again) tells whether it is gone, and a
// new one replaces it. A Secret whose name could not be recorded is the job's: it goes with the
// job, and the next reconcile creates another.
func (r *Reconciler) ensureSSHSecret(ctx context.Context, job *convoy.TrainingJob) error {
	if name := job.Status.SSHSecretName; name != "" {
		probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: name}}
		err := r.Client.Create(ctx, probe, client.DryRunAll)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("looking for Secret %s: %w", name, err)
		}
	}
	priv, pub, err := r.NewSSHKeyPair()
	if err != nil {
		return err
	}
	secret := builder.SSHSecret(job, priv, pub)
	if err := r.Client.Create(ctx, secret); err != nil {
		return fmt.Errorf("creating Secret %s: %w", secret.GenerateName, err)
	}
	st := *job.Status.DeepCopy()
	st.SSHSecretName = secret.Name
	if err := r.writeStatus(ctx, job, st); err != nil {
		return fmt.Errorf("recording Secret %s in the status: %w", secret.Name, err)
	}
	return nil
}

// ensureDisruptionBudget keeps the job's PodDisruptionBudget as builder.DisruptionBudget has it
// (pdb), and deletes the one the job owns when the operator gives jobs none (pdb nil).
func (r *Reconciler) ensureDisruptionBudget(ctx context.Context, job *convoy.TrainingJob, pdb *policyv1.PodDisruptionBudget) error {
	if pdb != nil {
		return ensure(ctx, r, job, pdb, &policyv1.PodDisruptionBudget{}, func(want, have *policyv1.PodDisruptionBudget) bool {
			if equality.Semantic.DeepEqual(want.Spec, have.Spec) {
				return false
			}
			have.Spec = want.Spec
			return true
		})
	}
	have := &policyv1.PodDisruptionBudget{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(job), have); err != nil || !metav1.IsControlledBy(have, job) {
		return client.IgnoreNotFound(err)
	}
	if err := r.Client.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting PodDisruptionBudget %s: %w", have.Name, err)
	}
	return nil
}

// ensureCheckpointClaim creates the claim <job>-checkpoints for a job that checkpoints without
// naming a claim (when create is set, as the gang is wanted), and keeps the job its owner only
// under reclaimPolicy Delete, which may change at any time. A claim of that name that is not the
// job's (builder.IsOwnCheckpointClaim) is never used.
func (r *Reconciler) ensureCheckpointClaim(ctx context.Context, job *convoy.TrainingJob, create bool) error {
	want := builder.CheckpointClaim(job)
	if want == nil {
		return nil
	}
	have := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		if !create {
			return nil
		}
		switch err := r.Client.Create(ctx, want); {
		case err == nil:
			return nil
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("creating PersistentVolumeClaim %s: %w", want.Name, err)
		}
		// The cache holds only claims labelled for a job: read this one past it.
		have, err := r.metadataPastCache(ctx, want)
		if err != nil {
			return err
		}
		if !builder.IsOwnCheckpointClaim(job, have) {
			return &childConflict{kind: "PersistentVolumeClaim", namespace: job.Namespace, name: want.Name}
		}
		return nil
	}
	if err != nil {
		return err
	}
	if !builder.IsOwnCheckpointClaim(job, have) {
		if !create {
			return nil
		}
		return &childConflict{kind: "PersistentVolumeClaim", namespace: job.Namespace, name: want.Name}
	}
	owners := slices.DeleteFunc(slices.Clone(have.OwnerReferences), func(o metav1.OwnerReference) bool { return o.UID == job.UID })
	owners = append(owners, want.OwnerReferences...)
	if equality.Semantic.DeepEqual(owners, have.OwnerReferences) {
		return nil
	}
	have.OwnerReferences = owners
	if err := r.Client.Update(ctx, have); err != nil {
		return fmt.Errorf("updating the owners of PersistentVolumeClaim %s: %w", want.Name, err)
	}
	return nil
}

// ensureGPUClaimTemplate creates the ResourceClaimTemplate of a job with spec.gpu while the job
// is not finished: Kueue reads it to count the job's devices before it admits the job. A
// template's spec is immutable, so one that no longer matches the job (spec.gpu changed while
// the job was suspended) is replaced; the claims made from it belong to their pods.
func (r *Reconciler) ensureGPUClaimTemplate(ctx context.Context, job *convoy.TrainingJob) error {
	want := builder.GPUClaimTemplate(job)
	if want == nil || job.Status.IsFinished() {
		return nil
	}
	have := &resourcev1.ResourceClaimTemplate{}
	stale := false
	if err := ensure(ctx, r, job, want, have, func(want, have *resourcev1.ResourceClaimTemplate) bool {
		stale = !equality.Semantic.DeepEqual(want.Spec, have.Spec)
		return false
	}); err != nil || !stale {
		return err
	}
	if err := r.Client.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replacing ResourceClaimTemplate %s: %w", have.Name, err)
	}
	if err := r.Client.Create(ctx, want); err != nil {
		return fmt.Errorf("replacing ResourceClaimTemplate %s: %w", want.Name, err)
	}
	return nil
}

// createGPUClaim creates a worker's GPU claim (builder.GPUClaim; nil: none) before its pod.
func (r *Reconciler) createGPUClaim(ctx context.Context, job *convoy.TrainingJob, claim *resourcev1.ResourceClaim) error {
	if claim == nil {
		return nil
	}
	err := r.Client.Create(ctx, claim)
	if apierrors.IsAlreadyExists(err) {
		// Ours, not in the cache yet, or someone else's.
		err = r.ownsTaken(ctx, job, claim)
	}
	if err != nil {
		return fmt.Errorf("creating ResourceClaim %s: %w", claim.Name, err)
	}
	return nil
}

// syncGPUClaims keeps the job's GPU claims (builder.GPUClaim) to those of the pods it wants. It
// deletes the claims of earlier restart attempts, of workers an elastic shrink let go, and all of
// them once the job is finished; a claim still allocated to a pod going away keeps its devices,
// held by its finalizer, until the resource claim controller sees the pod gone. It makes again
// the claim of a pod the scheduler has looked at (condition PodScheduled) but not bound, when the
// claim is gone (deleted by hand): without it the pod would wait for the claim forever.
func (r *Reconciler) syncGPUClaims(ctx context.Context, job *convoy.TrainingJob, plugin mlframework.Plugin, pods []*corev1.Pod) error {
	if job.Spec.GPU == nil {
		return nil
	}
	claims := &resourcev1.ResourceClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(job.Namespace), client.MatchingLabels{convoy.LabelJobName: job.Name}); err != nil {
		return err
	}
	wanted := map[string]bool{}
	if !job.Status.IsFinished() {
		for _, rep := range plugin.Replicas(job) {
			wanted[builder.GPUClaimNameOf(mlframework.PodName(job, rep, job.Status.RestartCount))] = true
		}
	}
	have := map[string]bool{}
	for i := range claims.Items {
		c := &claims.Items[i]
		have[c.Name] = true
		if c.DeletionTimestamp != nil || !metav1.IsControlledBy(c, job) || wanted[c.Name] {
			continue
		}
		if err := r.Client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting ResourceClaim %s: %w", c.Name, err)
		}
	}
	for _, pod := range pods {
		name := builder.GPUClaimNameOf(pod.Name)
		if !wanted[name] || have[name] || pod.DeletionTimestamp != nil || pod.Spec.NodeName != "" ||
			!slices.ContainsFunc(pod.Spec.ResourceClaims, func(c corev1.PodResourceClaim) bool { return ptr.Deref(c.ResourceClaimName, "") == name }) ||
			!slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled }) {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Making again a worker's deleted GPU claim", "pod", pod.Name, "resourceClaim", name)
		if err := r.createGPUClaim(ctx, job, builder.GPUClaimFor(job, pod.Name, pod.Labels[convoy.LabelRestartAttempt])); err != nil {
			return err
		}
	}
	return nil
}

// metadataPastCache reads the metadata of the object of obj's kind and name from the API server:
// the cache holds only objects labelled for a job.
func (r *Reconciler) metadataPastCache(ctx context.Context, obj client.Object) (*metav1.PartialObjectMetadata, error) {
	gvk, err := apiutil.GVKForObject(obj, r.Client.Scheme())
	if err != nil {
		return nil, err
	}
	have := &metav1.PartialObjectMetadata{}
	have.SetGroupVersionKind(gvk)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), have); err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return have, nil
}

// ownsTaken is called when creating want found its name taken: it is nil when the object of that
// name is the job's (created by an earlier reconcile the cache has not caught up with), and a
// childConflict when it is not.
func (r *Reconciler) ownsTaken(ctx context.Context, job *convoy.TrainingJob, want client.Object) error {
	have, err := r.metadataPastCache(ctx, want)
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(have, job) {
		return &childConflict{kind: kindOf(r.Client, want), namespace: have.Namespace, name: have.Name}
	}
	return nil
}

// childConflict is an object with the name of one of the job's children that the job does not
// control. The job never uses it (ConditionChildConflict).
type childConflict struct {
	kind, namespace, name string
}

func (c *childConflict) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not controlled by this TrainingJob, which will not use it: delete it or rename the job", c.kind, c.namespace, c.name)
}

// ensure creates want when the cache has no object of its name, or else updates the cached object
// when sync copied a difference into it. An object of that name that the job does not control,
// in the cache or (unlabelled) only on the API server, is an error a person must resolve.
func ensure[T client.Object](ctx context.Context, r *Reconciler, job *convoy.TrainingJob, want, have T, sync func(want, have T) bool) error {
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		err := r.Client.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			return r.ownsTaken(ctx, job, want)
		}
		if err != nil {
			return fmt.Errorf("creating %s %s: %w", kindOf(r.Client, want), want.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(have, job) {
		return &childConflict{kind: kindOf(r.Client, want), namespace: have.GetNamespace(), name: have.GetName()}
	}
	if sync(want, have) {
		if err := r.Client.Update(ctx, have); err != nil {
			return fmt.Errorf("updating %s %s: %w", kindOf(r.Client, want), want.GetName(), err)
		}
	}
	return nil
}

// kindOf is obj's kind, as the client's scheme knows it.
func kindOf(c client.Client, obj client.Object) string {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}
