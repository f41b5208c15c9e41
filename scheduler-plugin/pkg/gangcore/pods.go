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

package gangcore

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// AnnotationGPUIndices is the annotation the scheduler writes on a pod, with the binding, naming
// the GPU indices it chose ("0,1,2,3"). The node agent's mock mode assigns those GPUs on fake
// nodes; on real nodes the NVIDIA device plugin decides.
const AnnotationGPUIndices = convoy.AnnotationGPUIndices

// GangKey names the gang of a pod: "namespace/podgroup", or "namespace/pod (pod)" for a pod that
// belongs to no PodGroup.
func GangKey(pod *corev1.Pod) string {
	if pg := PodGroupName(pod); pg != "" {
		return pod.Namespace + "/" + pg
	}
	return pod.Namespace + "/" + pod.Name + " (pod)"
}

// SameGang reports whether both pods belong to the same PodGroup.
func SameGang(a, b *corev1.Pod) bool {
	pg := PodGroupName(a)
	return pg != "" && a.Namespace == b.Namespace && PodGroupName(b) == pg
}

// PodGroupName returns the pod's PodGroup, or "" for a lone pod: its scheduler-plugins label, or
// else the scheduling.k8s.io PodGroup its spec.schedulingGroup names (Kubernetes' own gang API).
// A TrainingJob's pods have both, naming one gang.
func PodGroupName(pod *corev1.Pod) string {
	if pg := pod.Labels[v1alpha1.PodGroupLabel]; pg != "" {
		return pg
	}
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		return *g.PodGroupName
	}
	return ""
}

// GPURequest is the number of GPUs of resource the pod requests: its containers' sum, or its
// largest init container's if larger (restartable init containers count with the containers).
func GPURequest(pod *corev1.Pod, resource corev1.ResourceName) int {
	value := func(c *corev1.Container) int {
		if q, ok := c.Resources.Requests[resource]; ok {
			return int(q.Value())
		}
		if q, ok := c.Resources.Limits[resource]; ok {
			return int(q.Value())
		}
		return 0
	}
	sum, initMax, sidecars := 0, 0, 0
	for i := range pod.Spec.Containers {
		sum += value(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += value(c)
			continue
		}
		initMax = max(initMax, sidecars+value(c))
	}
	return max(sum+sidecars, initMax)
}

// rank is the pod's convoy.dev/rank label, or a large number when it has none.
func rank(pod *corev1.Pod) int {
	if r, err := strconv.Atoi(pod.Labels[convoy.LabelReplicaRank]); err == nil {
		return r
	}
	return 1 << 30
}

// FormatGPUIndices writes a GPU set as AnnotationGPUIndices spells it.
func FormatGPUIndices(s planner.GPUSet) string {
	idx := s.Indices()
	parts := make([]string, len(idx))
	for i, v := range idx {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

// ParseGPUIndices reads AnnotationGPUIndices; ok is false when it is absent or malformed.
func ParseGPUIndices(v string) (planner.GPUSet, bool) {
	if v == "" {
		return 0, false
	}
	var s planner.GPUSet
	for _, p := range strings.Split(v, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || i < 0 || i >= planner.MaxGPUsPerNode {
			return 0, false
		}
		s |= planner.NewGPUSet(i)
	}
	return s, true
}
