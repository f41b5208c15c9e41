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

package queue

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// specJob is a job that names no queue, with every section the cases below break.
func specJob(namespace, name string) *convoy.TrainingJob {
	job := utiltesting.MakeTrainingJob(name, namespace).Workers(2).GPUs(1).Obj()
	job.UID = ""
	job.Spec.Env = []corev1.EnvVar{{Name: "HF_HOME", Value: "/cache"}}
	job.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")},
	}
	job.Spec.Hyperparameters = &convoy.Hyperparameters{LearningRate: ptr.To(3e-4), AdditionalParams: map[string]string{"weight-decay": "0.1"}}
	job.Spec.Scheduling = &convoy.SchedulingSpec{
		NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
		Tolerations:  []corev1.Toleration{{Key: "convoy.dev/spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
	}
	return job
}

// manifest writes yaml to a file of the test's own for kubectl apply -f.
func manifest(t *testing.T, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func envFrom(secretKey string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: secretKey}}
}

// TestSpecsWhosePodsCouldNeverBeCreatedAreRefused applies, through the real API server and the
// children webhook as deploy/kueue/webhook.yaml registers it, specs that pass the CRD's schema
// but whose pods, Services or ConfigMap the API server would refuse: each is refused at create,
// naming the TrainingJob field (not the pod's) and what is wrong, and nothing is stored. The job
// they all start from is created, so the webhook refuses what is wrong and nothing else.
func TestSpecsWhosePodsCouldNeverBeCreatedAreRefused(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.create(specJob(e.ns, "valid"))

	for _, tc := range []struct {
		name string
		edit func(*convoy.TrainingJob)
		// field is the TrainingJob field the error must name; want, a part of its message.
		field, want string
	}{
		{"env name with =", func(j *convoy.TrainingJob) { j.Spec.Env = append(j.Spec.Env, corev1.EnvVar{Name: "A=B", Value: "1"}) },
			"spec.env[1].name", "A=B"},
		{"empty env name after a valid one", func(j *convoy.TrainingJob) { j.Spec.Env = append(j.Spec.Env, corev1.EnvVar{Name: "", Value: "1"}) },
			"spec.env[1].name", "Required value"},
		{"env with value and valueFrom", func(j *convoy.TrainingJob) {
			j.Spec.Env = []corev1.EnvVar{{Name: "TOKEN", Value: "x", ValueFrom: envFrom("token")}}
		}, "spec.env[0].valueFrom", "may not be specified when `value` is not empty"},
		{"env secret key with a space", func(j *convoy.TrainingJob) {
			j.Spec.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: envFrom("hf token")}}
		}, "spec.env[0].valueFrom.secretKeyRef.key", "hf token"},
		{"env fieldRef to an unknown field", func(j *convoy.TrainingJob) {
			j.Spec.Env = []corev1.EnvVar{{Name: "WHERE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nowhere"}}}}
		}, "spec.env[0].valueFrom.fieldRef.fieldPath", "spec.nowhere"},
		{"env resourceFieldRef to an unknown resource", func(j *convoy.TrainingJob) {
			j.Spec.Env = []corev1.EnvVar{{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.gold"}}}}
		}, "spec.env[0].valueFrom.resourceFieldRef.resource", "requests.gold"},
		{"cpu request above its limit", func(j *convoy.TrainingJob) { j.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("16") },
			"spec.resources.requests", "must be less than or equal to cpu limit"},
		{"memory request above its limit", func(j *convoy.TrainingJob) {
			j.Spec.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Gi")
		},
			"spec.resources.requests", "must be less than or equal to memory limit"},
		{"unqualified resource name", func(j *convoy.TrainingJob) { j.Spec.Resources.Limits["gold"] = resource.MustParse("1") },
			"spec.resources.limits[gold]", "must be a standard resource"},
		{"negative cpu", func(j *convoy.TrainingJob) { j.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("-1") },
			"spec.resources.requests[cpu]", "must be greater than or equal to 0"},
		{"image with a trailing space", func(j *convoy.TrainingJob) { j.Spec.Image = "ghcr.io/org/trainer:v1 " },
			"spec.image", "leading or trailing whitespace"},
		{"ephemeral storage request above its limit", func(j *convoy.TrainingJob) {
			j.Spec.Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("20Gi")
			j.Spec.Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("10Gi")
		}, "spec.resources.requests", "must be less than or equal to ephemeral-storage limit"},
		{"node selector key with a space", func(j *convoy.TrainingJob) { j.Spec.Scheduling.NodeSelector["gpu type"] = "h100" },
			"spec.scheduling.nodeSelector", "gpu type"},
		{"node selector value with a slash", func(j *convoy.TrainingJob) { j.Spec.Scheduling.NodeSelector["pool"] = "a/b" },
			"spec.scheduling.nodeSelector", "a/b"},
		{"node selector value too long", func(j *convoy.TrainingJob) { j.Spec.Scheduling.NodeSelector["pool"] = strings.Repeat("a", 64) },
			"spec.scheduling.nodeSelector", "must be no more than 63 bytes"},
		{"toleration key with a space", func(j *convoy.TrainingJob) { j.Spec.Scheduling.Tolerations[0].Key = "spot instance" },
			"spec.scheduling.tolerations[0].key", "spot instance"},
		{"toleration Exists with a value", func(j *convoy.TrainingJob) { j.Spec.Scheduling.Tolerations[0].Operator = corev1.TolerationOpExists },
			"spec.scheduling.tolerations[0].operator", "value must be empty when `operator` is 'Exists'"},
		{"toleration with an unknown effect", func(j *convoy.TrainingJob) { j.Spec.Scheduling.Tolerations[0].Effect = "Sometimes" },
			"spec.scheduling.tolerations[0].effect", "Sometimes"},
		{"tolerationSeconds without NoExecute", func(j *convoy.TrainingJob) { j.Spec.Scheduling.Tolerations[0].TolerationSeconds = ptr.To[int64](60) },
			"spec.scheduling.tolerations[0].effect", "NoExecute"},
		{"node affinity In without values", func(j *convoy.TrainingJob) {
			j.Spec.Scheduling.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn}}}},
			}}}
		}, "spec.scheduling.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values", "must be specified when `operator` is 'In' or 'NotIn'"},
		{"node affinity matchFields on a label", func(j *convoy.TrainingJob) {
			j.Spec.Scheduling.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.labels", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
			}}}
		}, "spec.scheduling.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key", "metadata.labels"},
		{"pod affinity without a topology key", func(j *convoy.TrainingJob) {
			j.Spec.Scheduling.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}},
			}}}}
		}, "spec.scheduling.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey", "Required value"},
		{"pod affinity weight out of range", func(j *convoy.TrainingJob) {
			j.Spec.Scheduling.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 1000, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: convoy.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}},
			}}}}
		}, "spec.scheduling.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "must be in the range 1-100"},
		{"pod affinity selector value with a space", func(j *convoy.TrainingJob) {
			j.Spec.Scheduling.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: convoy.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "the cache"}}},
			}}}
		}, "spec.scheduling.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels", "the cache"},
		{"hyperparameter name too long for a ConfigMap key", func(j *convoy.TrainingJob) {
			j.Spec.Hyperparameters.AdditionalParams[strings.Repeat("k", 254)] = "1"
		}, "spec.hyperparameters.additionalParams[" + strings.Repeat("k", 254) + "]", "must be no more than 253 characters"},
		{"two hyperparameters that become one variable", func(j *convoy.TrainingJob) { j.Spec.Hyperparameters.AdditionalParams["weight_decay"] = "0.2" },
			"spec.hyperparameters.additionalParams[weight_decay]", "becomes the variable WEIGHT_DECAY"},
		{"a hyperparameter that shadows learningRate", func(j *convoy.TrainingJob) { j.Spec.Hyperparameters.AdditionalParams["learning-rate"] = "1" },
			"spec.hyperparameters.additionalParams[learning-rate]", "becomes the variable LEARNING_RATE"},
		{"node affinity Gt with two values", func(j *convoy.TrainingJob) {
			j.Spec.Scheduling.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu-memory", Operator: corev1.NodeSelectorOpGt, Values: []string{"40", "80"}}}}},
			}}}
		}, "spec.scheduling.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values", "must be specified single value when `operator` is 'Lt' or 'Gt'"},
		{"pod anti-affinity selector with an unknown operator", func(j *convoy.TrainingJob) {
			j.Spec.Scheduling.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: convoy.LabelHostname, LabelSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Like", Values: []string{"cache"}}}}},
			}}}}
		}, "spec.scheduling.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchExpressions[0].operator", "Like"},
		{"checkpoint storage class with capitals", func(j *convoy.TrainingJob) {
			j.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StoragePVC, StorageClassName: "Fast_SSD"}}
		}, "spec.checkpoint.storage.storageClassName", "Fast_SSD"},
		{"ReadWriteOncePod with another access mode", func(j *convoy.TrainingJob) {
			j.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StoragePVC,
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteMany}}}
		}, "spec.checkpoint.storage.accessModes", "ReadWriteOncePod"},
		{"credentials Secret name with capitals", func(j *convoy.TrainingJob) {
			j.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt",
				CredentialsSecretRef: &corev1.LocalObjectReference{Name: "AWS_Keys"}}}
		}, "spec.checkpoint.storage.credentialsSecretRef.name", "AWS_Keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := specJob(e.ns, "refused")
			tc.edit(job)
			err := e.k.Create(ctx, job)
			if err == nil {
				_ = e.k.Delete(ctx, job)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("creating the job: %v\nwant it refused, naming %s with %q", err, tc.field, tc.want)
			}
			if err := e.k.Get(ctx, client.ObjectKeyFromObject(job), &convoy.TrainingJob{}); !apierrors.IsNotFound(err) {
				t.Errorf("the refused job: %v, want it not stored", err)
				_ = e.k.Delete(ctx, job)
			}
		})
	}
}

