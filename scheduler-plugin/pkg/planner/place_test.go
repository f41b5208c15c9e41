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
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlace(t *testing.T) {
	cases := map[string]struct {
		cluster    *Cluster
		gang       Gang
		want       []string
		wantLevel  Level
		wantRacks  int
		wantErr    string
		wantDomain string
	}{
		"a 4×8 gang lands in the one rack that can hold it": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 4, 8).Rack("z1", "b1", "r2", 4, 8).
				Used("r1-0", 0).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 4, GPUsPerPod: 8, Level: LevelRack, Required: true},
			want:       []string{"r2-0:[0 1 2 3 4 5 6 7]", "r2-1:[0 1 2 3 4 5 6 7]", "r2-2:[0 1 2 3 4 5 6 7]", "r2-3:[0 1 2 3 4 5 6 7]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r2",
			wantRacks:  1,
		},
		"best fit: the fuller rack that still holds the gang": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 4, 8).Rack("z1", "b1", "r2", 4, 8).
				Used("r1-0", 0).Used("r1-1", 3).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8},
			want:       []string{"r1-2:[0 1 2 3 4 5 6 7]", "r1-3:[0 1 2 3 4 5 6 7]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r1",
			wantRacks:  1,
		},
		"best fit in stranded GPUs: a gang's last pod fills a half-used node of a roomier rack, not a free node of the fullest": {
			// In r1 the 4-GPU pod would open a free node, leaving 4 GPUs that no 8-GPU pod can use; in
			// r2 it fills the half-used node, and r1's two free nodes stay whole.
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 4, 8).
				Used("r2-3", 0, 1, 2, 3).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 4},
			want:       []string{"r2-0:[0 1 2 3]", "r2-0:[4 5 6 7]", "r2-3:[4 5 6 7]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r2",
			wantRacks:  1,
		},
		"odd GPUs evened out: a gang whose last node is partly used goes to the rack it leaves on whole nodes, not to the fullest": {
			// Either rack's plan strands the 4 GPUs its last node leaves. r1 (the best fit) would
			// then keep 12 free GPUs, 4 past whole nodes; r2 keeps 24 with its two 2-GPU holes, on
			// whole nodes: 4-GPU pods cannot fill those holes, but 4 + 2 + 2 make a node's worth
			// that later 1- and 2-GPU pods can.
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).Rack("z1", "b1", "r2", 6, 8).
				Used("r2-4", 0, 1, 2, 3, 4, 5).Used("r2-5", 0, 1, 2, 3, 4, 5).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 4},
			want:       []string{"r2-0:[0 1 2 3]", "r2-0:[4 5 6 7]", "r2-1:[0 1 2 3]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r2",
			wantRacks:  1,
		},
		"fewest nodes: a 4×4 gang takes two free nodes, though two half-used nodes would hold two of its pods": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 4, 8).Used("r1-0", 0, 1, 2, 3).Used("r1-1", 0, 1, 2, 3).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 4, GPUsPerPod: 4},
			want:    []string{"r1-2:[0 1 2 3]", "r1-2:[4 5 6 7]", "r1-3:[0 1 2 3]", "r1-3:[4 5 6 7]"},
			// the default packing: the job spans two nodes, and the half-used nodes strand 8 GPUs
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r1",
			wantRacks:  1,
		},
		"partly used nodes first: the same gang fills both half-used nodes and one free node, and leaves a node whole": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 4, 8).Used("r1-0", 0, 1, 2, 3).Used("r1-1", 0, 1, 2, 3).
				PartlyUsedFirst().Obj(),
			gang:       Gang{Key: "ns/job", Pods: 4, GPUsPerPod: 4},
			want:       []string{"r1-0:[4 5 6 7]", "r1-1:[4 5 6 7]", "r1-2:[0 1 2 3]", "r1-2:[4 5 6 7]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r1",
			wantRacks:  1,
		},
		"partly used nodes first keeps to the fewest racks": {
			// r1's half-used node would take one pod, but r2 holds the whole gang
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).Used("r1-0", 0, 1, 2, 3).Rack("z1", "b1", "r2", 2, 8).
				PartlyUsedFirst().Obj(),
			gang:       Gang{Key: "ns/job", Pods: 4, GPUsPerPod: 4},
			want:       []string{"r2-0:[0 1 2 3]", "r2-0:[4 5 6 7]", "r2-1:[0 1 2 3]", "r2-1:[4 5 6 7]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r2",
			wantRacks:  1,
		},
		"fragmentation trap: a 4-GPU pod takes the half-used node, not a free one": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Used("r1-1", 0, 1, 2, 3).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 4},
			want:    []string{"r1-1:[4 5 6 7]"},
			// one node
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"fragmentation trap: two 4-GPU pods share one node rather than split two half nodes' worth": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).Used("r1-1", 0, 1, 2, 3).Used("r1-2", 4, 5, 6, 7).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 4},
			want:    []string{"r1-0:[0 1 2 3]", "r1-0:[4 5 6 7]"},
			// the gang needs one node; the half nodes stay for smaller pods
			wantLevel:  LevelNode,
			wantDomain: "r1-0",
			wantRacks:  1,
		},
		"best fit beside the GPUs: of nodes of equal GPU fit, the one whose CPU and memory the pod fills most": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).Fill("r1-0", 50).Fill("r1-1", 400).Fill("r1-2", 200).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8},
			// r1-0 keeps its CPU and memory for a pod that needs them
			want:       []string{"r1-1:[0 1 2 3 4 5 6 7]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"best fit beside the GPUs: of nodes of equal GPU fit, the smallest, though a larger one's CPU and memory are fuller": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Size("r1-0", 128, 1024).Fill("r1-0", 700).
				Size("r1-1", 16, 256).Fill("r1-1", 600).Obj(),
			gang: Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8},
			// r1-0's 128 CPUs stay for a pod that needs them
			want:       []string{"r1-1:[0 1 2 3 4 5 6 7]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"best fit beside the GPUs: of nodes of one size and equal GPU fit, the fullest rack before the node the pod fills most": {
			// Between nodes of one size, Fill counts the pods already there: ranked before the
			// rack, it would put the pod in r2 and leave r1-1's 4 GPUs for a rack of its own.
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 2, 8).
				Used("r1-0", 0, 1, 2, 3, 4, 5, 6, 7).Used("r1-1", 0, 1, 2, 3).Fill("r1-1", 100).
				Used("r2-0", 0, 1, 2, 3).Fill("r2-0", 600).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 4},
			want:       []string{"r1-1:[4 5 6 7]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"best fit beside the GPUs comes after best fit in GPUs": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Used("r1-0", 0, 1, 2, 3).Fill("r1-0", 10).Fill("r1-1", 900).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 2},
			want:    []string{"r1-0:[4 5]", "r1-0:[6 7]"},
			// the half-used node, though the free one's CPU and memory are fuller
			wantLevel:  LevelNode,
			wantDomain: "r1-0",
			wantRacks:  1,
		},
		"best fit in GPUs before room: a pod takes the node of fewest free GPUs, not one whose CPU holds fewer pods": {
			// r1-0's CPU holds one more pod: there the pod would strand 3 GPUs without CPU,
			// where r1-0 keeps room for a 4-GPU pod
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Used("r1-0", 0, 1, 2, 3).MaxPods("r1-0", 1).
				Used("r1-1", 0, 1, 2, 3, 4, 5).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 1},
			want:       []string{"r1-1:[6]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"best fit in GPUs before room, for pods of different GPU counts on one node too": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Used("r1-0", 0).MaxPods("r1-0", 2).
				Used("r1-1", 0, 1).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{1, 2}},
			want:       []string{"r1-1:[4]", "r1-1:[2 3]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"best fit beside the GPUs, for pods of different GPU counts on one node too": {
			cluster:    makeCluster().Rack("z1", "b1", "r1", 2, 8).Fill("r1-1", 300).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{1, 4}},
			want:       []string{"r1-1:[4]", "r1-1:[0 1 2 3]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"best fit beside the GPUs, for pods of different GPU counts: the smallest node, then the fullest rack, then the fullest node": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 3, 8).Used("r1-0", 0, 1, 2, 3, 4, 5, 6, 7).
				Size("r1-1", 128, 1024).Fill("r1-1", 100).Size("r2-0", 128, 1024).Fill("r2-0", 600).
				Size("r2-1", 16, 256).Size("r2-2", 16, 256).Fill("r2-2", 200).Obj(),
			gang: Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{1, 4}},
			// the 16-CPU nodes before the others; of those, r2-2, the fuller
			want:       []string{"r2-2:[4]", "r2-2:[0 1 2 3]"},
			wantLevel:  LevelNode,
			wantDomain: "r2-2",
			wantRacks:  1,
		},
		"best fit beside the GPUs, for pods of different GPU counts: of nodes of one size, the fullest rack before the fullest node": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 2, 8).Used("r1-0", 0, 1, 2, 3, 4, 5, 6, 7).
				Fill("r1-1", 100).Fill("r2-0", 600).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{1, 4}},
			want:       []string{"r1-1:[4]", "r1-1:[0 1 2 3]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"best fit beside the GPUs leaves a gang of several nodes alone": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).Fill("r1-2", 900).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8},
			// the rack's nodes by room, then name: the fill of one node does not reorder them
			want:       []string{"r1-0:[0 1 2 3 4 5 6 7]", "r1-1:[0 1 2 3 4 5 6 7]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r1",
			wantRacks:  1,
		},
		"required rack: too big for any rack, with a message a person can act on": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 2, 8).Used("r2-0", 7).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 8, Level: LevelRack, Required: true},
			wantErr: "ns/job needs 3 pod(s) × 8 GPU(s) in one rack; the best rack (z1/b1/r1) has room for 2 pods (16 free GPUs)",
		},
		"preferred rack: too big for one rack, spread over the fewest racks of one block": {
			cluster: makeCluster().
				Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 3, 8).Rack("z1", "b1", "r3", 1, 8).
				Rack("z1", "b2", "r4", 3, 8).Obj(),
			gang: Gang{Key: "ns/job", Pods: 4, GPUsPerPod: 8, Level: LevelRack},
			// b1 (room 6) is the best fit over the cluster (room 9); in b1 the roomiest rack r2, then
			// the rack that fits the one pod left most tightly, r3.
			want: []string{"r2-0:[0 1 2 3 4 5 6 7]", "r2-1:[0 1 2 3 4 5 6 7]", "r2-2:[0 1 2 3 4 5 6 7]",
				"r3-0:[0 1 2 3 4 5 6 7]"},
			wantLevel:  LevelBlock,
			wantDomain: "z1/b1",
			wantRacks:  2,
		},
		"no topology asked: still the tightest domain": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).Rack("z2", "b2", "r2", 2, 8).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8},
			want:    []string{"r2-0:[0 1 2 3 4 5 6 7]", "r2-1:[0 1 2 3 4 5 6 7]"},
			// one rack in zone z2 rather than both zones
			wantLevel:  LevelRack,
			wantDomain: "z2/b2/r2",
			wantRacks:  1,
		},
		"across zones when nothing smaller holds the gang": {
			cluster:    makeCluster().Rack("z1", "b1", "r1", 1, 8).Rack("z2", "b2", "r2", 1, 8).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8},
			want:       []string{"r1-0:[0 1 2 3 4 5 6 7]", "r2-0:[0 1 2 3 4 5 6 7]"},
			wantLevel:  LevelCluster,
			wantDomain: "cluster",
			wantRacks:  2,
		},
		"required zone: no zone holds it": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).Rack("z2", "b2", "r2", 1, 8).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8, Level: LevelZone, Required: true},
			wantErr: "ns/job needs 2 pod(s) × 8 GPU(s) in one zone; the best zone (z1) has room for 1 pod (8 free GPUs)",
		},
		"an unhealthy GPU is not free": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Unhealthy("r1-0", 3).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8},
			want:    []string{"r1-1:[0 1 2 3 4 5 6 7]"},
			// the node with a bad GPU cannot hold an 8-GPU pod
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"an unhealthy GPU is avoided inside the node": {
			cluster:    makeCluster().Rack("z1", "b1", "r1", 1, 8).Unhealthy("r1-0", 0, 1).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 4},
			want:       []string{"r1-0:[2 3 4 5]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-0",
			wantRacks:  1,
		},
		"unhealthy GPUs make a gang unplaceable and the message says so": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Unhealthy("r1-0", 3).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8},
			wantErr: "ns/job needs 2 pod(s) × 8 GPU(s); the cluster has room for 1 pod (15 free GPUs on 2 nodes); 1 unhealthy GPU excluded",
		},
		"excluded nodes and pod limits count against room": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 4, 8).Exclude("r1-0").MaxPods("r1-1", 1).MaxPods("r1-3", -1).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 4, GPUsPerPod: 2},
			// r1-2 holds all four
			want:       []string{"r1-2:[0 1]", "r1-2:[2 3]", "r1-2:[4 5]", "r1-2:[6 7]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-2",
			wantRacks:  1,
		},
		"nodes without room beside their free GPUs are named in the message": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).MaxPods("r1-0", -1).MaxPods("r1-1", -1).Used("r1-2", all8...).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 8},
			wantErr: "ns/job needs 1 pod(s) × 8 GPU(s); the cluster has room for 0 pods (16 free GPUs on 2 nodes); 2 nodes have free GPUs but no room beside them for one more pod (CPU, memory, pod slots or the pods' spread)",
		},
		"excluded nodes are named in the message": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Exclude("r1-0").Obj(),
			gang:    Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 8},
			wantErr: "ns/job needs 2 pod(s) × 8 GPU(s); the cluster has room for 1 pod (8 free GPUs on 1 node); 1 node excluded by the pods' node selector, node or pod affinity, topology spread, host ports, tolerations or cordon",
		},
		"NVLink: a 2-GPU pod stays inside one island and keeps the other island whole": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).Islands("r1-0", [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}).
				Used("r1-0", 0, 1).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 2},
			want:       []string{"r1-0:[2 3]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-0",
			wantRacks:  1,
		},
		"NVLink: a 4-GPU pod takes a whole island, not two halves": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 1, 8).Islands("r1-0", [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}).
				Used("r1-0", 0, 1).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 4},
			want:       []string{"r1-0:[4 5 6 7]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-0",
			wantRacks:  1,
		},
		"NVLink: of equally good sets, the one that leaves the rest best connected": {
			// 0-1 and 2-3 are strong pairs; 4 is linked well to 0 and 1 only. Taking 2-3 leaves
			// {0,1,4} a connected triangle; taking 0-1 would strand 4.
			cluster: makeCluster().Node("n", 5).Islands("n", [][]int{{0, 1}, {2, 3}}).
				Link("n", 0, 4, NVLinkScore).Link("n", 1, 4, NVLinkScore).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 2},
			want:       []string{"n:[2 3]"},
			wantLevel:  LevelNode,
			wantDomain: "n",
			wantRacks:  1,
		},
		"required nvlink: a multi-node NVLink domain holds the gang": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 4, 4).
				Islands("r1-0", [][]int{{0, 1, 2, 3}}, "clique-a").Islands("r1-1", [][]int{{0, 1, 2, 3}}, "clique-a").
				Islands("r1-2", [][]int{{0, 1, 2, 3}}, "clique-b").Islands("r1-3", [][]int{{0, 1, 2, 3}}, "clique-b").
				Used("r1-2", 0).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 3, Level: LevelNVLink, Required: true},
			want:       []string{"r1-2:[1 2 3]", "r1-3:[0 1 2]"},
			wantLevel:  LevelNVLink,
			wantDomain: "clique-b",
			wantRacks:  1,
		},
		"required nvlink: no domain big enough": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 4).
				Islands("r1-0", [][]int{{0, 1, 2, 3}}, "clique-a").Islands("r1-1", [][]int{{0, 1, 2, 3}}, "clique-b").Obj(),
			gang:    Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 4, Level: LevelNVLink, Required: true},
			wantErr: "ns/job needs 2 pod(s) × 4 GPU(s) in one NVLink domain; the best NVLink domain (clique-a) has room for 1 pod (4 free GPUs)",
		},
		"required nvlink: nodes without GPUNode data never qualify": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).CountOnly("r1-0").Obj(),
			gang:    Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 1, Level: LevelNVLink, Required: true},
			wantErr: "ns/job needs 1 pod(s) × 1 GPU(s) in one NVLink domain; no eligible node publishes NVLink domains (GPUNode status.gpus[].nvlinkDomain)",
		},
		"preferred nvlink falls back to the tightest node": {
			cluster:    makeCluster().Rack("z1", "b1", "r1", 2, 8).Used("r1-1", 0, 1, 2, 3, 4).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 1, GPUsPerPod: 2, Level: LevelNVLink},
			want:       []string{"r1-1:[5 6]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-1",
			wantRacks:  1,
		},
		"a node known by count only gets no GPU indices": {
			cluster:    makeCluster().Rack("z1", "b1", "r1", 1, 8).CountOnly("r1-0").Obj(),
			gang:       Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 4},
			want:       []string{"r1-0:[]", "r1-0:[]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-0",
			wantRacks:  1,
		},
		"consecutive ranks share racks": {
			cluster: makeCluster().Rack("z1", "b1", "rb", 2, 8).Rack("z1", "b1", "ra", 1, 8).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 8},
			want:    []string{"ra-0:[0 1 2 3 4 5 6 7]", "rb-0:[0 1 2 3 4 5 6 7]", "rb-1:[0 1 2 3 4 5 6 7]"},
			// ordered by rack, then node
			wantLevel:  LevelBlock,
			wantDomain: "z1/b1",
			wantRacks:  2,
		},
		"on the fewest nodes, the partly used ones before the free ones": {
			// 20 one-GPU pods need three nodes: 6 + 7 + 7 free fill three holes exactly, where the
			// roomiest first (8 + 8, then 4 of the 6) would take both free nodes and strand 2 GPUs.
			cluster: makeCluster().Rack("z1", "b1", "r1", 5, 8).
				Used("r1-2", 0).Used("r1-3", 0).Used("r1-4", 0, 1).Obj(),
			gang: Gang{Key: "ns/job", Pods: 20, GPUsPerPod: 1},
			want: slices.Concat(
				[]string{"r1-2:[1]", "r1-2:[2]", "r1-2:[3]", "r1-2:[4]", "r1-2:[5]", "r1-2:[6]", "r1-2:[7]"},
				[]string{"r1-3:[1]", "r1-3:[2]", "r1-3:[3]", "r1-3:[4]", "r1-3:[5]", "r1-3:[6]", "r1-3:[7]"},
				[]string{"r1-4:[2]", "r1-4:[3]", "r1-4:[4]", "r1-4:[5]", "r1-4:[6]", "r1-4:[7]"}),
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r1",
			wantRacks:  1,
		},
		"mixed counts: a 2-GPU launcher and two 8-GPU workers fit where three 8-GPU pods would not": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).Used("r1-2", 0, 1, 2, 3, 4, 5).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 3, PodGPUs: []int{2, 8, 8}},
			// pod by pod: the launcher in the hole, the workers on the free nodes
			want:       []string{"r1-2:[6 7]", "r1-0:[0 1 2 3 4 5 6 7]", "r1-1:[0 1 2 3 4 5 6 7]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r1",
			wantRacks:  1,
		},
		"mixed counts: the smaller pods join the node of the larger ones": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Used("r1-1", 0, 1, 2, 3).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 3, PodGPUs: []int{1, 4, 2}},
			// 7 GPUs: only r1-0 holds them all
			want:       []string{"r1-0:[6]", "r1-0:[0 1 2 3]", "r1-0:[4 5]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-0",
			wantRacks:  1,
		},
		"mixed counts: a small pod that does not fit beside the large ones takes the tightest hole of their rack": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 3, 8).Rack("z1", "b1", "r2", 1, 8).
				Used("r1-1", 0, 1, 2, 3, 4).Used("r1-2", 0, 1, 2, 3).Obj(),
			gang: Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{8, 3}},
			// r2 (one node) cannot hold 11 GPUs; in r1 the 3-GPU pod takes r1-1's 3, not r1-2's 4
			want:       []string{"r1-0:[0 1 2 3 4 5 6 7]", "r1-1:[5 6 7]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r1",
			wantRacks:  1,
		},
		"mixed counts, required rack: a message a person can act on": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Rack("z1", "b1", "r2", 2, 8).Used("r2-0", 7).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 3, PodGPUs: []int{8, 8, 1}, Level: LevelRack, Required: true},
			wantErr: "ns/job needs 2 pod(s) × 8 GPU(s) + 1 pod(s) × 1 GPU(s) in one rack; the best rack (z1/b1/r1) has room for 2 pods of 8 GPUs (16 free GPUs)",
		},
		"mixed counts, required nvlink: the domain that holds them all, the small pod beside a large one": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 4, 4).
				Islands("r1-0", [][]int{{0, 1, 2, 3}}, "clique-a").Islands("r1-1", [][]int{{0, 1, 2, 3}}, "clique-a").
				Islands("r1-2", [][]int{{0, 1, 2, 3}}, "clique-b").Islands("r1-3", [][]int{{0, 1, 2, 3}}, "clique-b").
				Used("r1-2", 0).Used("r1-0", 0, 1).Obj(),
			gang: Gang{Key: "ns/job", Pods: 3, PodGPUs: []int{1, 3, 3}, Level: LevelNVLink, Required: true},
			// clique-a has 6 free GPUs, too few for 7
			want:       []string{"r1-3:[3]", "r1-2:[1 2 3]", "r1-3:[0 1 2]"},
			wantLevel:  LevelNVLink,
			wantDomain: "clique-b",
			wantRacks:  1,
		},
		"mixed counts, required nvlink: no domain big enough": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 4).
				Islands("r1-0", [][]int{{0, 1, 2, 3}}, "clique-a").Islands("r1-1", [][]int{{0, 1, 2, 3}}, "clique-b").Obj(),
			gang:    Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{4, 1}, Level: LevelNVLink, Required: true},
			wantErr: "ns/job needs 1 pod(s) × 4 GPU(s) + 1 pod(s) × 1 GPU(s) in one NVLink domain (5 GPUs); the best NVLink domain (clique-a) has 4 free GPUs",
		},
		"a master that asks more CPU than its workers: each pod is counted at its own CPU, not at the most any asks": {
			// 96 CPUs a node: at the master's 60 a node takes one pod (MaxPods), but it takes
			// the master and a worker of 30
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).MaxPods("r1-0", 1).MaxPods("r1-1", 1).
				Spare("r1-0", 96, 110).Spare("r1-1", 96, 110).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 4, GPUsPerPod: 4, PodNeeds: [][]int64{{60, 1}, {30, 1}, {30, 1}, {30, 1}}},
			want:       []string{"r1-0:[0 1 2 3]", "r1-0:[4 5 6 7]", "r1-1:[0 1 2 3]", "r1-1:[4 5 6 7]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r1",
			wantRacks:  1,
		},
		"workers that ask more CPU than their master are not stacked past a node's CPU": {
			// two workers of 50 CPUs do not share a node of 96; the master of 10 joins one
			cluster:    makeCluster().Rack("z1", "b1", "r1", 2, 8).Spare("r1-0", 96, 110).Spare("r1-1", 96, 110).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 4, PodNeeds: [][]int64{{10, 1}, {50, 1}, {50, 1}}},
			want:       []string{"r1-0:[4 5 6 7]", "r1-0:[0 1 2 3]", "r1-1:[0 1 2 3]"},
			wantLevel:  LevelRack,
			wantDomain: "z1/b1/r1",
			wantRacks:  1,
		},
		"pods of different CPU that fit no node together: a message a person can act on": {
			// the master asks 100 CPUs; no node has more than 96 (MaxPods counts the largest pod)
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).MaxPods("r1-0", -1).MaxPods("r1-1", -1).
				Spare("r1-0", 96, 110).Spare("r1-1", 96, 110).Obj(),
			gang:    Gang{Key: "ns/job", Pods: 3, GPUsPerPod: 4, PodNeeds: [][]int64{{100, 1}, {50, 1}, {10, 1}}},
			wantErr: "ns/job needs 3 pod(s) × 4 GPU(s); the cluster has room for 0 of its largest 4-GPU pods (16 free GPUs on 2 nodes); 2 nodes have free GPUs but no room beside them for its largest pod (CPU, memory, pod slots or the pods' spread)",
		},
		"pods that ask the same of everything are a gang of one count": {
			cluster:    makeCluster().Rack("z1", "b1", "r1", 1, 8).Spare("r1-0", 96, 110).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 2, GPUsPerPod: 4, PodNeeds: [][]int64{{30, 1}, {30, 1}}},
			want:       []string{"r1-0:[0 1 2 3]", "r1-0:[4 5 6 7]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-0",
			wantRacks:  1,
		},
		"mixed counts that are all the same are a gang of one count": {
			cluster:    makeCluster().Rack("z1", "b1", "r1", 1, 8).Obj(),
			gang:       Gang{Key: "ns/job", Pods: 2, PodGPUs: []int{4, 4}},
			want:       []string{"r1-0:[0 1 2 3]", "r1-0:[4 5 6 7]"},
			wantLevel:  LevelNode,
			wantDomain: "r1-0",
			wantRacks:  1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := tc.cluster.Place(tc.gang)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Place() = %v, want error %q", placed(p), tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("Place() error (-want,+got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Place() error: %v", err)
			}
			if diff := cmp.Diff(tc.want, placed(p)); diff != "" {
				t.Errorf("Place() (-want,+got):\n%s", diff)
			}
			if p.Level != tc.wantLevel || p.Domain != tc.wantDomain {
				t.Errorf("Place() domain = %s %q, want %s %q", p.Level, p.Domain, tc.wantLevel, tc.wantDomain)
			}
			if p.Racks() != tc.wantRacks {
				t.Errorf("Place() racks = %d, want %d", p.Racks(), tc.wantRacks)
			}
		})
	}
}

