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
	"fmt"
	"math/bits"
	"strings"
	"time"
)

// Level is a level of the GPU fabric, from the tightest to the widest. Above the node come the
// cluster's topology levels (Cluster.Levels), counted from the innermost: with the default levels
// zone, block and rack, LevelRack is the rack, LevelBlock the block and LevelZone the zone; with
// other levels, LevelRack is the innermost, LevelBlock the next and so on (TopologyLevel).
type Level int8

const (
	// LevelNone is the zero value: the gang asks for no level, as LevelCluster.
	LevelNone Level = iota
	// LevelNVLink is one NVLink domain inside a node (an NVSwitch island), or a multi-node NVLink
	// fabric that the node's GPUNode names.
	LevelNVLink
	LevelNode
	// LevelRack is the innermost topology level, LevelBlock the one outside it, LevelZone the
	// third: rack, block and zone of the default levels.
	LevelRack
	LevelBlock
	LevelZone

	// LevelCluster is the whole cluster: no topology constraint.
	LevelCluster = LevelRack + MaxLevels

	numLevels = int(LevelCluster) + 1
)

// MaxLevels is the most topology levels above the node a cluster may have.
const MaxLevels = 6

// TopologyLevel is the level of the i-th of n topology levels counted from the outermost (the
// order of Cluster.Levels).
func TopologyLevel(i, n int) Level { return LevelRack + Level(n-1-i) }

// DefaultLevels are the topology levels of a Cluster without Levels, outer to inner: Node.Zone,
// Node.Block and Node.Rack.
var DefaultLevels = []string{"zone", "block", "rack"}

var levelNames = [numLevels]string{"", "nvlink", "node", "rack", "block", "zone", "", "", "", "cluster"}

// String returns the level's name as the convoy.dev/topology-level annotation spells it with the
// default levels.
func (l Level) String() string {
	if l < 0 || int(l) >= numLevels || levelNames[l] == "" {
		return fmt.Sprintf("Level(%d)", l)
	}
	return levelNames[l]
}

// noun is how messages name one domain of the level.
func (l Level) noun() string {
	if l == LevelNVLink {
		return "NVLink domain"
	}
	return l.String()
}

// ParseLevel parses a level name of the default levels (nvlink, node, rack, block, zone,
// cluster).
func ParseLevel(s string) (Level, bool) {
	for i, n := range levelNames {
		if n != "" && strings.EqualFold(s, n) {
			return Level(i), true
		}
	}
	return LevelCluster, false
}

// MaxGPUsPerNode is the most GPUs a node may have: a GPUSet is a 64-bit mask.
const MaxGPUsPerNode = 64

// GPUSet is a set of GPU indices of one node.
type GPUSet uint64

// NewGPUSet returns the set of the given indices.
func NewGPUSet(indices ...int) GPUSet {
	var s GPUSet
	for _, i := range indices {
		s |= 1 << uint(i)
	}
	return s
}

// FirstGPUs returns the set {0, ..., n-1}.
func FirstGPUs(n int) GPUSet {
	if n >= MaxGPUsPerNode {
		return ^GPUSet(0)
	}
	return GPUSet(1)<<uint(n) - 1
}

// Len is the number of GPUs in the set.
func (s GPUSet) Len() int { return bits.OnesCount64(uint64(s)) }

// Has reports whether GPU i is in the set.
func (s GPUSet) Has(i int) bool { return s&(1<<uint(i)) != 0 }

// Indices returns the set's GPU indices in increasing order.
func (s GPUSet) Indices() []int {
	out := make([]int, 0, s.Len())
	for s != 0 {
		i := bits.TrailingZeros64(uint64(s))
		out = append(out, i)
		s &^= 1 << uint(i)
	}
	return out
}

// Lowest returns the n lowest GPUs of s.
func (s GPUSet) Lowest(n int) GPUSet {
	var out GPUSet
	for ; n > 0 && s != 0; n-- {
		b := s & -s
		out |= b
		s &^= b
	}
	return out
}

