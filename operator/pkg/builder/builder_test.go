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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

var opts = Options{ProgressURL: "https://convoy-operator.convoy-system.svc:9443", ProgressCA: []byte("CA")}

func owner(name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "convoy.dev/v1alpha1", Kind: "TrainingJob", Name: name, UID: "llm-uid",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
}

func plugin(t *testing.T, f convoy.Framework) mlframework.Plugin {
	t.Helper()
	p, err := mlframework.For(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func cmRef(key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "llm-config"}, Key: key}}
}

// TestPodGolden checks one whole pod: every field a user, the scheduler and the node see.
func TestPodGolden(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "team-a").Workers(2).GPUs(8).
		Resources("16", "64Gi").
		Env("RANK", "user-value-is-replaced").Env("HF_HOME", "/cache").
		Command([]string{"torchrun"}, "train.py").
		Hyperparameters(convoy.Hyperparameters{LearningRate: ptr.To(3e-4), Epochs: ptr.To[int32](10),
			AdditionalParams: map[string]string{"weight-decay": "0.1"}}).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Frequency: 2, IntervalSeconds: ptr.To[int32](900), ResumeFrom: "s3://ckpt/base",
			Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt", S3Region: "eu-west-1",
				CredentialsSecretRef: &corev1.LocalObjectReference{Name: "s3-creds"}}}).
		Scheduling(convoy.SchedulingSpec{PriorityClassName: "high", NodeSelector: map[string]string{"pool": "h100"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			Topology:    &convoy.TopologySpec{Level: convoy.TopologyRack}}).
		Status(convoy.TrainingJobStatus{RestartCount: 1, Checkpoint: &convoy.CheckpointStatus{Latest: "s3://ckpt/team-a/llm/attempt-0/epoch-4"}}).
		Obj()

	got := Pod(job, mlframework.Replica{Role: mlframework.RoleWorker, Rank: 1}, plugin(t, convoy.FrameworkPyTorch), opts)

	gpus := resource.MustParse("8")
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "llm-worker-1-r1", Namespace: "team-a",
			Labels: map[string]string{
				"convoy.dev/job-name": "llm", "training-job": "llm", "convoy.dev/role": "worker", "convoy.dev/rank": "1",
				"scheduling.x-k8s.io/pod-group": "llm", "convoy.dev/restart-attempt": "1",
			},
			Annotations:     map[string]string{"convoy.dev/topology-level": "rack", "convoy.dev/topology-mode": "required"},
			OwnerReferences: owner("llm"),
		},
		Spec: corev1.PodSpec{
			Hostname: "llm-worker-1", Subdomain: "llm",
			RestartPolicy: corev1.RestartPolicyNever, SchedulerName: "convoy-scheduler", PriorityClassName: "high",
			EnableServiceLinks: ptr.To(false), AutomountServiceAccountToken: ptr.To(false),
			NodeSelector: map[string]string{"pool": "h100"},
			Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "trainer", Image: "trainer:1", Command: []string{"torchrun"}, Args: []string{"train.py"},
				Env: []corev1.EnvVar{
					{Name: "RANK", Value: "1"},
					{Name: "HF_HOME", Value: "/cache"},
					{Name: "LEARNING_RATE", ValueFrom: cmRef("LEARNING_RATE")},
					{Name: "EPOCHS", ValueFrom: cmRef("EPOCHS")},
					{Name: "WEIGHT_DECAY", ValueFrom: cmRef("WEIGHT_DECAY")},
					{Name: "MODEL", Value: "llama-3-8b"},
					{Name: "DATASET", Value: "s3://corpus/en"},
					{Name: "MASTER_ADDR", Value: "llm-worker-0.llm.team-a.svc"},
					{Name: "MASTER_PORT", Value: "29500"},
					{Name: "WORLD_SIZE", Value: "2"},
					{Name: "NODE_RANK", Value: "1"},
					{Name: "PET_MASTER_ADDR", Value: "llm-worker-0.llm.team-a.svc"},
					{Name: "PET_MASTER_PORT", Value: "29500"},
					{Name: "PET_NNODES", Value: "2"},
					{Name: "PET_NPROC_PER_NODE", Value: "8"},
					{Name: "PET_NODE_RANK", Value: "1"},
					{Name: "CONVOY_HYPERPARAMETERS_FILE", Value: "/etc/convoy/hyperparameters.json"},
					{Name: "CONVOY_DIST_BACKEND", Value: "nccl"},
					{Name: "NCCL_IB_DISABLE", Value: "1"},
					{Name: "CONVOY_RESUME_FROM", Value: "s3://ckpt/team-a/llm/attempt-0/epoch-4"},
					{Name: "AWS_REGION", Value: "eu-west-1"},
					{Name: "AWS_DEFAULT_REGION", Value: "eu-west-1"},
					{Name: "CONVOY_CHECKPOINT_URI", Value: "s3://ckpt/team-a/llm/attempt-1"},
					{Name: "CONVOY_CHECKPOINT_ROOT", Value: "s3://ckpt/team-a/llm"},
					{Name: "CONVOY_CHECKPOINT_FREQUENCY", Value: "2"},
					{Name: "CONVOY_CHECKPOINT_INTERVAL_SECONDS", Value: "900"},
					{Name: "CONVOY_PROGRESS_URL", Value: "https://convoy-operator.convoy-system.svc:9443/v1/namespaces/team-a/trainingjobs/llm"},
					{Name: "CONVOY_PROGRESS_TOKEN_FILE", Value: "/var/run/secrets/convoy.dev/progress/token"},
					{Name: "CONVOY_PROGRESS_CA_FILE", Value: "/var/run/secrets/convoy.dev/progress/ca.crt"},
				},
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s3-creds"}}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"cpu": resource.MustParse("16"), "memory": resource.MustParse("64Gi"), "nvidia.com/gpu": gpus},
					Limits:   corev1.ResourceList{"nvidia.com/gpu": gpus},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: "/etc/convoy", ReadOnly: true},
					{Name: "convoy-progress", MountPath: "/var/run/secrets/convoy.dev/progress", ReadOnly: true},
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "llm-config"}}}},
				{Name: "convoy-progress", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "convoy.dev/progress", ExpirationSeconds: ptr.To[int64](3600), Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "llm-config"},
							Items: []corev1.KeyToPath{{Key: "progress-ca.crt", Path: "ca.crt"}}}},
					}}}},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pod (-want,+got):\n%s", diff)
	}
}

