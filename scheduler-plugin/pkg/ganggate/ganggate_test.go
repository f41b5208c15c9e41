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

package ganggate

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// TestEventsToRegister: nothing that only makes room (nodes, GPUNodes, bound pods) requeues a
// held pod; only its gang's own changes do.
func TestEventsToRegister(t *testing.T) {
	events, err := (&GangGate{}).EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []fwk.EventResource
	for _, e := range events {
		got = append(got, e.Event.Resource)
		if e.Event.Resource == fwk.Node || e.Event.Resource == "gpunodes.v1alpha1.convoy.dev" {
			t.Errorf("GangGate registers %s events: every node or GPUNode change would requeue every held pod", e.Event.Resource)
		}
	}
	if len(got) != 2 {
		t.Errorf("events = %v, want a pod deleted and a PodGroup added or changed", got)
	}
}

func TestQueueingHints(t *testing.T) {
	pod := st.MakePod().Namespace("ns").Name("job-1").Label(schedv1alpha1.PodGroupLabel, "job").Obj()
	podGroup := func(ns, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": ns, "name": name}}}
	}
	cases := map[string]struct {
		hint     fwk.QueueingHintFn
		old, new any
		want     fwk.QueueingHint
	}{
		"a sibling deleted":             {hint: sibling, old: st.MakePod().Namespace("ns").Name("job-0").Label(schedv1alpha1.PodGroupLabel, "job").Obj(), want: fwk.Queue},
		"a pod of another gang deleted": {hint: sibling, old: st.MakePod().Namespace("ns").Name("x-0").Label(schedv1alpha1.PodGroupLabel, "x").Obj(), want: fwk.QueueSkip},
		"a bound GPU pod deleted": {hint: sibling, old: st.MakePod().Namespace("ns").Name("x").Node("a").
			Req(map[corev1.ResourceName]string{"nvidia.com/gpu": "1"}).Obj(), want: fwk.QueueSkip},
		"same gang name, another namespace": {hint: sibling, old: st.MakePod().Namespace("other").Name("job-0").Label(schedv1alpha1.PodGroupLabel, "job").Obj(), want: fwk.QueueSkip},
		"its PodGroup changed":              {hint: OwnPodGroup, new: podGroup("ns", "job"), want: fwk.Queue},
		"another PodGroup changed":          {hint: OwnPodGroup, new: podGroup("ns", "other"), want: fwk.QueueSkip},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.hint(klog.Background(), pod, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Errorf("hint = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
