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

package planner

import (
	"math/bits"
	"slices"
)

// Link scores: how well two GPUs of a node talk, higher is better. NVLink pairs score NVLinkScore
// plus the number of links joining them; the PCIe levels follow `nvidia-smi topo -m`.
const (
	NVLinkScore  = 100
	PIXScore     = 40
	PXBScore     = 30
	PHBScore     = 20
	NODEScore    = 10
	SYSScore     = 0
	UnknownScore = NODEScore
)

// GPUTopology is how the GPUs of one node are linked. Nodes of one model can share one.
type GPUTopology struct {
	n      int
	score  []int32
	domain []int32
	// Domains names the NVLink domain of each GPU ("" for none). GPUs of different nodes with the
	// same name share a multi-node NVLink fabric.
	Domains []string
}

// NewGPUTopology returns the topology of n GPUs with every pair at UnknownScore and no NVLink
// domain.
func NewGPUTopology(n int) *GPUTopology {
	t := &GPUTopology{n: n, score: make([]int32, n*n), domain: make([]int32, n), Domains: make([]string, n)}
	for i := range t.score {
		t.score[i] = UnknownScore
	}
	for i := range t.domain {
		t.domain[i] = -1
	}
	return t
}

// Equal reports whether two topologies have the same scores and domains.
func (t *GPUTopology) Equal(o *GPUTopology) bool {
	if t == nil || o == nil {
		return t == o
	}
	return t.n == o.n && slices.Equal(t.score, o.score) && slices.Equal(t.Domains, o.Domains)
}

// SetLink sets the score of the pair a, b.
func (t *GPUTopology) SetLink(a, b, score int) {
	if a < 0 || b < 0 || a >= t.n || b >= t.n || a == b {
		return
	}
	t.score[a*t.n+b], t.score[b*t.n+a] = int32(score), int32(score)
}

// SetDomain puts GPU i into the NVLink domain named key.
func (t *GPUTopology) SetDomain(i int, key string) {
	if i < 0 || i >= t.n {
		return
	}
	t.Domains[i] = key
	t.domain[i] = -1
	if key == "" {
		return
	}
	for j := range t.n {
		if j != i && t.Domains[j] == key {
			t.domain[i] = t.domain[j]
			return
		}
	}
	t.domain[i] = int32(i)
}

// Score returns the score of the pair a, b.
func (t *GPUTopology) Score(a, b int) int {
	if t == nil || a >= t.n || b >= t.n {
		return UnknownScore
	}
	return int(t.score[a*t.n+b])
}

// DomainMask returns the GPUs of the node in the NVLink domain key.
func (t *GPUTopology) DomainMask(key string) GPUSet {
	var s GPUSet
	for i, d := range t.Domains {
		if d == key && key != "" {
			s |= 1 << uint(i)
		}
	}
	return s
}

// setQuality rates a set of GPUs: fewer NVLink domains first, then a higher sum of pair scores.
type setQuality struct {
	domains int
	score   int
}

func (a setQuality) better(b setQuality) bool {
	if a.domains != b.domains {
		return a.domains < b.domains
	}
	return a.score > b.score
}

func (t *GPUTopology) quality(s GPUSet) setQuality {
	idx := s.Indices()
	var q setQuality
	seen := make(map[int32]bool, 2)
	for i, a := range idx {
		if d := t.domain[a]; d < 0 {
			q.domains++
		} else if !seen[d] {
			seen[d] = true
			q.domains++
		}
		for _, b := range idx[i+1:] {
			q.score += int(t.score[a*t.n+b])
		}
	}
	return q
}

// maxEnumeration bounds the subsets chooseGPUs compares exactly; past it, it grows sets greedily.
const maxEnumeration = 4096

// chooseGPUs picks n GPUs of free for one pod: the best-connected set (fewest NVLink domains, then
// the highest pair scores), then the one that leaves the rest of free best connected, then the
// lowest indices. Without a topology it takes the lowest indices.
func chooseGPUs(free GPUSet, n int, t *GPUTopology) GPUSet {
	m := free.Len()
	if n >= m {
		return free
	}
	if t == nil {
		return free.Lowest(n)
	}
	idx := free.Indices()
	var (
		best             GPUSet
		bestQ, bestRestQ setQuality
		found            bool
	)
	consider := func(s GPUSet) {
		q := t.quality(s)
		if found && bestQ.better(q) {
			return
		}
		rq := t.quality(free &^ s)
		if found && q == bestQ && (bestRestQ.better(rq) || rq == bestRestQ && best < s) {
			return
		}
		best, bestQ, bestRestQ, found = s, q, rq, true
	}
	if binomial(m, n) <= maxEnumeration {
		// Gosper's hack over positions in idx.
		for c := uint64(1)<<uint(n) - 1; c < uint64(1)<<uint(m); {
			var s GPUSet
			for x := c; x != 0; x &= x - 1 {
				s |= 1 << uint(idx[bits.TrailingZeros64(x)])
			}
			consider(s)
			u := c & -c
			v := u + c
			c = v + (((v ^ c) / u) >> 2)
		}
		return best
	}
	for _, seed := range idx {
		s := GPUSet(1) << uint(seed)
		for s.Len() < n {
			var pick, pickScore = -1, -1
			for _, c := range idx {
				if s.Has(c) {
					continue
				}
				sc := 0
				for x := s; x != 0; x &= x - 1 {
					a := bits.TrailingZeros64(uint64(x))
					sc += int(t.score[a*t.n+c])
					if t.domain[a] >= 0 && t.domain[a] == t.domain[c] {
						sc += 1 << 20
					}
				}
				if sc > pickScore {
					pick, pickScore = c, sc
				}
			}
			s |= 1 << uint(pick)
		}
		consider(s)
	}
	return best
}

func binomial(n, k int) int {
	if k > n-k {
		k = n - k
	}
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
		if r > maxEnumeration {
			return r
		}
	}
	return r
}
