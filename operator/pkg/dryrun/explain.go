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

package dryrun

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
)

// origin is the TrainingJob field a child's field comes from, and what to do about it.
type origin struct {
	// field is the TrainingJob field; unless whole, the rest of the child's path follows it.
	field string
	fix   string
	whole bool
}

// A child field maps to the TrainingJob field by its longest matching prefix in these tables.
var (
	podOrigins = map[string]origin{
		"metadata":                           {"metadata.name", "choose a shorter job name", false},
		"spec.hostname":                      {"metadata.name", "choose a shorter job name", false},
		"spec.subdomain":                     {"metadata.name", "choose a shorter job name", false},
		"spec.containers[0].image":           {"spec.image", "set an image reference such as ghcr.io/org/trainer:v1", false},
		"spec.containers[0].command":         {"spec.command", "", false},
		"spec.containers[0].args":            {"spec.args", "", false},
		"spec.containers[0].resources":       {"spec.resources", "name each resource as Kubernetes does (cpu, memory, example.com/device) and keep every request at or below its limit", false},
		"spec.schedulerName":                 {"spec.scheduling.schedulerName", "name the scheduler as its KubeSchedulerConfiguration profile does, for example convoy-scheduler", false},
		"spec.priorityClassName":             {"spec.scheduling.priorityClassName", "name an existing PriorityClass", false},
		"spec.nodeSelector":                  {"spec.scheduling.nodeSelector", "use label keys and values as nodes carry them", false},
		"spec.affinity":                      {"spec.scheduling.affinity", "", false},
		"spec.tolerations":                   {"spec.scheduling.tolerations", "", false},
		"spec.containers[0].volumeMounts":    {"spec.checkpoint.storage", "", false},
		"spec.containers[0].ports":           {"spec.networking.masterPort", "pick another port", false},
		"spec.containers[0].env":             {"spec.env", "rename the variable or fix its valueFrom", false},
		"spec.volumes":                       {"spec.checkpoint.storage", "", false},
		"spec.containers[0].securityContext": {"spec", "", false},
	}
	serviceOrigins = map[string]origin{
		"metadata":   {"metadata.name", "choose a shorter job name", true},
		"spec.ports": {"spec.networking.masterPort", "pick a port from 1 to 65535", true},
	}
	configMapOrigins = map[string]origin{
		"metadata": {"metadata.name", "choose a shorter job name", true},
		"data":     {"spec.hyperparameters.additionalParams", "use shorter names of letters, digits, '-', '_' and '.'", false},
		"":         {"spec.hyperparameters", "pass fewer or shorter hyperparameters", false},
	}
	claimOrigins = map[string]origin{
		"metadata":              {"metadata.name", "choose a shorter job name", true},
		"spec.storageClassName": {"spec.checkpoint.storage.storageClassName", "name an existing StorageClass", true},
		"spec.resources":        {"spec.checkpoint.storage.size", "give a size such as 10Gi", true},
		"spec.accessModes":      {"spec.checkpoint.storage.accessModes", "", false},
	}
	gpuClaimOrigins = map[string]origin{
		"metadata": {"metadata.name", "choose a shorter job name", true},
		"spec.spec.devices.requests[0].exactly.deviceClassName": {"spec.gpu.deviceClassName", "name a DeviceClass such as gpu.nvidia.com", true},
		"spec.spec.devices.requests[0].exactly.count":           {"spec.gpusPerWorker", "", true},
		"spec": {"spec.gpu", "", true},
	}
	podGroupOrigins = map[string]origin{
		"metadata":          {"metadata.name", "choose a shorter job name", true},
		"spec.minResources": {"spec.resources", "", true},
	}
)

// indexed is a child field through a list index: env[3] is spec.containers[0].env[3].
var indexed = regexp.MustCompile(`^(spec\.containers\[0\]\.env|spec\.containers\[0\]\.envFrom|spec\.volumes|spec\.containers\[0\]\.ports|spec\.containers\[0\]\.volumeMounts|data)\[([^\]]*)\](.*)$`)

// explain maps one child field error to the TrainingJob field it comes from.
func explain(job *convoy.TrainingJob, child client.Object, c metav1.StatusCause) *field.Error {
	f, fix := jobField(job, child, c.Field)
	typ := field.ErrorType(c.Type)
	if typ == "" {
		typ = field.ErrorTypeInvalid
	}
	// The API server's words without their type, which Error prints again.
	detail := strings.TrimPrefix(strings.TrimPrefix(c.Message, typ.String()), ": ")
	where := strings.TrimSpace(kindOf(child) + " " + child.GetName() + " " + c.Field)
	detail = strings.TrimSpace(detail + " (in " + where + ")")
	if fix != "" {
		detail += ": " + fix
	}
	return &field.Error{Type: typ, Field: f, BadValue: field.OmitValueType{}, Detail: detail}
}

