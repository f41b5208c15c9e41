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

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GangPlacementArgs configures the GangPlacement plugin.
// +kubebuilder:object:root=true
type GangPlacementArgs struct {
	metav1.TypeMeta `json:",inline"`

	// topologyPreset names the topology levels of a labelling the cluster already has: convoy
	// (topology.kubernetes.io/zone, convoy.dev/topology-block, convoy.dev/topology-rack,
	// nvidia.com/gpu.clique), topograph (NVIDIA Topograph's network.topology.nvidia.com/core,
	// spine, leaf, accelerator), eks (zone, topology.k8s.aws/network-node-layer-1 to 4,
	// nvidia.com/gpu.clique) or gke (zone, cloud.google.com/gce-topology-block, -subblock,
	// nvidia.com/gpu.clique). Defaults to convoy where neither topologyLevels nor the deprecated
	// zoneLabel, blockLabel and rackLabel are set; set it or topologyLevels, not both.
	// +optional
	// +kubebuilder:validation:Enum=convoy;topograph;eks;gke
	TopologyPreset *string `json:"topologyPreset,omitempty"`
	// topologyLevels are the cluster's topology levels, outer to inner, 1 to 6 of them: each a
	// name (what spec.scheduling.topology.level may ask, beside the node label) and the node
	// label whose value names a node's domain of the level. Each level nests in the one outside
	// it; a node without the label is a domain of its own there and below.
	// +optional
	// +listType=atomic
	TopologyLevels []TopologyLevel `json:"topologyLevels,omitempty"`
	// zoneLabel, blockLabel and rackLabel, deprecated, set the node labels of three levels named
	// zone, block and rack, the unset ones those of the convoy preset, without its clique level:
	// use topologyLevels.
	// +optional
	ZoneLabel *string `json:"zoneLabel,omitempty"`
	// +optional
	BlockLabel *string `json:"blockLabel,omitempty"`
	// +optional
	RackLabel *string `json:"rackLabel,omitempty"`
	// gpuResourceName is the extended resource that counts GPUs. Defaults to nvidia.com/gpu.
	// +optional
	GPUResourceName *string `json:"gpuResourceName,omitempty"`
	// planTimeoutSeconds is how long a gang's plan is kept while its pods are placed one by one;
	// a plan not bound by then is dropped and made again. Defaults to 90.
	// +optional
	PlanTimeoutSeconds *int64 `json:"planTimeoutSeconds,omitempty"`
	// maxConcurrentBindings caps the pods whose Binding or DRA claim writes the plugin has in
	// flight at once; the pods of a released gang wait their turn. Coscheduling releases a whole gang at once, and a
	// client with more requests in flight than the API server's streams per connection (100 by
	// default, --http2-max-streams-per-connection) opens new TLS connections for the rest: without
	// a cap the scheduler opened over 1,000 connections in one 5,000-node benchmark run, and a
	// Binding took 3.8 s on average. Defaults to 64, below 100 less the scheduler's own watches.
	// +optional
	MaxConcurrentBindings *int32 `json:"maxConcurrentBindings,omitempty"`
	// nodePacking is how a gang that needs several nodes of a rack picks them. FewestNodes (the
	// default) takes the fewest nodes, of the least room, so a job spans as few nodes as it can.
	// PartlyUsedFirst takes every partly used node of the rack, least room first, before it opens
	// a free one: fewer GPUs stay stranded on partly used nodes, for platforms that rank
	// fragmentation over locality, at the cost of more nodes per gang (2 % more in the scheduler
	// benchmark's fits mix). Either way a gang keeps to the fewest racks.
	// +optional
	// +kubebuilder:validation:Enum=FewestNodes;PartlyUsedFirst
	NodePacking *string `json:"nodePacking,omitempty"`
	// bookingTimeoutSeconds is how long the placement admission check (controllerName
	// convoy.dev/placement) holds the place it found for an admitted gang before the gang's pods
	// reach the scheduler; then the place is released and the check set to Retry, so Kueue releases
	// the quota too. Defaults to 300.
	// +optional
	BookingTimeoutSeconds *int64 `json:"bookingTimeoutSeconds,omitempty"`
	// leaderElectionLease is the scheduler's leader-election Lease, as "namespace/name" (its
	// leaderElection.resourceNamespace and resourceName): the placement admission check decides
	// only in the replica that holds it, whose plans are the ones that count. Empty, the default,
	// for a scheduler without leader election.
	// +optional
	LeaderElectionLease *string `json:"leaderElectionLease,omitempty"`
}

// TopologyLevel is one topology level of the cluster.
type TopologyLevel struct {
	// name names the level, e.g. rack; node, nvlink and cluster are the built-in levels'.
	Name string `json:"name"`
	// nodeLabel is the node label whose value names a node's domain of the level.
	NodeLabel string `json:"nodeLabel"`
}

// GangPreemptionArgs configures the GangPreemption plugin.
// +kubebuilder:object:root=true
type GangPreemptionArgs struct {
	metav1.TypeMeta `json:",inline"`

	// preemptLonePods lets preemption evict lower-priority pods that belong to no gang. Defaults
	// to true.
	// +optional
	PreemptLonePods *bool `json:"preemptLonePods,omitempty"`
	// victimTerminationSeconds is how long a preemptor waits for its victims to terminate before
	// it may choose victims again. Defaults to 120.
	// +optional
	VictimTerminationSeconds *int64 `json:"victimTerminationSeconds,omitempty"`
}
