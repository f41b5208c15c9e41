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

package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner/synth"
	"github.com/convoy-dev/convoy/test/framework"
)

// The DRA contenders' nodes publish their GPUs as devices of NVIDIA's driver in a ResourceSlice
// each, and their gangs' workers claim them, each from a ResourceClaim of its own, of DeviceClass
// gpu.nvidia.com, as the operator makes for a job with spec.gpu (beside a ResourceClaimTemplate
// per gang, for Kueue).
const (
	// ConvoyDRA is Convoy's profile on the DRA fleet and gangs.
	ConvoyDRA Scheduler = "convoy+dra"
	// KubeScheduler137DRA is upstream kube-scheduler 1.37 with its default plugins (DynamicResources
	// among them) and the GenericWorkload feature gate on, which adds its GangScheduling plugin:
	// each gang is a scheduling.k8s.io/v1beta1 Workload and PodGroup (minCount = all its pods)
	// that its pods name in spec.schedulingGroup.
	KubeScheduler137DRA Scheduler = "kube-scheduler-1.37+dra"
)

// dra reports whether the contender runs on the DRA fleet and gangs.
func (s Scheduler) dra() bool { return s == ConvoyDRA || s == KubeScheduler137DRA }

// The feature gate and API of 1.37 that the DRA run's API server, controller manager and upstream
// kube-scheduler turn on: the Workload and PodGroup API (beta, off by default), the resource claim
// controller's and kube-scheduler's reading of a pod's PodGroup (GangScheduling).
const (
	draFeatureGates   = "--feature-gates=GenericWorkload=true"
	draRuntimeConfig  = "--runtime-config=scheduling.k8s.io/v1beta1=true"
	draGPUProduct     = "NVIDIA-H100-80GB-HBM3"
	draClaimName      = "gpu"
	workloadAPI       = "scheduling.k8s.io/v1beta1"
	workloadGroupName = "workers"
)

// draNode is node i of the fleet as a DRA node: its GPUs are devices, not nvidia.com/gpu.
func draNode(f synth.Fleet, i int) framework.NodeSpec {
	w := f.Node(i)
	return framework.NodeSpec{Name: w.Name, DRAGPUs: f.GPUsPerNode, GPUProduct: draGPUProduct}
}

// createDRADevices creates the DeviceClass gpu.nvidia.com and each node's ResourceSlice.
func createDRADevices(ctx context.Context, cs kubernetes.Interface, f synth.Fleet) error {
	if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, framework.GPUDeviceClass(), metav1.CreateOptions{}); err != nil {
		return err
	}
	return parallel(ctx, f.Nodes, func(i int) error {
		slice, err := draNode(f, i).ResourceSlice()
		if err != nil {
			return err
		}
		_, err = cs.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
		return err
	})
}

// gpuClaimTemplate is gang g's ResourceClaimTemplate: GPUsPerWorker devices of gpu.nvidia.com per
// worker.
func gpuClaimTemplate(g synth.Gang, ns string) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: g.Name + "-gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: draClaimName, Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: convoy.DriverGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(g.GPUsPerWorker),
			}}}},
		}},
	}
}

// claimGPUs makes a worker's pod claim its GPUs from a ResourceClaim of its own instead of asking
// for nvidia.com/gpu, and returns that claim: the template's spec, with the finalizer the
// scheduler would add, as the operator makes it (builder.GPUClaim).
func claimGPUs(pod *corev1.Pod, g synth.Gang) *resourcev1.ResourceClaim {
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-gpu", Finalizers: []string{resourcev1.Finalizer}},
		Spec:       gpuClaimTemplate(g, pod.Namespace).Spec.Spec,
	}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: draClaimName, ResourceClaimName: &claim.Name}}
	c := &pod.Spec.Containers[0]
	delete(c.Resources.Requests, convoy.ResourceGPU)
	delete(c.Resources.Limits, convoy.ResourceGPU)
	c.Resources.Claims = []corev1.ResourceClaim{{Name: draClaimName}}
	return claim
}

// workloadObjects are gang g's Workload and PodGroup of scheduling.k8s.io/v1beta1 (1.37's types,
// newer than this module's k8s.io/api): one gang of all its workers.
func workloadObjects(g synth.Gang, ns string) []*unstructured.Unstructured {
	gang := map[string]any{"gang": map[string]any{"minCount": int64(g.Workers)}}
	workload := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": workloadAPI, "kind": "Workload",
		"metadata": map[string]any{"namespace": ns, "name": g.Name},
		"spec":     map[string]any{"podGroupTemplates": []any{map[string]any{"name": workloadGroupName, "schedulingPolicy": gang}}},
	}}
	podGroup := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": workloadAPI, "kind": "PodGroup",
		"metadata": map[string]any{"namespace": ns, "name": g.Name},
		"spec": map[string]any{
			"workloadRef":      map[string]any{"workloadName": g.Name, "templateName": workloadGroupName},
			"schedulingPolicy": gang,
		},
	}}
	return []*unstructured.Unstructured{workload, podGroup}
}

// createGangObjects creates what gang g's pods need before they exist: for DRA contenders its
// ResourceClaimTemplate; for upstream kube-scheduler its Workload and PodGroup, else
// scheduler-plugins' PodGroup.
func createGangObjects(ctx context.Context, cl client.Client, sc Scheduler, g synth.Gang, ns string) error {
	if sc.dra() {
		if err := cl.Create(ctx, gpuClaimTemplate(g, ns)); err != nil {
			return err
		}
	}
	if sc == KubeScheduler137DRA {
		for _, o := range workloadObjects(g, ns) {
			if err := cl.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	}
	return cl.Create(ctx, coschedulingPodGroup(g, ns))
}

// kubeScheduler137Config is upstream kube-scheduler's configuration: one profile for the gangs'
// scheduler name with the default plugins, which with DynamicResourceAllocation (GA) and
// GenericWorkload on include DynamicResources and GangScheduling.
func kubeScheduler137Config() map[string]any {
	return map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"profiles":   []any{map[string]any{"schedulerName": schedulerName}},
	}
}
