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

package nodeagent

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// The DaemonSet's agent, with its own RBAC and admission policies, evicts the pod holding a GPU
// that turns unhealthy, and only that pod.
func TestUnhealthyGPUEvictsItsPod(t *testing.T) {
	c := cluster(t)
	node := framework.Unique(t, "evict-x")
	ns := framework.Unique(t, "evict")
	ctx := context.Background()
	createNodes(t, c, 8, node)
	cfg := nodeBoundConfig(t, c, node)
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{gpuPod(ns, "train", node, 2, "2,3"), gpuPod(ns, "other", node, 2, "4,5")} {
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	run := startAgent(t, cfg, nvmlmock.ProfileH100x8, nodeagent.Options{NodeName: node, PollInterval: 200 * time.Millisecond, EvictOnUnhealthy: true})
	waitGPUNode(t, c, node, 20*time.Second, "both pods holding their GPUs", func(g *convoy.GPUNode) bool {
		h := holders(g)
		return len(h[ns+"/train"]) == 2 && len(h[ns+"/other"]) == 2
	})

	w, err := c.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "train").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := run.fleet.Inject(node, 3, nvmlmock.Fault{Kind: nvmlmock.FaultXID, XID: 79}); err != nil {
		t.Fatal(err)
	}

	// The API server marks the pod DisruptionTarget before deleting it (no PodDisruptionBudget).
	var disrupted *corev1.PodCondition
	deleting := false
	timeout := time.After(10 * time.Second)
	for disrupted == nil || !deleting {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of evict/train ended")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			for i, cond := range p.Status.Conditions {
				if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue {
					disrupted = &p.Status.Conditions[i]
				}
			}
			deleting = deleting || p.DeletionTimestamp != nil || ev.Type == watch.Deleted
		case <-timeout:
			t.Fatalf("evict/train not evicted 10 s after XID 79 on its GPU 3: DisruptionTarget %+v, deleting %v", disrupted, deleting)
		}
	}
	if disrupted.Reason != "EvictionByEvictionAPI" {
		t.Errorf("DisruptionTarget reason %q, want EvictionByEvictionAPI", disrupted.Reason)
	}

	e := waitEvent(t, c, node, nodeagent.ReasonPodEvicted)
	if e.Type != corev1.EventTypeWarning || e.Related == nil || e.Related.Kind != "Pod" || e.Related.Name != "train" ||
		!strings.Contains(e.Note, ns+"/train") || !strings.Contains(e.Note, "GPU 3") || !strings.Contains(e.Note, "XID 79") {
		t.Errorf("Event %s related %+v: %q; want a Warning about evict/train naming GPU 3 and XID 79", e.Type, e.Related, e.Note)
	}
	// The pod on healthy GPUs stays; GPU 3 is unhealthy and GPU 2 free once the evicted pod is gone.
	g := waitGPUNode(t, c, node, 40*time.Second, "evict/train's GPUs released", func(g *convoy.GPUNode) bool {
		return len(holders(g)[ns+"/train"]) == 0
	})
	if g.Status.GPUs[3].Health != convoy.GPUUnhealthy || g.Status.Free != 5 {
		t.Errorf("GPU 3 %s, %d free; want GPU 3 unhealthy and 5 free", g.Status.GPUs[3].Health, g.Status.Free)
	}
	other := &corev1.Pod{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other"}, other); err != nil || other.DeletionTimestamp != nil {
		t.Errorf("evict/other, on healthy GPUs: %v, deleting %v; want it left alone", err, other.DeletionTimestamp != nil)
	}
	if n := len(nodeEvents(t, c, node, nodeagent.ReasonPodEvicted)); n != 1 {
		t.Errorf("%d PodEvicted Events, want 1: one eviction per transition", n)
	}
}

// A pod of a TrainingJob's gang, whose PodDisruptionBudget refuses to evict it, is deleted instead
// when its GPU fails: the budget makes drains wait for a checkpoint, and a failed GPU cannot wait.
// A pod of no TrainingJob that a budget protects is left to the budget, its eviction retried.
func TestUnhealthyGPUDeletesTheGangPodItsBudgetProtects(t *testing.T) {
	c := cluster(t)
	node := framework.Unique(t, "evict-pdb")
	ns := framework.Unique(t, "evict-pdb")
	ctx := context.Background()
	createNodes(t, c, 8, node)
	cfg := nodeBoundConfig(t, c, node)
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	job := utiltesting.MakeTrainingJob("llm", ns).Obj()
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	gangPod := gpuPod(ns, "llm-worker-0", node, 2, "2,3")
	gangPod.Labels = map[string]string{convoy.LabelJobName: "llm"}
	gangPod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, convoy.GroupVersion.WithKind("TrainingJob"))}
	other := gpuPod(ns, "other", node, 2, "4,5")
	other.Labels = map[string]string{"app": "other"}
	one := intstr.FromInt32(1)
	for _, p := range []*corev1.Pod{gangPod, other} {
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		// Running and Ready, as its kubelet would report it: a budget protects only such pods.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			return c.Client.Status().Update(ctx, p)
		}); err != nil {
			t.Fatal(err)
		}
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: p.Labels}},
		}
		if err := c.Client.Create(ctx, pdb); err != nil {
			t.Fatal(err)
		}
	}
	run := startAgent(t, cfg, nvmlmock.ProfileH100x8, nodeagent.Options{NodeName: node, PollInterval: 200 * time.Millisecond, EvictOnUnhealthy: true})
	waitGPUNode(t, c, node, 20*time.Second, "both pods holding their GPUs", func(g *convoy.GPUNode) bool {
		h := holders(g)
		return len(h[ns+"/llm-worker-0"]) == 2 && len(h[ns+"/other"]) == 2
	})
	for _, gpu := range []int{3, 5} {
		if err := run.fleet.Inject(node, gpu, nvmlmock.Fault{Kind: nvmlmock.FaultXID, XID: 79}); err != nil {
			t.Fatal(err)
		}
	}

	util.EventuallyErr(t, 100*time.Millisecond, 20*time.Second, "the gang's pod deleted", func() (bool, error) {
		p := &corev1.Pod{}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(gangPod), p)
		return apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil, err
	})
	e := waitEvent(t, c, node, nodeagent.ReasonPodEvicted)
	if e.Related == nil || e.Related.Name != "llm-worker-0" || !strings.Contains(e.Note, "GPU 3") {
		t.Errorf("Event related %+v: %q; want one about %s/llm-worker-0 naming GPU 3", e.Related, e.Note, ns)
	}
	util.Consistently(t, 200*time.Millisecond, 3*time.Second, "the budget keeps the pod of no TrainingJob", func() (bool, string) {
		p := &corev1.Pod{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(other), p); err != nil || p.DeletionTimestamp != nil {
			return false, "other is gone or going"
		}
		return true, ""
	})
}