// podEnv returns the pod's plain-valued variables.
func podEnv(pod *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, v := range pod.Spec.Containers[0].Env {
		if v.ValueFrom == nil {
			env[v.Name] = v.Value
		}
	}
	return env
}

func TestPodVariants(t *testing.T) {
	base := utiltesting.MakeTrainingJob("llm", "team-a").Workers(2).GPUs(4)
	worker0 := mlframework.Replica{Role: mlframework.RoleWorker}
	cases := map[string]struct {
		job     *convoy.TrainingJob
		replica mlframework.Replica
		// noProgress builds the pod for an operator without a progress endpoint.
		noProgress bool
		check      func(t *testing.T, pod *corev1.Pod)
	}{
		"an elastic job's pods wait at Kueue's gate for their Workload slice": {
			job: func() *convoy.TrainingJob {
				j := base.Clone().Elastic(1, convoy.ElasticSpec{}).Obj()
				j.Annotations = map[string]string{kueue.WorkloadSliceNameAnnotation: "trainingjob-llm-1a2b3"}
				return j
			}(),
			replica: mlframework.Replica{Role: mlframework.RoleWorker, Rank: 1},
			check: func(t *testing.T, pod *corev1.Pod) {
				want := []corev1.PodSchedulingGate{{Name: kueue.ElasticJobSchedulingGate}}
				if diff := cmp.Diff(want, pod.Spec.SchedulingGates); diff != "" {
					t.Errorf("scheduling gates (-want,+got):\n%s", diff)
				}
				if got := pod.Annotations[kueue.WorkloadSliceNameAnnotation]; got != "trainingjob-llm-1a2b3" {
					t.Errorf("annotation %s = %q, want the job's slice", kueue.WorkloadSliceNameAnnotation, got)
				}
			},
		},
		"an elastic job outside Kueue's Workload slices starts at once": {
			job:     base.Clone().Elastic(1, convoy.ElasticSpec{}).Obj(),
			replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				if len(pod.Spec.SchedulingGates) > 0 {
					t.Errorf("scheduling gates %v, want none", pod.Spec.SchedulingGates)
				}
			},
		},
		"first run resumes from spec.checkpoint.resumeFrom": {
			job:     base.Clone().Checkpoint(convoy.CheckpointSpec{ResumeFrom: "/models/base"}).Obj(),
			replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				wantEnv(t, pod, "CONVOY_RESUME_FROM", "/models/base")
				wantEnv(t, pod, "CONVOY_CHECKPOINT_URI", "")
			},
		},
		"a named claim is mounted read-only, only the job's directory (the default prefix) of it": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Retention: ptr.To[int32](3),
				Storage: &convoy.CheckpointStorage{Type: convoy.StoragePVC, ClaimName: "ckpt"}}).
				Monitoring(convoy.MonitoringSpec{TensorboardEnabled: true}).Obj(),
			replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				wantEnv(t, pod, "CONVOY_CHECKPOINT_URI", "/checkpoints/team-a/llm/attempt-0")
				wantEnv(t, pod, "CONVOY_CHECKPOINT_ROOT", "/checkpoints/team-a/llm")
				wantEnv(t, pod, "CONVOY_CHECKPOINT_FREQUENCY", "1")
				wantEnv(t, pod, "CONVOY_CHECKPOINT_INTERVAL_SECONDS", "")
				wantEnv(t, pod, "CONVOY_CHECKPOINT_RETENTION", "3")
				wantEnv(t, pod, "TENSORBOARD_LOG_DIR", "/checkpoints/team-a/llm/attempt-0/tensorboard")
				wantMount(t, pod, "checkpoints", corev1.VolumeMount{Name: "checkpoints", MountPath: "/checkpoints/team-a/llm", SubPath: "team-a/llm", ReadOnly: true})
			},
		},
		"nfs checkpoints with a prefix": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StorageNFS, Prefix: "runs/7", NFS: &convoy.NFSStorage{Server: "nfs.local", Path: "/export"}}}).Obj(),
			replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				wantEnv(t, pod, "CONVOY_CHECKPOINT_URI", "/checkpoints/runs/7/attempt-0")
				wantMount(t, pod, "checkpoints", corev1.VolumeMount{Name: "checkpoints", MountPath: "/checkpoints", ReadOnly: true})
			},
		},
		"gcs and azure URIs": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StorageAzure, AzureContainer: "ckpt", AzureStorageAccount: "acct"}}).Obj(),
			replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				wantEnv(t, pod, "CONVOY_CHECKPOINT_URI", "az://ckpt/team-a/llm/attempt-0")
				wantEnv(t, pod, "AZURE_STORAGE_ACCOUNT", "acct")
			},
		},
		"s3-compatible endpoint": {
			job: base.Clone().Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{
				Type: convoy.StorageS3, S3Bucket: "ckpt", S3Endpoint: "http://minio:9000"}}).Obj(),
			replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				wantEnv(t, pod, "AWS_ENDPOINT_URL", "http://minio:9000")
			},
		},
		"rdma lets NCCL use InfiniBand; gloo sets no NCCL variables": {
			job:     base.Clone().Networking("nccl", true).Obj(),
			replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				wantEnv(t, pod, "NCCL_IB_DISABLE", "0")
				gloo := Pod(base.Clone().Networking("gloo", false).Obj(), worker0, plugin(t, convoy.FrameworkPyTorch), opts)
				wantEnv(t, gloo, "NCCL_IB_DISABLE", "")
				wantEnv(t, gloo, "CONVOY_DIST_BACKEND", "gloo")
			},
		},
		"monitoring exposes the metrics port on rank 0 and passes trackers": {
			job: base.Clone().Monitoring(convoy.MonitoringSpec{Enabled: true, MetricsPort: 9100,
				MLflowTrackingURI: "http://mlflow", WandbProject: "llm"}).Obj(),
			replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				wantEnv(t, pod, "MLFLOW_TRACKING_URI", "http://mlflow")
				wantEnv(t, pod, "WANDB_PROJECT", "llm")
				wantEnv(t, pod, "WANDB_RUN_ID", "llm-llmuid")
				wantEnv(t, pod, "WANDB_RESUME", "allow")
				wantEnv(t, pod, "MLFLOW_RUN_ID", "") // no run recorded yet
				want := []corev1.ContainerPort{
					{Name: "rendezvous", ContainerPort: 29500, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", ContainerPort: 9100, Protocol: corev1.ProtocolTCP},
				}
				if diff := cmp.Diff(want, pod.Spec.Containers[0].Ports); diff != "" {
					t.Errorf("ports (-want,+got):\n%s", diff)
				}
			},
		},
		"a later attempt logs into the MLflow run recorded in status.tracking": {
			job: base.Clone().Monitoring(convoy.MonitoringSpec{MLflowTrackingURI: "http://mlflow"}).
				Status(convoy.TrainingJobStatus{RestartCount: 1, Tracking: &convoy.TrackingStatus{MLflowRunID: "4f1c"}}).Obj(),
			replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				wantEnv(t, pod, "MLFLOW_RUN_ID", "4f1c")
				wantEnv(t, pod, "WANDB_RUN_ID", "")
			},
		},
		"without a progress URL no token is mounted": {
			job: base.Clone().Obj(), replica: worker0, noProgress: true,
			check: func(t *testing.T, pod *corev1.Pod) {
				wantEnv(t, pod, "CONVOY_PROGRESS_URL", "")
				if len(pod.Spec.Volumes) != 1 {
					t.Errorf("volumes = %v, want only the config volume", pod.Spec.Volumes)
				}
			},
		},
		"parameter servers get no GPUs and the framework's default image": {
			job:     base.Clone().Framework(convoy.FrameworkTensorFlow).ParameterServers(1).Image("").Obj(),
			replica: mlframework.Replica{Role: mlframework.RolePS},
			check: func(t *testing.T, pod *corev1.Pod) {
				if _, ok := pod.Spec.Containers[0].Resources.Requests[convoy.ResourceGPU]; ok {
					t.Error("a parameter server requests GPUs")
				}
				if got := pod.Spec.Containers[0].Image; got != "tensorflow/tensorflow:2.18.0-gpu" {
					t.Errorf("image = %q", got)
				}
				if got := pod.Labels[convoy.LabelReplicaRole]; got != "ps" {
					t.Errorf("role label = %q, want ps", got)
				}
			},
		},
		"mpi mounts the hostfile and keys and gives sshd its capabilities": {
			job:     base.Clone().Framework(convoy.FrameworkMPI).Obj(),
			replica: mlframework.Replica{Role: mlframework.RoleWorker, Rank: 1},
			check: func(t *testing.T, pod *corev1.Pod) {
				wantMount(t, pod, "mpi-hostfile", corev1.VolumeMount{Name: "mpi-hostfile", MountPath: "/etc/mpi", ReadOnly: true})
				wantMount(t, pod, "ssh-auth", corev1.VolumeMount{Name: "ssh-auth", MountPath: "/root/.ssh", ReadOnly: true})
				sc := pod.Spec.Containers[0].SecurityContext
				if diff := cmp.Diff(&corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"},
						Add: []corev1.Capability{"SETUID", "SETGID", "SYS_CHROOT", "NET_BIND_SERVICE"}},
				}, sc); diff != "" {
					t.Errorf("securityContext (-want,+got):\n%s", diff)
				}
			},
		},
		"zero GPUs requests none": {
			job: base.Clone().GPUs(0).Obj(), replica: worker0,
			check: func(t *testing.T, pod *corev1.Pod) {
				if len(pod.Spec.Containers[0].Resources.Requests) != 0 || len(pod.Spec.Containers[0].Resources.Limits) != 0 {
					t.Errorf("resources = %v, want none", pod.Spec.Containers[0].Resources)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := opts
			if tc.noProgress {
				o = Options{}
			}
			tc.check(t, Pod(tc.job, tc.replica, plugin(t, tc.job.Spec.Framework), o))
		})
	}
}

