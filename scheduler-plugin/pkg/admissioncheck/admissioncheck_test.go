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

package admissioncheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// TestGangPodsOfAGrowingSlice: the placement check plans a Workload's pods by rank; a slice that
// replaces a running one (an elastic gang that grows) asks for places only for the ranks it adds,
// counting both slices at their pod sets' counts where a shrink or a withdrawn grow lowered them.
func TestGangPodsOfAGrowingSlice(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	admitted := func(wl *kueue.Workload, workers int32) *kueue.Workload {
		wl.Status.Admission = &kueue.Admission{ClusterQueue: "cq", PodSetAssignments: []kueue.PodSetAssignment{{
			Name: "worker", Count: ptr.To(workers), Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{convoy.ResourceGPU: "h100"}}}}
		return wl
	}
	// Kueue's object wrappers (pkg/util/testing) register Kueue's feature gates, which clash with
	// the scheduler's in this binary.
	slice := func(name string, workers int32) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "worker", Count: workers,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer"}}}}}}}}
	}
	replacing := func(wl *kueue.Workload, ref string) *kueue.Workload {
		wl.Annotations = map[string]string{replacementFor: ref}
		return wl
	}
	running := admitted(slice("llm-a", 1), 1)
	shrunk := admitted(slice("llm-s", 1), 2)
	flavor := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h100"},
		Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "h100"}}}
	cases := map[string]struct {
		wl    *kueue.Workload
		whole bool
		want  []string
	}{
		"a first slice: every rank": {
			wl:   admitted(slice("llm-a", 2), 2),
			want: []string{"llm-a-worker-0", "llm-a-worker-1"},
		},
		"a slice that replaces a running one: the added ranks": {
			wl:   replacing(admitted(slice("llm-b", 3), 3), "ns/llm-a"),
			want: []string{"llm-b-worker-1", "llm-b-worker-2"},
		},
		"a slice that replaces one shrunk since its admission: the ranks above the shrunk size": {
			wl:   replacing(admitted(slice("llm-b", 2), 2), "ns/llm-s"),
			want: []string{"llm-b-worker-1"},
		},
		"a grow withdrawn to the running size after it reserved quota: no rank": {
			wl: replacing(admitted(slice("llm-b", 1), 2), "ns/llm-a"),
		},
		"a slice that replaces a running one, for a gang that moves whole: every rank": {
			wl:    replacing(admitted(slice("llm-b", 3), 3), "ns/llm-a"),
			whole: true,
			want:  []string{"llm-b-worker-0", "llm-b-worker-1", "llm-b-worker-2"},
		},
		"a slice whose replaced one is gone: every rank": {
			wl:   replacing(admitted(slice("llm-b", 2), 2), "ns/gone"),
			want: []string{"llm-b-worker-0", "llm-b-worker-1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(running, shrunk, flavor).Build()
			pods, err := gangPods(t.Context(), c, tc.wl, tc.whole)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pods {
				got = append(got, p.Name)
				if p.Spec.NodeSelector["gpu"] != "h100" {
					t.Errorf("pod %s nodeSelector %v, want the flavor's labels", p.Name, p.Spec.NodeSelector)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pods (-want,+got):\n%s", diff)
			}
		})
	}
}
