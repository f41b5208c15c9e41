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

package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GangPlacementArgs configures the GangPlacement plugin.
// +kubebuilder:object:root=true
type GangPlacementArgs struct {
	metav1.TypeMeta

	// TopologyPreset names the TopologyLevels of a known labelling: convoy, topograph, eks or gke.
	TopologyPreset string
	// TopologyLevels are the cluster's topology levels, outer to inner.
	TopologyLevels []TopologyLevel
	// ZoneLabel, BlockLabel and RackLabel, deprecated, are the node labels of the levels zone,
	// block and rack, in place of TopologyLevels; "" where unset.
	ZoneLabel  string
	BlockLabel string
	RackLabel  string
	// GPUResourceName is the extended resource that counts GPUs.
	GPUResourceName string
	// PlanTimeoutSeconds is how long a gang's plan is kept while its pods are placed one by one.
	PlanTimeoutSeconds int64
	// MaxConcurrentBindings caps the pods whose Binding or DRA claim writes the plugin has in
	// flight at once.
	MaxConcurrentBindings int32
	// NodePacking is how a gang that needs several nodes of a rack picks them.
	NodePacking NodePacking
	// BookingTimeoutSeconds is how long the placement admission check holds an admitted gang's
	// place for its pods.
	BookingTimeoutSeconds int64
	// LeaderElectionLease is the scheduler's leader-election Lease, "namespace/name"; "" without.
	LeaderElectionLease string
}

// TopologyLevel is one topology level: its name and the node label that names a node's domain.
type TopologyLevel struct {
	Name      string
	NodeLabel string
}

// NodePacking is how a gang that needs several nodes of a rack picks them.
type NodePacking string

const (
	// NodePackingFewestNodes takes the fewest nodes, of the least room: issue 5's "fewest
	// domains at the lowest level". The default.
	NodePackingFewestNodes NodePacking = "FewestNodes"
	// NodePackingPartlyUsedFirst takes every partly used node of the rack, least room first,
	// before it opens a free one: fewer GPUs stranded on partly used nodes, more nodes per gang.
	NodePackingPartlyUsedFirst NodePacking = "PartlyUsedFirst"
)

// GangPreemptionArgs configures the GangPreemption plugin.
// +kubebuilder:object:root=true
type GangPreemptionArgs struct {
	metav1.TypeMeta

	// PreemptLonePods lets preemption evict lower-priority pods that belong to no gang.
	PreemptLonePods bool
	// VictimTerminationSeconds is how long a preemptor waits for its victims to terminate before it
	// may choose victims again.
	VictimTerminationSeconds int64
}
