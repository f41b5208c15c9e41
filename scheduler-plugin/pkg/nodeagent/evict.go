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

package nodeagent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Eviction is a pod the agent evicts because GPUs it holds turned unhealthy.
type Eviction struct {
	// Pod is "namespace/name", as GPUDevice.AllocatedTo spells it.
	Pod string
	// GPUs are the indices of the pod's GPUs that turned unhealthy.
	GPUs []int32
	// Reason names each of those GPUs and why it is unhealthy.
	Reason string

	lastErr string // the last failed attempt's error, logged once
}

// Evictions returns the pods to evict for the GPUs that just turned unhealthy: each pod holding
// one of them, once, ordered by pod, with every such GPU in its reason. GPUs no pod holds evict
// nothing.
func Evictions(unhealthy []convoy.GPUDevice) []Eviction {
	byPod := map[string]*Eviction{}
	var out []*Eviction
	for _, g := range unhealthy {
		if g.AllocatedTo == "" {
			continue
		}
		e := byPod[g.AllocatedTo]
		if e == nil {
			e = &Eviction{Pod: g.AllocatedTo}
			byPod[g.AllocatedTo] = e
			out = append(out, e)
		}
		e.GPUs = append(e.GPUs, g.Index)
		reason := fmt.Sprintf("GPU %d (%s) unhealthy: %s", g.Index, g.UUID, g.HealthReason)
		if e.Reason == "" {
			e.Reason = reason
		} else {
			e.Reason += "; " + reason
		}
	}
	slices.SortFunc(out, func(a, b *Eviction) int { return strings.Compare(a.Pod, b.Pod) })
	evictions := make([]Eviction, len(out))
	for i, e := range out {
		evictions[i] = *e
	}
	return evictions
}

// stillHeld reports whether the pod still holds one of the GPUs it is evicted for.
func (e *Eviction) stillHeld(s *convoy.GPUNodeStatus) bool {
	for _, g := range s.GPUs {
		if g.AllocatedTo == e.Pod && slices.Contains(e.GPUs, g.Index) {
			return true
		}
	}
	return false
}

// ofTrainingJob reports whether a TrainingJob controls the pod: it is a pod of a Convoy gang.
func ofTrainingJob(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "TrainingJob" && strings.HasPrefix(ref.APIVersion, convoy.GroupVersion.Group+"/")
}

// evict deletes each pending pod that still holds its unhealthy GPUs, is bound to this node and
// is a TrainingJob's, with the pod's UID as a precondition; the operator restarts the gang
// elsewhere, as for any lost pod. It deletes rather than evicts: the admission policy
// convoy-node-agent-pod-deletes can hold a delete to the pods of a TrainingJob on the agent's node
// (a DELETE shows it the pod), while an Eviction shows it only the pod's name, so the agent has no
// right to evict at all. A pod of no TrainingJob is left to its owner: the GPU is published
// unhealthy, so nothing new is placed on it. A delete the API server fails is retried at the next
// poll while the pod holds the GPU; one that succeeded, or whose pod is gone, is done.
func (w *worker) evict(ctx context.Context, node *corev1.Node, s *convoy.GPUNodeStatus) {
	pending := w.evictions[:0]
	for _, e := range w.evictions {
		if !e.stillHeld(s) {
			continue
		}
		ns, name, _ := strings.Cut(e.Pod, "/")
		pod := &corev1.Pod{}
		if err := w.a.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			if !apierrors.IsNotFound(err) {
				w.log.Error(err, "Reading the pod to evict from the cache", "pod", e.Pod)
				pending = append(pending, e)
			}
			continue
		}
		// The cache holds only this node's pods on a real node; a simulator's holds every node's.
		if pod.Spec.NodeName != w.name || pod.DeletionTimestamp != nil {
			continue
		}
		if !ofTrainingJob(pod) {
			w.log.Info("Leaving the pod of no TrainingJob on an unhealthy GPU to its owner", "pod", e.Pod, "reason", e.Reason)
			continue
		}
		uid := pod.UID
		err := w.a.client.Delete(ctx, pod, client.Preconditions{UID: &uid})
		switch {
		case err == nil:
			w.log.Info("Deleted the TrainingJob pod holding an unhealthy GPU", "pod", e.Pod, "reason", e.Reason)
			w.a.recorder.Eventf(node, pod, corev1.EventTypeWarning, ReasonPodEvicted, "Evict",
				"Deleted pod %s: %s", e.Pod, e.Reason)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone, or replaced by a pod of the same name that holds nothing yet.
		default:
			if msg := err.Error(); msg != e.lastErr {
				w.log.Error(err, "Deleting the pod holding an unhealthy GPU: retrying at the next poll", "pod", e.Pod)
				e.lastErr = msg
			}
			pending = append(pending, e)
		}
	}
	w.evictions = pending
}
