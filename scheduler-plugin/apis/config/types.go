package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GangPlacementArgs configures the GangPlacement plugin.
// +kubebuilder:object:root=true
type GangPlacementArgs struct {
	metav1.TypeMeta

	// ZoneLabel, BlockLabel and RackLabel are the node labels naming a node's zone, block and rack.
	ZoneLabel  string
	BlockLabel string
	RackLabel  string
	// GPUResourceName is the extended resource that counts GPUs.
	GPUResourceName string
	// PlanTimeoutSeconds is how long a gang's plan is kept while its pods are placed one by one.
	PlanTimeoutSeconds int64
	// MaxConcurrentBindings caps the Binding requests the plugin has in flight at once.
	MaxConcurrentBindings int32
}

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
