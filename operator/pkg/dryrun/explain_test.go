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
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestExplainNamesTheTrainingJobField maps the API server's causes, as it words them, for the
// children Children builds, to the message kubectl apply prints.
func TestExplainNamesTheTrainingJobField(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(2).Obj()
	job.Spec.Env = []corev1.EnvVar{{Name: "HF_HOME", Value: "/cache"}, {Name: "A=B", Value: "1"}}
	job.Spec.Hyperparameters = &convoy.Hyperparameters{AdditionalParams: map[string]string{"weight-decay": "0.1"}}
	job.Spec.Monitoring = &convoy.MonitoringSpec{Enabled: true, MetricsPort: 9090}
	job.Spec.GPU = &convoy.GPUSpec{DeviceClassName: "gpu.nvidia.com"}
	children, err := Children(job, builder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]client.Object{}
	for _, c := range children {
		byName[c.GetName()] = c
	}
	pod := byName["llm-worker-0"].(*corev1.Pod)
	envIndex := func(name string) int {
		for i, e := range pod.Spec.Containers[0].Env {
			if e.Name == name {
				return i
			}
		}
		t.Fatalf("pod has no variable %s", name)
		return -1
	}
	for _, tc := range []struct {
		child string
		cause metav1.StatusCause
		want  string
	}{{
		child: "llm-worker-0",
		cause: metav1.StatusCause{Type: "FieldValueInvalid", Field: "spec.containers[0].env[" + itoa(envIndex("A=B")) + "].name", Message: `Invalid value: "A=B": must not contain '='`},
		want:  `spec.env[1].name: Invalid value: "A=B": must not contain '=' (in Pod llm-worker-0 spec.containers[0].env[` + itoa(envIndex("A=B")) + `].name): rename the variable or fix its valueFrom`,
	}, {
		child: "llm-worker-0",
		cause: metav1.StatusCause{Type: "FieldValueInvalid", Field: "spec.containers[0].env[" + itoa(envIndex("WEIGHT_DECAY")) + "].valueFrom.configMapKeyRef.key", Message: `Invalid value: "x": bad`},
		want:  `spec.hyperparameters.additionalParams[weight-decay]: Invalid value: "x": bad (in Pod llm-worker-0 spec.containers[0].env[` + itoa(envIndex("WEIGHT_DECAY")) + `].valueFrom.configMapKeyRef.key): rename the variable or fix its valueFrom`,
	}, {
		child: "llm-worker-0",
		cause: metav1.StatusCause{Type: "FieldValueInvalid", Field: "spec.containers[0].env[" + itoa(envIndex("RANK")) + "].value", Message: `Invalid value: "x": bad`},
		want:  `spec: Invalid value: "x": bad (in Pod llm-worker-0 spec.containers[0].env[` + itoa(envIndex("RANK")) + `].value): rename the variable or fix its valueFrom`,
	}, {
		child: "llm-worker-0",
		cause: metav1.StatusCause{Type: "FieldValueNotSupported", Field: "spec.tolerations[0].effect", Message: `Unsupported value: "NoSchedul": supported values: "NoExecute", "NoSchedule", "PreferNoSchedule"`},
		want:  `spec.scheduling.tolerations[0].effect: Unsupported value: "NoSchedul": supported values: "NoExecute", "NoSchedule", "PreferNoSchedule" (in Pod llm-worker-0 spec.tolerations[0].effect)`,
	}, {
		child: "llm-metrics",
		cause: metav1.StatusCause{Type: "FieldValueInvalid", Field: "spec.ports[0].port", Message: `Invalid value: 0: must be between 1 and 65535, inclusive`},
		want:  `spec.monitoring.metricsPort: Invalid value: 0: must be between 1 and 65535, inclusive (in Service llm-metrics spec.ports[0].port): pick a port from 1 to 65535`,
	}, {
		child: "llm-config",
		cause: metav1.StatusCause{Type: "FieldValueInvalid", Field: "data[WEIGHT_DECAY]", Message: `Invalid value: "WEIGHT_DECAY": too long`},
		want:  `spec.hyperparameters.additionalParams[weight-decay]: Invalid value: "WEIGHT_DECAY": too long (in ConfigMap llm-config data[WEIGHT_DECAY]): use shorter names of letters, digits, '-', '_' and '.'`,
	}, {
		child: "llm-gpu",
		cause: metav1.StatusCause{Type: "FieldValueInvalid", Field: "spec.spec.devices.requests[0].exactly.deviceClassName", Message: `Invalid value: "x": bad`},
		want:  `spec.gpu.deviceClassName: Invalid value: "x": bad (in ResourceClaimTemplate llm-gpu spec.spec.devices.requests[0].exactly.deviceClassName): name a DeviceClass such as gpu.nvidia.com`,
	}, {
		child: "llm",
		cause: metav1.StatusCause{Type: "FieldValueRequired", Field: "spec.minResources", Message: `Required value`},
		want:  `spec.resources: Required value: (in PodGroup llm spec.minResources)`,
	}} {
		child := byName[tc.child]
		if child == nil {
			t.Fatalf("no child %s among %v", tc.child, children)
		}
		if tc.child == "llm" {
			for _, c := range children {
				if kindOf(c) == "PodGroup" {
					child = c
				}
			}
		}
		if diff := cmp.Diff(tc.want, explain(job, child, tc.cause).Error()); diff != "" {
			t.Errorf("%s %s (-want,+got):\n%s", tc.child, tc.cause.Field, diff)
		}
	}
}

// TestChildrenAreOnePodOfEachEndOfEachRole: pods of a role differ in their rank only, so the
// first and the last stand for all (the last has the longest name), with their DRA GPU claims.
func TestChildrenAreOnePodOfEachEndOfEachRole(t *testing.T) {
	cases := map[string]struct {
		job  *convoy.TrainingJob
		want []string
	}{
		"extended resource": {
			job:  utiltesting.MakeTrainingJob("tf", "ns").Workers(16).Obj(),
			want: []string{"Pod tf-worker-0", "Pod tf-worker-15", "Pod tf-ps-0", "Pod tf-ps-2", "PodGroup tf", "Service tf", "ConfigMap tf-config"},
		},
		"DRA GPUs": {
			job: utiltesting.MakeTrainingJob("tf", "ns").Workers(16).DRAGPUs("gpu.nvidia.com", "").Obj(),
			want: []string{"Pod tf-worker-0", "Pod tf-worker-15", "Pod tf-ps-0", "Pod tf-ps-2", "ResourceClaim tf-worker-0-gpu", "ResourceClaim tf-worker-15-gpu",
				"PodGroup tf", "Service tf", "ConfigMap tf-config", "ResourceClaimTemplate tf-gpu"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.job.Spec.Framework = convoy.FrameworkTensorFlow
			tc.job.Spec.NumParameterServers = 3
			children, err := Children(tc.job, builder.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range children {
				got = append(got, kindOf(c)+" "+c.GetName())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("children (-want,+got):\n%s", diff)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
