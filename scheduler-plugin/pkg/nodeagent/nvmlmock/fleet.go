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

package nvmlmock

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Fleet is one mocked server per fake node, all of one profile, created as the agent starts
// serving each node. Faults can be injected before a node's server exists; they apply when it is
// created. Safe for concurrent use.
type Fleet struct {
	profile *Profile

	mu      sync.Mutex
	servers map[string]*Server
	pending map[string][]pendingFault
}

type pendingFault struct {
	gpu   int
	fault Fault
}

// NewFleet returns an empty fleet of the named profile.
func NewFleet(profile string) (*Fleet, error) {
	p, err := Lookup(profile)
	if err != nil {
		return nil, err
	}
	return &Fleet{profile: p, servers: map[string]*Server{}, pending: map[string][]pendingFault{}}, nil
}

// Server returns node's server, creating it with opts (Seed defaults to the node name).
func (f *Fleet) Server(node string, opts Options) *Server {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.servers[node]; ok {
		return s
	}
	if opts.Seed == "" {
		opts.Seed = node
	}
	s := NewFromProfile(f.profile, opts)
	f.servers[node] = s
	for _, p := range f.pending[node] {
		_ = s.Inject(p.gpu, p.fault) // validated when queued
	}
	delete(f.pending, node)
	return s
}

// Inject makes GPU gpu of node fail; see Server.Inject.
func (f *Fleet) Inject(node string, gpu int, fault Fault) error {
	f.mu.Lock()
	s, ok := f.servers[node]
	if !ok {
		defer f.mu.Unlock()
		if gpu < 0 || gpu >= f.profile.GPUs() {
			return fmt.Errorf("no GPU %d: the %s profile has GPUs 0-%d", gpu, f.profile.Name, f.profile.GPUs()-1)
		}
		if fault.Kind == FaultRowRemap && !f.profile.RowRemapping {
			return fmt.Errorf("the %s profile's GPUs have no row remapping", f.profile.Name)
		}
		f.pending[node] = append(f.pending[node], pendingFault{gpu, fault})
		return nil
	}
	f.mu.Unlock()
	return s.Inject(gpu, fault)
}

// Clear ends GPU gpu's faults on node; see Server.Clear.
func (f *Fleet) Clear(node string, gpu int) error {
	f.mu.Lock()
	s, ok := f.servers[node]
	if !ok {
		defer f.mu.Unlock()
		kept := f.pending[node][:0]
		for _, p := range f.pending[node] {
			if p.gpu != gpu || p.fault.Kind == FaultXID {
				kept = append(kept, p)
			}
		}
		f.pending[node] = kept
		return nil
	}
	f.mu.Unlock()
	return s.Clear(gpu)
}

// ParseFaultFlag reads "<node>/<gpu>=<fault>", for example "node-a/3=xid:79".
func ParseFaultFlag(s string) (node string, gpu int, fault Fault, err error) {
	target, spec, ok := strings.Cut(s, "=")
	node, idx, ok2 := strings.Cut(target, "/")
	if !ok || !ok2 || node == "" {
		return "", 0, Fault{}, fmt.Errorf("fault %q: want <node>/<gpu>=<fault>, for example node-a/3=xid:79", s)
	}
	if gpu, err = strconv.Atoi(idx); err != nil {
		return "", 0, Fault{}, fmt.Errorf("fault %q: GPU %q is not an index", s, idx)
	}
	fault, err = ParseFault(spec)
	return node, gpu, fault, err
}

// ServeHTTP injects and clears faults:
//
//	POST   /faults?node=node-a&gpu=3&fault=xid:79   inject (fault defaults to ecc)
//	DELETE /faults?node=node-a&gpu=3                 clear the GPU's ecc, row-remap and lost faults
func (f *Fleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	node := q.Get("node")
	gpu, err := strconv.Atoi(q.Get("gpu"))
	if node == "" || err != nil {
		http.Error(w, "want ?node=<node>&gpu=<index>", http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodPost:
		spec := q.Get("fault")
		if spec == "" {
			spec = string(FaultECC)
		}
		fault, err := ParseFault(spec)
		if err == nil {
			err = f.Inject(node, gpu, fault)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "injected %s into GPU %d of %s\n", fault, gpu, node)
	case http.MethodDelete:
		if err := f.Clear(node, gpu); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "cleared the faults of GPU %d of %s\n", gpu, node)
	default:
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "POST injects a fault, DELETE clears it", http.StatusMethodNotAllowed)
	}
}
