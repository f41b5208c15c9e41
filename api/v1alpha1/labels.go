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

package v1alpha1

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

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
	// LabelGPUClique names the node's multi-node NVLink domain (GB200/GB300 NVL72): its fabric's
	// cluster UUID and clique ID, "<uuid>.<clique>".
	LabelGPUClique = "nvidia.com/gpu.clique"

	// ResourceGPU is the extended resource the NVIDIA device plugin advertises.
	ResourceGPU = "nvidia.com/gpu"

	// DriverGPU is NVIDIA's DRA driver: the domain of the attributes (productName, uuid, ...) and
	// capacities (memory) of the GPUs it publishes in ResourceSlices, and the name of its
	// DeviceClass of whole GPUs.
	DriverGPU = "gpu.nvidia.com"

	// AnnotationGPUIndices on a pod lists the GPU indices Convoy's scheduler chose for it on its
	// node, for example "0,1,2,3". On fake nodes the node agent gives the pod these GPUs when they
	// are free and healthy.
	AnnotationGPUIndices = "convoy.dev/gpu-indices"
)

// Labels and annotations the operator puts on a TrainingJob's pods.
const (
	LabelJobName     = "convoy.dev/job-name"
	LabelReplicaRole = "convoy.dev/role"
	LabelReplicaRank = "convoy.dev/rank"
	// LabelTrainingJob is the TrainingJob design's own label of the job's pods, so that
	// `kubectl logs -l training-job=<name>` works as its docs say. It carries the same value as
	// LabelJobName, which the operator and the scheduler select on.
	LabelTrainingJob = "training-job"
)

// Annotations the operator puts on a TrainingJob's pods and PodGroup for the scheduler.
const (
	// AnnotationTopologyLevel carries spec.scheduling.topology.level.
	AnnotationTopologyLevel = "convoy.dev/topology-level"
	// AnnotationTopologyMode carries spec.scheduling.topology.mode.
	AnnotationTopologyMode = "convoy.dev/topology-mode"
	// AnnotationLastCheckpointTime is the RFC 3339 time of the latest reported checkpoint, on the
	// PodGroup: the scheduler prefers preempting gangs that lose the least work.
	AnnotationLastCheckpointTime = "convoy.dev/last-checkpoint-time"
	// AnnotationPreemptAttempt, set on a PodGroup by convoy-scheduler's gang preemption, names the
	// restart attempt (LabelRestartAttempt) of the pods it preempts: the operator has that attempt
	// checkpoint within spec.checkpoint.preemptionGraceSeconds, then stops it as preempted.
	AnnotationPreemptAttempt = "convoy.dev/preempt-attempt"
	// AnnotationTopologyDomains, set by convoy-scheduler on each GPU pod it binds, is the domain of
	// the pod's node at each of the scheduler's topology levels (GangPlacement's topologyLevels)
	// that labels it, outer to inner: zone=z1,block=b1,rack=r1. status.resources.placement counts them.
	AnnotationTopologyDomains = "convoy.dev/topology-domains"
	// LabelRestartAttempt is status.restartCount when the pod was created: it tells a restarted
	// gang's pods from the terminating pods of the gang before, which have the same names.
	LabelRestartAttempt = "convoy.dev/restart-attempt"
)

// Annotations Convoy keeps on a MultiKueue manager cluster's TrainingJob (spec.managedBy
// kueue.x-k8s.io/multikueue), which runs on a worker cluster while its status mirrors the worker's.
const (
	// AnnotationWorkerCluster names the worker cluster (MultiKueueCluster) that MultiKueue last
	// dispatched the job to; each new one is announced by a Dispatched event.
	AnnotationWorkerCluster = "convoy.dev/worker-cluster"
	// AnnotationResumeFrom is the latest checkpoint a worker reported (status.checkpoint.latest).
	// MultiKueue copies it with the job when it dispatches the job again, to another worker after
	// the first was lost, and that worker's pods get it as CONVOY_RESUME_FROM, in place of
	// spec.checkpoint.resumeFrom, until they report a checkpoint of their own.
	AnnotationResumeFrom = "convoy.dev/resume-from"
)

