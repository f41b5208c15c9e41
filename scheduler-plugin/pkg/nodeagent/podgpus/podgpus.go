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

// Package podgpus finds which pod holds each GPU of a node: from the kubelet's PodResources API
// on a real node, and on a fake node (no kubelet, no device plugin) by assigning GPUs to the pods
// bound to it as the NVIDIA device plugin would.
package podgpus

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Pod is a pod bound to the node that holds GPUs while it runs.
type Pod struct {
	// Key is "namespace/name", as GPUDevice.AllocatedTo spells it.
	Key     string
	UID     types.UID
	Created time.Time
	// GPUs is how many nvidia.com/gpu the pod asks for.
	GPUs int
	// Indices are the GPUs Convoy's scheduler chose (the convoy.dev/gpu-indices annotation); nil
	// when the pod has no such annotation or it does not parse.
	Indices []int
}

// FromPod returns the pod's GPU request; ok is false when the pod holds no GPU: it asks for none,
// or it has terminated.
func FromPod(p *corev1.Pod) (pod Pod, ok bool) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return Pod{}, false
	}
	n := GPURequest(&p.Spec)
	if n == 0 {
		return Pod{}, false
	}
	pod = Pod{Key: p.Namespace + "/" + p.Name, UID: p.UID, Created: p.CreationTimestamp.Time, GPUs: n}
	if v, found := p.Annotations[convoy.AnnotationGPUIndices]; found {
		pod.Indices, _ = ParseIndices(v)
	}
	return pod, true
}

// GPURequest is the pod's effective nvidia.com/gpu request, as the scheduler counts it: the sum
// over its containers and sidecars, or the largest init container's if that is more.
func GPURequest(spec *corev1.PodSpec) int {
	count := func(c *corev1.Container) int {
		q, ok := c.Resources.Limits[convoy.ResourceGPU]
		if !ok {
			q, ok = c.Resources.Requests[convoy.ResourceGPU]
		}
		if !ok {
			return 0
		}
		return int(q.Value())
	}
	sum := 0
	for i := range spec.Containers {
		sum += count(&spec.Containers[i])
	}
	initMax := 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += count(c)
			continue
		}
		initMax = max(initMax, count(c))
	}
	return max(sum, initMax)
}

// ParseIndices reads "0,1,2,3".
func ParseIndices(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 {
			return nil, fmt.Errorf("GPU indices %q: %q is not a GPU index", s, f)
		}
		out = append(out, i)
	}
	return out, nil
}

// Holders maps GPU index to the "namespace/name" of the pod holding it.
type Holders map[int]string

// sortPods orders pods oldest first, as they were bound, so that assignment is deterministic.
func sortPods(pods []Pod) {
	slices.SortFunc(pods, func(a, b Pod) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
}
