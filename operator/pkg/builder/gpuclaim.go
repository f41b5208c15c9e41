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

package builder

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// GPUClaimName is the name of the workers' GPU claim in their pod spec and container.
const GPUClaimName = "gpu"

// GPUClaimTemplateName is the ResourceClaimTemplate of a job with spec.gpu.
func GPUClaimTemplateName(job *convoy.TrainingJob) string { return job.Name + "-gpu" }

// GPUClaimTemplate returns the ResourceClaimTemplate of the workers' GPU claims (gpuClaimSpec),
// which the pod sets name for Kueue to count the job's devices; the pods claim theirs through
// GPUClaim. Nil for a job without spec.gpu or without GPUs.
func GPUClaimTemplate(job *convoy.TrainingJob) *resourcev1.ResourceClaimTemplate {
	spec := gpuClaimSpec(job)
	if spec == nil {
		return nil
	}
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: objectMeta(job, GPUClaimTemplateName(job), JobLabels(job)),
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: *spec},
	}
}

// GPUClaim returns the ResourceClaim of a worker's pod (made by Pod) that the operator creates
// before the pod, and points the pod's GPU claim at it instead of at the job's template; nil for
// a pod without one. Kueue counts the job's devices from the template, in the pod sets.
func GPUClaim(job *convoy.TrainingJob, pod *corev1.Pod) *resourcev1.ResourceClaim {
	i := slices.IndexFunc(pod.Spec.ResourceClaims, func(c corev1.PodResourceClaim) bool {
		return c.Name == GPUClaimName && c.ResourceClaimTemplateName != nil
	})
	claim := GPUClaimFor(job, pod.Name, pod.Labels[convoy.LabelRestartAttempt])
	if i < 0 || claim == nil {
		return nil
	}
	pod.Spec.ResourceClaims[i] = corev1.PodResourceClaim{Name: GPUClaimName, ResourceClaimName: &claim.Name}
	return claim
}

// GPUClaimNameOf names the GPU claim of the worker pod of that name.
func GPUClaimNameOf(pod string) string { return pod + "-" + GPUClaimName }

// GPUClaimFor is the GPU claim of the job's worker pod of that name and restart attempt; nil for
// a job without spec.gpu or without GPUs. It carries the finalizer the scheduler would add when it
// allocates it, so that its allocation is the scheduler's one write to it. It belongs to the job
// and is labelled with the pod's restart attempt: each attempt's pods get fresh claims, and the
// operator deletes those of earlier attempts.
func GPUClaimFor(job *convoy.TrainingJob, pod, attempt string) *resourcev1.ResourceClaim {
	spec := gpuClaimSpec(job)
	if spec == nil {
		return nil
	}
	meta := objectMeta(job, GPUClaimNameOf(pod), map[string]string{
		convoy.LabelJobName:        job.Name,
		convoy.LabelRestartAttempt: attempt,
	})
	meta.Finalizers = []string{resourcev1.Finalizer}
	return &resourcev1.ResourceClaim{ObjectMeta: meta, Spec: *spec}
}

// gpuClaimSpec is a worker's GPU claim: gpusPerWorker devices of spec.gpu's DeviceClass, with its
// product and memory as CEL selectors. Nil for a job without spec.gpu or without GPUs.
func gpuClaimSpec(job *convoy.TrainingJob) *resourcev1.ResourceClaimSpec {
	g := job.Spec.GPU
	if g == nil || job.GPUsPerWorker() == 0 {
		return nil
	}
	req := resourcev1.ExactDeviceRequest{
		DeviceClassName: g.DeviceClassName,
		AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
		Count:           int64(job.GPUsPerWorker()),
	}
	if g.Product != "" {
		req.Selectors = append(req.Selectors, celSelector(fmt.Sprintf("device.attributes[%q].productName == %s", convoy.DriverGPU, strconv.Quote(g.Product))))
	}
	if g.MinMemory != nil {
		req.Selectors = append(req.Selectors, celSelector(fmt.Sprintf("device.capacity[%q].memory.compareTo(quantity(%q)) >= 0", convoy.DriverGPU, g.MinMemory.String())))
	}
	return &resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: GPUClaimName, Exactly: &req}}},
	}
}

func celSelector(expr string) resourcev1.DeviceSelector {
	return resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}
}

// setGPUClaim gives a worker of a job with spec.gpu a claim from the job's template, which its
// container uses.
func setGPUClaim(job *convoy.TrainingJob, r mlframework.Replica, pod *corev1.Pod) {
	if job.Spec.GPU == nil || r.Role != mlframework.RoleWorker || job.GPUsPerWorker() == 0 {
		return
	}
	name := GPUClaimTemplateName(job)
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: GPUClaimName, ResourceClaimTemplateName: &name})
	c := &pod.Spec.Containers[0]
	c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: GPUClaimName})
}