// jobField is the TrainingJob field a child's field comes from, and the fix to suggest.
func jobField(job *convoy.TrainingJob, child client.Object, childField string) (string, string) {
	var origins map[string]origin
	switch child.(type) {
	case *corev1.Pod:
		origins = podOrigins
	case *corev1.Service:
		origins = serviceOrigins
	case *corev1.ConfigMap:
		origins = configMapOrigins
	case *schedv1alpha1.PodGroup:
		origins = podGroupOrigins
	case *corev1.PersistentVolumeClaim:
		origins = claimOrigins
	case *resourcev1.ResourceClaimTemplate:
		origins = gpuClaimOrigins
	}
	jobField, fix := "spec", ""
	if prefix, ok := longestPrefix(origins, childField); ok {
		o := origins[prefix]
		jobField, fix = o.field, o.fix
		if !o.whole {
			jobField += strings.TrimPrefix(childField, prefix)
		}
	}
	if m := indexed.FindStringSubmatch(childField); m != nil {
		f, ok := listOrigin(job, child, m[1], m[2], m[3])
		switch {
		case ok:
			jobField = f
		case m[1] == "data":
			jobField = "spec.hyperparameters"
		default:
			// An item the operator adds itself: no spec field to name.
			jobField = "spec"
		}
	}
	if _, ok := child.(*corev1.Service); ok && jobField == "spec.networking.masterPort" && child.GetName() == builder.MetricsServiceName(job) {
		jobField = "spec.monitoring.metricsPort"
	}
	return jobField, fix
}

// longestPrefix finds the longest key of origins that is path or a parent of it.
func longestPrefix(origins map[string]origin, path string) (string, bool) {
	best, found := "", false
	for _, k := range slices.Sorted(maps.Keys(origins)) {
		if (k == "" || path == k || strings.HasPrefix(path, k+".") || strings.HasPrefix(path, k+"[")) && (!found || len(k) > len(best)) {
			best, found = k, true
		}
	}
	return best, found
}

// listOrigin maps an item of a child's list (an env var, a volume, a ConfigMap key) to the
// TrainingJob field it comes from: the env var of spec.env with its name, the hyperparameter whose
// variable it is, the checkpoint volume.
func listOrigin(job *convoy.TrainingJob, child client.Object, list, index, rest string) (string, bool) {
	pod, _ := child.(*corev1.Pod)
	switch list {
	case "spec.containers[0].env":
		i, err := strconv.Atoi(index)
		if pod == nil || err != nil || i >= len(pod.Spec.Containers[0].Env) {
			return "", false
		}
		name := pod.Spec.Containers[0].Env[i].Name
		if j := slices.IndexFunc(job.Spec.Env, func(e corev1.EnvVar) bool { return e.Name == name }); j >= 0 {
			return "spec.env[" + strconv.Itoa(j) + "]" + rest, true
		}
		return hyperparameter(job, name)
	case "data":
		return hyperparameter(job, index)
	case "spec.containers[0].envFrom":
		// The only source the operator adds is the checkpoint storage's credentials.
		return "spec.checkpoint.storage.credentialsSecretRef" + strings.TrimPrefix(rest, ".secretRef"), true
	case "spec.volumes", "spec.containers[0].volumeMounts":
		i, err := strconv.Atoi(index)
		if pod == nil || err != nil {
			return "", false
		}
		name := ""
		if list == "spec.volumes" && i < len(pod.Spec.Volumes) {
			name = pod.Spec.Volumes[i].Name
		} else if list != "spec.volumes" && i < len(pod.Spec.Containers[0].VolumeMounts) {
			name = pod.Spec.Containers[0].VolumeMounts[i].Name
		}
		if name != "checkpoints" {
			return "", false
		}
		switch {
		case strings.HasPrefix(rest, ".persistentVolumeClaim.claimName"):
			return "spec.checkpoint.storage.claimName", true
		case strings.HasPrefix(rest, ".nfs."):
			return "spec.checkpoint.storage" + rest, true
		}
		return "spec.checkpoint.storage", true
	case "spec.containers[0].ports":
		i, err := strconv.Atoi(index)
		if pod == nil || err != nil || i >= len(pod.Spec.Containers[0].Ports) {
			return "", false
		}
		if pod.Spec.Containers[0].Ports[i].Name == "metrics" {
			return "spec.monitoring.metricsPort", true
		}
		return "spec.networking.masterPort", true
	}
	return "", false
}

// hyperparameter is the spec.hyperparameters.additionalParams entry whose variable and ConfigMap
// key is name.
func hyperparameter(job *convoy.TrainingJob, name string) (string, bool) {
	hp := job.Spec.Hyperparameters
	if hp == nil {
		return "", false
	}
	for _, k := range slices.Sorted(maps.Keys(hp.AdditionalParams)) {
		if builder.EnvName(k) == name {
			return field.NewPath("spec", "hyperparameters", "additionalParams").Key(k).String(), true
		}
	}
	return "", false
}
