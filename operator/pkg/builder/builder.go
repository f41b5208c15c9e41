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

// Package builder constructs a TrainingJob's children: its PodGroup, pods, Services, ConfigMap and
// SSH Secret. Every function is pure, so a table test checks it without a client; the controller
// creates what they return.
package builder

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// Options are the operator-wide settings the children depend on.
type Options struct {
	// ProgressURL is the base URL of the operator's progress endpoint, for example
	// https://convoy-operator.convoy-system.svc:9443. Empty leaves progress reporting out of the pods.
	ProgressURL string
	// ProgressCA is the PEM bundle that verifies the endpoint's certificate; it is put in the job's
	// ConfigMap and mounted beside the token.
	ProgressCA []byte
	// ScheduleTimeoutSeconds is the PodGroup's scheduleTimeoutSeconds: how long the gang's first
	// pods wait in the scheduler for the rest. DefaultScheduleTimeoutSeconds when zero.
	ScheduleTimeoutSeconds int32
	// JobNetworkPolicy gives every job the NetworkPolicy NetworkPolicy returns.
	JobNetworkPolicy bool
	// DisruptionBudget gives every job the PodDisruptionBudget DisruptionBudget returns.
	DisruptionBudget bool
	// PublishImage is the operator's own image, which the publish pod runs (PublishPod).
	PublishImage string
	// PlainHTTPRegistries are the registries (host[:port]) the publish pod talks plain HTTP to.
	PlainHTTPRegistries []string
	// EnforcedPodSecurity is the Pod Security level the job's namespace enforces
	// (EnforcedPodSecurity of the namespace); empty where it enforces none.
	EnforcedPodSecurity convoy.PodSecurityLevel
	// SpotNodeLabels mark spot nodes (convoy.DefaultSpotNodeLabel when empty): spec.scheduling.capacity
	// spot selects the first, on-demand excludes each, and status.cost prices a node with one as spot.
	SpotNodeLabels []convoy.SpotNodeLabel
	// WorkloadAPI gives each gang Kubernetes' own Workload and PodGroup (Workload, UpstreamPodGroup)
	// besides scheduler-plugins' PodGroup, and points its pods at the former: where the cluster
	// serves scheduling.k8s.io/v1beta1.
	WorkloadAPI bool
}

// DefaultScheduleTimeoutSeconds leaves a large gang time to be placed whole.
const DefaultScheduleTimeoutSeconds = 300

// Names of what the pods see.
const (
	// ContainerName is the training container's name.
	ContainerName = "trainer"
	// ConfigDir is where the job's ConfigMap is mounted.
	ConfigDir = "/etc/convoy"
	// HyperparametersFile is the ConfigMap key (and file in ConfigDir) of the hyperparameters as JSON.
	HyperparametersFile = "hyperparameters.json"
	// ProgressCAKey is the ConfigMap key of the progress endpoint's CA bundle.
	ProgressCAKey = "progress-ca.crt"
	// ProgressDir holds the progress token and CA in the pods.
	ProgressDir = "/var/run/secrets/convoy.dev/progress"
	// CheckpointDir is where a pvc or nfs checkpoint volume is mounted.
	CheckpointDir = "/checkpoints"
	// ProgressTokenSeconds is the projected token's lifetime; the kubelet renews it before it ends.
	ProgressTokenSeconds = 3600
)

// MetricsServiceName is the Service in front of rank 0's metrics port.
func MetricsServiceName(job *convoy.TrainingJob) string { return job.Name + "-metrics" }

// JobLabels select every child of a job.
func JobLabels(job *convoy.TrainingJob) map[string]string {
	return map[string]string{convoy.LabelJobName: job.Name}
}

// PodLabels are the labels of the replica's pod in the gang started restartCount times before.
func PodLabels(job *convoy.TrainingJob, r mlframework.Replica) map[string]string {
	return map[string]string{
		convoy.LabelJobName:         job.Name,
		convoy.LabelTrainingJob:     job.Name,
		convoy.LabelReplicaRole:     string(r.Role),
		convoy.LabelReplicaRank:     itoa(r.Rank),
		schedv1alpha1.PodGroupLabel: job.Name,
		convoy.LabelRestartAttempt:  itoa(job.Status.RestartCount),
	}
}

// PodReplica is the replica a pod of the gang was created for, read from its labels (PodLabels);
// false for a pod without them. Pods are told apart by their labels, not their names, which
// change from one restart attempt to the next (mlframework.PodName).
func PodReplica(pod *corev1.Pod) (mlframework.Replica, bool) {
	role, ok := pod.Labels[convoy.LabelReplicaRole]
	if !ok {
		return mlframework.Replica{}, false
	}
	rank, err := strconv.ParseInt(pod.Labels[convoy.LabelReplicaRank], 10, 32)
	if err != nil {
		return mlframework.Replica{}, false
	}
	return mlframework.Replica{Role: mlframework.Role(role), Rank: int32(rank)}, true
}

// topologyAnnotations carry spec.scheduling.topology to the scheduler, on pods and the PodGroup.
func topologyAnnotations(job *convoy.TrainingJob) map[string]string {
	s := job.Spec.Scheduling
	if s == nil || s.Topology == nil {
		return nil
	}
	mode := s.Topology.Mode
	if mode == "" {
		mode = convoy.TopologyRequired
	}
	return map[string]string{
		convoy.AnnotationTopologyLevel: string(s.Topology.Level),
		convoy.AnnotationTopologyMode:  string(mode),
	}
}

func objectMeta(job *convoy.TrainingJob, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       job.Namespace,
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, convoy.GroupVersion.WithKind("TrainingJob"))},
	}
}
