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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestMixedPrecisionReachesPodsAsBefore: mixedPrecision true or false, with or without precision,
// gives the pods the MIXED_PRECISION variable and hyperparameters.json that the string it
// replaces gave ("bf16", "no", ...), and a job stored with that string reads as the new spec.
func TestMixedPrecisionReachesPodsAsBefore(t *testing.T) {
	cases := map[string]struct {
		spec, legacy string
		// want is MIXED_PRECISION, and mixedPrecision in hyperparameters.json; empty for neither.
		want string
	}{
		"on, default precision": {spec: `{"mixedPrecision": true}`, legacy: `{"mixedPrecision": "bf16"}`, want: "bf16"},
		"on, bf16":              {spec: `{"mixedPrecision": true, "precision": "bf16"}`, legacy: `{"mixedPrecision": "bf16"}`, want: "bf16"},
		"on, fp16":              {spec: `{"mixedPrecision": true, "precision": "fp16"}`, legacy: `{"mixedPrecision": "fp16"}`, want: "fp16"},
		"precision alone, fp8":  {spec: `{"precision": "fp8"}`, legacy: `{"mixedPrecision": "fp8"}`, want: "fp8"},
		"off":                   {spec: `{"mixedPrecision": false}`, legacy: `{"mixedPrecision": "no"}`, want: "no"},
		"unset":                 {spec: `{"epochs": 2}`, legacy: `{"epochs": 2}`},
	}
	configMap := func(t *testing.T, hyperparameters string) *corev1.ConfigMap {
		t.Helper()
		job := utiltesting.MakeTrainingJob("llm", "team-a").Obj()
		if err := json.Unmarshal([]byte(hyperparameters), &job.Spec.Hyperparameters); err != nil {
			t.Fatal(err)
		}
		return ConfigMap(job, plugin(t, convoy.FrameworkPyTorch), opts)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, legacy := configMap(t, tc.spec), configMap(t, tc.legacy)
			if diff := cmp.Diff(legacy.Data, got.Data); diff != "" {
				t.Errorf("ConfigMap of %s against that of %s (-legacy,+got):\n%s", tc.spec, tc.legacy, diff)
			}
			var file struct {
				MixedPrecision *string `json:"mixedPrecision"`
			}
			if err := json.Unmarshal([]byte(got.Data[HyperparametersFile]), &file); err != nil {
				t.Fatal(err)
			}
			v, set := got.Data["MIXED_PRECISION"]
			if tc.want == "" {
				if set || file.MixedPrecision != nil {
					t.Errorf("MIXED_PRECISION = %q, hyperparameters.json %s; want neither", v, got.Data[HyperparametersFile])
				}
				return
			}
			if v != tc.want || file.MixedPrecision == nil || *file.MixedPrecision != tc.want {
				t.Errorf("MIXED_PRECISION = %q, hyperparameters.json %s; want %q in both", v, got.Data[HyperparametersFile], tc.want)
			}
			pod := Pod(utiltesting.MakeTrainingJob("llm", "team-a").Hyperparameters(*mustHyperparameters(t, tc.spec)).Obj(),
				mlframework.Replica{Role: mlframework.RoleWorker}, plugin(t, convoy.FrameworkPyTorch), opts)
			if !hasEnvFrom(pod, "MIXED_PRECISION", cmRef("MIXED_PRECISION")) {
				t.Errorf("the pod does not read MIXED_PRECISION from the ConfigMap: %v", pod.Spec.Containers[0].Env)
			}
		})
	}
}

func mustHyperparameters(t *testing.T, s string) *convoy.Hyperparameters {
	t.Helper()
	hp := &convoy.Hyperparameters{}
	if err := json.Unmarshal([]byte(s), hp); err != nil {
		t.Fatal(err)
	}
	return hp
}

func hasEnvFrom(pod *corev1.Pod, name string, from *corev1.EnvVarSource) bool {
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == name {
			return cmp.Equal(v.ValueFrom, from)
		}
	}
	return false
}
