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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
)

// wakeDelay gathers the GPUNode updates of a moment (a node agent restarted across the fleet, a
// switch's GPUs healthy again) into one activation.
const wakeDelay = time.Second

// A GPUNode's changes reach the pods GangPlacement rejected through the State, not the scheduling
// queue: a plugin that registers a cluster event makes the queue walk every pending pod on every
// such event, the thousands PreEnqueue holds included, and node agents update their GPUNodes as
// pods come and go. Instead the State remembers the pods whose gang found no room (await) and
// activates just those when a GPUNode appears or reports more healthy or free GPUs, and when the
// State sees a pod that held GPUs go (State.onPodDelete says why).

// A gang whose plan was dropped after some of its pods were reserved (Permit timed out, a bind
// failed, Coscheduling's Permit found no PodGroup in its own cache, which can lag the scheduler's)
// is tried again: its pending pods are activated after retryDelay, doubled on each retry of the
// gang up to maxRetryDelay (client-go's per-key Backoff), until the gang is bound. Without it, the
// pods Permit turned away wait for an unrelated pod or PodGroup event, or for the scheduling
// queue's five-minute flush.
const (
	retryDelay    = time.Second
	maxRetryDelay = time.Minute
)

// waiters brings pods back to the scheduling queue: the pods whose gang found no room, when room
// may have come (wake), and the gangs whose plan was dropped, after a backoff (retry).
type waiters struct {
	activate func(klog.Logger, map[string]*corev1.Pod)
	// gather is how long the loop waits after a wake for more (wakeDelay).
	gather time.Duration
	wake   chan struct{}
	// backoff holds, by gang, the delay of its next retry since it was last bound; it locks
	// itself.
	backoff *flowcontrol.Backoff

	// mu guards waiting and armed.
	mu sync.Mutex
	// waiting holds the pods whose gang found no room, by UID.
	waiting map[types.UID]*corev1.Pod
	// armed holds the gangs with a retry to come.
	armed map[string]bool
}

func newWaiters(activate func(klog.Logger, map[string]*corev1.Pod), gather, retry, maxRetry time.Duration) *waiters {
	return &waiters{activate: activate, gather: gather, wake: make(chan struct{}, 1),
		backoff: flowcontrol.NewBackOff(retry, maxRetry), waiting: map[types.UID]*corev1.Pod{}, armed: map[string]bool{}}
}

// await records that the pod's gang found no room.
func (w *waiters) await(pod *corev1.Pod) {
	w.mu.Lock()
	w.waiting[pod.UID] = pod
	w.mu.Unlock()
}

// found forgets the pod: its gang has a plan, or it is gone.
func (w *waiters) found(uid types.UID) {
	w.mu.Lock()
	delete(w.waiting, uid)
	w.mu.Unlock()
}

// moreRoom asks, without blocking, for the waiting pods to be activated.
func (w *waiters) moreRoom() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// loop activates the waiting pods, gather after the first ask of a burst, until ctx ends. They
// are forgotten: each one that still finds no room is recorded again by its next cycle.
func (w *waiters) loop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.gather):
		}
		w.mu.Lock()
		pods := make(map[string]*corev1.Pod, len(w.waiting))
		for _, p := range w.waiting {
			pods[p.Namespace+"/"+p.Name] = p
		}
		clear(w.waiting)
		w.mu.Unlock()
		if len(pods) > 0 {
			logger.V(3).Info("GPUs freed or healthy again: activating the pods whose gangs found no room", "pods", len(pods))
			w.activate(logger, pods)
		}
	}
}

// retry activates the gang's pending pods after its backoff, unless a retry is armed already.
func (w *waiters) retry(key string, pending func() map[string]*corev1.Pod) {
	w.mu.Lock()
	if w.armed[key] {
		w.mu.Unlock()
		return
	}
	w.armed[key] = true
	w.mu.Unlock()
	w.backoff.GC()
	w.backoff.Next(key, time.Now())
	delay := w.backoff.Get(key)
	time.AfterFunc(delay, func() {
		w.mu.Lock()
		delete(w.armed, key)
		w.mu.Unlock()
		if pods := pending(); len(pods) > 0 {
			klog.Background().V(3).Info("Trying again the gang whose plan was dropped", "gang", key, "after", delay, "pods", len(pods))
			w.activate(klog.Background(), pods)
		}
	})
}

// resetBackoff starts the gang's next retry from the first delay again: it was bound, or it is
// gone.
func (w *waiters) resetBackoff(key string) { w.backoff.Reset(key) }

// retryGang arms the retry of the PodGroup's gang, unless one is armed already.
func (s *State) retryGang(namespace, name string) {
	s.waiters.retry(namespace+"/"+name, func() map[string]*corev1.Pod { return s.gangs.pendingMembers(namespace, name) })
}
