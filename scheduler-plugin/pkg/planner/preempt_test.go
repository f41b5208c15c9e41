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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPreempt(t *testing.T) {
	const low, mid, high = 1, 5, 10
	cases := map[string]struct {
		cluster     *Cluster
		gang        Gang
		wantVictims []string
		wantNodes   []string
		wantErr     string
	}{
		"a victim of one-GPU pods packed on the node": {
			// Each pod alone frees too few GPUs for a pod of the gang; the victim's pods together
			// free the node.
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).
				Victim("ns/small-pods", low, 0, map[string][][]int{"r1-0": {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}}).
				Victim("ns/whole", low, time.Hour, map[string][][]int{"r1-1": {all8}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/small-pods"},
			wantNodes:   []string{"r1-0"},
		},
		"fewest nodes after eviction: two pods on the freed node, one in a hole": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).Used("r1-0", 0, 1, 2, 3).Used("r1-1", 0, 1, 2, 3).
				Victim("ns/low", low, 0, map[string][][]int{"r1-2": {all8}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 4, Priority: high},
			wantVictims: []string{"ns/low"},
			wantNodes:   []string{"r1-0", "r1-2", "r1-2"},
		},
		"partly used nodes first after eviction: both holes, then the freed node": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).Used("r1-0", 0, 1, 2, 3).Used("r1-1", 0, 1, 2, 3).
				Victim("ns/low", low, 0, map[string][][]int{"r1-2": {all8}}).PartlyUsedFirst().Obj(),
			gang:        Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 4, Priority: high},
			wantVictims: []string{"ns/low"},
			wantNodes:   []string{"r1-0", "r1-1", "r1-2"},
		},
		"a victim of two pods on a node that takes one pod of the gang": {
			// MaxPods 1 (the gang's host ports): evicting either pod alone adds no room, evicting
			// the victim does.
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).MaxPods("r1-0", 1).
				Victim("ns/low", low, 0, map[string][][]int{"r1-0": {{0, 1, 2, 3}, {4, 5, 6, 7}}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 4, Priority: high},
			wantVictims: []string{"ns/low"},
			wantNodes:   []string{"r1-0"},
		},
		"a victim that holds the CPU the gang's pod needs": {
			// r1-0 has 6 of its 96 CPUs free (MaxPods -1); the victim's 90 come back with its GPUs.
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).MaxPods("r1-0", -1).Needs(90).Spare("r1-0", 6).
				Victim("ns/low", low, 0, map[string][][]int{"r1-0": {all8}}).Uses("ns/low", "r1-0", 90).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/low"},
			wantNodes:   []string{"r1-0"},
		},
		"of two victims on a node, the one whose CPU is enough": {
			// Each victim holds four GPUs and 45 CPUs: evicting one makes room for the gang's pod
			// (4 GPUs, 45 CPUs); ns/a loses less work.
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).MaxPods("r1-0", -1).Needs(45).Spare("r1-0", 6).
				Victim("ns/a", low, 0, map[string][][]int{"r1-0": {{0, 1, 2, 3}}}).Uses("ns/a", "r1-0", 45).
				Victim("ns/b", low, time.Hour, map[string][][]int{"r1-0": {{4, 5, 6, 7}}}).Uses("ns/b", "r1-0", 45).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 4, Priority: high},
			wantVictims: []string{"ns/a"},
			wantNodes:   []string{"r1-0"},
		},
		"a victim without GPUs that holds the CPU": {
			// r1-0's GPUs are free; a pod of no GPUs holds 50 of its CPUs.
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).MaxPods("r1-0", -1).Needs(90).Spare("r1-0", 46).
				Victim("ns/cpu-job", low, 0, map[string][][]int{"r1-0": {{}}}).Uses("ns/cpu-job", "r1-0", 50).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/cpu-job"},
			wantNodes:   []string{"r1-0"},
		},
		"two victims that hold the CPU together": {
			// Evicting ns/a frees the GPUs but only 40 CPUs; the pod needs 80.
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).MaxPods("r1-0", -1).Needs(80).Spare("r1-0", 6).
				Victim("ns/a", low, 0, map[string][][]int{"r1-0": {{0, 1, 2, 3}}}).Uses("ns/a", "r1-0", 40).
				Victim("ns/b", low, time.Hour, map[string][][]int{"r1-0": {{4, 5, 6, 7}}}).Uses("ns/b", "r1-0", 40).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 4, Priority: high},
			wantVictims: []string{"ns/a", "ns/b"},
			wantNodes:   []string{"r1-0"},
		},
		"a victim of higher priority keeps its CPU": {
			// ns/peer stays, and its 80 CPUs with it: the node takes no pod of the gang.
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).MaxPods("r1-0", -1).Needs(30).Spare("r1-0", 6).
				Victim("ns/low", low, 0, map[string][][]int{"r1-0": {{0, 1, 2, 3}}}).Uses("ns/low", "r1-0", 10).
				Victim("ns/peer", high, 0, map[string][][]int{"r1-0": {{4}}}).Uses("ns/peer", "r1-0", 80).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 2, Priority: high},
			wantErr: "ns/job needs 1 pod(s) × 2 GPU(s); the cluster has room for 0 pods (3 free GPUs on 1 node); 1 node has free GPUs but no room beside them for one more pod (CPU, memory, pod slots or the pods' spread), and preempting every lower-priority gang would not make room",
		},
		"a node two victims stand in the way on": {
			// r1-0 has free GPUs, but the pods of both its victims stand in the gang's way there
			// (Requires): the victim with the fewest GPUs is not enough; r1-1 holds a pod of higher
			// priority.
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).
				Victim("ns/a", low, 0, map[string][][]int{"r1-0": {{0, 1, 2, 3}}}).
				Victim("ns/b", low, 0, map[string][][]int{"r1-0": {{4}}}).
				Victim("ns/elsewhere", low, 0, map[string][][]int{"r1-1": {{0}}}).
				Victim("ns/high", high, 0, map[string][][]int{"r1-1": {{1, 2, 3, 4, 5, 6, 7}}}).
				Requires("r1-0", 0, 1).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 2, Priority: high},
			wantVictims: []string{"ns/b", "ns/a"}, // cheapest first
			wantNodes:   []string{"r1-0"},
		},
		"a node whose required victim may not be evicted stays out": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).
				Victim("ns/a", low, 0, map[string][][]int{"r1-0": {{0, 1}}}).
				Victim("ns/b", mid, 0, map[string][][]int{"r1-0": {{2}}}).
				Requires("r1-0", 0, 1).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 2, Priority: mid},
			wantErr: "ns/job needs 1 pod(s) × 2 GPU(s); the cluster has room for 0 pods (0 free GPUs on 0 nodes), and preempting every lower-priority gang would not make room",
		},
		"mixed counts: only the victim the gang's own pods need": {
			// Weighed as two 8-GPU pods, the gang would take both nodes; its 2-GPU launcher fits
			// beside ns/small, so only ns/whole goes.
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).
				Victim("ns/whole", low, 0, map[string][][]int{"r1-0": {all8}}).
				Victim("ns/small", low, 0, map[string][][]int{"r1-1": {{0, 1}}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{2, 8}, Priority: high},
			wantVictims: []string{"ns/whole"},
			wantNodes:   []string{"r1-1", "r1-0"},
		},
		"mixed counts: the launcher takes a hole no whole 8-GPU slot could use": {
			// Weighed as two 8-GPU pods the gang would need r1-1 whole, which a pod of its own
			// priority holds; weighed by its worker alone, evicting ns/low makes room, and the
			// launcher takes r1-1's free GPU.
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).
				Victim("ns/low", low, 0, map[string][][]int{"r1-0": {all8}}).
				Victim("ns/peer", high, 0, map[string][][]int{"r1-1": {{0, 1, 2, 3, 4, 5, 6}}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{8, 1}, Priority: high},
			wantVictims: []string{"ns/low"},
			wantNodes:   []string{"r1-0", "r1-1"},
		},
		"mixed counts: a victim for each": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).
				Victim("ns/a", low, 0, map[string][][]int{"r1-0": {all8}}).
				Victim("ns/b", low, time.Hour, map[string][][]int{"r1-1": {{0, 1, 2, 3, 4, 5, 6}}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{2, 8}, Priority: high},
			wantVictims: []string{"ns/a", "ns/b"},
			wantNodes:   []string{"r1-1", "r1-0"},
		},
		"no preemption when the gang fits": {
			cluster:   makeCluster().Rack("z1", "b1", "r1", 2, 8).Victim("ns/low", low, 0, map[string][][]int{"r1-0": {all8}}).Obj(),
			gang:      Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantNodes: []string{"r1-1"},
		},
		"one whole gang rather than two smaller ones": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 2, 8).
				Victim("ns/big", low, time.Hour, map[string][][]int{"r1-0": {all8}, "r1-1": {all8}}).
				Victim("ns/small-a", low, time.Minute, map[string][][]int{"r2-0": {all8}}).
				Victim("ns/small-b", low, time.Minute, map[string][][]int{"r2-1": {all8}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/big"},
			wantNodes:   []string{"r1-0", "r1-1"},
		},
		"never equal or higher priority": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).
				Victim("ns/same", high, 0, map[string][][]int{"r1-0": {all8}}).
				Victim("ns/higher", high+1, 0, map[string][][]int{"r1-1": {all8}}).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantErr: "ns/job needs 1 pod(s) × 8 GPU(s); the cluster has room for 0 pods (0 free GPUs on 0 nodes), and preempting every lower-priority gang would not make room",
		},
		"the lowest priority first": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).
				Victim("ns/mid", mid, time.Minute, map[string][][]int{"r1-0": {all8}}).
				Victim("ns/low", low, time.Hour, map[string][][]int{"r1-1": {all8}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/low"},
			wantNodes:   []string{"r1-1"},
		},
		"the victim that loses the least work": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).
				Victim("ns/checkpointed-long-ago", low, 3*time.Hour, map[string][][]int{"r1-0": {all8}}).
				Victim("ns/checkpointed-recently", low, 5*time.Minute, map[string][][]int{"r1-1": {all8}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/checkpointed-recently"},
			wantNodes:   []string{"r1-1"},
		},
		"the victim with the fewest GPUs when work lost ties": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).
				Victim("ns/two-nodes", low, time.Hour, map[string][][]int{"r1-0": {all8}, "r1-1": {{0, 1}}}).
				Victim("ns/one-node", low, time.Hour, map[string][][]int{"r1-2": {all8}}).
				Used("r1-1", 2, 3, 4, 5, 6, 7).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/one-node"},
			wantNodes:   []string{"r1-2"},
		},
		"two lone pods that share a node, when one would not do": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).
				Victim("ns/pod-a", low, 0, map[string][][]int{"r1-0": {{0, 1, 2, 3}}}).
				Victim("ns/pod-b", low, 0, map[string][][]int{"r1-0": {{4, 5, 6, 7}}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/pod-a", "ns/pod-b"},
			wantNodes:   []string{"r1-0"},
		},
		"required rack: victims inside one rack, even if more of them": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 2, 8).
				Victim("ns/spans-racks", low, 0, map[string][][]int{"r1-0": {all8}, "r2-0": {all8}}).
				Victim("ns/r1-a", mid, 0, map[string][][]int{"r1-1": {all8}}).
				Used("r2-1", 0).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8, Level: LevelRack, Required: true, Priority: high},
			wantVictims: []string{"ns/spans-racks", "ns/r1-a"},
			wantNodes:   []string{"r1-0", "r1-1"},
		},
		"a gang that spans racks frees all of its GPUs": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).Rack("z1", "b1", "r2", 1, 8).
				Victim("ns/spans-racks", low, 0, map[string][][]int{"r1-0": {all8}, "r2-0": {all8}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/spans-racks"},
			wantNodes:   []string{"r1-0", "r2-0"},
		},
		"a master that asks more CPU than its workers, over two victims' nodes": {
			// 96 CPUs a node, all held by one victim per node. Counted at the master's 60 CPUs,
			// both nodes emptied take one pod each; counted pod by pod, the master and a worker
			// of 30 share one and two workers the other.
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).MaxPods("r1-0", -1).MaxPods("r1-1", -1).
				Needs(60, 1).Spare("r1-0", 0, 100).Spare("r1-1", 0, 100).
				Victim("ns/a", low, 0, map[string][][]int{"r1-0": {all8}}).Uses("ns/a", "r1-0", 96, 1).
				Victim("ns/b", low, time.Hour, map[string][][]int{"r1-1": {all8}}).Uses("ns/b", "r1-1", 96, 1).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 4, GPUsPerPod: 4, Priority: high, PodNeeds: [][]int64{{60, 1}, {30, 1}, {30, 1}, {30, 1}}},
			wantVictims: []string{"ns/a", "ns/b"},
			wantNodes:   []string{"r1-0", "r1-0", "r1-1", "r1-1"},
		},
		"a master that asks more CPU than its workers: only the victims its pods need": {
			// r1-2 is free; the master and a worker take it, two workers take one of the
			// victims' nodes, and ns/a loses less work than ns/b.
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).MaxPods("r1-0", -1).MaxPods("r1-1", -1).MaxPods("r1-2", 1).
				Needs(60, 1).Spare("r1-0", 0, 100).Spare("r1-1", 0, 100).Spare("r1-2", 96, 100).
				Victim("ns/a", low, 0, map[string][][]int{"r1-0": {all8}}).Uses("ns/a", "r1-0", 96, 1).
				Victim("ns/b", low, time.Hour, map[string][][]int{"r1-1": {all8}}).Uses("ns/b", "r1-1", 96, 1).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 4, GPUsPerPod: 4, Priority: high, PodNeeds: [][]int64{{60, 1}, {30, 1}, {30, 1}, {30, 1}}},
			wantVictims: []string{"ns/a"},
			wantNodes:   []string{"r1-0", "r1-0", "r1-2", "r1-2"},
		},
		"not even evicting every lower-priority gang makes room in one rack": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 2, 8).
				Victim("ns/low", low, 0, map[string][][]int{"r1-0": {all8}, "r2-0": {all8}}).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 8, Level: LevelRack, Required: true, Priority: high},
			wantErr: "ns/job needs 3 pod(s) × 8 GPU(s) in one rack; the best rack (z1/b1/r1) has room for 1 pod (8 free GPUs), and preempting every lower-priority gang would not make room",
		},
		"an unhealthy GPU is not made free by preemption": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Unhealthy("r1-0", 7).
				Victim("ns/on-bad-node", low, 0, map[string][][]int{"r1-0": {{0, 1, 2, 3, 4, 5, 6}}}).
				Victim("ns/on-good-node", low, time.Hour, map[string][][]int{"r1-1": {all8}}).Obj(),
			gang:        Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8, Priority: high},
			wantVictims: []string{"ns/on-good-node"},
			wantNodes:   []string{"r1-1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := tc.cluster
			got, err := c.Preempt(tc.gang)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Preempt() = %+v, want error %q", got, tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("Preempt() error (-want,+got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Preempt() error: %v", err)
			}
			var victims, nodes []string
			for _, v := range got.Victims {
				victims = append(victims, c.Victims[v].Key)
			}
			for _, a := range got.Plan.Assignments {
				nodes = append(nodes, a.Node)
			}
			if diff := cmp.Diff(tc.wantVictims, victims); diff != "" {
				t.Errorf("Preempt() victims (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNodes, nodes); diff != "" {
				t.Errorf("Preempt() nodes (-want,+got):\n%s", diff)
			}
		})
	}
}
