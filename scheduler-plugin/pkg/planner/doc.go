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

// Package planner places a whole gang of GPU pods at once. It is pure: it reads a snapshot of the
// cluster (nodes, their free GPUs and GPU links, their domains of the cluster's topology levels,
// Cluster.Levels: zone, block and rack by default, up to MaxLevels) and returns where every
// pod of the gang goes, or why none can, or which whole lower-priority gangs to evict so that it
// can. The Convoy scheduler plugins call it from PreFilter and PostFilter; a simulator or a
// benchmark can drive the same code without a cluster.
//
// The objective, in order:
//
//  1. every pod of the gang fits (free, healthy GPUs and the node's other resources);
//  2. the whole gang lies inside one domain of the gang's required topology level;
//  3. the gang spans the fewest domains at the lowest level: it goes into the smallest single
//     domain (NVLink domain, node, then the topology levels from the innermost: rack, block, zone,
//     or clique, rack, block, zone...) that can hold it, of those the one where it spans the fewest
//     domains of the innermost level ("racks" below) and, inside that domain, into the fewest
//     children, level by level
//     (across blocks, the blocks of the most room are filled first, which may span a rack more
//     than the fewest; inside a rack, of the fewest nodes that hold the pods, those with the least
//     room, so that partly used nodes fill before free ones; with Cluster.PartlyUsedFirst, every
//     partly used node of the rack before any free one, on more nodes than the fewest);
//  4. inside a node, each pod gets GPUs that form a well-connected NVLink set and leave the
//     node's remaining free GPUs well connected;
//  5. best fit: among equal choices the plan that strands the fewest GPUs on partly used nodes
//     (of racks that hold the gang, the one whose plan fills the most partly used nodes and opens
//     the fewest free ones; of those, for a gang that is not whole nodes, the rack left with the
//     fewest free GPUs past whole nodes), then the fullest domain, so that large free blocks
//     survive; a gang that fits on one node goes to the node of fewest free GPUs, then, of those,
//     to the smallest in CPU and memory (Node.CPU, Node.Memory), so that the largest stay for the
//     pods that need them, then to the one of least room for its pods, in the fullest rack, and
//     last to the one whose CPU and memory it fills most (Node.Fill).
//
// A gang's pods may ask different GPU counts (Gang.PodGPUs: a launcher beside its workers), or
// different CPU and memory (Gang.PodNeeds: a master beside its workers). The domain is then
// chosen for all of them as above, by the room for its largest pods; inside it the largest pods
// are placed first, and each smaller shape's pods fill the nodes the gang already uses before they
// are placed as a gang of their own inside the domain. With PodNeeds each pod takes its own CPU
// and memory from its node's Spare as the plan goes.
//
// In the code, Place checks the gang and hands it to placeIn (one GPU count, place.go) or
// placeMixed (mixed.go), which calls placeIn for each shape's pods inside the domain it chose.
// placeIn makes a placement per call, in the cluster's buffers: init counts every domain's room
// and free GPUs, place walks the levels up from the node (rule 3), distribute splits the pods
// among a domain's children, and better, betterRack, betterNode, strands and leastStrands are the
// orders of rule 5; each step is tested on its own (placement_test.go), and the whole against
// every choice (place_oracle_test.go).
package planner
