// Package gangcore is the state the GangPlacement and GangPreemption plugins share: the GPU
// inventory published in GPUNode objects, the plans of gangs being placed, the GPUs reserved for
// pods on their way to binding, and the translation of the scheduler's snapshot into the
// planner's view of the cluster.
//
// A gang is a scheduler-plugins PodGroup: the pods labelled scheduling.x-k8s.io/pod-group in one
// namespace. A GPU pod without that label is a gang of one.
package gangcore