// AnnotationElasticWorkers, on an elastic TrainingJob (spec.elastic), is the number of workers
// Kueue accounts for: set to the count admitted when the job starts and changed by the operator
// when the gang resizes. spec.numWorkers stays the most workers the job may have.
const AnnotationElasticWorkers = "convoy.dev/elastic-workers"

// AnnotationElasticGrows, on an elastic TrainingJob, counts the times the operator grew it: each
// grow is a new Kueue Workload slice, named by it.
const AnnotationElasticGrows = "convoy.dev/elastic-grows"

// AnnotationElasticAdmitted, on an elastic TrainingJob, is the number of workers Kueue admitted
// it with when it started, set with AnnotationElasticWorkers and removed when the job stops:
// workers it grew beyond this into free GPUs are lent, given back to a waiting job of the same
// priority.
const AnnotationElasticAdmitted = "convoy.dev/elastic-admitted"

// AnnotationElasticShrinkTo, on an elastic TrainingJob, is the size the operator shrinks the
// running gang to once it has checkpointed: the operator then lowers AnnotationElasticWorkers to
// it and removes it.
const AnnotationElasticShrinkTo = "convoy.dev/elastic-shrink-to"

// Spot capacity. Cloud providers and node provisioners mark spot (preemptible) nodes with a label,
// and announce a node's reclaim with a taint shortly before the node goes.
const (
	// LabelCapacityType is Karpenter's capacity label: CapacityTypeSpot or CapacityTypeOnDemand.
	LabelCapacityType = "karpenter.sh/capacity-type"
	// CapacityTypeSpot and CapacityTypeOnDemand are LabelCapacityType's values.
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// SpotNodeLabel is one label=value that marks a node as spot: the operator's --spot-node-label,
// for example cloud.google.com/gke-spot=true on GKE, eks.amazonaws.com/capacityType=SPOT on EKS
// managed node groups, kubernetes.azure.com/scalesetpriority=spot on AKS.
type SpotNodeLabel struct {
	Key   string
	Value string
}

// String is the label as key=value.
func (l SpotNodeLabel) String() string { return l.Key + "=" + l.Value }

// DefaultSpotNodeLabel is Karpenter's spot label.
var DefaultSpotNodeLabel = SpotNodeLabel{Key: LabelCapacityType, Value: CapacityTypeSpot}

// ParseSpotNodeLabel parses key=value, the key a qualified label key and the value a label value.
func ParseSpotNodeLabel(s string) (SpotNodeLabel, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || v == "" {
		return SpotNodeLabel{}, fmt.Errorf("%q is not key=value: name the label and the value it has on spot nodes, such as cloud.google.com/gke-spot=true", s)
	}
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return SpotNodeLabel{}, fmt.Errorf("%q: the key is no label key: %s", s, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return SpotNodeLabel{}, fmt.Errorf("%q: the value is no label value: %s", s, strings.Join(errs, "; "))
	}
	return SpotNodeLabel{Key: k, Value: v}, nil
}

// IsSpotNode reports whether a node's labels carry one of spot (DefaultSpotNodeLabel when empty).
func IsSpotNode(nodeLabels map[string]string, spot []SpotNodeLabel) bool {
	if len(spot) == 0 {
		spot = []SpotNodeLabel{DefaultSpotNodeLabel}
	}
	for _, l := range spot {
		if v, ok := nodeLabels[l.Key]; ok && v == l.Value {
			return true
		}
	}
	return false
}

// DefaultReclaimNoticeTaints are the taint keys that announce a node's imminent removal: Karpenter's
// disruption taint (set before it drains and deletes a node, a spot interruption included), GKE's
// taint before a spot or preemptible VM is terminated, and the AWS node termination handler's taint
// on a spot interruption notice. All three have the NoSchedule effect, so that no new pod lands there.
var DefaultReclaimNoticeTaints = []string{
	"karpenter.sh/disrupted",
	"cloud.google.com/impending-node-termination",
	"aws-node-termination-handler/spot-itn",
}
