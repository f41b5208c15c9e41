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

// Package synth makes synthetic GPU fleets and seed-fixed gang mixes, for the planner's benchmarks
// and the scheduler benchmark command.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// Fleet is a fleet of identical GPU nodes in zones, blocks and racks.
type Fleet struct {
	Nodes         int
	GPUsPerNode   int
	Zones         int
	BlocksPerZone int
	NodesPerRack  int
	// CliqueNodes, when set, splits each rack into multi-node NVLink cliques of that many nodes
	// (nvidia.com/gpu.clique), the innermost topology level.
	CliqueNodes int
}

// DefaultFleet is the benchmark's fleet: 2 zones, 4 blocks per zone, 16-node racks, 8 GPUs a node.
func DefaultFleet(nodes int) Fleet {
	return Fleet{Nodes: nodes, GPUsPerNode: 8, Zones: 2, BlocksPerZone: 4, NodesPerRack: 16}
}

// NVL72Fleet is a fleet of GB200 NVL72 compute trays: 4 GPUs a node, 18 to a clique, two cliques
// under one rack label (a leaf pair), 2 zones of 4 blocks.
func NVL72Fleet(nodes int) Fleet {
	return Fleet{Nodes: nodes, GPUsPerNode: 4, Zones: 2, BlocksPerZone: 4, NodesPerRack: 36, CliqueNodes: 18}
}

// Where is one node's name and topology labels; Clique is empty without CliqueNodes.
type Where struct {
	Name, Zone, Block, Rack, Clique string
}

// Innermost is the node's domain of the innermost level: its clique, or its rack.
func (w Where) Innermost() string {
	if w.Clique != "" {
		return w.Clique
	}
	return w.Rack
}

// InnermostNodes is the number of nodes of a domain of the innermost level.
func (f Fleet) InnermostNodes() int {
	if f.CliqueNodes > 0 {
		return f.CliqueNodes
	}
	return f.NodesPerRack
}

// Node returns the name and labels of node i: racks are filled in order and spread evenly over
// the blocks, blocks over the zones.
func (f Fleet) Node(i int) Where {
	racks := (f.Nodes + f.NodesPerRack - 1) / f.NodesPerRack
	blocks := f.Zones * f.BlocksPerZone
	rack := i / f.NodesPerRack
	block := rack * blocks / racks
	zone := block / f.BlocksPerZone
	w := Where{
		Name:  fmt.Sprintf("gpu-%05d", i),
		Zone:  fmt.Sprintf("zone-%d", zone),
		Block: fmt.Sprintf("block-%d", block),
		Rack:  fmt.Sprintf("rack-%03d", rack),
	}
	if f.CliqueNodes > 0 {
		w.Clique = fmt.Sprintf("%s-nvl%d", w.Rack, i%f.NodesPerRack/f.CliqueNodes)
	}
	return w
}

// Cluster returns the fleet, every GPU free, as the planner sees it.
func (f Fleet) Cluster() *planner.Cluster {
	c := &planner.Cluster{Nodes: make([]planner.Node, f.Nodes)}
	if f.CliqueNodes > 0 {
		c.Levels = append(slices.Clone(planner.DefaultLevels), "clique")
	}
	for i := range c.Nodes {
		w := f.Node(i)
		c.Nodes[i] = planner.Node{Name: w.Name, Zone: w.Zone, Block: w.Block, Rack: w.Rack,
			GPUs: f.GPUsPerNode, Free: planner.FirstGPUs(f.GPUsPerNode), Indexed: true}
		if f.CliqueNodes > 0 {
			c.Nodes[i].Domains = []string{w.Zone, w.Block, w.Rack, w.Clique}
		}
	}
	return c
}

// Mix is a distribution of gangs.
type Mix struct {
	// Name names the mix in reports.
	Name string
	// MinWorkers and MaxWorkers bound the workers of a gang; the count is log-uniform between them,
	// so small gangs are common and large ones rare, as in real clusters.
	MinWorkers, MaxWorkers int
	// GPUsPerWorker are the per-worker GPU counts, one drawn per gang.
	GPUsPerWorker []int
	// Weights, when set, weigh GPUsPerWorker's counts (the same length); without them each count is
	// as likely as the others.
	Weights []int
	// Fleet, when set, is the mix's fleet of a number of nodes; DefaultFleet otherwise.
	Fleet func(nodes int) Fleet
}

// FleetOf is the mix's fleet of nodes nodes.
func (m Mix) FleetOf(nodes int) Fleet {
	if m.Fleet != nil {
		return m.Fleet(nodes)
	}
	return DefaultFleet(nodes)
}

var (
	// MixedWorkers has 1, 2, 4 or 8 GPUs per worker.
	MixedWorkers = Mix{Name: "mixed", MinWorkers: 1, MaxWorkers: 64, GPUsPerWorker: []int{1, 2, 4, 8}}
	// WholeNodeWorkers has 8 GPUs per worker.
	WholeNodeWorkers = Mix{Name: "whole-node", MinWorkers: 1, MaxWorkers: 64, GPUsPerWorker: []int{8}}
	// FittingWorkers has 1, 2, 4 or 8 GPUs per worker, each count half as common as the one below
	// it (small workers are the common case in real fleets: in the Alibaba GPU trace of 2023, 1-GPU
	// pods outnumber multi-GPU ones). Its gangs ask about 80% of the GPUs of a fleet with one gang
	// per 5 nodes (77% at 5,000 nodes, 82% at 1,000), so every gang can be placed, where the other
	// mixes ask more than the fleet has.
	FittingWorkers = Mix{Name: "fits", MinWorkers: 1, MaxWorkers: 64, GPUsPerWorker: []int{1, 2, 4, 8}, Weights: []int{8, 4, 2, 1}}
	// CliqueWorkers has 1 to 36 whole-tray workers (4 GPUs) on NVL72Fleet: most gangs fit in one
	// NVL72 clique of 18 trays, and "racks" per gang count cliques.
	CliqueWorkers = Mix{Name: "clique", MinWorkers: 1, MaxWorkers: 36, GPUsPerWorker: []int{4}, Fleet: NVL72Fleet}
)

// Mixes are the mixes by name.
var Mixes = []Mix{MixedWorkers, WholeNodeWorkers, FittingWorkers, CliqueWorkers}

// Gang is one gang of a mix.
type Gang struct {
	Name          string
	Workers       int
	GPUsPerWorker int
}

// GPUs is the gang's total.
func (g Gang) GPUs() int { return g.Workers * g.GPUsPerWorker }

// Gangs draws n gangs of mix from seed.
func Gangs(seed uint64, n int, mix Mix) []Gang {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]Gang, n)
	lo, hi := math.Log(float64(mix.MinWorkers)), math.Log(float64(mix.MaxWorkers)+1)
	for i := range out {
		w := int(math.Exp(lo + r.Float64()*(hi-lo)))
		w = min(max(w, mix.MinWorkers), mix.MaxWorkers)
		out[i] = Gang{Name: fmt.Sprintf("gang-%04d", i), Workers: w, GPUsPerWorker: mix.GPUsPerWorker[mix.draw(r)]}
	}
	return out
}

// draw picks the index of a per-worker GPU count.
func (m Mix) draw(r *rand.Rand) int {
	if len(m.Weights) == 0 {
		return r.IntN(len(m.GPUsPerWorker))
	}
	total := 0
	for _, w := range m.Weights {
		total += w
	}
	x := r.IntN(total)
	for i, w := range m.Weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(m.Weights) - 1
}