// TestSpecChangeWhosePodsCouldNeverBeCreatedIsRefused: changing a job's spec so that its pods
// would be refused is itself refused, with the field, and the job keeps its spec; suspending it
// is not checked again.
func TestSpecChangeWhosePodsCouldNeverBeCreatedIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.create(specJob(e.ns, "changed"))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := e.job(e.ns, "changed")
		j.Spec.Scheduling.NodeSelector["gpu type"] = "h100"
		return e.k.Update(ctx, j)
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.scheduling.nodeSelector: ") {
		t.Errorf("adding an invalid node selector: %v, want it refused naming spec.scheduling.nodeSelector", err)
	}
	if got := e.job(e.ns, "changed").Spec.Scheduling.NodeSelector; len(got) != 1 {
		t.Errorf("after the refused update the node selector is %v, want it unchanged", got)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := e.job(e.ns, "changed")
		j.Spec.Suspend = ptr.To(true)
		return e.k.Update(ctx, j)
	}); err != nil {
		t.Errorf("suspending the job: %v", err)
	}
}

// TestKubectlApplyNamesTheFieldAndWarnsOfTheNamespacesRules: what a user sees from kubectl. A spec
// with an invalid toleration is refused naming it; a valid spec in a namespace whose
// ResourceQuota allows no pods is created, with a warning that its pods would be refused now.
func TestKubectlApplyNamesTheFieldAndWarnsOfTheNamespacesRules(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	bad := `apiVersion: convoy.dev/v1alpha1
kind: TrainingJob
metadata: {name: typo, namespace: ` + e.ns + `}
spec:
  model: llama-3-8b
  dataset: s3://corpus/en
  numWorkers: 2
  scheduling:
    tolerations: [{key: convoy.dev/spot, operator: Equal, value: "true", effect: NoSchedul}]
`
	out, err := e.Kubectl(ctx, "apply", "-f", manifest(t, bad))
	if err == nil || !strings.Contains(out, "spec.scheduling.tolerations[0].effect") || !strings.Contains(out, "NoSchedul") {
		t.Errorf("kubectl apply of a misspelt effect: %v\n%s\nwant it refused naming spec.scheduling.tolerations[0].effect", err, out)
	}

	e.create(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}})
	e.eventually("the quota to be counted", func() (bool, string) {
		q := &corev1.ResourceQuota{}
		err := e.k.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "no-pods"}, q)
		return err == nil && q.Status.Hard != nil, "quota status not set"
	})
	good := strings.Replace(strings.Replace(bad, "NoSchedul}", "NoSchedule}", 1), "typo", "quota", 1)
	out, err = e.Kubectl(ctx, "apply", "-f", manifest(t, good))
	if err != nil || !strings.Contains(out, "trainingjob.convoy.dev/quota created") || !strings.Contains(out, "Warning:") || !strings.Contains(out, "exceeded quota") {
		t.Errorf("kubectl apply in a namespace that allows no pods: %v\n%s\nwant it created with a warning of the quota", err, out)
	}
}