func wantEnv(t *testing.T, pod *corev1.Pod, name, want string) {
	t.Helper()
	if got := podEnv(pod)[name]; got != want {
		t.Errorf("%s = %q, want %q", name, got, want)
	}
}

func wantMount(t *testing.T, pod *corev1.Pod, name string, want corev1.VolumeMount) {
	t.Helper()
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.Name == name {
			if diff := cmp.Diff(want, m); diff != "" {
				t.Errorf("mount %s (-want,+got):\n%s", name, diff)
			}
			return
		}
	}
	t.Errorf("no volume mount %s in %v", name, pod.Spec.Containers[0].VolumeMounts)
}

func TestPodGroup(t *testing.T) {
	checkpointed := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cases := map[string]struct {
		job  *convoy.TrainingJob
		want *schedv1alpha1.PodGroup
	}{
		"all workers, their GPUs and resources, the topology and the last checkpoint": {
			job: utiltesting.MakeTrainingJob("llm", "team-a").Workers(4).GPUs(8).Resources("8", "").
				Topology(convoy.TopologyBlock, convoy.TopologyPreferred).
				Status(convoy.TrainingJobStatus{Checkpoint: &convoy.CheckpointStatus{Latest: "x", Time: &checkpointed}}).Obj(),
			want: &schedv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "team-a", Labels: map[string]string{"convoy.dev/job-name": "llm"},
					Annotations: map[string]string{"convoy.dev/topology-level": "block", "convoy.dev/topology-mode": "preferred",
						"convoy.dev/last-checkpoint-time": "2026-01-02T03:04:05Z"},
					OwnerReferences: owner("llm")},
				Spec: schedv1alpha1.PodGroupSpec{MinMember: 4, ScheduleTimeoutSeconds: ptr.To[int32](300),
					MinResources: corev1.ResourceList{"cpu": resource.MustParse("32"), "nvidia.com/gpu": resource.MustParse("32")}},
			},
		},
		"mxnet counts the scheduler and servers": {
			job: utiltesting.MakeTrainingJob("mx", "ns").Framework(convoy.FrameworkMXNet).Workers(2).GPUs(1).ParameterServers(2).Obj(),
			want: &schedv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "mx", Namespace: "ns", Labels: map[string]string{"convoy.dev/job-name": "mx"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "convoy.dev/v1alpha1", Kind: "TrainingJob", Name: "mx", UID: "mx-uid",
						Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
				Spec: schedv1alpha1.PodGroupSpec{MinMember: 5, ScheduleTimeoutSeconds: ptr.To[int32](300),
					MinResources: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := plugin(t, tc.job.Spec.Framework)
			got := PodGroup(tc.job, Pods(tc.job, p, opts), opts)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PodGroup (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestServices(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "team-a").Monitoring(convoy.MonitoringSpec{Enabled: true}).Obj()
	wantHeadless := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "team-a", Labels: map[string]string{"convoy.dev/job-name": "llm"}, OwnerReferences: owner("llm")},
		Spec: corev1.ServiceSpec{ClusterIP: "None", PublishNotReadyAddresses: true,
			Selector: map[string]string{"convoy.dev/job-name": "llm"},
			Ports:    []corev1.ServicePort{{Name: "rendezvous", Port: 29500, TargetPort: intstr.FromInt32(29500), Protocol: "TCP"}}},
	}
	if diff := cmp.Diff(wantHeadless, HeadlessService(job)); diff != "" {
		t.Errorf("HeadlessService (-want,+got):\n%s", diff)
	}
	wantMetrics := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "llm-metrics", Namespace: "team-a", Labels: map[string]string{"convoy.dev/job-name": "llm"}, OwnerReferences: owner("llm")},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"convoy.dev/job-name": "llm", "convoy.dev/role": "worker", "convoy.dev/rank": "0"},
			Ports:    []corev1.ServicePort{{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: "TCP"}}},
	}
	if diff := cmp.Diff(wantMetrics, MetricsService(job)); diff != "" {
		t.Errorf("MetricsService (-want,+got):\n%s", diff)
	}
	if s := MetricsService(utiltesting.MakeTrainingJob("llm", "team-a").Obj()); s != nil {
		t.Errorf("MetricsService without monitoring = %v, want nil", s)
	}
}