// Node is one node as the planner sees it.
type Node struct {
	// Name is the node's name.
	Name string
	// Domains are the node's values of the cluster's topology levels (Cluster.Levels), outer to
	// inner; nil for Zone, Block and Rack, the values of the default levels. A node without a
	// value is a domain of its own at that level and every level below it; a domain is named by
	// its path from the outermost level, so each level nests in the one outside it.
	Domains           []string
	Zone, Block, Rack string

	// GPUs is the number of GPUs of the node, healthy or not.
	GPUs int
	// Free are the node's free, healthy GPUs.
	Free GPUSet
	// Indexed reports whether GPU indices are real (the node publishes a GPUNode). When false the
	// node is known by count only: Free and Holder.GPUs are stand-in indices, and plans carry no
	// indices for it.
	Indexed bool
	// Unhealthy is the number of GPUs excluded for their health, for messages.
	Unhealthy int
	// Topology is how the node's GPUs are linked; nil when unknown (all pairs alike, no NVLink
	// domain).
	Topology *GPUTopology

	// Excluded removes the node from the plan: the gang's pods may not run on it (node selector,
	// node or pod affinity, topology spread, taints, cordon).
	Excluded bool
	// MaxPods is how many of the gang's pods the node's other resources (CPU, memory, pod slots)
	// and the pods' spread among themselves admit; zero means no limit beyond GPUs, a negative
	// number that none fits.
	MaxPods int
	// Spare is what the node has free of each resource of Cluster.Needs (CPU, memory, pod
	// slots...), for preemption: once victims are evicted, the node takes as many of the gang's
	// pods as Spare and their Holder.Uses hold, within SpreadCap. Nil where preemption frees none
	// of them (MaxPods holds whatever is evicted). For a gang with PodNeeds, the room its pods
	// find beside the GPUs.
	Spare []int64
	// SpreadCap bounds the gang's pods on the node beside its resources (the pods' spread among
	// themselves) where Spare is set; zero for no bound.
	SpreadCap int
	// CPU (millicores) and Memory (bytes) are the node's allocatable CPU and memory (zero where
	// the node sets none, which ranks it smallest). Of the nodes of equal fit in GPUs, a gang that
	// fits on one node takes the smallest (compareSize), so that the largest stay for the pods
	// that need their CPU and memory.
	CPU, Memory int64
	// Fill is how full the node's CPU and memory would be with one more of the gang's pods, in
	// thousandths (the mean of the two, as upstream's MostAllocated scores it); zero when unknown.
	// Of the nodes of equal fit in GPUs, equal size and equally full racks, a gang that fits on
	// one node takes the fullest. It comes after the rack: between nodes of one size, it mostly
	// counts the pods already there, and ranked first it spreads small gangs over racks.
	Fill int32

	// Holders are the pods holding GPUs of the node, for preemption.
	Holders []Holder
	// Requires are victims (indices in Cluster.Victims) that must all be evicted before the node
	// takes any pod of the gang: pods of each stand in the gang's way there (inter-pod terms, host
	// ports), not only by their GPUs. Place leaves such a node out; Preempt uses it only with every
	// one of them among its victims.
	Requires []int
}

// Holder is one pod's hold on GPUs of a node, or, with no GPUs, on the resources of Uses alone.
type Holder struct {
	// Victim is the index in Cluster.Victims of the gang (or lone pod) the pod belongs to, or -1
	// when the pod may not be evicted.
	Victim int
	// GPUs are the GPUs the pod holds.
	GPUs GPUSet
	// Uses is what the pod holds of each resource of Cluster.Needs, where the node has Spare.
	Uses []int64
}

// Victim is a gang, or a pod that belongs to no gang, that preemption may evict as a whole.
type Victim struct {
	// Key names the victim, e.g. "team-a/job-3" or "team-a/pod-x".
	Key string
	// Priority is the highest priority among its pods.
	Priority int32
	// WorkLost is how much work evicting it throws away: the time since its last checkpoint (or
	// since it started, when it never checkpointed).
	WorkLost time.Duration
	// GPUs is the number of GPUs its pods hold in the whole cluster.
	GPUs int
}

