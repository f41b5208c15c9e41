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

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// servesWorkloadAPI reports whether the cluster serves Kubernetes' own gang API (a 1.37 control
// plane: stack.Main turns it on there).
func servesWorkloadAPI(t *testing.T) bool {
	t.Helper()
	served, err := operator.ServesWorkloadAPI(framework.Shared(t).RESTConfig)
	must(t, err)
	return served
}

// upstream returns the scheduling.k8s.io object of gvk and name in the test's namespace, nil when
// there is none.
func (e *env) upstream(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	must(e.t, err)
	return u
}

// TestTrainingJobGetsUpstreamWorkloadAndPodGroup: where the cluster serves scheduling.k8s.io/v1beta1,
// a TrainingJob's gang has a Workload and a PodGroup of its own besides scheduler-plugins', which its
// pods name, of the gang's minimum; they go with the job. Where it does not (K8S=1.36), its pods
// name none, and the job runs the same.
func TestTrainingJobGetsUpstreamWorkloadAndPodGroup(t *testing.T) {
	e := setup(t)
	e.queue(64)
	e.create(e.job("gang", 3, 8, "normal"))
	e.waitState("gang", convoy.StateRunning)
	pods := e.requireWholeGang("gang", 3)
	served := servesWorkloadAPI(t)
	t.Logf("scheduling.k8s.io/v1beta1 Workloads and PodGroups served: %v", served)
	for _, p := range pods {
		got := ptr.Deref(ptr.Deref(p.Spec.SchedulingGroup, corev1.PodSchedulingGroup{}).PodGroupName, "")
		if want := map[bool]string{true: "gang"}[served]; got != want {
			t.Errorf("pod %s's spec.schedulingGroup.podGroupName = %q, want %q", p.Name, got, want)
		}
	}
	if !served {
		return
	}
	job := e.get("gang")
	for _, gvk := range []schema.GroupVersionKind{builder.WorkloadGVK, builder.PodGroupGVK} {
		u := e.upstream(gvk, "gang")
		if u == nil {
			t.Fatalf("no %s gang", gvk.Kind)
		}
		if !metav1.IsControlledBy(u, job) {
			t.Errorf("%s gang is owned by %+v, want TrainingJob gang", gvk.Kind, u.GetOwnerReferences())
		}
		policy := []string{"spec", "schedulingPolicy", "gang", "minCount"}
		if gvk == builder.WorkloadGVK {
			templates, _, _ := unstructured.NestedSlice(u.Object, "spec", "podGroupTemplates")
			if len(templates) != 1 {
				t.Fatalf("Workload gang has templates %v, want one", templates)
			}
			u = &unstructured.Unstructured{Object: map[string]any{"spec": templates[0]}}
		}
		if min, _, _ := unstructured.NestedInt64(u.Object, policy...); min != 3 {
			t.Errorf("%s gang's gang.minCount = %d, want 3", gvk.Kind, min)
		}
	}

	must(t, e.k.Delete(t.Context(), job))
	util.Eventually(t, 200*time.Millisecond, timeout, "the job's Workload and PodGroup to go with it", func() (bool, string) {
		w, pg := e.upstream(builder.WorkloadGVK, "gang"), e.upstream(builder.PodGroupGVK, "gang")
		return w == nil && pg == nil, fmt.Sprintf("Workload left: %v, PodGroup left: %v", w != nil, pg != nil)
	})
}

// TestUpstreamGangPlacedWholeOrNotAtAll: pods that name a scheduling.k8s.io PodGroup another tool
// made, and convoy-scheduler, are its gang: they wait until minCount of them exist, and are placed
// all together, or, when they cannot all fit, none of them.
func TestUpstreamGangPlacedWholeOrNotAtAll(t *testing.T) {
	e := setup(t)
	if !servesWorkloadAPI(t) {
		t.Skip("the cluster does not serve scheduling.k8s.io/v1beta1 PodGroups (K8S=1.36)")
	}
	// A queue of no quota: these pods skip Kueue, as the upstream API's tools' do; its cleanup
	// waits until they are gone.
	e.queue(0)
	ctx := t.Context()
	nodes := &corev1.NodeList{}
	must(t, e.k.List(ctx, nodes, client.MatchingLabels{framework.LabelGPUProduct: product}))
	rack := nodes.Items[0].Labels[framework.LabelRack]
	// gang creates the Workload and PodGroup name of minCount pods, as a tool of the upstream API
	// would, and its first n pods in rack rack (4 nodes of 8 GPUs) of 8 GPUs each.
	gang := func(name string, minCount, n int) []string {
		for _, obj := range []*unstructured.Unstructured{builder.Workload(e.jobNamed(name), int32(minCount)), builder.UpstreamPodGroup(e.jobNamed(name), int32(minCount))} {
			obj.SetOwnerReferences(nil)
			must(t, e.k.Create(ctx, obj))
		}
		var names []string
		for i := range n {
			names = append(names, e.upstreamPod(name, i, rack))
		}
		return names
	}

	short := gang("short", 3, 2)
	e.waitPods(short, "to wait for their gang", func(p *corev1.Pod) bool {
		return strings.Contains(unschedulable(p), "waiting for 1 more pod(s) of gang "+e.ns+"/short (minMember 3)")
	})
	e.upstreamPod("short", 2, rack)
	e.waitPods(append(short, "short-2"), "to be bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })

	// 5 pods of 8 GPUs in a rack whose 4 nodes have 1 left for them after short's 3.
	big := gang("big", 5, 5)
	e.waitPods(big, "to be found not to fit", func(p *corev1.Pod) bool {
		return strings.Contains(unschedulable(p), e.ns+"/big needs 5 pod(s) × 8 GPU(s)")
	})
	for _, n := range big {
		p := &corev1.Pod{}
		must(t, e.k.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: n}, p))
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of gang big, which does not fit whole, is bound to %s", n, p.Spec.NodeName)
		}
	}
}

// jobNamed is a TrainingJob of name in the test's namespace, for builders that name its children.
func (e *env) jobNamed(name string) *convoy.TrainingJob {
	return &convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
}

// upstreamPod creates pod <gang>-<i> of 8 GPUs in rack, which names scheduling.k8s.io PodGroup
// gang and convoy-scheduler, and returns its name.
func (e *env) upstreamPod(gang string, i int, rack string) string {
	e.t.Helper()
	p := restrictedPod(e.ns, fmt.Sprintf("%s-%d", gang, i), nil)
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(gang)}
	p.Spec.NodeSelector = map[string]string{framework.LabelRack: rack}
	p.Spec.Containers[0].Resources.Requests = p.Spec.Containers[0].Resources.Limits
	must(e.t, e.k.Create(e.t.Context(), p))
	return p.Name
}

// waitPods waits until cond holds for every named pod of the test's namespace.
func (e *env) waitPods(names []string, what string, cond func(*corev1.Pod) bool) {
	e.t.Helper()
	util.Eventually(e.t, 200*time.Millisecond, timeout, fmt.Sprintf("pods %v %s", names, what), func() (bool, string) {
		var states []string
		ok := true
		for _, n := range names {
			p := &corev1.Pod{}
			if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: n}, p); err != nil {
				return false, err.Error()
			}
			ok = ok && cond(p)
			states = append(states, fmt.Sprintf("%s on %q: %s", n, p.Spec.NodeName, unschedulable(p)))
		}
		return ok, strings.Join(states, "; ")
	})
}

// unschedulable is the PodScheduled=False message the scheduler left on the pod.
func unschedulable(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}
