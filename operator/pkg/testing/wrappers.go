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

// Package testing holds fluent fixtures for the operator's tests:
// MakeTrainingJob("a", "ns").Workers(4).GPUs(8).Obj().
package testing

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TrainingJobWrapper builds a TrainingJob.
type TrainingJobWrapper struct{ convoy.TrainingJob }

// MakeTrainingJob returns a one-worker, one-GPU PyTorch job with a model and a dataset.
func MakeTrainingJob(name, namespace string) *TrainingJobWrapper {
	return &TrainingJobWrapper{convoy.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(name + "-uid")},
		Spec: convoy.TrainingJobSpec{
			Model:         "llama-3-8b",
			Dataset:       "s3://corpus/en",
			Framework:     convoy.FrameworkPyTorch,
			NumWorkers:    1,
			GPUsPerWorker: ptr.To[int32](1),
			Image:         "trainer:1",
		},
	}}
}

// Obj returns the job.
func (w *TrainingJobWrapper) Obj() *convoy.TrainingJob { return &w.TrainingJob }

// Clone returns a copy of the wrapper.
func (w *TrainingJobWrapper) Clone() *TrainingJobWrapper {
	return &TrainingJobWrapper{*w.DeepCopy()}
}

// Workers sets spec.numWorkers.
func (w *TrainingJobWrapper) Workers(n int32) *TrainingJobWrapper {
	w.Spec.NumWorkers = n
	return w
}

// MinWorkers sets spec.minWorkers: Kueue may admit the job with fewer workers, at least n.
func (w *TrainingJobWrapper) MinWorkers(n int32) *TrainingJobWrapper {
	w.Spec.MinWorkers = &n
	return w
}

// GPUs sets spec.gpusPerWorker.
func (w *TrainingJobWrapper) GPUs(n int32) *TrainingJobWrapper {
	w.Spec.GPUsPerWorker = ptr.To(n)
	return w
}

// DRAGPUs sets spec.gpu: the workers' GPUs are devices of the DeviceClass, of the product when
// it is not empty.
func (w *TrainingJobWrapper) DRAGPUs(deviceClass, product string) *TrainingJobWrapper {
	w.Spec.GPU = &convoy.GPUSpec{DeviceClassName: deviceClass, Product: product}
	return w
}

// Framework sets spec.framework.
func (w *TrainingJobWrapper) Framework(f convoy.Framework) *TrainingJobWrapper {
	w.Spec.Framework = f
	return w
}

// ParameterServers sets spec.numParameterServers.
func (w *TrainingJobWrapper) ParameterServers(n int32) *TrainingJobWrapper {
	w.Spec.NumParameterServers = n
	return w
}

// Image sets spec.image.
func (w *TrainingJobWrapper) Image(image string) *TrainingJobWrapper {
	w.Spec.Image = image
	return w
}

// SecurityContext sets spec.securityContext.
func (w *TrainingJobWrapper) SecurityContext(sc convoy.JobSecurityContext) *TrainingJobWrapper {
	w.Spec.SecurityContext = &sc
	return w
}

// Command sets spec.command and spec.args.
func (w *TrainingJobWrapper) Command(command []string, args ...string) *TrainingJobWrapper {
	w.Spec.Command, w.Spec.Args = command, args
	return w
}

