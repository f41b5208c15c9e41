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
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// Pods returns every pod of the gang, in the framework's order.
func Pods(job *convoy.TrainingJob, p mlframework.Plugin, opts Options) []*corev1.Pod {
	replicas := p.Replicas(job)
	pods := make([]*corev1.Pod, 0, len(replicas))
	for _, r := range replicas {
		pods = append(pods, Pod(job, r, p, opts))
	}
	return pods
}

// PodGroup returns the gang's PodGroup, named after the job: every pod must be placed
// (minMember) and their requests together (minResources) must fit. It carries the topology
// annotations and, once a checkpoint is reported, its time.
func PodGroup(job *convoy.TrainingJob, pods []*corev1.Pod, opts Options) *schedv1alpha1.PodGroup {
	total := corev1.ResourceList{}
	for _, pod := range pods {
		for _, c := range pod.Spec.Containers {
			for name, q := range c.Resources.Requests {
				sum := total[name]
				sum.Add(q)
				total[name] = sum
			}
		}
	}
	pg := &schedv1alpha1.PodGroup{
		ObjectMeta: objectMeta(job, job.Name, JobLabels(job)),
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember:              int32(len(pods)),
			ScheduleTimeoutSeconds: ptr.To(cmpOr(opts.ScheduleTimeoutSeconds, DefaultScheduleTimeoutSeconds)),
		},
	}
	if len(total) > 0 {
		pg.Spec.MinResources = total
	}
	pg.Annotations = topologyAnnotations(job)
	if cp := job.Status.Checkpoint; cp != nil && cp.Time != nil {
		if pg.Annotations == nil {
			pg.Annotations = map[string]string{}
		}
		pg.Annotations[convoy.AnnotationLastCheckpointTime] = cp.Time.UTC().Format(time.RFC3339)
	}
	return pg
}

func cmpOr(a, b int32) int32 {
	if a != 0 {
		return a
	}
	return b
}

