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
	"time"
)

// clusterWrapper builds synthetic clusters for tests and benchmarks.
type clusterWrapper struct{ Cluster }

func makeCluster() *clusterWrapper { return &clusterWrapper{} }

// Rack adds n nodes of gpus GPUs named <rack>-<i> in zone/block/rack.
func (w *clusterWrapper) Rack(zone, block, rack string, n, gpus int) *clusterWrapper {
	for i := range n {
		w.Nodes = append(w.Nodes, Node{Name: fmt.Sprintf("%s-%d", rack, i), Zone: zone, Block: block, Rack: rack,
			GPUs: gpus, Free: FirstGPUs(gpus), Indexed: true})
	}
	return w
}

// Node adds one unlabelled node.
func (w *clusterWrapper) Node(name string, gpus int) *clusterWrapper {
	w.Nodes = append(w.Nodes, Node{Name: name, GPUs: gpus, Free: FirstGPUs(gpus), Indexed: true})
	return w
}

func (w *clusterWrapper) node(name string) *Node {
	for i := range w.Nodes {
		if w.Nodes[i].Name == name {
			return &w.Nodes[i]
		}
	}
	panic("no node " + name)
}

// Used marks GPUs of a node held by a pod that may not be evicted.
func (w *clusterWrapper) Used(node string, gpus ...int) *clusterWrapper {
	nd := w.node(node)
	nd.Free &^= NewGPUSet(gpus...)
	nd.Holders = append(nd.Holders, Holder{Victim: -1, GPUs: NewGPUSet(gpus...)})
	return w
}

// Unhealthy marks GPUs of a node unhealthy.
func (w *clusterWrapper) Unhealthy(node string, gpus ...int) *clusterWrapper {
	nd := w.node(node)
	nd.Free &^= NewGPUSet(gpus...)
	nd.Unhealthy += len(gpus)
	return w
}

// CountOnly makes a node known by count only (no GPUNode).
func (w *clusterWrapper) CountOnly(node string) *clusterWrapper {
	w.node(node).Indexed = false
	return w
}

// Exclude excludes a node; MaxPods limits it.
func (w *clusterWrapper) Exclude(node string) *clusterWrapper {
	w.node(node).Excluded = true
	return w
}

func (w *clusterWrapper) MaxPods(node string, n int) *clusterWrapper {
	w.node(node).MaxPods = n
	return w
}

// Needs sets what each pod of the gang asks of the resources beside GPUs (say CPUs).
func (w *clusterWrapper) Needs(needs ...int64) *clusterWrapper {
	w.Cluster.Needs = needs
	return w
}

// Spare sets what a node has free of the resources of Needs.
func (w *clusterWrapper) Spare(node string, spare ...int64) *clusterWrapper {
	w.node(node).Spare = spare
	return w
}

// Uses sets what each pod of victim key holds on node of the resources of Needs.
func (w *clusterWrapper) Uses(key, node string, uses ...int64) *clusterWrapper {
	nd := w.node(node)
	for i, h := range nd.Holders {
		if h.Victim >= 0 && w.Victims[h.Victim].Key == key {
			nd.Holders[i].Uses = uses
		}
	}
	return w
}

// PartlyUsedFirst has gangs of several nodes take a rack's partly used nodes before free ones.
func (w *clusterWrapper) PartlyUsedFirst() *clusterWrapper {
	w.Cluster.PartlyUsedFirst = true
	return w
}

// Size sets a node's allocatable CPU (cores) and memory (GiB).
func (w *clusterWrapper) Size(node string, cores, gib int64) *clusterWrapper {
	w.node(node).CPU, w.node(node).Memory = cores*1000, gib<<30
	return w
}

// Fill sets how full a node's CPU and memory would be with one more of the gang's pods.
func (w *clusterWrapper) Fill(node string, permille int32) *clusterWrapper {
	w.node(node).Fill = permille
	return w
}

// Islands gives a node NVLink islands: all pairs inside an island are NVLink with one link,
// pairs across islands SYS. Each island is an NVLink domain named <node>/<i>, or domain[i] when
// given.
func (w *clusterWrapper) Islands(node string, islands [][]int, domain ...string) *clusterWrapper {
	nd := w.node(node)
	t := NewGPUTopology(nd.GPUs)
	for a := range nd.GPUs {
		for b := a + 1; b < nd.GPUs; b++ {
			t.SetLink(a, b, SYSScore)
		}
	}
	for k, isl := range islands {
		key := fmt.Sprintf("%s/%d", node, k)
		if k < len(domain) {
			key = domain[k]
		}
		for i, a := range isl {
			t.SetDomain(a, key)
			for _, b := range isl[i+1:] {
				t.SetLink(a, b, NVLinkScore+1)
			}
		}
	}
	nd.Topology = t
	return w
}

// Link sets one pair's score on a node that already has a topology.
func (w *clusterWrapper) Link(node string, a, b, score int) *clusterWrapper {
	w.node(node).Topology.SetLink(a, b, score)
	return w
}

// Victim adds a victim holding GPUs on nodes: holds maps a node to the GPU sets of its pods there.
func (w *clusterWrapper) Victim(key string, priority int32, workLost time.Duration, holds map[string][][]int) *clusterWrapper {
	v := len(w.Victims)
	gpus := 0
	for node, pods := range holds {
		nd := w.node(node)
		for _, p := range pods {
			set := NewGPUSet(p...)
			nd.Free &^= set
			nd.Holders = append(nd.Holders, Holder{Victim: v, GPUs: set})
			gpus += len(p)
		}
	}
	w.Victims = append(w.Victims, Victim{Key: key, Priority: priority, WorkLost: workLost, GPUs: gpus})
	return w
}

// Requires makes the node take pods only once the victims (indices) are all evicted.
func (w *clusterWrapper) Requires(node string, victims ...int) *clusterWrapper {
	w.node(node).Requires = victims
	return w
}

func (w *clusterWrapper) Obj() *Cluster { c := w.Cluster; return &c }

var all8 = []int{0, 1, 2, 3, 4, 5, 6, 7}

// placed summarises a plan as "node:gpus" per pod.
func placed(p *Plan) []string {
	var out []string
	for _, a := range p.Assignments {
		out = append(out, fmt.Sprintf("%s:%v", a.Node, a.GPUs))
	}
	return out
}
