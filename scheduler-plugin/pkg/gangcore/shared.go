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
	"fmt"
	"sync"

	"k8s.io/client-go/kubernetes"
	fwk "k8s.io/kube-scheduler/framework"
)

var (
	registryMu sync.Mutex
	registry   = map[kubernetes.Interface]*State{}
)

// Shared returns the State of the scheduler that h belongs to, creating it with opts on first
// use. Every profile of a scheduler shares one State: GPUs and plans are cluster-wide.
func Shared(ctx context.Context, h fwk.Handle, opts Options) (*State, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if s := registry[h.ClientSet()]; s != nil {
		if s.opts != opts {
			return nil, fmt.Errorf("GangPlacement has different args in two profiles (%+v and %+v): give every profile the same GangPlacementArgs", s.opts, opts)
		}
		return s, nil
	}
	s, err := New(ctx, h, opts)
	if err != nil {
		return nil, err
	}
	registry[h.ClientSet()] = s
	return s, nil
}

// Lookup returns the State GangPlacement created for h's scheduler, or nil when GangPlacement is
// not enabled.
func Lookup(h fwk.Handle) *State {
	registryMu.Lock()
	defer registryMu.Unlock()
	return registry[h.ClientSet()]
}