// Gang is what the planner places: Pods pods of GPUsPerPod GPUs each, or, when its pods ask
// different counts, of PodGPUs[i] GPUs for pod i.
type Gang struct {
	// Key names the gang in messages, e.g. "team-a/job-1".
	Key string
	// Pods is the number of pods to place.
	Pods int
	// GPUsPerPod is the number of GPUs each pod requests (at least one).
	GPUsPerPod int
	// PodGPUs, when set, gives each pod's GPU count, pod by pod (one entry per pod, each at least
	// one), for a gang whose pods ask different counts (a launcher or chief beside its workers);
	// GPUsPerPod is then ignored, and the plan's Assignments[i] is pod i's.
	PodGPUs []int
	// PodNeeds, when set, gives what each pod asks of the resources Node.Spare counts (the order
	// of Cluster.Needs: CPU, memory..., then one pod slot), pod by pod, for a gang whose pods ask
	// different CPU or memory (a chief or master beside its workers). A node's room for them is
	// then counted from its Spare, pod by pod as the plan takes it, and not from MaxPods; nodes
	// without Spare are counted by MaxPods. The plan's Assignments[i] is pod i's.
	PodNeeds [][]int64
	// Level is the topology level the gang asks to fit in; LevelNone or LevelCluster when it asks
	// none.
	Level Level
	// Required makes Level a hard constraint; otherwise the gang is packed as tightly as it can be.
	Required bool
	// Priority is the gang's priority; preemption evicts only strictly lower priorities.
	Priority int32
}

func (g Gang) String() string {
	if g.PodGPUs == nil {
		return fmt.Sprintf("%d pod(s) × %d GPU(s)", g.Pods, g.GPUsPerPod)
	}
	// Pods of one GPU count are named together, whatever else they ask.
	var out []string
	pods := 0
	parts := g.parts()
	for i, pt := range parts {
		pods += len(pt.pods)
		if i+1 == len(parts) || parts[i+1].gpus != pt.gpus {
			out = append(out, fmt.Sprintf("%d pod(s) × %d GPU(s)", pods, pt.gpus))
			pods = 0
		}
	}
	return strings.Join(out, " + ")
}

// Assignment is where one pod of the gang goes.
type Assignment struct {
	// Node is the node's name.
	Node string
	// GPUs are the GPU indices chosen on the node; nil when the node is known by count only.
	GPUs []int
	// node is the index in Cluster.Nodes; set is the chosen GPUs.
	node int
	set  GPUSet
}

// NodeIndex is the index of the assignment's node in Cluster.Nodes.
func (a Assignment) NodeIndex() int { return a.node }

// Plan is a placement of every pod of a gang.
type Plan struct {
	// Assignments has one entry per pod, grouped by zone, block, rack and node so that
	// consecutive ranks sit close together.
	Assignments []Assignment
	// Level is the level of the smallest single domain that holds the whole gang, and Domain its
	// name.
	Level  Level
	Domain string
	// Spread is the number of domains the gang uses at each level, e.g. Spread[LevelRack] racks.
	Spread [numLevels]int
}

// Racks is the number of racks the plan uses.
func (p *Plan) Racks() int { return p.Spread[LevelRack] }

// Nodes is the number of nodes the plan uses.
func (p *Plan) Nodes() int { return p.Spread[LevelNode] }

// Unplaceable is the error for a gang that cannot be placed. Its message says what the gang
// needs and how close the cluster comes.
type Unplaceable struct {
	Message string
}

func (e *Unplaceable) Error() string { return e.Message }

// compareSize orders nodes by allocatable CPU, then memory, the smaller first. It is written to
// be inlined (cmp.Compare is not, for int64): the planner calls it for every pair of nodes with
// equally few free GPUs.
func compareSize(a, b *Node) int {
	switch {
	case a.CPU < b.CPU:
		return -1
	case a.CPU > b.CPU:
		return 1
	case a.Memory < b.Memory:
		return -1
	case a.Memory > b.Memory:
		return 1
	}
	return 0
}
