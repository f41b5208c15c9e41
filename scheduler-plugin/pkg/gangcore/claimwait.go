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

package gangcore

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/klog/v2"
)

// A pod DynamicResources turned away waits for a claim's status to change: its own claim's, or
// any claim's devices freed. Upstream's DynamicResources registers every ResourceClaim update for
// it, and the scheduling queue walks every pending pod on each, the thousands GangGate holds
// too, twice for every DRA pod bound (its allocation assumed in PreFilter, then written). The
// shipped profile runs bindquiet's DynamicResources, which registers no claim update; the State
// brings back the pods it may have turned away instead (claimWaiters).
//
// A pod is recorded when DynamicResources' PreFilter starts on it, before it reads a claim, unless
// GangPlacement allocated its claims: then DynamicResources only checks what GangPlacement chose,
// and a rejection drops the gang's plan, which GangPlacement retries (Rejected). A claim update
// that frees devices activates every recorded pod; any other change of a claim's status, the
// recorded pods that use it. A pod activated while in flight is retried when it fails. The
// informer hands an update to the State and to the scheduler's claim cache in no set order, so the
// activation waits until the cache has it: the pod's next cycle reads it there.

// claimCatchUp bounds the wait for the claim cache to have an update.
const claimCatchUp = 5 * time.Second

// claimWaiters holds the pods DynamicResources may have turned away, and activates them when a
// claim changes.
type claimWaiters struct {
	activate func(klog.Logger, map[string]*corev1.Pod)
	// cached returns the resourceVersion of the claim ("namespace/name") in the scheduler's claim
	// cache; false when it has none.
	cached func(key string) (string, bool)
	wake   chan struct{}

	// mu guards pods and changes.
	mu   sync.Mutex
	pods map[types.UID]*corev1.Pod
	// changes are the claim updates the loop has yet to act on.
	changes []claimChange
}

// claimChange is a claim's status changed: its key and resourceVersion ("": a claim the claim
// cache restored, nothing to wait for), and whether devices were freed.
type claimChange struct {
	key, version string
	freed        bool
}

func newClaimWaiters(activate func(klog.Logger, map[string]*corev1.Pod), cached func(string) (string, bool)) *claimWaiters {
	return &claimWaiters{activate: activate, cached: cached, wake: make(chan struct{}, 1), pods: map[types.UID]*corev1.Pod{}}
}

// await records the pod.
func (w *claimWaiters) await(pod *corev1.Pod) {
	w.mu.Lock()
	w.pods[pod.UID] = pod
	w.mu.Unlock()
}

// forget drops the pod: it is bound or gone, or DynamicResources has nothing to do with it.
func (w *claimWaiters) forget(uid types.UID) {
	w.mu.Lock()
	delete(w.pods, uid)
	w.mu.Unlock()
}

// updated is the ResourceClaim informer's update: a change of the claim's status is acted on.
func (w *claimWaiters) updated(oldObj, newObj any) {
	o, ok1 := oldObj.(*resourcev1.ResourceClaim)
	n, ok2 := newObj.(*resourcev1.ResourceClaim)
	if !ok1 || !ok2 || equality.Semantic.DeepEqual(&o.Status, &n.Status) {
		return
	}
	w.changed(claimChange{key: n.Namespace + "/" + n.Name, version: n.ResourceVersion,
		freed: o.Status.Allocation != nil && n.Status.Allocation == nil})
}

// freed reports devices freed in the claim cache itself (an assumed allocation restored).
func (w *claimWaiters) freed() { w.changed(claimChange{freed: true}) }

func (w *claimWaiters) changed(c claimChange) {
	w.mu.Lock()
	w.changes = append(w.changes, c)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// loop acts on the changes until ctx ends.
func (w *claimWaiters) loop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		w.mu.Lock()
		changes := w.changes
		w.changes = nil
		w.mu.Unlock()
		for _, c := range changes {
			w.catchUp(ctx, c)
		}
		if pods := w.take(changes); len(pods) > 0 {
			logger.V(3).Info("Claims changed: activating the pods DynamicResources may have turned away", "pods", len(pods))
			w.activate(logger, pods)
		}
	}
}

// catchUp waits, up to claimCatchUp, until the claim cache has the change.
func (w *claimWaiters) catchUp(ctx context.Context, c claimChange) {
	if c.version == "" {
		return
	}
	deadline := time.Now().Add(claimCatchUp)
	for {
		v, ok := w.cached(c.key)
		if !ok {
			return
		}
		if order, err := resourceversion.CompareResourceVersion(v, c.version); err != nil || order >= 0 || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// take removes and returns the recorded pods the changes concern: all of them where one freed
// devices, else those that use a changed claim.
func (w *claimWaiters) take(changes []claimChange) map[string]*corev1.Pod {
	keys := map[string]bool{}
	all := false
	for _, c := range changes {
		all = all || c.freed
		keys[c.key] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]*corev1.Pod{}
	for uid, p := range w.pods {
		if !all && !usesAny(p, keys) {
			continue
		}
		out[p.Namespace+"/"+p.Name] = p
		delete(w.pods, uid)
	}
	return out
}

func usesAny(pod *corev1.Pod, keys map[string]bool) bool {
	for _, k := range podClaims(pod) {
		if keys[k] {
			return true
		}
	}
	return false
}

// AwaitClaims records that DynamicResources' PreFilter starts on the pod (see above); a pod whose
// claims GangPlacement allocated is not recorded.
func (s *State) AwaitClaims(pod *corev1.Pod) {
	if !s.WritesClaims(pod) {
		s.claimWaiters.await(pod)
	}
}

// ClaimsSettled forgets the pod: it is bound, or DynamicResources has nothing to do with it.
func (s *State) ClaimsSettled(pod *corev1.Pod) { s.claimWaiters.forget(pod.UID) }

// ClaimsRestored reports that allocations assumed in the scheduler's claim cache were taken back:
// their devices are free again.
func (s *State) ClaimsRestored() { s.claimWaiters.freed() }

// cachedClaimVersion is the resourceVersion of the claim in the scheduler's claim cache.
func (s *State) cachedClaimVersion(key string) (string, bool) {
	dm := s.handle.SharedDRAManager()
	if dm == nil {
		return "", false
	}
	ns, name, _ := strings.Cut(key, "/")
	c, err := dm.ResourceClaims().Get(ns, name)
	if err != nil {
		return "", false
	}
	return c.ResourceVersion, true
}
