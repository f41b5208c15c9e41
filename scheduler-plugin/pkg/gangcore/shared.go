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
	"reflect"
	"sync"

	"k8s.io/client-go/kubernetes"
	fwk "k8s.io/kube-scheduler/framework"
)

// The States of this process, one per scheduler, by the scheduler's client set: every profile of
// a scheduler shares one State, for GPUs and plans are cluster-wide. A State is held by the
// profiles that asked for it (Shared) until each one's context ends or its framework closes
// GangPlacement (Release); when the last lets go, the State stops and is forgotten.
var (
	registryMu sync.Mutex
	registry   = map[kubernetes.Interface]*shared{}
)

// shared is a State and the frameworks, one per profile, that hold it.
type shared struct {
	state   *State
	holders map[fwk.Handle]bool
}

// Shared returns the State of the scheduler that h belongs to, creating it with opts on first
// use, and holds it for h's profile until ctx ends or Release(h).
func Shared(ctx context.Context, h fwk.Handle, opts Options) (*State, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	e := registry[h.ClientSet()]
	if e != nil && !reflect.DeepEqual(e.state.opts, opts) {
		return nil, fmt.Errorf("GangPlacement has different args in two profiles (%+v and %+v): give every profile the same GangPlacementArgs", e.state.opts, opts)
	}
	if e == nil {
		// The State outlives the context of the profile that made it while others hold it.
		s, err := New(context.WithoutCancel(ctx), h, opts)
		if err != nil {
			return nil, err
		}
		e = &shared{state: s, holders: map[fwk.Handle]bool{}}
		registry[h.ClientSet()] = e
	}
	if !e.holders[h] {
		e.holders[h] = true
		context.AfterFunc(ctx, func() { Release(h) })
	}
	return e.state, nil
}

// Lookup returns the State GangPlacement created for h's scheduler, or nil when GangPlacement is
// not enabled.
func Lookup(h fwk.Handle) *State {
	registryMu.Lock()
	defer registryMu.Unlock()
	if e := registry[h.ClientSet()]; e != nil {
		return e.state
	}
	return nil
}

// Release ends h's hold on its scheduler's State; the last hold's end stops the State and drops it
// from the registry. Releasing a framework that holds nothing does nothing.
func Release(h fwk.Handle) {
	registryMu.Lock()
	e := registry[h.ClientSet()]
	if e == nil || !e.holders[h] {
		registryMu.Unlock()
		return
	}
	delete(e.holders, h)
	last := len(e.holders) == 0
	if last {
		delete(registry, h.ClientSet())
	}
	registryMu.Unlock()
	if last {
		e.state.close()
	}
}
