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

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

func TestGPUClaimTemplate(t *testing.T) {
	h100 := `device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`
	mem80 := `device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0`
	cases := map[string]struct {
		job  *convoy.TrainingJob
		want *resourcev1.ExactDeviceRequest // nil: no template
	}{
		"extended resource": {job: utiltesting.MakeTrainingJob("llm", "team-a").GPUs(8).Obj()},
		"class only": {
			job:  utiltesting.MakeTrainingJob("llm", "team-a").GPUs(8).DRAGPUs("gpu.nvidia.com", "").Obj(),
			want: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 8},
		},
		"product and memory": {
			job: func() *convoy.TrainingJob {
				j := utiltesting.MakeTrainingJob("llm", "team-a").GPUs(4).DRAGPUs("gpu.nvidia.com", "NVIDIA H100 80GB HBM3").Obj()
				j.Spec.GPU.MinMemory = ptr.To(resource.MustParse("80Gi"))
				return j
			}(),
			want: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 4,
				Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: h100}}, {CEL: &resourcev1.CELDeviceSelector{Expression: mem80}}}},
		},
		"no GPUs": {job: utiltesting.MakeTrainingJob("llm", "team-a").GPUs(0).DRAGPUs("gpu.nvidia.com", "").Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.job.UID = "llm-uid"
			got := GPUClaimTemplate(tc.job)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("GPUClaimTemplate() = %v, want none", got)
				}
				return
			}
			want := &resourcev1.ResourceClaimTemplate{
				ObjectMeta: objectMeta(tc.job, "llm-gpu", JobLabels(tc.job)),
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
					Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: tc.want}},
				}}},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("GPUClaimTemplate() (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(owner("llm"), got.OwnerReferences); diff != "" {
				t.Errorf("owner (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDRAGPUsOnlyForWorkers(t *testing.T) {
	job := utiltesting.MakeTrainingJob("tf", "team-a").Framework(convoy.FrameworkTensorFlow).GPUs(2).DRAGPUs("gpu.nvidia.com", "").Obj()
	job.Spec.NumParameterServers = 1
	for _, pod := range Pods(job, plugin(t, convoy.FrameworkTensorFlow), opts) {
		var want []corev1.PodResourceClaim
		var wantUse []corev1.ResourceClaim
		if pod.Labels[convoy.LabelReplicaRole] == string(mlframework.RoleWorker) {
			want = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("tf-gpu")}}
			wantUse = []corev1.ResourceClaim{{Name: "gpu"}}
		}
		c := pod.Spec.Containers[0]
		if diff := cmp.Diff(want, pod.Spec.ResourceClaims); diff != "" {
			t.Errorf("%s: resourceClaims (-want,+got):\n%s", pod.Name, diff)
		}
		if diff := cmp.Diff(wantUse, c.Resources.Claims); diff != "" {
			t.Errorf("%s: container claims (-want,+got):\n%s", pod.Name, diff)
		}
		if _, ok := c.Resources.Limits[convoy.ResourceGPU]; ok {
			t.Errorf("%s asks for %s beside its DRA claim", pod.Name, convoy.ResourceGPU)
		}
	}
}

// TestGPUClaim: each worker of a job with spec.gpu claims its GPUs from a ResourceClaim of its own,
// made before the pod with the template's spec and the scheduler's finalizer, labelled with the
// pod's restart attempt; the template stays in the pods Kueue reads (TestDRAGPUsOnlyForWorkers).
func TestGPUClaim(t *testing.T) {
	cases := map[string]struct {
		job       *convoy.TrainingJob
		restarts  int32
		wantNames map[string]string // claim by pod; a pod not named gets none
	}{
		"workers, not parameter servers": {
			job:       utiltesting.MakeTrainingJob("tf", "team-a").Framework(convoy.FrameworkTensorFlow).Workers(2).GPUs(2).DRAGPUs("gpu.nvidia.com", "").Obj(),
			wantNames: map[string]string{"tf-worker-0": "tf-worker-0-gpu", "tf-worker-1": "tf-worker-1-gpu"},
		},
		"a restart attempt's pods get fresh claims": {
			job: utiltesting.MakeTrainingJob("tf", "team-a").Framework(convoy.FrameworkTensorFlow).Workers(1).GPUs(2).DRAGPUs("gpu.nvidia.com", "").Obj(), restarts: 2,
			wantNames: map[string]string{"tf-worker-0-r2": "tf-worker-0-r2-gpu"},
		},
		"extended resource": {job: utiltesting.MakeTrainingJob("tf", "team-a").Framework(convoy.FrameworkTensorFlow).Workers(1).GPUs(2).Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.job.UID = "tf-uid"
			tc.job.Spec.NumParameterServers = 1
			tc.job.Status.RestartCount = tc.restarts
			got := map[string]string{}
			for _, pod := range Pods(tc.job, plugin(t, convoy.FrameworkTensorFlow), opts) {
				claim := GPUClaim(tc.job, pod)
				if claim == nil {
					continue
				}
				got[pod.Name] = claim.Name
				want := &resourcev1.ResourceClaim{
					ObjectMeta: objectMeta(tc.job, pod.Name+"-gpu", map[string]string{convoy.LabelJobName: "tf", convoy.LabelRestartAttempt: itoa(tc.restarts)}),
					Spec:       GPUClaimTemplate(tc.job).Spec.Spec,
				}
				want.Finalizers = []string{resourcev1.Finalizer}
				if diff := cmp.Diff(want, claim); diff != "" {
					t.Errorf("%s: GPUClaim() (-want,+got):\n%s", pod.Name, diff)
				}
				if diff := cmp.Diff([]corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}, pod.Spec.ResourceClaims); diff != "" {
					t.Errorf("%s: resourceClaims (-want,+got):\n%s", pod.Name, diff)
				}
			}
			if diff := cmp.Diff(tc.wantNames, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("claims by pod (-want,+got):\n%s", diff)
			}
		})
	}
}
