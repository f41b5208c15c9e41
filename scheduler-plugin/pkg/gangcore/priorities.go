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
	"sync"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// priorities counts the pods the scheduler's pod informer holds, pending or bound, by priority. A
// pod in the scheduler's snapshot, bound or assumed, is one of them, and a pod's priority never
// changes, so when no pod has a priority below a gang's, no pod can be its victim: anyVictim
// answers that without walking the pods of every node. The count comes from a handler of its
// own, so it may trail the snapshot by a pod just added; a preemption then finds no victim in it,
// as it would had the pod come after the snapshot. Until the handler has had the informer's
// first list, it knows no pod and says a victim may exist.
type priorities struct {
	// synced is the handler's registration's HasSynced; nil until it is registered.
	synced func() bool
	mu     sync.Mutex
	n      map[int32]int
}

func newPriorities() *priorities { return &priorities{n: map[int32]int{}} }

func (c *priorities) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.change(obj, 1) },
		DeleteFunc: func(obj any) { c.change(obj, -1) },
	}
}

func (c *priorities) change(obj any, by int) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	pr := corev1helpers.PodPriority(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[pr] += by; c.n[pr] <= 0 {
		delete(c.n, pr)
	}
}

// below reports whether any pod may have a priority below pr.
func (c *priorities) below(pr int32) bool {
	if c.synced == nil || !c.synced() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range c.n {
		if p < pr {
			return true
		}
	}
	return false
}