// Env adds a variable to spec.env.
func (w *TrainingJobWrapper) Env(name, value string) *TrainingJobWrapper {
	w.Spec.Env = append(w.Spec.Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// Resources sets the workers' cpu and memory requests.
func (w *TrainingJobWrapper) Resources(cpu, memory string) *TrainingJobWrapper {
	w.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{}}
	if cpu != "" {
		w.Spec.Resources.Requests[corev1.ResourceCPU] = resourceMust(cpu)
	}
	if memory != "" {
		w.Spec.Resources.Requests[corev1.ResourceMemory] = resourceMust(memory)
	}
	return w
}

// MasterPort sets spec.networking.masterPort.
func (w *TrainingJobWrapper) MasterPort(port int32) *TrainingJobWrapper {
	w.networking().MasterPort = port
	return w
}

// Networking sets spec.networking's backend and RDMA.
func (w *TrainingJobWrapper) Networking(backend convoy.NetworkBackend, rdma bool) *TrainingJobWrapper {
	n := w.networking()
	n.Backend, n.RDMAEnabled = backend, rdma
	return w
}

func (w *TrainingJobWrapper) networking() *convoy.NetworkingSpec {
	if w.Spec.Networking == nil {
		w.Spec.Networking = &convoy.NetworkingSpec{}
	}
	return w.Spec.Networking
}

// Hyperparameters sets spec.hyperparameters.
func (w *TrainingJobWrapper) Hyperparameters(hp convoy.Hyperparameters) *TrainingJobWrapper {
	w.Spec.Hyperparameters = &hp
	return w
}

// Checkpoint sets spec.checkpoint.
func (w *TrainingJobWrapper) Checkpoint(c convoy.CheckpointSpec) *TrainingJobWrapper {
	w.Spec.Checkpoint = &c
	return w
}

// Scheduling sets spec.scheduling.
func (w *TrainingJobWrapper) Scheduling(s convoy.SchedulingSpec) *TrainingJobWrapper {
	w.Spec.Scheduling = &s
	return w
}

// Queue sets spec.scheduling.queue.
func (w *TrainingJobWrapper) Queue(queue string) *TrainingJobWrapper {
	if w.Spec.Scheduling == nil {
		w.Spec.Scheduling = &convoy.SchedulingSpec{}
	}
	w.Spec.Scheduling.Queue = queue
	return w
}

// Monitoring sets spec.monitoring.
func (w *TrainingJobWrapper) Monitoring(m convoy.MonitoringSpec) *TrainingJobWrapper {
	w.Spec.Monitoring = &m
	return w
}

// FailurePolicy sets spec.failurePolicy.
func (w *TrainingJobWrapper) FailurePolicy(policy convoy.RestartPolicy, backoffLimit int32) *TrainingJobWrapper {
	w.Spec.FailurePolicy = &convoy.FailurePolicy{RestartPolicy: policy, BackoffLimit: ptr.To(backoffLimit)}
	return w
}

// Deadline sets spec.failurePolicy.activeDeadlineSeconds.
func (w *TrainingJobWrapper) Deadline(seconds int64) *TrainingJobWrapper {
	if w.Spec.FailurePolicy == nil {
		w.Spec.FailurePolicy = &convoy.FailurePolicy{}
	}
	w.Spec.FailurePolicy.ActiveDeadlineSeconds = ptr.To(seconds)
	return w
}

// StartupTimeout sets spec.failurePolicy.startupTimeoutSeconds.
func (w *TrainingJobWrapper) StartupTimeout(seconds int32) *TrainingJobWrapper {
	if w.Spec.FailurePolicy == nil {
		w.Spec.FailurePolicy = &convoy.FailurePolicy{}
	}
	w.Spec.FailurePolicy.StartupTimeoutSeconds = ptr.To(seconds)
	return w
}

// TargetAccuracy sets spec.successPolicy.targetAccuracy.
func (w *TrainingJobWrapper) TargetAccuracy(a float64) *TrainingJobWrapper {
	w.successPolicy().TargetAccuracy = ptr.To(a)
	return w
}

// Patience sets spec.successPolicy.earlyStoppingPatience.
func (w *TrainingJobWrapper) Patience(epochs int32) *TrainingJobWrapper {
	w.successPolicy().EarlyStoppingPatience = ptr.To(epochs)
	return w
}

func (w *TrainingJobWrapper) successPolicy() *convoy.SuccessPolicy {
	if w.Spec.SuccessPolicy == nil {
		w.Spec.SuccessPolicy = &convoy.SuccessPolicy{}
	}
	return w.Spec.SuccessPolicy
}

// Output publishes the job's model as m.
func (w *TrainingJobWrapper) Output(m convoy.ModelOutput) *TrainingJobWrapper {
	w.Spec.Output = &convoy.OutputSpec{Model: &m}
	return w
}

// Elastic sets spec.elastic with minWorkers min.
func (w *TrainingJobWrapper) Elastic(min int32, e convoy.ElasticSpec) *TrainingJobWrapper {
	w.Spec.MinWorkers = &min
	w.Spec.Elastic = &e
	return w
}

// Suspend sets spec.suspend.
func (w *TrainingJobWrapper) Suspend(s bool) *TrainingJobWrapper {
	w.Spec.Suspend = ptr.To(s)
	return w
}

// TTL sets spec.ttlSecondsAfterFinished.
func (w *TrainingJobWrapper) TTL(seconds int32) *TrainingJobWrapper {
	w.Spec.TTLSecondsAfterFinished = ptr.To(seconds)
	return w
}

// Budget sets spec.budget.
func (w *TrainingJobWrapper) Budget(amount float64) *TrainingJobWrapper {
	w.Spec.Budget = ptr.To(amount)
	return w
}

// Topology sets spec.scheduling.topology.
func (w *TrainingJobWrapper) Topology(level convoy.TopologyLevel, mode convoy.TopologyMode) *TrainingJobWrapper {
	if w.Spec.Scheduling == nil {
		w.Spec.Scheduling = &convoy.SchedulingSpec{}
	}
	w.Spec.Scheduling.Topology = &convoy.TopologySpec{Level: level, Mode: mode}
	return w
}

// Status sets the job's status.
func (w *TrainingJobWrapper) Status(s convoy.TrainingJobStatus) *TrainingJobWrapper {
	w.TrainingJob.Status = s
	return w
}

func resourceMust(q string) resource.Quantity { return resource.MustParse(q) }