func TestConfigMap(t *testing.T) {
	cases := map[string]struct {
		job  *convoy.TrainingJob
		want map[string]string
	}{
		"hyperparameters as JSON and one key each, and the progress CA": {
			job: utiltesting.MakeTrainingJob("llm", "team-a").Hyperparameters(convoy.Hyperparameters{
				LearningRate: ptr.To(5e-5), BatchSize: ptr.To[int32](256), Epochs: ptr.To[int32](3), Optimizer: "adamw",
				WarmupSteps: ptr.To[int32](100), GradientAccumulationSteps: ptr.To[int32](4), MixedPrecision: ptr.To(true),
				AdditionalParams: map[string]string{"weight-decay": "0.01", "2nd.beta": "0.95"},
			}).Obj(),
			want: map[string]string{
				"hyperparameters.json": `{"learningRate":0.00005,"batchSize":256,"epochs":3,"optimizer":"adamw","warmupSteps":100,` +
					`"gradientAccumulationSteps":4,"mixedPrecision":"bf16","additionalParams":{"2nd.beta":"0.95","weight-decay":"0.01"}}`,
				"LEARNING_RATE": "5e-05", "BATCH_SIZE": "256", "EPOCHS": "3", "OPTIMIZER": "adamw", "WARMUP_STEPS": "100",
				"GRADIENT_ACCUMULATION_STEPS": "4", "MIXED_PRECISION": "bf16", "WEIGHT_DECAY": "0.01", "_2ND_BETA": "0.95",
				"progress-ca.crt": "CA",
			},
		},
		"no hyperparameters; mpi adds its hostfile": {
			job: utiltesting.MakeTrainingJob("hvd", "ns").Framework(convoy.FrameworkMPI).Workers(2).GPUs(2).Obj(),
			want: map[string]string{
				"hyperparameters.json": "{}",
				"hostfile":             "hvd-worker-0.hvd.ns.svc slots=2\nhvd-worker-1.hvd.ns.svc slots=2\n",
				"progress-ca.crt":      "CA",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cm := ConfigMap(tc.job, plugin(t, tc.job.Spec.Framework), opts)
			if diff := cmp.Diff(tc.want, cm.Data); diff != "" {
				t.Errorf("data (-want,+got):\n%s", diff)
			}
			if cm.Name != tc.job.Name+"-config" {
				t.Errorf("name = %q", cm.Name)
			}
		})
	}
}

