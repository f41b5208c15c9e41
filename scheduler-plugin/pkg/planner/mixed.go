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
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// part is the pods of a gang that ask one GPU count, and, with PodNeeds, the same of the rest.
type part struct {
	gpus int
	// needs is what each pod asks of the resources of Node.Spare (Gang.PodNeeds); nil without.
	needs []int64
	// pods are indices in the gang's PodGPUs, in increasing order.
	pods []int
}

// parts groups the pods of a gang with PodGPUs by GPU count and needs, the largest count first,
// of one count the largest needs first.
func (g Gang) parts() []part {
	var out []part
	for i, n := range g.PodGPUs {
		var needs []int64
		if g.PodNeeds != nil {
			needs = g.PodNeeds[i]
		}
		j := slices.IndexFunc(out, func(p part) bool { return p.gpus == n && slices.Equal(p.needs, needs) })
		if j < 0 {
			out = append(out, part{gpus: n, needs: needs})
			j = len(out) - 1
		}
		out[j].pods = append(out[j].pods, i)
	}
	slices.SortFunc(out, func(a, b part) int { return cmp.Or(cmp.Compare(b.gpus, a.gpus), slices.Compare(b.needs, a.needs)) })
	return out
}

// gpus is the number of GPUs the whole gang asks.
func (g Gang) gpus() int {
	if g.PodGPUs == nil {
		return g.Pods * g.GPUsPerPod
	}
	n := 0
	for _, k := range g.PodGPUs {
		n += k
	}
	return n
}

// placeMixed places a gang whose pods ask different GPU counts in the smallest domain that holds
// every pod (of those, the best fit for its largest pods; above the rack, the one whose plan spans
// the fewest racks). Inside the domain the largest pods go first: each count's pods take room on
// the nodes the gang already uses, then the rest are placed as a gang of their own would be,
// inside the domain.
func (c *Cluster) placeMixed(g Gang, free []GPUSet) (*Plan, error) {
	parts := g.parts()
	if g.Level == LevelNVLink {
		p, msg := c.placeMixedNVLink(g, parts, free)
		if p != nil {
			return p, nil
		}
		if g.Required {
			return nil, &Unplaceable{Message: msg}
		}
	}
	ix := c.index()
	// caps[k][l][d] is domain d's room for the pods of part k alone; frees[l][d] its free GPUs.
	caps := make([][numLevels][]int32, len(parts))
	var frees [numLevels][]int32
	for l := LevelNode; l <= LevelCluster; l++ {
		frees[l] = make([]int32, ix.count[l])
		for k := range parts {
			caps[k][l] = make([]int32, ix.count[l])
		}
	}
	for i := range c.Nodes {
		if c.Nodes[i].Excluded {
			continue
		}
		frees[LevelNode][i] = int32(free[i].Len())
		for k, pt := range parts {
			caps[k][LevelNode][i] = int32(c.partCap(i, free[i], pt, c.spareOf(i, pt.needs), 0))
		}
	}
	for l := LevelRack; l <= LevelCluster; l++ {
		for d := range ix.count[l-1] {
			p := ix.parent[l-1][d]
			frees[l][p] += frees[l-1][d]
			for k := range parts {
				caps[k][l][p] += caps[k][l-1][d]
			}
		}
	}
	// mayHold is what a domain must have to hold the gang: room for each count's pods alone, for
	// all the pods at the smallest count, and the GPUs of all. On one node it is enough.
	total, smallest := int32(g.gpus()), len(parts)-1
	mayHold := func(l Level, d int32) bool {
		// Pods of the fewest GPUs may ask the most CPU: with PodNeeds, no count holds for all.
		if frees[l][d] < total || g.PodNeeds == nil && caps[smallest][l][d] < int32(g.Pods) {
			return false
		}
		for k, pt := range parts {
			if caps[k][l][d] < int32(len(pt.pods)) {
				return false
			}
		}
		return true
	}
	top := LevelCluster
	if g.Required {
		top = max(g.Level, LevelNode)
	}
	for l := LevelNode; l <= top; l++ {
		var candidates []int32
		for d := range int32(ix.count[l]) {
			if mayHold(l, d) {
				candidates = append(candidates, d)
			}
		}
		// Best fit, as for a gang of one count: the least room for the largest pods, the fewest
		// free GPUs, the fullest parent, then the name.
		slices.SortFunc(candidates, func(a, b int32) int {
			r := cmp.Or(cmp.Compare(caps[0][l][a], caps[0][l][b]), cmp.Compare(frees[l][a], frees[l][b]))
			if l == LevelNode {
				// On one node, as for a gang of one count: the fewest free GPUs, the smallest
				// node, the least room, the fullest rack, then the fullest in CPU and memory.
				r = cmp.Or(cmp.Compare(frees[l][a], frees[l][b]), compareSize(&c.Nodes[a], &c.Nodes[b]), cmp.Compare(caps[0][l][a], caps[0][l][b]))
			}
			if r == 0 && l < LevelCluster {
				r = cmp.Compare(frees[l+1][ix.parent[l][a]], frees[l+1][ix.parent[l][b]])
			}
			if r == 0 && l == LevelNode {
				r = cmp.Compare(c.Nodes[b].Fill, c.Nodes[a].Fill)
			}
			return cmp.Or(r, strings.Compare(ix.names[l][a], ix.names[l][b]))
		})
		var best []Assignment
		bestD, bestRacks := int32(-1), 0
		for _, d := range candidates {
			as := c.fillMixed(g, parts, ix.nodes[l][d], free, l)
			if as == nil {
				continue
			}
			if l <= LevelRack {
				best, bestD = as, d
				break
			}
			if r := c.spread(as)[LevelRack]; best == nil || r < bestRacks {
				best, bestD, bestRacks = as, d, r
			}
		}
		if best != nil {
			return &Plan{Assignments: best, Level: ix.canon[l], Domain: ix.names[l][bestD], Spread: c.spread(best)}, nil
		}
	}
	return nil, &Unplaceable{Message: c.explain(g, caps[0], frees)}
}

