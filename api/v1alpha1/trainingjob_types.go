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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Framework is the distributed-training framework whose environment the operator wires into pods.
// +kubebuilder:validation:Enum=pytorch;tensorflow;jax;mpi;mxnet;generic
type Framework string

const (
	FrameworkPyTorch    Framework = "pytorch"
	FrameworkTensorFlow Framework = "tensorflow"
	FrameworkJAX        Framework = "jax"
	FrameworkMPI        Framework = "mpi"
	FrameworkMXNet      Framework = "mxnet"
	FrameworkGeneric    Framework = "generic"
)

// TrainingJobSpec is what a data scientist asks for: a model trained on a dataset by a gang of workers.
// +kubebuilder:validation:XValidation:rule="self.numParameterServers == 0 || self.framework in ['tensorflow', 'mxnet']",message="spec.numParameterServers is only used by framework tensorflow or mxnet: set it to 0 or change spec.framework",fieldPath=".numParameterServers"
// +kubebuilder:validation:XValidation:rule="self.framework != 'mxnet' || self.numParameterServers >= 1",message="spec.numParameterServers must be at least 1 for framework mxnet: MXNet's dist kvstore needs a server",fieldPath=".numParameterServers"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !('nvidia.com/gpu' in self.resources.limits) || (isQuantity(string(self.resources.limits['nvidia.com/gpu'])) && quantity(string(self.resources.limits['nvidia.com/gpu'])).isInteger() && (!has(self.gpusPerWorker) || quantity(string(self.resources.limits['nvidia.com/gpu'])).asInteger() == self.gpusPerWorker))",message="spec.resources.limits[nvidia.com/gpu] must be a whole number equal to spec.gpusPerWorker: set one of the two, or make them agree",fieldPath=".resources.limits"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || !('nvidia.com/gpu' in self.resources.requests) || (isQuantity(string(self.resources.requests['nvidia.com/gpu'])) && quantity(string(self.resources.requests['nvidia.com/gpu'])).isInteger() && (!has(self.gpusPerWorker) || quantity(string(self.resources.requests['nvidia.com/gpu'])).asInteger() == self.gpusPerWorker))",message="spec.resources.requests[nvidia.com/gpu] must be a whole number equal to spec.gpusPerWorker: set one of the two, or make them agree",fieldPath=".resources.requests"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || !has(self.resources.limits) || !('nvidia.com/gpu' in self.resources.requests) || !('nvidia.com/gpu' in self.resources.limits) || !isQuantity(string(self.resources.requests['nvidia.com/gpu'])) || !isQuantity(string(self.resources.limits['nvidia.com/gpu'])) || quantity(string(self.resources.requests['nvidia.com/gpu'])).compareTo(quantity(string(self.resources.limits['nvidia.com/gpu']))) == 0",message="spec.resources.requests[nvidia.com/gpu] must equal spec.resources.limits[nvidia.com/gpu]: GPUs cannot be overcommitted",fieldPath=".resources.requests"
// +kubebuilder:validation:XValidation:rule="!has(self.gpu) || !has(self.resources) || ((!has(self.resources.limits) || !('nvidia.com/gpu' in self.resources.limits)) && (!has(self.resources.requests) || !('nvidia.com/gpu' in self.resources.requests)))",message="spec.gpu asks for the workers' GPUs as DRA devices, so spec.resources must not ask for nvidia.com/gpu too: remove nvidia.com/gpu from spec.resources and give the count in spec.gpusPerWorker, or remove spec.gpu",fieldPath=".gpu"
// +kubebuilder:validation:XValidation:rule="!has(self.gpu) || !has(self.gpusPerWorker) || self.gpusPerWorker > 0",message="spec.gpu asks for DRA GPUs but spec.gpusPerWorker is 0: remove spec.gpu to run workers without GPUs, or set spec.gpusPerWorker to at least 1",fieldPath=".gpu"
// +kubebuilder:validation:XValidation:rule="has(self.gpu) == has(oldSelf.gpu) && (!has(self.gpu) || self.gpu == oldSelf.gpu) || (has(self.suspend) && self.suspend && has(oldSelf.suspend) && oldSelf.suspend)",message="spec.gpu is immutable unless the job is suspended: set spec.suspend to true first, or create a new TrainingJob",fieldPath=".gpu"
// +kubebuilder:validation:XValidation:rule="!has(self.monitoring) || !has(self.networking) || self.monitoring.metricsPort != self.networking.masterPort",message="spec.monitoring.metricsPort must differ from spec.networking.masterPort: pick another port for one of them",fieldPath=".monitoring.metricsPort"
// +kubebuilder:validation:XValidation:rule="self.numWorkers == oldSelf.numWorkers || (has(self.suspend) && self.suspend) || (has(oldSelf.suspend) && oldSelf.suspend)",message="spec.numWorkers is immutable while the job runs: set spec.suspend to true first, or create a new TrainingJob",fieldPath=".numWorkers"
// +kubebuilder:validation:XValidation:rule="!has(self.minWorkers) || self.minWorkers <= self.numWorkers",message="spec.minWorkers must not exceed spec.numWorkers: lower spec.minWorkers, or raise spec.numWorkers",fieldPath=".minWorkers"
// +kubebuilder:validation:XValidation:rule="has(self.minWorkers) == has(oldSelf.minWorkers) && (!has(self.minWorkers) || self.minWorkers == oldSelf.minWorkers) || (has(self.suspend) && self.suspend && has(oldSelf.suspend) && oldSelf.suspend)",message="spec.minWorkers is immutable unless the job is suspended: set spec.suspend to true first, or create a new TrainingJob",fieldPath=".minWorkers"
// +kubebuilder:validation:XValidation:rule="has(self.gpusPerWorker) == has(oldSelf.gpusPerWorker) && (!has(self.gpusPerWorker) || self.gpusPerWorker == oldSelf.gpusPerWorker) || (has(self.suspend) && self.suspend && has(oldSelf.suspend) && oldSelf.suspend)",message="spec.gpusPerWorker is immutable unless the job is suspended: set spec.suspend to true first, or create a new TrainingJob",fieldPath=".gpusPerWorker"
// +kubebuilder:validation:XValidation:rule="(has(self.resources) && has(self.resources.limits) && 'nvidia.com/gpu' in self.resources.limits) == (has(oldSelf.resources) && has(oldSelf.resources.limits) && 'nvidia.com/gpu' in oldSelf.resources.limits) && (!(has(self.resources) && has(self.resources.limits) && 'nvidia.com/gpu' in self.resources.limits) || string(self.resources.limits['nvidia.com/gpu']) == string(oldSelf.resources.limits['nvidia.com/gpu'])) || (has(self.suspend) && self.suspend && has(oldSelf.suspend) && oldSelf.suspend)",message="spec.resources.limits[nvidia.com/gpu] is immutable unless the job is suspended: set spec.suspend to true first, or create a new TrainingJob",fieldPath=".resources.limits"
// +kubebuilder:validation:XValidation:rule="self.numParameterServers == oldSelf.numParameterServers || (has(self.suspend) && self.suspend && has(oldSelf.suspend) && oldSelf.suspend)",message="spec.numParameterServers is immutable unless the job is suspended: set spec.suspend to true first, or create a new TrainingJob",fieldPath=".numParameterServers"
// +kubebuilder:validation:XValidation:rule="self.framework == oldSelf.framework",message="spec.framework is immutable: create a new TrainingJob to change it",fieldPath=".framework"
// +kubebuilder:validation:XValidation:rule="self.framework != 'mpi' || !has(self.securityContext) || !has(self.securityContext.podSecurity) || self.securityContext.podSecurity != 'restricted'",message="spec.securityContext.podSecurity cannot be restricted for framework mpi: its workers run sshd as root with the SETUID, SETGID and SYS_CHROOT capabilities, which only baseline allows; set baseline or remove podSecurity",fieldPath=".securityContext.podSecurity"
// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="spec.managedBy is immutable: delete the job and create it again to change which controller runs it",fieldPath=".managedBy"
// +kubebuilder:validation:XValidation:rule="!has(self.output) || !has(self.output.model) || !has(self.checkpoint) || !has(self.checkpoint.storage) || !(has(self.checkpoint.storage.s3Access) || has(self.checkpoint.storage.gcsAccess) || has(self.checkpoint.storage.azureAccess))",message="spec.output.model is published with the job's own identity, not the operator's pre-signed URLs: remove spec.checkpoint.storage.s3Access, gcsAccess or azureAccess presigned and give serviceAccountName or credentialsSecretRef access to the bucket, or remove spec.output.model",fieldPath=".output.model"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || self.framework == 'pytorch'",message="spec.elastic needs framework pytorch: only torchrun's elastic rendezvous lets workers join and leave a running job (TF_CONFIG, the MPI hostfile and JAX's num_processes are fixed at start); remove spec.elastic or use framework pytorch",fieldPath=".elastic"
// +kubebuilder:validation:XValidation:rule="(oldSelf.hasValue() && has(oldSelf.value().elastic)) || !has(self.elastic) || (has(self.minWorkers) && self.minWorkers < self.numWorkers)",message="spec.elastic needs spec.minWorkers below spec.numWorkers: the job resizes between the two; set spec.minWorkers lower than spec.numWorkers, or remove spec.elastic",fieldPath=".elastic",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="has(self.elastic) == has(oldSelf.elastic) || (has(self.suspend) && self.suspend && has(oldSelf.suspend) && oldSelf.suspend)",message="spec.elastic can be added or removed only while the job is suspended: set spec.suspend to true first, or create a new TrainingJob",fieldPath=".elastic"
type TrainingJobSpec struct {
	// model names the model to train, for example "llama-3-8b" or a path or URI the training code
	// understands. It reaches every pod as the MODEL environment variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Model string `json:"model"`

	// dataset names the training data, for example "s3://corpus/en" or a path on a mounted volume. It
	// reaches every pod as the DATASET environment variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Dataset string `json:"dataset"`

	// framework selects the distributed-training environment wired into the pods: pytorch (torchrun
	// variables), tensorflow (TF_CONFIG), jax (JAX_* coordinator variables), mpi (hostfile and SSH keys,
	// launcher on rank 0), mxnet (DMLC_* variables and a scheduler pod) or generic (rank and world size
	// only). Defaults to pytorch.
	// +optional
	// +kubebuilder:default=pytorch
	Framework Framework `json:"framework,omitempty"`

	// numWorkers is the number of worker pods in the gang. All of them are scheduled together or not at
	// all. Immutable while the job runs. With minWorkers, Kueue may admit fewer: numWorkers then
	// shows the workers admitted while the job runs, and returns to the number asked for when the
	// job is suspended again.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	NumWorkers int32 `json:"numWorkers"`

	// minWorkers, when set, lets Kueue admit the job with fewer workers than numWorkers when its
	// ClusterQueue has quota for at least minWorkers but not for all (Kueue's partial admission):
	// the job then runs with as many workers as the quota allows, every framework environment
	// (WORLD_SIZE, TF_CONFIG, hosts) sized to them. Unset, the job runs with numWorkers workers or
	// waits. At most numWorkers; immutable unless the job is suspended.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	MinWorkers *int32 `json:"minWorkers,omitempty"`

	// elastic makes the job resizable between minWorkers and numWorkers while it runs (framework
	// pytorch only, minWorkers below numWorkers): its workers run torchrun's elastic rendezvous
	// (PET_NNODES=<minWorkers>:<numWorkers>, PET_RDZV_BACKEND=c10d on worker 0), numWorkers
	// stays the most workers it may have, and it runs with the workers Kueue accounts for
	// (status.elastic.targetWorkers), adding the new ranks or removing the highest ones, never
	// worker 0, without restarting the gang when that count changes. Added or removed only while
	// the job is suspended.
	// +optional
	Elastic *ElasticSpec `json:"elastic,omitempty"`

	// gpusPerWorker is the number of GPUs each worker requests, as nvidia.com/gpu or, with spec.gpu,
	// as devices of its DeviceClass; 0 runs workers without GPUs.
	// Unset, it is spec.resources' nvidia.com/gpu (limits, else requests) where that is set, else 1;
	// where both are set they must agree. Parameter servers and other roles get no GPU either way.
	// Immutable unless the job is suspended.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	GPUsPerWorker *int32 `json:"gpusPerWorker,omitempty"`

	// numParameterServers is the number of parameter-server pods for tensorflow's
	// ParameterServerStrategy and mxnet's servers (mxnet needs at least 1). Defaults to 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	NumParameterServers int32 `json:"numParameterServers,omitempty"`

	// image is the container image every pod runs. Defaults to the framework's reference image chosen by
	// the operator.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// securityContext sets the user the pods run as and the Pod Security Standard they are built to
	// meet. Unset, the pods meet what the namespace enforces (its label
	// pod-security.kubernetes.io/enforce); status.podSecurity says which level they meet.
	// +optional
	SecurityContext *JobSecurityContext `json:"securityContext,omitempty"`

	// serviceAccountName is the ServiceAccount of the job's namespace its pods run as, so that
	// workload identity (EKS IRSA or Pod Identity, GKE Workload Identity, Azure Workload Identity)
	// reaches buckets and trackers without a static key. Its API token is mounted as the
	// ServiceAccount's automountServiceAccountToken says. Unset, the pods run as the namespace's
	// default ServiceAccount with no API token mounted.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.serviceAccountName must be a ServiceAccount name: lowercase letters, digits, '-' and '.'"
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// command overrides the image's entrypoint.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Command []string `json:"command,omitempty"`

	// args are the arguments to the command.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	Args []string `json:"args,omitempty"`

	// env adds environment variables to every pod. Variables the operator sets (RANK, WORLD_SIZE, ...)
	// take precedence over these.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Env []corev1.EnvVar `json:"env,omitempty"`

	// resources are the cpu, memory and other non-GPU requests and limits of each worker. GPUs are set
	// with gpusPerWorker.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// gpu asks for the workers' GPUs as Dynamic Resource Allocation devices instead of the
	// nvidia.com/gpu extended resource: the operator creates the ResourceClaimTemplate <job>-gpu,
	// one claim per worker for gpusPerWorker devices, and the workers' pods reference it. Unset,
	// workers ask for nvidia.com/gpu. Immutable unless the job is suspended.
	// +optional
	GPU *GPUSpec `json:"gpu,omitempty"`

	// hyperparameters are passed to the training code through the <job>-config ConfigMap (as JSON and as
	// one environment variable each).
	// +optional
	Hyperparameters *Hyperparameters `json:"hyperparameters,omitempty"`

	// checkpoint configures where checkpoints are written and what a restarted gang resumes from.
	// +optional
	Checkpoint *CheckpointSpec `json:"checkpoint,omitempty"`

	// scheduling says where and when the gang may run: priority, Kueue queue, node constraints and
	// topology.
	// +optional
	Scheduling *SchedulingSpec `json:"scheduling,omitempty"`

	// monitoring configures the metrics endpoint and experiment trackers.
	// +optional
	Monitoring *MonitoringSpec `json:"monitoring,omitempty"`

	// networking configures the collective-communication backend and rendezvous port.
	// +optional
	Networking *NetworkingSpec `json:"networking,omitempty"`

	// output says what becomes of the trained model when the job completes.
	// +optional
	Output *OutputSpec `json:"output,omitempty"`

	// failurePolicy says what happens when a worker fails.
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`

	// successPolicy lets the job finish early once it reaches a target accuracy or stops improving.
	// +optional
	SuccessPolicy *SuccessPolicy `json:"successPolicy,omitempty"`

	// managedBy names the controller that runs the job, as a domain-prefixed path such as
	// kueue.x-k8s.io/multikueue (at most 63 characters). Empty, or convoy.dev/trainingjob-controller,
	// is Convoy's operator. Any other value leaves the job to that controller: the operator creates
	// no pods or other children for it and never writes its status. Kueue's MultiKueue
	// (kueue.x-k8s.io/multikueue) copies such a job to a worker cluster, where Convoy runs it, and
	// mirrors the worker's status back; Convoy's queue webhook sets it on a new job whose LocalQueue
	// feeds a ClusterQueue with a MultiKueue admission check. A sweep's trials take it from
	// spec.trialTemplate.spec, or from that webhook. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[-A-Za-z0-9/._~%!$&()*+,;=:]+$')",message="spec.managedBy must be a domain-prefixed path such as kueue.x-k8s.io/multikueue; remove it to let Convoy's operator run the job"
	ManagedBy *string `json:"managedBy,omitempty"`

	// suspend stops the gang (deleting its pods) while true and starts it again, from the latest
	// checkpoint, when set back to false. Kueue also sets it while the job waits for admission.
	// +optional
	// +kubebuilder:default=false
	Suspend *bool `json:"suspend,omitempty"`

	// budget is the most the job may cost, in the price list's currency (status.cost.amount). When
	// the cost reaches it, the gang is asked to checkpoint (as for a preemption, within
	// spec.checkpoint.preemptionGraceSeconds) and the job then fails with reason BudgetExceeded;
	// resume from its checkpoint in a new job with a larger budget. Unset: no limit.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self > 0.0",message="spec.budget must be greater than 0, an amount in the price list's currency such as 250 or 99.5; remove it for no limit"
	Budget *float64 `json:"budget,omitempty"`

	// ttlSecondsAfterFinished deletes the TrainingJob (and everything it owns) this many seconds after it
	// completes or fails. Unset keeps it forever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ElasticSpec says how often and how far a running elastic job resizes.
type ElasticSpec struct {
	// resizeCooldownSeconds is the least time between two resizes of the gang (each one costs a
	// checkpoint and a new rendezvous), and between the job's start and its first resize.
	// Defaults to 300; 30 to 86400.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=86400
	ResizeCooldownSeconds *int32 `json:"resizeCooldownSeconds,omitempty"`

	// minScalingEfficiency, a percentage from 1 to 100, stops growth where it stops paying: the
	// resize policy grows the job only while the samples per second per worker it reported at a
	// larger size stay at least this share of those at its smallest measured size
	// (status.elastic.throughput). Unset, 70.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MinScalingEfficiency *int32 `json:"minScalingEfficiency,omitempty"`
}

// GPUSpec says which DRA devices a worker's GPUs are. The attribute and capacity names are those
// NVIDIA's DRA driver publishes (driver gpu.nvidia.com).
type GPUSpec struct {
	// deviceClassName is the DeviceClass of the devices, for example gpu.nvidia.com (NVIDIA's DRA
	// driver) or a class the platform team defined for one product. With Kueue, the class must be
	// in Kueue's resources.deviceClassMappings to be counted against quota.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.gpu.deviceClassName must be a DeviceClass name: lowercase letters, digits, '-' and '.', for example gpu.nvidia.com"
	DeviceClassName string `json:"deviceClassName"`

	// product keeps the workers to devices whose productName attribute is this, for example
	// "NVIDIA H100 80GB HBM3" (a CEL selector of the claim). Kueue counts no claim with a
	// selector: with a queue, name a DeviceClass that selects the product instead.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][-A-Za-z0-9 _.()/]*$')",message="spec.gpu.product must be a product name of letters, digits, spaces and - _ . ( ) /, for example NVIDIA H100 80GB HBM3"
	Product string `json:"product,omitempty"`

	// minMemory keeps the workers to devices with at least this memory capacity, for example 80Gi
	// (a CEL selector of the claim; with a queue, see product).
	// +optional
	MinMemory *resource.Quantity `json:"minMemory,omitempty"`
}

// Precision is the floating-point type mixed-precision training computes in, named as Hugging Face
// Accelerate names it.
// +kubebuilder:validation:Enum=fp16;bf16;fp8
type Precision string

const (
	PrecisionFP16 Precision = "fp16"
	PrecisionBF16 Precision = "bf16"
	PrecisionFP8  Precision = "fp8"
)

// Hyperparameters are the usual knobs of a training run. Numbers are plain YAML numbers.
// +kubebuilder:validation:XValidation:rule="!has(self.precision) || !has(self.mixedPrecision) || self.mixedPrecision",message="spec.hyperparameters.precision is only used with mixed precision: remove it, or set spec.hyperparameters.mixedPrecision to true",fieldPath=".precision"
type Hyperparameters struct {
	// learningRate is the optimizer's initial learning rate, for example 0.00005 or 3e-4.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self > 0.0",message="spec.hyperparameters.learningRate must be greater than 0, for example 0.0001"
	LearningRate *float64 `json:"learningRate,omitempty"`

	// batchSize is the global batch size.
	// +optional
	// +kubebuilder:validation:Minimum=1
	BatchSize *int32 `json:"batchSize,omitempty"`

	// epochs is the number of passes over the dataset; progress is reported against it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Epochs *int32 `json:"epochs,omitempty"`

	// optimizer names the optimizer, for example adamw or sgd.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Optimizer string `json:"optimizer,omitempty"`

	// warmupSteps is the number of learning-rate warm-up steps.
	// +optional
	// +kubebuilder:validation:Minimum=0
	WarmupSteps *int32 `json:"warmupSteps,omitempty"`

	// gradientAccumulationSteps is the number of micro-batches accumulated per optimizer step.
	// +optional
	// +kubebuilder:validation:Minimum=1
	GradientAccumulationSteps *int32 `json:"gradientAccumulationSteps,omitempty"`

	// mixedPrecision turns mixed-precision training on (true) or off (false). On, the training
	// code computes in precision, bf16 unless set. Pods get MIXED_PRECISION: the precision when
	// on, "no" when off, nothing when neither this nor precision is set.
	// +optional
	MixedPrecision *bool `json:"mixedPrecision,omitempty"`

	// precision is the type mixed-precision training computes in: fp16, bf16 or fp8. Setting it
	// turns mixed precision on; with mixedPrecision false it is refused. Defaults to bf16 when
	// mixedPrecision is true.
	// +optional
	Precision Precision `json:"precision,omitempty"`

	// additionalParams are further hyperparameters passed through unchanged, as strings.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	AdditionalParams map[string]string `json:"additionalParams,omitempty"`
}

// CheckpointSpec configures checkpointing.
type CheckpointSpec struct {
	// enabled turns checkpointing on: storage is wired into the pods and CONVOY_CHECKPOINT_URI is
	// set. Without storage, the job gets a PersistentVolumeClaim of its own, <job>-checkpoints.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// frequency is how often, in epochs, the training code should write a checkpoint (CONVOY_CHECKPOINT_FREQUENCY).
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	Frequency int32 `json:"frequency,omitempty"`

	// intervalSeconds is how often, in seconds, the training code should write a checkpoint besides
	// the epochs of frequency (CONVOY_CHECKPOINT_INTERVAL_SECONDS): the SDK's callbacks save at the
	// end of the first training step this long after the latest checkpoint, so that a gang killed
	// without warning loses at most about this much work. A stop that would ask for a checkpoint
	// (preemptionGraceSeconds) stops at once when the latest one is younger than a tenth of it.
	// Unset, checkpoints follow frequency only.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 60 && self <= 604800",message="spec.checkpoint.intervalSeconds must be between 60 (a checkpoint a minute) and 604800 (a week): writing checkpoints more often costs more than a kill loses"
	IntervalSeconds *int32 `json:"intervalSeconds,omitempty"`

	// storage is where checkpoints live. Unset, or of type pvc without claimName, the operator
	// creates a PersistentVolumeClaim <job>-checkpoints for the job (of the cluster's default
	// StorageClass, 10Gi, kept when the job is deleted) and mounts it at /checkpoints.
	// +optional
	Storage *CheckpointStorage `json:"storage,omitempty"`

	// resumeFrom is a checkpoint path or URI the first run starts from (CONVOY_RESUME_FROM). After a
	// restart the latest reported checkpoint takes its place.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	ResumeFrom string `json:"resumeFrom,omitempty"`

	// retention is how many of the latest checkpoints the training code should keep (CONVOY_CHECKPOINT_RETENTION).
	// +optional
	// +kubebuilder:validation:Minimum=1
	Retention *int32 `json:"retention,omitempty"`

	// preemptionGraceSeconds is how long a running gang with checkpointing enabled is given to
	// write a checkpoint before it is stopped by anything but its own failure: Kueue preempting or
	// evicting it, spec.suspend, or convoy-scheduler's gang preemption. The operator asks for the
	// checkpoint in its replies to the progress endpoint (the SDK's should_checkpoint() turns True)
	// and stops the gang once a checkpoint newer than the request is reported, or when this grace
	// has passed; the gang resumes from the latest checkpoint. A preemptor waits no longer than
	// this for the room. 0 stops the gang at once. Defaults to 60.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	PreemptionGraceSeconds *int32 `json:"preemptionGraceSeconds,omitempty"`
}

// StorageType is the kind of checkpoint storage.
// +kubebuilder:validation:Enum=pvc;s3;gcs;azure;nfs
type StorageType string

const (
	StoragePVC   StorageType = "pvc"
	StorageS3    StorageType = "s3"
	StorageGCS   StorageType = "gcs"
	StorageAzure StorageType = "azure"
	StorageNFS   StorageType = "nfs"
)

// S3Access is how a job's pods reach S3.
type S3Access string

// S3AccessPresigned: the pods ask the operator for a pre-signed URL for each object.
const S3AccessPresigned S3Access = "presigned"

// AzureAccess is how a job's pods reach Azure Blob Storage.
type AzureAccess string

// AzureAccessPresigned: the pods ask the operator for a URL with a SAS for each blob.
const AzureAccessPresigned AzureAccess = "presigned"

// GCSAccess is how a job's pods reach Google Cloud Storage.
type GCSAccess string

// GCSAccessPresigned: the pods ask the operator for a V4 signed URL for each object.
const GCSAccessPresigned GCSAccess = "presigned"

// ReclaimPolicy says what becomes of the claim the operator creates for a job's checkpoints when
// the job is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the claim, and the checkpoints on it, after the job is deleted.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete deletes the claim with the job.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// CheckpointStorage says where checkpoints are written. Each type needs its own field.
// +kubebuilder:validation:XValidation:rule="(self.type == 'pvc' && !has(self.claimName)) || !(has(self.storageClassName) || has(self.size) || has(self.accessModes) || has(self.reclaimPolicy))",message="spec.checkpoint.storage.storageClassName, size, accessModes and reclaimPolicy describe the claim the operator creates: remove them, or remove claimName and use type pvc"
// +kubebuilder:validation:XValidation:rule="self.type != 's3' || has(self.s3Bucket)",message="spec.checkpoint.storage.s3Bucket is required when spec.checkpoint.storage.type is s3"
// +kubebuilder:validation:XValidation:rule="self.type != 'gcs' || has(self.gcsBucket)",message="spec.checkpoint.storage.gcsBucket is required when spec.checkpoint.storage.type is gcs"
// +kubebuilder:validation:XValidation:rule="self.type != 'azure' || has(self.azureContainer)",message="spec.checkpoint.storage.azureContainer is required when spec.checkpoint.storage.type is azure"
// +kubebuilder:validation:XValidation:rule="self.type != 'nfs' || has(self.nfs)",message="spec.checkpoint.storage.nfs (server and path) is required when spec.checkpoint.storage.type is nfs"
// +kubebuilder:validation:XValidation:rule="!has(self.credentialsSecretRef) || self.type in ['s3', 'gcs', 'azure']",message="spec.checkpoint.storage.credentialsSecretRef is only used with type s3, gcs or azure: remove it or change the type"
// +kubebuilder:validation:XValidation:rule="!has(self.s3Access) || (self.type == 's3' && !has(self.credentialsSecretRef) && !has(self.prefix))",message="spec.checkpoint.storage.s3Access presigned needs type s3, no credentialsSecretRef and no prefix (the job's prefix is <namespace>/<job>): remove them or remove s3Access"
// +kubebuilder:validation:XValidation:rule="!has(self.azureAccess) || (self.type == 'azure' && !has(self.credentialsSecretRef) && !has(self.prefix) && !has(self.azureStorageAccount))",message="spec.checkpoint.storage.azureAccess presigned needs type azure, no credentialsSecretRef, no prefix (the job's prefix is <namespace>/<job>) and no azureStorageAccount (the account is the operator's): remove them or remove azureAccess"
// +kubebuilder:validation:XValidation:rule="!has(self.gcsAccess) || (self.type == 'gcs' && !has(self.credentialsSecretRef) && !has(self.prefix))",message="spec.checkpoint.storage.gcsAccess presigned needs type gcs, no credentialsSecretRef and no prefix (the job's prefix is <namespace>/<job>): remove them or remove gcsAccess"
type CheckpointStorage struct {
	// type is the storage kind: pvc, s3, gcs, azure or nfs. Defaults to pvc.
	// +optional
	// +kubebuilder:default=pvc
	Type StorageType `json:"type,omitempty"`

	// claimName is an existing PersistentVolumeClaim to write checkpoints to when type is pvc,
	// which several jobs may share: each job mounts only its own directory of the claim, prefix
	// (<namespace>/<job> by default), as a subPath at /checkpoints/<prefix>, so jobs cannot
	// overwrite each other's checkpoints. Unset, the operator creates the claim <job>-checkpoints
	// for the job and mounts it whole at /checkpoints.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`

	// storageClassName is the StorageClass of the claim the operator creates. Unset, the
	// cluster's default StorageClass. Read when the claim is created.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	StorageClassName string `json:"storageClassName,omitempty"`

	// size is the capacity the claim the operator creates requests. Defaults to 10Gi. Read when
	// the claim is created.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(self).isGreaterThan(quantity('0'))",message="spec.checkpoint.storage.size must be greater than 0, for example 10Gi"
	Size *resource.Quantity `json:"size,omitempty"`

	// accessModes are the access modes of the claim the operator creates. Defaults to
	// ReadWriteMany, which pods on several nodes need, or ReadWriteOnce for a job of one pod
	// (numWorkers 1, no parameter servers, no minWorkers). Read when the claim is created.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:Enum=ReadWriteOnce;ReadWriteMany;ReadWriteOncePod
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`

	// reclaimPolicy says what becomes of the claim the operator creates when the job is deleted:
	// Retain keeps it, and the checkpoints on it, labelled with the job's name (a job created
	// again under that name uses it again); Delete makes the job its owner, so it is deleted
	// with the job. Defaults to Retain: deleting a job does not destroy checkpoints someone may
	// still need.
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// s3Bucket is the bucket when type is s3.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	S3Bucket string `json:"s3Bucket,omitempty"`

	// s3Endpoint is an S3-compatible endpoint URL (MinIO, Ceph), when not AWS.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	S3Endpoint string `json:"s3Endpoint,omitempty"`

	// s3Region is the bucket's region.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	S3Region string `json:"s3Region,omitempty"`

	// s3Access presigned has the pods hold no S3 credentials: for each object they read or write,
	// the SDK asks the operator's progress endpoint for a URL pre-signed with the operator's own
	// S3 credentials (its --s3-presign flag), valid for 15 minutes, and only for keys under the
	// job's prefix <namespace>/<job> (writes: the current attempt's directory only). The endpoint
	// and region are the operator's. Unset, the pods use their own credentials.
	// +optional
	// +kubebuilder:validation:Enum=presigned
	S3Access S3Access `json:"s3Access,omitempty"`

	// gcsBucket is the bucket when type is gcs.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=222
	GCSBucket string `json:"gcsBucket,omitempty"`

	// gcsAccess presigned has the pods hold no Google credentials: for each object they read, write
	// or delete, the SDK asks the operator's progress endpoint for a V4 signed URL the operator
	// signs with its own service account key (its --gcs-presign flag), valid for 15 minutes, for
	// that object and operation only and only under the job's prefix <namespace>/<job> (writes: the
	// current attempt's directory only); the operator lists the job's prefix itself, as no signed
	// URL confines a listing to a prefix. Unset, the pods use their own credentials.
	// +optional
	// +kubebuilder:validation:Enum=presigned
	GCSAccess GCSAccess `json:"gcsAccess,omitempty"`

	// azureContainer is the blob container when type is azure.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	AzureContainer string `json:"azureContainer,omitempty"`

	// azureStorageAccount is the storage account holding azureContainer.
	// +optional
	// +kubebuilder:validation:MaxLength=24
	AzureStorageAccount string `json:"azureStorageAccount,omitempty"`

	// azureAccess presigned has the pods hold no Azure credentials: for each blob they read, write
	// or delete, the SDK asks the operator's progress endpoint for its URL with a SAS the operator
	// signs with its own account key (its --azure-presign flag), valid for 15 minutes, for that
	// blob only and only under the job's prefix <namespace>/<job> (writes: the current attempt's
	// directory only); the operator lists the job's prefix itself, as a SAS cannot confine a
	// listing to a prefix. The account and endpoint are the operator's. Unset, the pods use their
	// own credentials.
	// +optional
	// +kubebuilder:validation:Enum=presigned
	AzureAccess AzureAccess `json:"azureAccess,omitempty"`

	// nfs is the NFS export mounted at /checkpoints when type is nfs.
	// +optional
	NFS *NFSStorage `json:"nfs,omitempty"`

	// prefix is the path inside the bucket or volume under which this job's checkpoints are written.
	// Defaults to <namespace>/<job name>. A relative path without '..' segments.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !('..' in self.split('/'))",message="spec.checkpoint.storage.prefix must be a relative path without '..' segments, for example team-a/llama"
	Prefix string `json:"prefix,omitempty"`

	// credentialsSecretRef names a Secret in the job's namespace whose keys become environment variables
	// of every pod (for example AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
	// +optional
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// NFSStorage is an NFS export.
type NFSStorage struct {
	// server is the NFS server's host name or address.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Server string `json:"server"`

	// path is the exported path.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="spec.checkpoint.storage.nfs.path must be an absolute path starting with /"
	Path string `json:"path"`
}

// TopologyLevel is a level of the GPU fabric: nvlink, node, cluster, or one of the scheduler's
// topology levels (GangPlacement's topologyLevels), by name (rack, block, zone and clique with the
// shipped convoy levels) or by node label (nvidia.com/gpu.clique).
// +kubebuilder:validation:MaxLength=317
// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
type TopologyLevel string

const (
	TopologyNVLink TopologyLevel = "nvlink"
	TopologyNode   TopologyLevel = "node"
	TopologyRack   TopologyLevel = "rack"
	TopologyBlock  TopologyLevel = "block"
	TopologyZone   TopologyLevel = "zone"
)

// TopologyMode says whether a topology level is a hard constraint or a preference.
// +kubebuilder:validation:Enum=required;preferred
type TopologyMode string

const (
	TopologyRequired  TopologyMode = "required"
	TopologyPreferred TopologyMode = "preferred"
)

// TopologySpec asks for the whole gang inside one domain of a topology level.
type TopologySpec struct {
	// level is the topology level the whole gang should fit in: nvlink (one NVLink domain), node, or
	// a topology level of the scheduler by name or node label (rack, block, zone, clique with the
	// shipped levels; leaf or network.topology.nvidia.com/leaf with Topograph's). A level the
	// scheduler does not have is reported in the job's status, and its pods stay pending.
	// +required
	Level TopologyLevel `json:"level"`

	// mode is required (the gang waits until one domain can hold it) or preferred (the scheduler packs
	// the gang into as few domains as it can). Defaults to required.
	// +optional
	// +kubebuilder:default=required
	Mode TopologyMode `json:"mode,omitempty"`
}

// SchedulingSpec says where and when the gang may run.
// +kubebuilder:validation:XValidation:rule="!has(self.priority) || !has(self.priorityClassName) || self.priority == self.priorityClassName",message="spec.scheduling.priority and spec.scheduling.priorityClassName name the same PriorityClass: set only one, or set both to the same name"
type SchedulingSpec struct {
	// priorityClassName is the PriorityClass of the pods and, with Kueue, of the Workload (low, normal,
	// high in Convoy's defaults).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.scheduling.priorityClassName must be a PriorityClass name: lowercase letters, digits, '-' and '.'"
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// priority is another spelling of priorityClassName, kept for manifests written for the seed design.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.scheduling.priority must be a PriorityClass name: lowercase letters, digits, '-' and '.'"
	Priority string `json:"priority,omitempty"`

	// queue is the Kueue LocalQueue in the job's namespace. A job with a queue waits, suspended, until
	// Kueue admits it. The label kueue.x-k8s.io/queue-name, if also set, must name the same queue.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.scheduling.queue must be a LocalQueue name: lowercase letters, digits and '-'"
	Queue string `json:"queue,omitempty"`

	// nodeSelector restricts the pods to nodes with these labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// affinity is the pods' affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// tolerations are the pods' tolerations.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// topology keeps the gang inside one domain of a topology level.
	// +optional
	Topology *TopologySpec `json:"topology,omitempty"`

	// capacity is the kind of nodes the gang may run on: spot (only nodes with the operator's spot
	// node label, by default karpenter.sh/capacity-type=spot), on-demand (only nodes without it),
	// or any. It becomes a required node affinity of every pod, which Kueue matches
	// against its ResourceFlavors' nodeLabels: with any, the ClusterQueue's flavor order decides
	// (deploy/queue-spot-first tries spot, then on-demand). A gang on a node that gets a reclaim
	// notice checkpoints and moves before the node goes. Defaults to any.
	// +optional
	// +kubebuilder:validation:Enum=spot;on-demand;any
	Capacity CapacityType `json:"capacity,omitempty"`

	// schedulerName is the scheduler of the pods. Defaults to convoy-scheduler.
	// +optional
	// +kubebuilder:default=convoy-scheduler
	// +kubebuilder:validation:MaxLength=253
	SchedulerName string `json:"schedulerName,omitempty"`
}

// CapacityType is spec.scheduling.capacity: the kind of nodes a gang may run on.
type CapacityType string

const (
	CapacitySpot     CapacityType = "spot"
	CapacityOnDemand CapacityType = "on-demand"
	CapacityAny      CapacityType = "any"
)

// MonitoringSpec configures metrics and experiment tracking.
type MonitoringSpec struct {
	// enabled exposes rank 0's metrics port through the <job>-metrics Service.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// metricsPort is the port the training code serves Prometheus metrics on. Defaults to 9090.
	// +optional
	// +kubebuilder:default=9090
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	MetricsPort int32 `json:"metricsPort,omitempty"`

	// tensorboardEnabled sets TENSORBOARD_LOG_DIR under the checkpoint location.
	// +optional
	TensorboardEnabled bool `json:"tensorboardEnabled,omitempty"`

	// mlflowTrackingUri is passed as MLFLOW_TRACKING_URI. Rank 0's SDK (convoy.start_tracking)
	// creates the job's MLflow run and reports it into status.tracking; later attempts get it as
	// MLFLOW_RUN_ID, so every attempt logs into one run.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	MLflowTrackingURI string `json:"mlflowTrackingUri,omitempty"`

	// wandbProject is passed as WANDB_PROJECT, with WANDB_RUN_ID derived from the job
	// (status.tracking.wandbRunID) and WANDB_RESUME=allow: every attempt logs into one run.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	WandbProject string `json:"wandbProject,omitempty"`
}

// OutputSpec says where the trained model goes.
type OutputSpec struct {
	// model publishes the job's final checkpoint (status.checkpoint.latest) as an OCI artifact once
	// the job completes. See docs/trainingjob.md, "Publishing the model".
	// +optional
	Model *ModelOutput `json:"model,omitempty"`
}

// ModelOutput is the OCI artifact a completed job's final checkpoint is pushed as.
type ModelOutput struct {
	// image is the OCI reference the model is pushed to: a registry host, a repository and a tag,
	// for example registry.example.com/team/llama-ft:v1. Each file of the checkpoint becomes a
	// layer of an artifact of type application/vnd.convoy.model.v1, annotated with the job, the
	// checkpoint's epoch and the job's latest metrics.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?(/[a-z0-9]+(([.]|_|__|-+)[a-z0-9]+)*)+:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$')",message="spec.output.model.image must be an OCI reference with a registry, a repository and a tag, for example registry.example.com/team/model:v1 (lowercase repository, tag of letters, digits, '.', '_' or '-')"
	Image string `json:"image"`

	// credentialsSecretRef names a Secret of type kubernetes.io/dockerconfigjson in the job's
	// namespace with the credentials to push image. Unset, the push is anonymous.
	// +optional
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// NetworkBackend is the collective-communication backend.
// +kubebuilder:validation:Enum=nccl;gloo;mpi
type NetworkBackend string

// NetworkingSpec configures the collective-communication backend and rendezvous.
type NetworkingSpec struct {
	// backend is the collective backend: nccl (GPUs), gloo (CPU) or mpi. Defaults to nccl.
	// +optional
	// +kubebuilder:default=nccl
	Backend NetworkBackend `json:"backend,omitempty"`

	// masterPort is rank 0's rendezvous port. Defaults to 29500.
	// +optional
	// +kubebuilder:default=29500
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	MasterPort int32 `json:"masterPort,omitempty"`

	// rdmaEnabled lets NCCL use InfiniBand/RoCE (NCCL_IB_DISABLE=0); otherwise NCCL uses sockets.
	// +optional
	RDMAEnabled bool `json:"rdmaEnabled,omitempty"`
}

// RestartPolicy says what a worker failure does to the gang.
// +kubebuilder:validation:Enum=Never;OnFailure;ExitCode
type RestartPolicy string

const (
	// RestartNever fails the job on the first failed worker.
	RestartNever RestartPolicy = "Never"
	// RestartOnFailure restarts the whole gang after any worker failure, up to backoffLimit times.
	RestartOnFailure RestartPolicy = "OnFailure"
	// RestartExitCode restarts the gang only for retryable exit codes (see the operator's documentation)
	// and fails the job for the others.
	RestartExitCode RestartPolicy = "ExitCode"
)

// FailurePolicy says what happens when a worker fails.
type FailurePolicy struct {
	// restartPolicy is Never (fail the job), OnFailure (restart the whole gang) or ExitCode (restart
	// only for retryable exit codes: 130, 137, 143 and 128+ signals other than those of a program bug;
	// exit codes 1-127 fail the job). Defaults to OnFailure.
	// +optional
	// +kubebuilder:default=OnFailure
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`

	// backoffLimit is how many gang restarts caused by worker failures are allowed before the job
	// fails. Restarts caused by a lost node or preemption do not count. Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// disruptionLimit is how many gang restarts caused by lost pods (a node gone, an eviction, a pod
	// deleted) are allowed before the job fails with reason DisruptionLimitExceeded, so that a gang
	// evicted again and again (for example for ephemeral storage) does not restart forever. Each such
	// restart after the first waits the restart backoff. Preemption by the scheduler or Kueue does
	// not count. Defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	DisruptionLimit *int32 `json:"disruptionLimit,omitempty"`

	// startupTimeoutSeconds fails the job with reason StartupTimeout when its gang, every pod placed
	// on a node, still has pods not running this long after the last was placed, or when the API
	// server has refused to create its pods (a ResourceQuota, Pod Security admission) for this long:
	// an image that cannot be pulled or a pod that cannot be created does not hold GPUs and quota
	// forever. Time spent waiting for room does not count. Defaults to 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	StartupTimeoutSeconds *int32 `json:"startupTimeoutSeconds,omitempty"`

	// activeDeadlineSeconds fails the job with reason DeadlineExceeded once it has been running (not
	// queued) this long.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}

// SuccessPolicy lets a job finish before every worker exits.
type SuccessPolicy struct {
	// targetAccuracy completes the job as soon as a reported accuracy reaches it (0 to 1).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 0.0 && self <= 1.0",message="spec.successPolicy.targetAccuracy must be between 0 and 1, for example 0.95"
	TargetAccuracy *float64 `json:"targetAccuracy,omitempty"`

	// earlyStoppingPatience completes the job when the reported accuracy (or, without accuracy, the
	// loss) has not improved for this many epochs.
	// +optional
	// +kubebuilder:validation:Minimum=1
	EarlyStoppingPatience *int32 `json:"earlyStoppingPatience,omitempty"`
}

// TrainingJobState is the one-word summary of a job, derived from its conditions by StateFromConditions.
// +kubebuilder:validation:Enum=Pending;Queued;Initializing;Running;Restarting;Completed;Failed;Suspended
type TrainingJobState string

const (
	StatePending      TrainingJobState = "Pending"
	StateQueued       TrainingJobState = "Queued"
	StateInitializing TrainingJobState = "Initializing"
	StateRunning      TrainingJobState = "Running"
	StateRestarting   TrainingJobState = "Restarting"
	StateCompleted    TrainingJobState = "Completed"
	StateFailed       TrainingJobState = "Failed"
	StateSuspended    TrainingJobState = "Suspended"
)

// PodSecurityLevel is a level of the Kubernetes Pod Security Standards.
type PodSecurityLevel string

// The Pod Security Standards' levels; privileged only in status.
const (
	PodSecurityRestricted PodSecurityLevel = "restricted"
	PodSecurityBaseline   PodSecurityLevel = "baseline"
	PodSecurityPrivileged PodSecurityLevel = "privileged"
)

// JobSecurityContext is the part of the pods' security context a job sets.
// +kubebuilder:validation:XValidation:rule="!has(self.runAsUser) || self.runAsUser != 0 || (has(self.podSecurity) && self.podSecurity == 'baseline')",message="spec.securityContext.runAsUser 0 (root) is forbidden by the restricted Pod Security Standard: use a non-zero UID, or set spec.securityContext.podSecurity to baseline",fieldPath=".runAsUser"
type JobSecurityContext struct {
	// podSecurity is the Pod Security Standard the pods are built to meet: restricted (what a
	// namespace labelled pod-security.kubernetes.io/enforce: restricted admits: no root, no added
	// capabilities but NET_BIND_SERVICE, RuntimeDefault seccomp, no privilege escalation) or
	// baseline (the pods may run as root; framework mpi's default and only level, for sshd).
	// Unset, pods of the framework's default image (spec.image empty) meet restricted, running as
	// UID, GID and fsGroup 1000 with HOME=/tmp unless set here or in spec.env; pods of an image of
	// your own run as its USER, root included, and meet baseline, unless the namespace enforces
	// restricted or runAsUser names a non-root UID: then they get runAsNonRoot, and the image must
	// name a numeric non-root USER or runAsUser must be set here.
	// +optional
	// +kubebuilder:validation:Enum=restricted;baseline
	PodSecurity PodSecurityLevel `json:"podSecurity,omitempty"`

	// runAsUser is the UID the pods' processes run as. Defaults to the image's USER (1000 for the
	// framework's default image under restricted).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	RunAsUser *int64 `json:"runAsUser,omitempty"`

	// runAsGroup is the GID the pods' processes run as. Defaults to the image's (1000 for the
	// framework's default image under restricted).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`

	// fsGroup owns the pods' volumes that support ownership management (the checkpoint claim) so
	// that runAsUser can write them. Defaults to none (1000 for the framework's default image under
	// restricted).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	FSGroup *int64 `json:"fsGroup,omitempty"`
}

// TrainingJobStatus is what the operator observed.
type TrainingJobStatus struct {
	// state summarises the conditions in one word: Pending, Queued, Initializing, Running, Restarting,
	// Completed, Failed or Suspended.
	// +optional
	State TrainingJobState `json:"state,omitempty"`

	// reason is the reason of the condition behind state, such as WaitingForAdmission,
	// Unschedulable or BackoffLimitExceeded: why the job is queued, initializing or failed, on
	// the first screen of kubectl get. Its condition's message says more.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// conditions are the job's observed conditions: Queued, Admitted, Initializing, Running, Restarting,
	// Suspended, Preempted, Completed and Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// progress is the share of epochs done, for example "45%".
	// +optional
	// +kubebuilder:validation:MaxLength=8
	Progress string `json:"progress,omitempty"`

	// currentEpoch is the latest epoch the training code reported.
	// +optional
	CurrentEpoch int32 `json:"currentEpoch,omitempty"`

	// totalEpochs is the number of epochs the training code reported it will run (or hyperparameters.epochs).
	// +optional
	TotalEpochs int32 `json:"totalEpochs,omitempty"`

	// metrics are the latest reported training metrics.
	// +optional
	Metrics *TrainingMetrics `json:"metrics,omitempty"`

	// best is the best reported accuracy (or, while none is reported, the lowest loss) and the epoch
	// it was reported at; successPolicy.earlyStoppingPatience counts epochs from it.
	// +optional
	Best *BestMetric `json:"best,omitempty"`

	// podSecurity is the most restrictive Pod Security Standard level the job's pods meet, as the
	// API server's Pod Security admission judges them: restricted, baseline or privileged. A
	// namespace that enforces a stricter level refuses the pods.
	// +optional
	// +kubebuilder:validation:Enum=restricted;baseline;privileged
	PodSecurity PodSecurityLevel `json:"podSecurity,omitempty"`

	// workers counts the gang's pods by phase.
	// +optional
	Workers WorkerCounts `json:"workers,omitempty"`

	// checkpoint is the latest checkpoint the training code reported.
	// +optional
	Checkpoint *CheckpointStatus `json:"checkpoint,omitempty"`

	// resources are the GPUs and nodes of the gang and where it was placed.
	// +optional
	Resources *ResourcesStatus `json:"resources,omitempty"`

	// admission is Kueue's admission of the job: the ClusterQueue and the flavors assigned.
	// +optional
	Admission *AdmissionStatus `json:"admission,omitempty"`

	// startTime is when the gang was first started after admission.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the job completed or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// duration is completionTime (or now) minus startTime, for example "1h2m3s".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Duration string `json:"duration,omitempty"`

	// failureReason is the machine-readable reason the job failed, for example BackoffLimitExceeded.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	FailureReason string `json:"failureReason,omitempty"`

	// restartCount is the number of times the whole gang was restarted, for any cause: a failed
	// or lost pod, preemption by the scheduler or by Kueue, or suspension while it ran. Each
	// restart's pods carry the next attempt number in the convoy.dev/restart-attempt label.
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`

	// failureRestarts is the number of restarts caused by worker failures, counted against backoffLimit.
	// +optional
	FailureRestarts int32 `json:"failureRestarts,omitempty"`

	// disruptionRestarts is the number of restarts caused by lost pods (not preemption), counted
	// against disruptionLimit.
	// +optional
	DisruptionRestarts int32 `json:"disruptionRestarts,omitempty"`

	// cost is what the job's pods have cost so far, by the administrator's price list.
	// +optional
	Cost *CostStatus `json:"cost,omitempty"`

	// podsRefusedSince is when the API server first refused to create a pod of the current
	// attempt (a ResourceQuota, Pod Security admission, a webhook); cleared once every pod of the
	// gang exists. spec.failurePolicy.startupTimeoutSeconds counts from it as from placement.
	// +optional
	PodsRefusedSince *metav1.Time `json:"podsRefusedSince,omitempty"`

	// tracking is the experiment-tracker run every attempt of the job logs into.
	// +optional
	Tracking *TrackingStatus `json:"tracking,omitempty"`

	// model is the artifact spec.output.model published once the job completed.
	// +optional
	Model *ModelStatus `json:"model,omitempty"`

	// sshSecretName is the Secret with the SSH key pair an MPI job's pods mount at /root/.ssh:
	// created under a name the API server generates, <job>-ssh-<suffix>, so that no Secret made
	// before it can be mounted. Once set it changes only when that Secret is gone.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SSHSecretName string `json:"sshSecretName,omitempty"`

	// elastic is the size of an elastic job (spec.elastic) and what it measured at each size.
	// +optional
	Elastic *ElasticStatus `json:"elastic,omitempty"`

	// forecast is the operator's estimate of when the job starts, while Kueue holds it in its
	// queue, and of when it completes, while it runs.
	// +optional
	Forecast *ForecastStatus `json:"forecast,omitempty"`

	// observedGeneration is the spec generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ElasticStatus is the size of an elastic job and its measured throughput by size.
type ElasticStatus struct {
	// currentWorkers is the number of the gang's workers running now.
	// +optional
	CurrentWorkers int32 `json:"currentWorkers,omitempty"`

	// targetWorkers is the size Kueue admitted the gang at and the operator drives it to:
	// between spec.minWorkers and spec.numWorkers.
	// +optional
	TargetWorkers int32 `json:"targetWorkers,omitempty"`

	// resizeCount is the number of times the gang grew or shrank while it ran.
	// +optional
	ResizeCount int32 `json:"resizeCount,omitempty"`

	// lastResizeTime is when the gang last grew or shrank, or a grow was withdrawn;
	// spec.elastic.resizeCooldownSeconds counts from it.
	// +optional
	LastResizeTime *metav1.Time `json:"lastResizeTime,omitempty"`

	// withdrawnGrows is the number of grows withdrawn in a row since the gang last grew: each
	// doubles spec.elastic.resizeCooldownSeconds before the next grow, up to 16 times.
	// +optional
	// +kubebuilder:validation:Minimum=0
	WithdrawnGrows int32 `json:"withdrawnGrows,omitempty"`

	// throughput is the training code's reported samples per second at each size the gang ran
	// at (progress reports with samplesPerSecond), by number of workers.
	// +optional
	// +listType=map
	// +listMapKey=workers
	// +kubebuilder:validation:MaxItems=1024
	Throughput []SizeThroughput `json:"throughput,omitempty"`
}

// SizeThroughput is the measured throughput of the gang at one size.
type SizeThroughput struct {
	// workers is the number of workers the gang ran with.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	Workers int32 `json:"workers"`

	// samplesPerSecond is the mean of the samples per second the job reported at this size.
	// +required
	SamplesPerSecond float64 `json:"samplesPerSecond"`

	// reports is the number of progress reports samplesPerSecond averages.
	// +optional
	Reports int32 `json:"reports,omitempty"`
}

// ForecastStatus is the operator's estimate of a job's start and completion.
type ForecastStatus struct {
	// estimatedStartTime is when the job is expected to be admitted, while it waits in a Kueue
	// ClusterQueue: the running jobs finishing at their estimated completion and the jobs ahead of
	// it in the queue starting first. Absent while the estimate is unknown; reason then says why.
	// +optional
	EstimatedStartTime *metav1.Time `json:"estimatedStartTime,omitempty"`

	// reason names what the job waits for: the jobs that must finish first and the quota they free,
	// or why no start can be estimated.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// estimatedCompletionTime is when the running job is expected to complete: the epochs left
	// times epochDuration after the latest report.
	// +optional
	EstimatedCompletionTime *metav1.Time `json:"estimatedCompletionTime,omitempty"`

	// epochDuration is the measured time per epoch of the current attempt, from rateSince to the
	// latest report.
	// +optional
	EpochDuration *metav1.Duration `json:"epochDuration,omitempty"`

	// rateSince is the first progress report of the current attempt, which epochDuration is
	// measured from.
	// +optional
	RateSince *EpochSample `json:"rateSince,omitempty"`
}

// EpochSample is an epoch the training code reported and when.
type EpochSample struct {
	// epoch is the reported epoch.
	// +required
	Epoch int32 `json:"epoch"`
	// time is when it was reported.
	// +required
	Time metav1.MicroTime `json:"time"`
	// attempt is the gang's attempt (status.restartCount) that reported it.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
}

// TrackingStatus is the experiment-tracker run of a job.
type TrackingStatus struct {
	// mlflowRunID is the MLflow run rank 0 of the job's first reporting attempt created; later
	// attempts get it as MLFLOW_RUN_ID. Once set it never changes.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	MLflowRunID string `json:"mlflowRunID,omitempty"`
	// wandbRunID is the W&B run id the operator derived from the job (WANDB_RUN_ID, with
	// WANDB_RESUME=allow): the same for every attempt.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	WandbRunID string `json:"wandbRunID,omitempty"`
	// url is the run's page in the tracker, as rank 0 reported it.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url,omitempty"`
}

// ModelStatus is a published model artifact.
type ModelStatus struct {
	// reference is where the model was pushed (spec.output.model.image).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reference string `json:"reference,omitempty"`
	// digest is the artifact's manifest digest; pull reference@digest for exactly this model.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Digest string `json:"digest,omitempty"`
	// checkpoint is the checkpoint that was published.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Checkpoint string `json:"checkpoint,omitempty"`
}

// TrainingMetrics are the latest metrics reported by the training code.
type TrainingMetrics struct {
	// loss is the latest training loss.
	// +optional
	Loss *float64 `json:"loss,omitempty"`

	// accuracy is the latest accuracy, from 0 to 1.
	// +optional
	Accuracy *float64 `json:"accuracy,omitempty"`

	// step is the latest global step.
	// +optional
	Step int64 `json:"step,omitempty"`

	// additional are further reported metrics, by name.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Additional map[string]string `json:"additional,omitempty"`
}

// BestMetric is the best value of one reported metric.
type BestMetric struct {
	// name is the metric: accuracy (higher is better) or loss (lower is better).
	// +required
	// +kubebuilder:validation:Enum=accuracy;loss
	Name string `json:"name"`
	// value is the best value reported.
	// +required
	Value float64 `json:"value"`
	// epoch is the epoch it was reported at.
	// +optional
	Epoch int32 `json:"epoch,omitempty"`
}

// WorkerCounts counts pods by phase.
type WorkerCounts struct {
	// pending pods are created but not running yet.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// active pods are running.
	// +optional
	Active int32 `json:"active,omitempty"`
	// succeeded pods exited 0.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// failed pods exited non-zero or were lost.
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// CheckpointStatus is the latest reported checkpoint.
type CheckpointStatus struct {
	// latest is the checkpoint's path or URI; a restarted gang gets it as CONVOY_RESUME_FROM.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Latest string `json:"latest,omitempty"`
	// epoch is the epoch the checkpoint was taken at.
	// +optional
	Epoch int32 `json:"epoch,omitempty"`
	// time is when the checkpoint was reported.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// attempt is the gang's attempt (status.restartCount) whose pod reported the checkpoint.
	// Within an attempt a checkpoint's epoch never goes back.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
}

// ResourcesStatus describes the gang's resources and placement.
type ResourcesStatus struct {
	// gpus is the number of GPUs the gang requests (numWorkers × gpusPerWorker).
	// +optional
	GPUs int32 `json:"gpus,omitempty"`
	// nodes is the number of distinct nodes the gang's pods are bound to.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// placement summarises where the gang runs: its nodes, then the domains of its GPU pods' nodes
	// at each topology level convoy-scheduler is configured with (GangPlacement's topologyLevels),
	// outer to inner, for example "4 nodes; block: b1; rack: r1, r2". Pods bound by another
	// scheduler add nodes only.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Placement string `json:"placement,omitempty"`
}

// AdmissionStatus is Kueue's admission of the job.
type AdmissionStatus struct {
	// clusterQueue is the ClusterQueue that admitted the job.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// flavors maps each resource (nvidia.com/gpu, cpu, ...) to the ResourceFlavor assigned to it.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Flavors map[string]string `json:"flavors,omitempty"`
}

// TrainingJob is a distributed training run: a gang of workers that is queued, admitted, placed and
// restarted as one.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tj;tjs,categories=convoy
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.status.currentEpoch`
// +kubebuilder:printcolumn:name="Workers",type=integer,JSONPath=`.spec.numWorkers`
// +kubebuilder:printcolumn:name="Target",type=integer,JSONPath=`.status.elastic.targetWorkers`,priority=1
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.status.resources.gpus`
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.scheduling.queue`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.cost.summary`
// +kubebuilder:printcolumn:name="Starts",type=string,JSONPath=`.status.forecast.estimatedStartTime`
// +kubebuilder:printcolumn:name="Ends",type=string,JSONPath=`.status.forecast.estimatedCompletionTime`,priority=1
// +kubebuilder:printcolumn:name="Pod Security",type=string,JSONPath=`.status.podSecurity`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Run",type=string,JSONPath=`.status.tracking.url`,priority=1
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.status.model.digest`,priority=1
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 48",message="metadata.name must be at most 48 characters: the pods' hostnames <name>-worker-<rank> must fit a 63-character DNS label"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a letter and contain only lowercase letters, digits and '-': it names the job's Service"
type TrainingJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired training run.
	// +required
	Spec TrainingJobSpec `json:"spec"`

	// status is the observed state of the run.
	// +optional
	Status TrainingJobStatus `json:"status,omitempty"`
}

// TrainingJobList is a list of TrainingJobs.
// +kubebuilder:object:root=true
type TrainingJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingJob `json:"items"`
}

func init() {
	register(&TrainingJob{}, &TrainingJobList{})
}
