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

package cost

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// UnknownProduct stands for the GPU product of a node without the nvidia.com/gpu.product label.
const UnknownProduct = "unknown"

// Node is what pricing needs of the node a pod ran on.
type Node struct {
	Product, CapacityType string
}

// NodeFromLabels reads a node's GPU product and capacity type from its labels: spot when one of
// spot (convoy.DefaultSpotNodeLabel when empty) marks it, else on-demand.
func NodeFromLabels(labels map[string]string, spot []convoy.SpotNodeLabel) Node {
	capacity := convoy.CapacityTypeOnDemand
	if convoy.IsSpotNode(labels, spot) {
		capacity = convoy.CapacityTypeSpot
	}
	return Node{Product: cmp.Or(labels[convoy.LabelGPUProduct], UnknownProduct), CapacityType: capacity}
}

// Held is the time a pod held its node's resources: from its binding (its PodScheduled
// condition, else its start or creation) to its end (its containers' latest finish when it
// finished), or open (end zero) while it runs or is being stopped. ok is false for a pod that
// was never bound, or whose times are unknown.
func Held(pod *corev1.Pod) (start, end time.Time, ok bool) {
	if pod.Spec.NodeName == "" {
		return time.Time{}, time.Time{}, false
	}
	start = pod.CreationTimestamp.Time
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			start = c.LastTransitionTime.Time
		}
	}
	if start.IsZero() {
		return time.Time{}, time.Time{}, false // no time is known: nothing can be counted
	}
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return start, time.Time{}, true
	}
	for _, cs := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(end) {
			end = t.FinishedAt.Time
		}
	}
	if end.IsZero() {
		// Finished without a recorded finish: it ended no later than it was first seen finished,
		// which the window before already covered.
		end = start
		for _, c := range pod.Status.Conditions {
			if c.LastTransitionTime.After(end) {
				end = c.LastTransitionTime.Time
			}
		}
	}
	if end.Before(start) {
		end = start
	}
	return start, end, true
}

// Accrue adds to usage what pods held from from to to: each bound pod's GPUs, CPU cores and
// memory (its requests) times the part of [from, to] within its Held interval, under its node's
// product and capacity type. A zero from counts from each pod's binding. Pods on nodes missing
// from nodes (deleted) add nothing: their product is no longer known. usage is returned sorted.
func Accrue(usage []convoy.ResourceUsage, pods []*corev1.Pod, nodes map[string]Node, from, to time.Time) []convoy.ResourceUsage {
	usage = slices.Clone(usage)
	for _, pod := range pods {
		start, end, ok := Held(pod)
		node, known := nodes[pod.Spec.NodeName]
		if !ok || !known {
			continue
		}
		if end.IsZero() || end.After(to) {
			end = to
		}
		if !from.IsZero() && start.Before(from) {
			start = from
		}
		seconds := int64(end.Sub(start) / time.Second)
		if seconds <= 0 {
			continue
		}
		req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		gpus := req.Name(convoy.ResourceGPU, "").Value()
		cores := req.Cpu().AsApproximateFloat64()
		gib := req.Memory().AsApproximateFloat64() / (1 << 30)
		i := slices.IndexFunc(usage, func(u convoy.ResourceUsage) bool {
			return u.Product == node.Product && u.CapacityType == node.CapacityType
		})
		if i < 0 {
			usage = append(usage, convoy.ResourceUsage{Product: node.Product, CapacityType: node.CapacityType})
			i = len(usage) - 1
		}
		usage[i].GPUSeconds += gpus * seconds
		usage[i].CPUCoreSeconds += cores * float64(seconds)
		usage[i].MemoryGiBSeconds += gib * float64(seconds)
	}
	slices.SortFunc(usage, func(a, b convoy.ResourceUsage) int {
		return cmp.Or(cmp.Compare(a.Product, b.Product), cmp.Compare(a.CapacityType, b.CapacityType))
	})
	return usage
}

// GPUSeconds sums usage's GPU-seconds.
func GPUSeconds(usage []convoy.ResourceUsage) int64 {
	var s int64
	for _, u := range usage {
		s += u.GPUSeconds
	}
	return s
}

// Holding reports whether a pod holds its node's resources still: bound and not finished.
func Holding(pod *corev1.Pod) bool {
	_, end, ok := Held(pod)
	return ok && end.IsZero()
}
