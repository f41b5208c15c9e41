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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// wakeDelay gathers the GPUNode updates of a moment (a node agent restarted across the fleet, a
// switch's GPUs healthy again) into one activation.
const wakeDelay = time.Second

// A GPUNode's changes reach the pods GangPlacement rejected through the State, not the scheduling
// queue: a plugin that registers a cluster event makes the queue walk every pending pod on every
// such event, the thousands PreEnqueue holds included, and node agents update their GPUNodes as
// pods come and go. Instead the State remembers the pods whose gang found no room (awaitRoom) and
// activates just those when a GPUNode appears or reports more healthy or free GPUs.

// awaitRoom records that the pod's gang found no room.
func (s *State) awaitRoom(pod *corev1.Pod) {
	s.waitMu.Lock()
	s.waiting[pod.UID] = pod
	s.waitMu.Unlock()
}

// roomFound forgets the pod: its gang has a plan, or it is gone.
func (s *State) roomFound(uid types.UID) {
	s.waitMu.Lock()
	delete(s.waiting, uid)
	s.waitMu.Unlock()
}

// moreRoom asks, without blocking, for the waiting pods to be activated.
func (s *State) moreRoom() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// wakeLoop activates the waiting pods, wakeDelay after the first ask of a burst. They are
// forgotten: each one that still finds no room is recorded again by its next cycle.
func (s *State) wakeLoop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wakeDelay):
		}
		s.waitMu.Lock()
		pods := make(map[string]*corev1.Pod, len(s.waiting))
		for _, p := range s.waiting {
			pods[p.Namespace+"/"+p.Name] = p
		}
		clear(s.waiting)
		s.waitMu.Unlock()
		if len(pods) > 0 {
			logger.V(3).Info("GPUs freed or healthy again: activating the pods whose gangs found no room", "pods", len(pods))
			s.handle.Activate(logger, pods)
		}
	}
}

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

// retryGang arms the gang's retry, unless one is armed already.
func (s *State) retryGang(namespace, name string) {
	s.retry(namespace+"/"+name, func() map[string]*corev1.Pod { return s.pendingMembers(namespace, name) })
}

// retry activates the pods after the gang's backoff, unless a retry is armed already.
func (s *State) retry(key string, pending func() map[string]*corev1.Pod) {
	s.waitMu.Lock()
	if s.retryArmed[key] {
		s.waitMu.Unlock()
		return
	}
	s.retryArmed[key] = true
	s.waitMu.Unlock()
	s.retryBackoff.GC()
	s.retryBackoff.Next(key, time.Now())
	delay := s.retryBackoff.Get(key)
	time.AfterFunc(delay, func() {
		s.waitMu.Lock()
		delete(s.retryArmed, key)
		s.waitMu.Unlock()
		if pods := pending(); len(pods) > 0 {
			klog.Background().V(3).Info("Trying again the gang whose plan was dropped", "gang", key, "after", delay, "pods", len(pods))
			s.handle.Activate(klog.Background(), pods)
		}
	})
}
