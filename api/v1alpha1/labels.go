package v1alpha1

// Well-known node labels. Zone is the Kubernetes standard; block and rack are Convoy's, and the
// scheduler plugin's args may name other keys for clusters that already label racks differently.
const (
	LabelTopologyZone  = "topology.kubernetes.io/zone"
	LabelTopologyBlock = "convoy.dev/topology-block"
	LabelTopologyRack  = "convoy.dev/topology-rack"
	LabelHostname      = "kubernetes.io/hostname"

	// GPU Feature Discovery-compatible labels, set by the node agent where no other owner does.
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUMemory  = "nvidia.com/gpu.memory"
	LabelGPUCount   = "nvidia.com/gpu.count"

	// ResourceGPU is the extended resource the NVIDIA device plugin advertises.
	ResourceGPU = "nvidia.com/gpu"
)

// Labels and annotations the operator puts on a TrainingJob's pods.
const (
	LabelJobName     = "convoy.dev/job-name"
	LabelReplicaRole = "convoy.dev/role"
	LabelReplicaRank = "convoy.dev/rank"
)
