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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// The DaemonSet's agent, with its own RBAC and admission policies, deletes the pod of a
// TrainingJob's gang holding a GPU that turns unhealthy, even where the gang's PodDisruptionBudget
// would refuse to evict it: the budget makes drains wait for a checkpoint, and a failed GPU cannot
// wait. A pod of no TrainingJob on a failing GPU is left to its owner, and a pod on healthy GPUs
// is left alone.
func TestUnhealthyGPUDeletesItsTrainingJobPod(t *testing.T) {
	c := cluster(t)
	node := framework.Unique(t, "evict-x")
	ns := framework.Unique(t, "evict")
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
	healthy := gpuPod(ns, "healthy", node, 2, "6,7")
	one := intstr.FromInt32(1)
	for _, p := range []*corev1.Pod{gangPod, other, healthy} {
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// Running and Ready, as its kubelet would report it: a budget protects only such pods.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(gangPod), gangPod); err != nil {
			return err
		}
		gangPod.Status.Phase = corev1.PodRunning
		gangPod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		return c.Client.Status().Update(ctx, gangPod)
	}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: gangPod.Labels}},
	}
	if err := c.Client.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	run := startAgent(t, cfg, nvmlmock.ProfileH100x8, nodeagent.Options{NodeName: node, PollInterval: 200 * time.Millisecond, EvictOnUnhealthy: true})
	waitGPUNode(t, c, node, 20*time.Second, "the pods holding their GPUs", func(g *convoy.GPUNode) bool {
		h := holders(g)
		return len(h[ns+"/llm-worker-0"]) == 2 && len(h[ns+"/other"]) == 2 && len(h[ns+"/healthy"]) == 2
	})
	for _, gpu := range []int{5, 3} {
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
	if e.Type != corev1.EventTypeWarning || e.Related == nil || e.Related.Kind != "Pod" || e.Related.Name != "llm-worker-0" ||
		!strings.Contains(e.Note, "Deleted pod "+ns+"/llm-worker-0") || !strings.Contains(e.Note, "GPU 3") || !strings.Contains(e.Note, "XID 79") {
		t.Errorf("Event %s related %+v: %q; want a Warning about %s/llm-worker-0 naming GPU 3 and XID 79", e.Type, e.Related, e.Note, ns)
	}
	// GPU 3 is unhealthy and GPU 2 free once the deleted pod is gone.
	g := waitGPUNode(t, c, node, 40*time.Second, "llm-worker-0's GPUs released", func(g *convoy.GPUNode) bool {
		return len(holders(g)[ns+"/llm-worker-0"]) == 0
	})
	if g.Status.GPUs[3].Health != convoy.GPUUnhealthy || g.Status.GPUs[5].Health != convoy.GPUUnhealthy {
		t.Errorf("GPU 3 %s, GPU 5 %s; want both unhealthy", g.Status.GPUs[3].Health, g.Status.GPUs[5].Health)
	}
	util.Consistently(t, 200*time.Millisecond, 3*time.Second, "the pods of no TrainingJob left alone", func() (bool, string) {
		for _, p := range []*corev1.Pod{other, healthy} {
			got := &corev1.Pod{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil || got.DeletionTimestamp != nil {
				return false, p.Name + " is gone or going"
			}
		}
		return true, ""
	})
	if n := len(nodeEvents(t, c, node, nodeagent.ReasonPodEvicted)); n != 1 {
		t.Errorf("%d PodEvicted Events, want 1: the gang's pod, once", n)
	}
}
