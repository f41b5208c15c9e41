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
	"cmp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
)

// Pod returns the pod of replica r: one container running the job's image with the framework's
// environment, secure defaults, and the gang's scheduling constraints. Restarts are the operator's,
// for the whole gang, so the pod's restartPolicy is Never.
func Pod(job *convoy.TrainingJob, r mlframework.Replica, p mlframework.Plugin, opts Options) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: objectMeta(job, mlframework.PodName(job, r, job.Status.RestartCount), PodLabels(job, r)),
		Spec: corev1.PodSpec{
			Hostname:      mlframework.HostName(job, r),
			Subdomain:     job.Name,
			RestartPolicy: corev1.RestartPolicyNever,
			SchedulerName: job.SchedulerName(),
			// A namespace with many jobs would hand every pod thousands of service variables.
			EnableServiceLinks: ptr.To(false),
			// Training code needs no API access unless the job names a ServiceAccount; its
			// progress token is projected separately.
			AutomountServiceAccountToken: ptr.To(false),
			PriorityClassName:            job.PriorityClassName(),
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:      ContainerName,
				Image:     cmp.Or(job.Spec.Image, p.DefaultImage()),
				Command:   job.Spec.Command,
				Args:      job.Spec.Args,
				Env:       append([]corev1.EnvVar(nil), job.Spec.Env...),
				Resources: resources(job, r),
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if opts.WorkloadAPI {
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(job.Name)}
	}
	runAsServiceAccount(job, pod)
	if a := topologyAnnotations(job); a != nil {
		pod.Annotations = a
	}
	if s := job.Spec.Scheduling; s != nil {
		pod.Spec.NodeSelector = s.NodeSelector
		pod.Spec.Affinity = withCapacity(s.Affinity, job.Capacity(), opts.SpotNodeLabels)
		pod.Spec.Tolerations = s.Tolerations
	}

	setWorkloadSlice(job, pod)
	setGPUClaim(job, r, pod)
	setHyperparameterEnv(job, pod)
	mlframework.SetEnv(pod, "MODEL", job.Spec.Model, "DATASET", job.Spec.Dataset)
	p.Configure(job, r, pod)
	setSecurityContext(job, p, opts, pod)
	setConfigVolume(job, pod)
	setNetworkEnv(job, pod)
	setCheckpoint(job, pod)
	setMonitoring(job, r, pod)
	setProgress(job, pod, opts)
	return pod
}

// setWorkloadSlice holds the pods of an elastic job that resizes through Kueue's Workload slices
// (the job carries its slice's name) at Kueue's scheduling gate, and names the slice on them: Kueue
// starts them (removes the gate) once the slice that counts them is admitted, so the workers a grow
// adds wait for the quota.
func setWorkloadSlice(job *convoy.TrainingJob, pod *corev1.Pod) {
	name := job.Annotations[kueue.WorkloadSliceNameAnnotation]
	if !job.IsElastic() || name == "" {
		return
	}
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, kueue.WorkloadSliceNameAnnotation, name)
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: kueue.ElasticJobSchedulingGate})
}

// resources are spec.resources, with gpusPerWorker nvidia.com/gpu for workers (unless they claim
// DRA GPUs, setGPUClaim) and none for other roles.
func resources(job *convoy.TrainingJob, r mlframework.Replica) corev1.ResourceRequirements {
	var res corev1.ResourceRequirements
	if job.Spec.Resources != nil {
		res = *job.Spec.Resources.DeepCopy()
		delete(res.Limits, convoy.ResourceGPU)
		delete(res.Requests, convoy.ResourceGPU)
	}
	if gpus := job.GPUsPerWorker(); r.Role == mlframework.RoleWorker && gpus > 0 && job.Spec.GPU == nil {
		q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		if res.Limits == nil {
			res.Limits = corev1.ResourceList{}
		}
		res.Requests[convoy.ResourceGPU] = q
		res.Limits[convoy.ResourceGPU] = q
	}
	return res
}

func setConfigVolume(job *convoy.TrainingJob, pod *corev1.Pod) {
	addVolume(pod, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: mlframework.ConfigMapName(job)},
	}}}, ConfigDir)
	mlframework.SetEnv(pod, "CONVOY_HYPERPARAMETERS_FILE", ConfigDir+"/"+HyperparametersFile)
}