// fillMixed places every pod of g on the given nodes, a domain of level l, the parts in order:
// first on the nodes the gang already uses while they have room, then the rest of the part as a
// gang of one count that requires level l. It returns the assignments by pod, or nil when the
// pods do not all fit.
func (c *Cluster) fillMixed(g Gang, parts []part, nodes []int32, free []GPUSet, l Level) []Assignment {
	work := make([]GPUSet, len(c.Nodes))
	for _, i := range nodes {
		work[i] = free[i]
	}
	placed := make([]int, len(c.Nodes))
	// spare is, with PodNeeds, what each node has left beside the GPUs (nil: counted by MaxPods).
	var spare [][]int64
	if g.PodNeeds != nil {
		spare = make([][]int64, len(c.Nodes))
		for _, i := range nodes {
			spare[i] = c.spareOf(int(i), g.PodNeeds[0])
		}
	}
	room := func(i int, mask GPUSet, pt part) int {
		if spare == nil {
			return c.nodeCapAfter(i, mask, pt.gpus, placed[i])
		}
		return c.partCap(i, mask, pt, spare[i], placed[i])
	}
	out := make([]Assignment, g.Pods)
	var used []int
	assign := func(pod, i int, set GPUSet) {
		nd := &c.Nodes[i]
		work[i] &^= set
		if placed[i] == 0 {
			used = append(used, i)
		}
		placed[i]++
		if spare != nil {
			takeSpare(spare[i], g.PodNeeds[pod])
		}
		out[pod] = Assignment{Node: nd.Name, node: i, set: set}
		if nd.Indexed {
			out[pod].GPUs = set.Indices()
		}
	}
	for _, pt := range parts {
		pods := pt.pods
		for _, i := range used {
			for len(pods) > 0 && room(i, work[i], pt) > 0 {
				assign(pods[0], i, chooseGPUs(work[i], pt.gpus, c.Nodes[i].Topology))
				pods = pods[1:]
			}
		}
		if len(pods) == 0 {
			continue
		}
		sub := Gang{Key: g.Key, Pods: len(pods), GPUsPerPod: pt.gpus, Level: l, Required: true}
		p, err := c.placeIn(sub, work, func(i int, mask GPUSet) int { return room(i, mask, pt) })
		if err != nil {
			return nil
		}
		for j, a := range p.Assignments {
			assign(pods[j], a.node, a.set)
		}
	}
	return out
}