func TestPlaceInvalidGang(t *testing.T) {
	c := makeCluster().Rack("z1", "b1", "r1", 1, 8).Obj()
	for name, g := range map[string]Gang{
		"no pods":                             {Key: "a", Pods: 0, GPUsPerPod: 1},
		"no GPUs":                             {Key: "a", Pods: 1, GPUsPerPod: 0},
		"more GPUs than 64":                   {Key: "a", Pods: 1, GPUsPerPod: 65},
		"unknown level":                       {Key: "a", Pods: 1, GPUsPerPod: 1, Level: LevelCluster + 1},
		"GPU counts for fewer pods":           {Key: "a", Pods: 3, PodGPUs: []int{1, 2}},
		"needs for fewer pods":                {Key: "a", Pods: 3, GPUsPerPod: 1, PodNeeds: [][]int64{{1, 1}, {2, 1}}},
		"needs of different resources":        {Key: "a", Pods: 2, GPUsPerPod: 1, PodNeeds: [][]int64{{1, 1}, {2}}},
		"a pod of no GPUs among mixed counts": {Key: "a", Pods: 2, PodGPUs: []int{0, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := c.Place(g); err == nil {
				t.Error("Place() succeeded, want an error")
			}
		})
	}
}

// TestPlaceSequence places gangs one after another, as the scheduler would, and checks that best
// fit keeps whole nodes and racks free for the gangs that need them.
func TestPlaceSequence(t *testing.T) {
	cases := map[string]struct {
		cluster      *Cluster
		gangs        []Gang
		wantStranded int
		wantRacks    []int
	}{
		"small pods fill half-used nodes and leave whole nodes whole": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Obj(),
			gangs: []Gang{{Key: "a", Pods: 1, GPUsPerPod: 4}, {Key: "b", Pods: 1, GPUsPerPod: 4},
				{Key: "c", Pods: 1, GPUsPerPod: 8}},
			wantRacks: []int{1, 1, 1},
		},
		"small gangs pack one rack and leave the other for a rack-sized gang": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 4, 8).Rack("z1", "b1", "r2", 4, 8).Obj(),
			gangs: []Gang{{Key: "a", Pods: 2, GPUsPerPod: 8}, {Key: "b", Pods: 3, GPUsPerPod: 4},
				{Key: "c", Pods: 2, GPUsPerPod: 2}, {Key: "d", Pods: 4, GPUsPerPod: 8, Level: LevelRack, Required: true}},
			wantRacks: []int{1, 1, 1, 1},
		},
		"mixed 1/2/4/8 pods leave no stranded GPUs when they add up": {
			cluster: makeCluster().Rack("z1", "b1", "r1", 2, 8).Obj(),
			gangs: []Gang{{Key: "a", Pods: 1, GPUsPerPod: 1}, {Key: "b", Pods: 1, GPUsPerPod: 2},
				{Key: "c", Pods: 1, GPUsPerPod: 4}, {Key: "d", Pods: 1, GPUsPerPod: 1}, {Key: "e", Pods: 1, GPUsPerPod: 8}},
			wantRacks: []int{1, 1, 1, 1, 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var racks []int
			for _, g := range tc.gangs {
				p, err := tc.cluster.Place(g)
				if err != nil {
					t.Fatalf("Place(%s) error: %v", g.Key, err)
				}
				tc.cluster.Apply(p, -1)
				racks = append(racks, p.Racks())
			}
			if diff := cmp.Diff(tc.wantRacks, racks); diff != "" {
				t.Errorf("racks per gang (-want,+got):\n%s", diff)
			}
			if got := tc.cluster.Stranded(); got != tc.wantStranded {
				t.Errorf("Stranded() = %d, want %d", got, tc.wantStranded)
			}
		})
	}
}