// HeadlessService gives every pod the stable name <pod>.<job>.<namespace>.svc, ready or not:
// rendezvous happens before readiness.
func HeadlessService(job *convoy.TrainingJob) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(job, job.Name, JobLabels(job)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 JobLabels(job),
			Ports: []corev1.ServicePort{{
				Name: "rendezvous", Port: job.MasterPort(), TargetPort: intstr.FromInt32(job.MasterPort()), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// MetricsService exposes rank 0's metrics port as <job>-metrics; nil unless spec.monitoring.enabled.
func MetricsService(job *convoy.TrainingJob) *corev1.Service {
	if m := job.Spec.Monitoring; m == nil || !m.Enabled {
		return nil
	}
	port := metricsPort(job)
	return &corev1.Service{
		ObjectMeta: objectMeta(job, MetricsServiceName(job), JobLabels(job)),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{
				convoy.LabelJobName:     job.Name,
				convoy.LabelReplicaRole: string(mlframework.RoleWorker),
				convoy.LabelReplicaRank: "0",
			},
			Ports: []corev1.ServicePort{{
				Name: "metrics", Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// ConfigMap is <job>-config: the hyperparameters as JSON and one key per variable, the framework's
// files, and the progress endpoint's CA.
func ConfigMap(job *convoy.TrainingJob, p mlframework.Plugin, opts Options) *corev1.ConfigMap {
	data := map[string]string{HyperparametersFile: hyperparametersJSON(job)}
	for _, kv := range hyperparameterEnv(job) {
		data[kv.name] = kv.value
	}
	maps.Copy(data, p.ConfigFiles(job))
	if len(opts.ProgressCA) > 0 {
		data[ProgressCAKey] = string(opts.ProgressCA)
	}
	return &corev1.ConfigMap{ObjectMeta: objectMeta(job, mlframework.ConfigMapName(job), JobLabels(job)), Data: data}
}

// SSHSecret holds the key pair of frameworks that ssh between pods (mlframework.NeedsSSHKeys). It
// has no name, only the generateName mlframework.SSHSecretPrefix: the operator records the name
// the API server gives it in status.sshSecretName, where the pods find it.
func SSHSecret(job *convoy.TrainingJob, privateKeyPEM, authorizedKey []byte) *corev1.Secret {
	meta := objectMeta(job, "", JobLabels(job))
	meta.GenerateName = mlframework.SSHSecretPrefix(job)
	return &corev1.Secret{
		ObjectMeta: meta,
		Type:       corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{
			mlframework.SSHPrivateKey: privateKeyPEM,
			mlframework.SSHPublicKey:  authorizedKey,
		},
	}
}

// podHyperparameters is hyperparameters.json as training code reads it: mixedPrecision is the
// precision mode Hugging Face Accelerate takes ("no", "fp16", "bf16" or "fp8"), not the spec's
// boolean and precision.
type podHyperparameters struct {
	LearningRate              *float64          `json:"learningRate,omitempty"`
	BatchSize                 *int32            `json:"batchSize,omitempty"`
	Epochs                    *int32            `json:"epochs,omitempty"`
	Optimizer                 string            `json:"optimizer,omitempty"`
	WarmupSteps               *int32            `json:"warmupSteps,omitempty"`
	GradientAccumulationSteps *int32            `json:"gradientAccumulationSteps,omitempty"`
	MixedPrecision            string            `json:"mixedPrecision,omitempty"`
	AdditionalParams          map[string]string `json:"additionalParams,omitempty"`
}

func hyperparametersJSON(job *convoy.TrainingJob) string {
	hp := job.Spec.Hyperparameters
	if hp == nil {
		hp = &convoy.Hyperparameters{}
	}
	b, err := json.Marshal(podHyperparameters{
		LearningRate: hp.LearningRate, BatchSize: hp.BatchSize, Epochs: hp.Epochs, Optimizer: hp.Optimizer,
		WarmupSteps: hp.WarmupSteps, GradientAccumulationSteps: hp.GradientAccumulationSteps,
		MixedPrecision: hp.MixedPrecisionMode(), AdditionalParams: hp.AdditionalParams,
	})
	if err != nil {
		panic(err) // a struct of numbers and strings always marshals
	}
	return string(b)
}

type envPair struct{ name, value string }

// hyperparameterEnv names each hyperparameter as a variable: LEARNING_RATE, BATCH_SIZE, ... and
// additionalParams upper-cased with other characters turned into '_'.
func hyperparameterEnv(job *convoy.TrainingJob) []envPair {
	hp := job.Spec.Hyperparameters
	if hp == nil {
		return nil
	}
	var out []envPair
	add := func(name string, set bool, value string) {
		if set {
			out = append(out, envPair{name, value})
		}
	}
	add("LEARNING_RATE", hp.LearningRate != nil, formatFloat(hp.LearningRate))
	add("BATCH_SIZE", hp.BatchSize != nil, itoaPtr(hp.BatchSize))
	add("EPOCHS", hp.Epochs != nil, itoaPtr(hp.Epochs))
	add("OPTIMIZER", hp.Optimizer != "", hp.Optimizer)
	add("WARMUP_STEPS", hp.WarmupSteps != nil, itoaPtr(hp.WarmupSteps))
	add("GRADIENT_ACCUMULATION_STEPS", hp.GradientAccumulationSteps != nil, itoaPtr(hp.GradientAccumulationSteps))
	add("MIXED_PRECISION", hp.MixedPrecisionMode() != "", hp.MixedPrecisionMode())
	for _, k := range slices.Sorted(maps.Keys(hp.AdditionalParams)) {
		out = append(out, envPair{EnvName(k), hp.AdditionalParams[k]})
	}
	return out
}

// EnvName turns a hyperparameter name into a variable name: "weight-decay" is WEIGHT_DECAY.
func EnvName(key string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		default:
			return '_'
		}
	}, key)
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		name = "_" + name
	}
	return name
}

func formatFloat(f *float64) string {
	if f == nil {
		return ""
	}
	return strconv.FormatFloat(*f, 'g', -1, 64)
}

func itoaPtr(n *int32) string {
	if n == nil {
		return ""
	}
	return itoa(*n)
}