// placeMixedNVLink places a gang whose pods ask different GPU counts inside one NVLink domain:
// the domain with the fewest free GPUs that holds it, each pod, the largest first, on a node the
// gang already uses when one there has room, else on the one with the fewest free GPUs of the
// domain that holds it. It returns nil and a message when no domain can hold the gang.
func (c *Cluster) placeMixedNVLink(g Gang, parts []part, free []GPUSet) (*Plan, string) {
	type domain struct {
		key   string
		freeN int
		units []unit
	}
	var domains []*domain
	byKey := map[string]*domain{}
	for i := range c.Nodes {
		t := c.Nodes[i].Topology
		if t == nil || c.Nodes[i].Excluded {
			continue
		}
		for _, key := range t.Domains {
			if key == "" {
				continue
			}
			d := byKey[key]
			if d == nil {
				d = &domain{key: key}
				byKey[key] = d
				domains = append(domains, d)
			}
			if n := len(d.units); n > 0 && d.units[n-1].node == i {
				continue
			}
			mask := t.DomainMask(key)
			d.units = append(d.units, unit{i, mask})
			d.freeN += (free[i] & mask).Len()
		}
	}
	slices.SortFunc(domains, func(a, b *domain) int { return cmp.Or(cmp.Compare(a.freeN, b.freeN), strings.Compare(a.key, b.key)) })
	need := fmt.Sprintf("%s needs %s in one NVLink domain", g.Key, g)
	if len(domains) == 0 {
		return nil, need + "; no eligible node publishes NVLink domains (GPUNode status.gpus[].nvlinkDomain)"
	}
	total := g.gpus()
	for _, d := range domains {
		if d.freeN < total {
			continue
		}
		work := make([]GPUSet, len(d.units))
		placed := map[int]int{}
		used := make([]bool, len(d.units))
		// spare is, with PodNeeds, what each node has left beside the GPUs (see fillMixed).
		spare := map[int][]int64{}
		for j, u := range d.units {
			work[j] = free[u.node] & u.mask
			if g.PodNeeds != nil {
				spare[u.node] = c.spareOf(u.node, g.PodNeeds[0])
			}
		}
		out := make([]Assignment, g.Pods)
		fits := true
		for _, pt := range parts {
			for _, pod := range pt.pods {
				pick := -1
				for j, u := range d.units {
					if c.partCap(u.node, work[j], pt, spare[u.node], placed[u.node]) == 0 {
						continue
					}
					if pick < 0 || used[j] && !used[pick] || used[j] == used[pick] && work[j].Len() < work[pick].Len() {
						pick = j
					}
				}
				if pick < 0 {
					fits = false
					break
				}
				u := d.units[pick]
				nd := &c.Nodes[u.node]
				set := chooseGPUs(work[pick], pt.gpus, nd.Topology)
				work[pick] &^= set
				placed[u.node]++
				takeSpare(spare[u.node], pt.needs)
				used[pick] = true
				out[pod] = Assignment{Node: nd.Name, node: u.node, set: set}
				if nd.Indexed {
					out[pod].GPUs = set.Indices()
				}
			}
			if !fits {
				break
			}
		}
		if fits {
			return &Plan{Assignments: out, Level: LevelNVLink, Domain: d.key, Spread: c.spread(out)}, ""
		}
	}
	roomiest := slices.MaxFunc(domains, func(a, b *domain) int { return cmp.Or(cmp.Compare(a.freeN, b.freeN), strings.Compare(b.key, a.key)) })
	return nil, fmt.Sprintf("%s (%s); the best NVLink domain (%s) has %s", need, plural(total, "GPU"), roomiest.key, plural(roomiest.freeN, "free GPU"))
}

// spread counts the domains the assignments use at each level.
func (c *Cluster) spread(as []Assignment) [numLevels]int {
	ix := c.index()
	var out [numLevels]int
	var seen [numLevels]map[int32]bool
	for l := LevelNode; l <= LevelCluster; l++ {
		seen[l] = map[int32]bool{}
	}
	nvlink := map[string]bool{}
	last := -1
	for _, a := range as {
		if a.node != last {
			// A plan lists a node's pods together.
			last = a.node
			for l := LevelNode; l <= LevelCluster; l++ {
				seen[l][ix.of[l][a.node]] = true
			}
		}
		if t := c.Nodes[a.node].Topology; t != nil {
			for _, i := range a.set.Indices() {
				if key := t.Domains[i]; key != "" {
					nvlink[key] = true
				}
			}
		}
	}
	for l := LevelNode; l <= LevelCluster; l++ {
		out[l] = len(seen[l])
	}
	out[LevelNVLink] = len(nvlink)
	return out
}

// takeSpare takes a pod's needs from a node's spare (nil: the node is counted by MaxPods).
func takeSpare(spare, needs []int64) {
	if spare == nil {
		return
	}
	for r, need := range needs {
		spare[r] -= need
	}
}
