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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/elastic"
)

// TestShrinksFor: a Workload of priority 1000 for 8 GPUs waits in a ClusterQueue of two GPU
// flavors, H100 then A100 (16 each, all reserved), where one elastic job of priority 100 runs in
// each (2 × 8 GPUs, minWorkers 1). Only the job in a flavor its pods can use shrinks: the first
// such flavor, as Kueue tries them; none when its GPUs fit in a usable flavor's free quota, or
// when it can use no flavor (an untolerated taint).
func TestShrinksFor(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h100 := utiltestingapi.MakeResourceFlavor("h100").NodeLabel(convoy.LabelGPUProduct, "H100").Obj()
	a100 := utiltestingapi.MakeResourceFlavor("a100").NodeLabel(convoy.LabelGPUProduct, "A100").Obj()
	a100.Spec.NodeTaints = []corev1.Taint{{Key: "convoy.dev/a100", Effect: corev1.TaintEffectNoSchedule}}
	r := &Resizer{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(h100, a100).Build()}
	cq := func(usedH100 int64) *kueue.ClusterQueue {
		cq := utiltestingapi.MakeClusterQueue("gpus").ResourceGroup(
			*utiltestingapi.MakeFlavorQuotas("h100").Resource(convoy.ResourceGPU, "16").Obj(),
			*utiltestingapi.MakeFlavorQuotas("a100").Resource(convoy.ResourceGPU, "16").Obj()).Obj()
		cq.Status.FlavorsReservation = []kueue.FlavorUsage{
			{Name: "h100", Resources: []kueue.ResourceUsage{{Name: convoy.ResourceGPU, Total: *resource.NewQuantity(usedH100, resource.DecimalSI)}}},
			{Name: "a100", Resources: []kueue.ResourceUsage{{Name: convoy.ResourceGPU, Total: resource.MustParse("16")}}},
		}
		return cq
	}
	peers := []elastic.Job{
		{Key: "team/on-h100", Min: 1, Max: 2, Current: 2, Admitted: 2, GPUsPerWorker: 8, Priority: 100},
		{Key: "team/on-a100", Min: 1, Max: 2, Current: 2, Admitted: 2, GPUsPerWorker: 8, Priority: 100},
	}
	admitted := func(f kueue.ResourceFlavorReference) runningSlice {
		return runningSlice{wl: &kueue.Workload{Status: kueue.WorkloadStatus{Admission: &kueue.Admission{
			PodSetAssignments: []kueue.PodSetAssignment{{Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{convoy.ResourceGPU: f}}}}}}}
	}
	running := map[client.ObjectKey]runningSlice{{Namespace: "team", Name: "on-h100"}: admitted("h100"), {Namespace: "team", Name: "on-a100"}: admitted("a100")}
	waiting := func(product string, tolerateA100 bool) *kueue.Workload {
		wl := utiltestingapi.MakeWorkload("w", "team").Priority(1000).Obj()
		spec := &wl.Spec.PodSets[0].Template.Spec
		if product != "" {
			spec.NodeSelector = map[string]string{convoy.LabelGPUProduct: product}
		}
		if tolerateA100 {
			spec.Tolerations = []corev1.Toleration{{Key: "convoy.dev/a100", Operator: corev1.TolerationOpExists}}
		}
		return wl
	}
	cases := map[string]struct {
		wl       *kueue.Workload
		usedH100 int64
		want     []string
		lack     int32
	}{
		"any flavor: the first's job shrinks":           {wl: waiting("", true), usedH100: 16, want: []string{"team/on-h100"}, lack: 8},
		"H100 only":                                     {wl: waiting("H100", true), usedH100: 16, want: []string{"team/on-h100"}, lack: 8},
		"A100 only: the A100 job shrinks":               {wl: waiting("A100", true), usedH100: 16, want: []string{"team/on-a100"}, lack: 8},
		"A100 only, its taint not tolerated: no flavor": {wl: waiting("A100", false), usedH100: 16, lack: 8},
		"free H100 quota: no shrink":                    {wl: waiting("", true), usedH100: 8, lack: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			decided, lack, err := r.shrinksFor(t.Context(), cq(tc.usedH100), tc.wl, 8, 0, peers, running)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range decided {
				got = append(got, d.Key)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || lack != tc.lack {
				t.Errorf("shrinks (-want,+got):\n%s\nlack %d, want %d", diff, lack, tc.lack)
			}
		})
	}
}
