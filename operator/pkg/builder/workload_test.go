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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestWorkloadAPI checks a gang's scheduling.k8s.io/v1beta1 objects, as kubectl shows them, and
// that its pods name the PodGroup only with Options.WorkloadAPI.
func TestWorkloadAPI(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "team-a").Workers(4).GPUs(8).Obj()
	const meta = `
metadata:
  name: llm
  namespace: team-a
  labels: {convoy.dev/job-name: llm}
  ownerReferences:
  - {apiVersion: convoy.dev/v1alpha1, kind: TrainingJob, name: llm, uid: llm-uid, controller: true, blockOwnerDeletion: true}
`
	cases := map[string]struct {
		got  *unstructured.Unstructured
		want string
	}{
		"Workload": {got: Workload(job, 4), want: `
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload` + meta + `
spec:
  controllerRef: {apiGroup: convoy.dev, kind: TrainingJob, name: llm}
  podGroupTemplates:
  - name: gang
    schedulingPolicy: {gang: {minCount: 4}}
`},
		"PodGroup": {got: UpstreamPodGroup(job, 4), want: `
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup` + meta + `
spec:
  workloadRef: {workloadName: llm, templateName: gang}
  schedulingPolicy: {gang: {minCount: 4}}
`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := &unstructured.Unstructured{}
			j, err := yaml.YAMLToJSON([]byte(tc.want))
			if err == nil {
				err = want.UnmarshalJSON(j)
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Object, tc.got.Object); diff != "" {
				t.Errorf("%s (-want,+got):\n%s", name, diff)
			}
		})
	}

	p := plugin(t, job.Spec.Framework)
	for _, on := range []bool{false, true} {
		o := opts
		o.WorkloadAPI = on
		for _, pod := range Pods(job, p, o) {
			if got := pod.Spec.SchedulingGroup != nil && *pod.Spec.SchedulingGroup.PodGroupName == "llm"; got != on {
				t.Errorf("WorkloadAPI %v: pod %s's spec.schedulingGroup = %+v", on, pod.Name, pod.Spec.SchedulingGroup)
			}
		}
	}
}
