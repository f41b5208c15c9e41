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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Kubernetes' own gang API, served from 1.37 where the cluster turns it on (docs/install.md):
// a Workload holds the gang's template, and a PodGroup made from it is what the pods point at
// with spec.schedulingGroup. Convoy's go.mod is on 1.36's k8s.io/api, which has only
// v1alpha2, so these are built unstructured.
var (
	WorkloadGVK = schema.GroupVersionKind{Group: "scheduling.k8s.io", Version: "v1beta1", Kind: "Workload"}
	PodGroupGVK = schema.GroupVersionKind{Group: "scheduling.k8s.io", Version: "v1beta1", Kind: "PodGroup"}
)

// WorkloadTemplate is the name of the one PodGroup template of a job's Workload.
const WorkloadTemplate = "gang"

// Workload returns the job's scheduling.k8s.io Workload, named after the job: one gang template
// of minCount pods.
func Workload(job *convoy.TrainingJob, minCount int32) *unstructured.Unstructured {
	return upstreamObject(job, WorkloadGVK, map[string]any{
		"controllerRef": map[string]any{"apiGroup": convoy.GroupVersion.Group, "kind": "TrainingJob", "name": job.Name},
		"podGroupTemplates": []any{map[string]any{
			"name":             WorkloadTemplate,
			"schedulingPolicy": gangPolicy(minCount),
		}},
	})
}

// UpstreamPodGroup returns the job's scheduling.k8s.io PodGroup, named after the job, made from
// its Workload's template: the group its pods name in spec.schedulingGroup.podGroupName.
func UpstreamPodGroup(job *convoy.TrainingJob, minCount int32) *unstructured.Unstructured {
	return upstreamObject(job, PodGroupGVK, map[string]any{
		"workloadRef":      map[string]any{"workloadName": job.Name, "templateName": WorkloadTemplate},
		"schedulingPolicy": gangPolicy(minCount),
	})
}

func gangPolicy(minCount int32) map[string]any {
	return map[string]any{"gang": map[string]any{"minCount": int64(minCount)}}
}

func upstreamObject(job *convoy.TrainingJob, gvk schema.GroupVersionKind, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	meta := objectMeta(job, job.Name, JobLabels(job))
	u.SetName(meta.Name)
	u.SetNamespace(meta.Namespace)
	u.SetLabels(meta.Labels)
	u.SetOwnerReferences(meta.OwnerReferences)
	return u
}
