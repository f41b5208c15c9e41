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
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DefaultSchedulerName is the scheduler profile of Convoy's kube-scheduler.
const DefaultSchedulerName = "convoy-scheduler"

// QueueNameLabel is Kueue's standard queue label. When a TrainingJob has both the label and
// spec.scheduling.queue they must agree; where only one is set, it names the queue.
const QueueNameLabel = "kueue.x-k8s.io/queue-name"

// GPUsPerWorker returns spec.gpusPerWorker, else the nvidia.com/gpu of spec.resources (limits,
// then requests), else 1.
func (j *TrainingJob) GPUsPerWorker() int32 {
	if j.Spec.GPUsPerWorker != nil {
		return *j.Spec.GPUsPerWorker
	}
	if r := j.Spec.Resources; r != nil {
		for _, list := range []corev1.ResourceList{r.Limits, r.Requests} {
			if q, ok := list[ResourceGPU]; ok {
				if n, ok := q.AsInt64(); ok && n >= 0 && n <= math.MaxInt32 {
					return int32(n)
				}
			}
		}
	}
	return 1
}

// TotalGPUs is the number of GPUs the whole gang requests.
func (j *TrainingJob) TotalGPUs() int32 {
	return j.WorkerCount() * j.GPUsPerWorker()
}

// PriorityClassName returns the PriorityClass named by scheduling.priorityClassName or its alias
// scheduling.priority.
func (j *TrainingJob) PriorityClassName() string {
	if s := j.Spec.Scheduling; s != nil {
		if s.PriorityClassName != "" {
			return s.PriorityClassName
		}
		return s.Priority
	}
	return ""
}

// QueueName returns the Kueue LocalQueue of the job: spec.scheduling.queue, else the
// kueue.x-k8s.io/queue-name label.
func (j *TrainingJob) QueueName() string {
	if s := j.Spec.Scheduling; s != nil && s.Queue != "" {
		return s.Queue
	}
	return j.Labels[QueueNameLabel]
}

// SchedulerName returns the pods' scheduler.
func (j *TrainingJob) SchedulerName() string {
	if s := j.Spec.Scheduling; s != nil && s.SchedulerName != "" {
		return s.SchedulerName
	}
	return DefaultSchedulerName
}

// Capacity is spec.scheduling.capacity, CapacityAny when unset.
func (j *TrainingJob) Capacity() CapacityType {
	if s := j.Spec.Scheduling; s != nil && s.Capacity != "" {
		return s.Capacity
	}
	return CapacityAny
}

// IsSuspended reports whether spec.suspend is true.
func (j *TrainingJob) IsSuspended() bool {
	return j.Spec.Suspend != nil && *j.Spec.Suspend
}

// ManagedByConvoy is spec.managedBy's value for Convoy's operator, the same as leaving it empty.
const ManagedByConvoy = "convoy.dev/trainingjob-controller"

// ManagedElsewhere reports whether spec.managedBy names a controller other than Convoy's operator,
// which then leaves the job alone.
func (j *TrainingJob) ManagedElsewhere() bool {
	return j.Spec.ManagedBy != nil && *j.Spec.ManagedBy != "" && *j.Spec.ManagedBy != ManagedByConvoy
}

// MasterPort returns networking.masterPort with its default.
func (j *TrainingJob) MasterPort() int32 {
	if n := j.Spec.Networking; n != nil && n.MasterPort != 0 {
		return n.MasterPort
	}
	return 29500
}

// WandbRunID is the W&B run id every attempt of the job logs into when spec.monitoring.wandbProject
// is set: the job's name and the first 12 hex digits of its UID, at most 61 characters of
// [a-z0-9-], which W&B accepts as a run id. Jobs of the same name (in other namespaces, or
// recreated) get other runs.
func (j *TrainingJob) WandbRunID() string {
	uid := strings.ReplaceAll(string(j.UID), "-", "")
	if len(uid) > 12 {
		uid = uid[:12]
	}
	if uid == "" {
		return j.Name
	}
	return j.Name + "-" + uid
}

// ModelImage is spec.output.model.image, or "" when the job publishes no model.
func (j *TrainingJob) ModelImage() string {
	if o := j.Spec.Output; o != nil && o.Model != nil {
		return o.Model.Image
	}
	return ""
}

// DefaultPreemptionGraceSeconds is spec.checkpoint.preemptionGraceSeconds's default.
const DefaultPreemptionGraceSeconds = 60