// addVolume mounts the volume (a ConfigMap, Secret or projected one) read-only at mountPath.
func addVolume(pod *corev1.Pod, v corev1.Volume, mountPath string) {
	pod.Spec.Volumes = append(pod.Spec.Volumes, v)
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: mountPath, ReadOnly: true})
}

// setHyperparameterEnv gives every hyperparameter its own variable, read from the ConfigMap that
// also holds them as JSON.
func setHyperparameterEnv(job *convoy.TrainingJob, pod *corev1.Pod) {
	for _, kv := range hyperparameterEnv(job) {
		mlframework.SetEnvVar(pod, corev1.EnvVar{Name: kv.name, ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: mlframework.ConfigMapName(job)},
				Key:                  kv.name,
			},
		}})
	}
}

func setNetworkEnv(job *convoy.TrainingJob, pod *corev1.Pod) {
	backend := convoy.NetworkBackend("nccl")
	rdma := false
	if n := job.Spec.Networking; n != nil {
		backend = cmp.Or(n.Backend, backend)
		rdma = n.RDMAEnabled
	}
	mlframework.SetEnv(pod, "CONVOY_DIST_BACKEND", string(backend))
	if backend == "nccl" {
		// Without RDMA NCCL must not probe InfiniBand devices that are not there.
		mlframework.SetEnv(pod, "NCCL_IB_DISABLE", map[bool]string{true: "0", false: "1"}[rdma])
	}
}

func setMonitoring(job *convoy.TrainingJob, r mlframework.Replica, pod *corev1.Pod) {
	m := job.Spec.Monitoring
	if m == nil {
		return
	}
	if m.Enabled && r == mlframework.Master {
		mlframework.AddPort(pod, "metrics", metricsPort(job))
	}
	if m.MLflowTrackingURI != "" {
		mlframework.SetEnv(pod, "MLFLOW_TRACKING_URI", m.MLflowTrackingURI)
		// The run rank 0 of an earlier attempt created: this attempt logs into it.
		if t := job.Status.Tracking; t != nil && t.MLflowRunID != "" {
			mlframework.SetEnv(pod, "MLFLOW_RUN_ID", t.MLflowRunID)
		}
	}
	if m.WandbProject != "" {
		mlframework.SetEnv(pod, "WANDB_PROJECT", m.WandbProject, "WANDB_RUN_ID", job.WandbRunID(), "WANDB_RESUME", "allow")
	}
}

func metricsPort(job *convoy.TrainingJob) int32 {
	if m := job.Spec.Monitoring; m != nil && m.MetricsPort != 0 {
		return m.MetricsPort
	}
	return 9090
}

// setProgress mounts a token for progress.Audience, bound to the pod, and the endpoint's CA.
func setProgress(job *convoy.TrainingJob, pod *corev1.Pod, opts Options) {
	if opts.ProgressURL == "" {
		return
	}
	addVolume(pod, corev1.Volume{Name: "convoy-progress", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: progress.Audience, ExpirationSeconds: ptr.To[int64](ProgressTokenSeconds), Path: "token",
			}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: mlframework.ConfigMapName(job)},
				Items:                []corev1.KeyToPath{{Key: ProgressCAKey, Path: "ca.crt"}},
			}},
		},
	}}}, ProgressDir)
	mlframework.SetEnv(pod,
		"CONVOY_PROGRESS_URL", opts.ProgressURL+progress.JobPath(job.Namespace, job.Name),
		"CONVOY_PROGRESS_TOKEN_FILE", ProgressDir+"/token",
		"CONVOY_PROGRESS_CA_FILE", ProgressDir+"/ca.crt",
	)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// runAsServiceAccount runs the pod as spec.serviceAccountName, with the API token its
// automountServiceAccountToken says, so that the job's workload identity (IRSA, GKE or Azure)
// reaches its bucket; unset, the pod keeps the namespace's default and no token.
func runAsServiceAccount(job *convoy.TrainingJob, pod *corev1.Pod) {
	if sa := job.Spec.ServiceAccountName; sa != "" {
		pod.Spec.ServiceAccountName = sa
		pod.Spec.AutomountServiceAccountToken = nil
	}
}