func TestSSHSecret(t *testing.T) {
	priv, pub, err := NewSSHKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	s := SSHSecret(utiltesting.MakeTrainingJob("hvd", "ns").Obj(), priv, pub)
	if s.Name != "" || s.GenerateName != "hvd-ssh-" || s.Type != corev1.SecretTypeSSHAuth {
		t.Errorf("secret %q (generateName %q) of type %s, want only generateName hvd-ssh- and type %s", s.Name, s.GenerateName, s.Type, corev1.SecretTypeSSHAuth)
	}
	if got := string(s.Data["ssh-publickey"]); len(got) < 20 || got[:19] != "ecdsa-sha2-nistp521" {
		t.Errorf("public key = %q, want an ecdsa-sha2-nistp521 authorized key", got)
	}
	if got := string(s.Data["ssh-privatekey"]); len(got) < 30 || got[:30] != "-----BEGIN EC PRIVATE KEY-----" {
		t.Errorf("private key does not start with a PEM header: %.30q", got)
	}
}

// TestServiceAccount: a job that names a ServiceAccount runs its pods as it, with the API token
// its automountServiceAccountToken says; one that names none gets no API token.
func TestServiceAccount(t *testing.T) {
	p := plugin(t, convoy.FrameworkPyTorch)
	worker := mlframework.Replica{Role: mlframework.RoleWorker}
	named := utiltesting.MakeTrainingJob("llm", "team-a").Obj()
	named.Spec.ServiceAccountName = "trainer-irsa"
	pod := Pod(named, worker, p, opts)
	if pod.Spec.ServiceAccountName != "trainer-irsa" || pod.Spec.AutomountServiceAccountToken != nil {
		t.Errorf("named: serviceAccountName %q automount %v, want trainer-irsa and the ServiceAccount's own setting (nil)",
			pod.Spec.ServiceAccountName, pod.Spec.AutomountServiceAccountToken)
	}
	if _, ok := pod.Labels[AzureWorkloadIdentityLabel]; ok {
		t.Errorf("named, without Azure storage: label %s set", AzureWorkloadIdentityLabel)
	}
	pod = Pod(utiltesting.MakeTrainingJob("llm", "team-a").Obj(), worker, p, opts)
	if pod.Spec.ServiceAccountName != "" || pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("unnamed: serviceAccountName %q automount %v, want the default ServiceAccount and no token",
			pod.Spec.ServiceAccountName, pod.Spec.AutomountServiceAccountToken)
	}
	azure := convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageAzure, AzureContainer: "ckpt"}}
	named = utiltesting.MakeTrainingJob("llm", "team-a").Checkpoint(azure).Obj()
	named.Spec.ServiceAccountName = "trainer-wi"
	if got := Pod(named, worker, p, opts).Labels[AzureWorkloadIdentityLabel]; got != "true" {
		t.Errorf("named, Azure storage: label %s = %q, want true (Azure Workload Identity's webhook mutates only such pods)", AzureWorkloadIdentityLabel, got)
	}
	if _, ok := Pod(utiltesting.MakeTrainingJob("llm", "team-a").Checkpoint(azure).Obj(), worker, p, opts).Labels[AzureWorkloadIdentityLabel]; ok {
		t.Errorf("unnamed, Azure storage: label %s set", AzureWorkloadIdentityLabel)
	}
}

// TestGPUsOnlyForWorkers: nvidia.com/gpu asked in spec.resources goes to the workers, not to the
// parameter servers that share spec.resources.
func TestGPUsOnlyForWorkers(t *testing.T) {
	job := utiltesting.MakeTrainingJob("tf", "team-a").Framework(convoy.FrameworkTensorFlow).Obj()
	job.Spec.NumParameterServers = 1
	job.Spec.GPUsPerWorker = nil
	job.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{convoy.ResourceGPU: resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("8")},
		Limits:   corev1.ResourceList{convoy.ResourceGPU: resource.MustParse("4")},
	}
	p := plugin(t, convoy.FrameworkTensorFlow)
	for _, pod := range Pods(job, p, opts) {
		res := pod.Spec.Containers[0].Resources
		want := int64(0)
		if pod.Labels[convoy.LabelReplicaRole] == string(mlframework.RoleWorker) {
			want = 4
		}
		if g := res.Limits[convoy.ResourceGPU]; g.Value() != want || res.Requests.Cpu().String() != "8" {
			t.Errorf("%s: GPU limit %s, CPU request %s; want %d GPUs and 8 CPUs", pod.Name, g.String(), res.Requests.Cpu(), want)
		}
	}
}