// PreemptionGrace returns how long a running gang is given to checkpoint before it is stopped: 0
// when checkpointing is off, else spec.checkpoint.preemptionGraceSeconds with its default.
func (j *TrainingJob) PreemptionGrace() time.Duration {
	c := j.Spec.Checkpoint
	if c == nil || !c.Enabled {
		return 0
	}
	if c.PreemptionGraceSeconds != nil {
		return time.Duration(*c.PreemptionGraceSeconds) * time.Second
	}
	return DefaultPreemptionGraceSeconds * time.Second
}

// CheckpointInterval returns spec.checkpoint.intervalSeconds as a duration: 0 when checkpointing
// is off or the interval unset.
func (j *TrainingJob) CheckpointInterval() time.Duration {
	c := j.Spec.Checkpoint
	if c == nil || !c.Enabled || c.IntervalSeconds == nil {
		return 0
	}
	return time.Duration(*c.IntervalSeconds) * time.Second
}

// Elastic defaults and the port of torchrun's c10d rendezvous on worker 0.
const (
	DefaultResizeCooldownSeconds = 300
	DefaultMinScalingEfficiency  = 70
	ElasticRendezvousPort        = 29400
)

// IsElastic reports whether spec.elastic is set: the running gang may resize.
func (j *TrainingJob) IsElastic() bool { return j.Spec.Elastic != nil }

// ElasticMinWorkers is the fewest workers an elastic job runs with: spec.minWorkers, else
// spec.numWorkers.
func (j *TrainingJob) ElasticMinWorkers() int32 {
	if j.Spec.MinWorkers != nil {
		return *j.Spec.MinWorkers
	}
	return j.Spec.NumWorkers
}

// ResizeCooldown is spec.elastic.resizeCooldownSeconds with its default; 0 for a job that is not
// elastic.
func (j *TrainingJob) ResizeCooldown() time.Duration {
	e := j.Spec.Elastic
	if e == nil {
		return 0
	}
	if e.ResizeCooldownSeconds != nil {
		return time.Duration(*e.ResizeCooldownSeconds) * time.Second
	}
	return DefaultResizeCooldownSeconds * time.Second
}

// MinScalingEfficiency is spec.elastic.minScalingEfficiency as a share from 0.01 to 1, with its
// default.
func (j *TrainingJob) MinScalingEfficiency() float64 {
	if e := j.Spec.Elastic; e != nil && e.MinScalingEfficiency != nil {
		return float64(*e.MinScalingEfficiency) / 100
	}
	return DefaultMinScalingEfficiency / 100.0
}

// WorkerCount is the number of workers the gang has: spec.numWorkers, or for an elastic job the
// size Kueue accounts for (AnnotationElasticWorkers, kept between spec.minWorkers and
// spec.numWorkers) once it is admitted.
func (j *TrainingJob) WorkerCount() int32 {
	if !j.IsElastic() {
		return j.Spec.NumWorkers
	}
	n, err := strconv.ParseInt(j.Annotations[AnnotationElasticWorkers], 10, 32)
	if err != nil {
		return j.Spec.NumWorkers
	}
	return min(max(int32(n), j.ElasticMinWorkers()), j.Spec.NumWorkers)
}

// ElasticAdmittedWorkers is the size Kueue admitted an elastic job at when it started
// (AnnotationElasticAdmitted, kept between spec.minWorkers and spec.numWorkers); 0 when unknown.
func (j *TrainingJob) ElasticAdmittedWorkers() int32 {
	n, err := strconv.ParseInt(j.Annotations[AnnotationElasticAdmitted], 10, 32)
	if !j.IsElastic() || err != nil {
		return 0
	}
	return min(max(int32(n), j.ElasticMinWorkers()), j.Spec.NumWorkers)
}

// ElasticShrinkTo is the size an elastic job was asked to shrink to (AnnotationElasticShrinkTo,
// at least spec.minWorkers); ok is false when no shrink below WorkerCount is asked.
func (j *TrainingJob) ElasticShrinkTo() (n int32, ok bool) {
	v, err := strconv.ParseInt(j.Annotations[AnnotationElasticShrinkTo], 10, 32)
	if !j.IsElastic() || err != nil {
		return 0, false
	}
	n = max(int32(v), j.ElasticMinWorkers())
	return n, n < j.WorkerCount()
}
