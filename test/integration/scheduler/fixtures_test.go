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

package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// namespace creates a namespace for the test and, at its end, deletes the test's pods and
// nodes so the next test starts on an empty cluster.
func (e *env) namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))
	name = strings.NewReplacer("/", "-").Replace(name)
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + "-" + strconv.FormatInt(time.Now().UnixNano()%100000, 10)
	ctx := t.Context()
	if err := e.c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = e.c.Clientset.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
		_ = e.c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return name
}

// fleet creates the fleet's kwok GPU nodes, each with a GPUNode of healthy GPUs; the test's end
// deletes them.
func (e *env) fleet(t *testing.T, f framework.Fleet) []framework.NodeSpec {
	t.Helper()
	specs := f.Nodes()
	e.nodes(t, specs, gpuNodesFor(specs)...)
	return specs
}

// nodes creates kwok GPU nodes and, for those in gpuNodes, their GPUNode objects; the test's end
// deletes them all.
func (e *env) nodes(t *testing.T, specs []framework.NodeSpec, gpuNodes ...*convoy.GPUNode) {
	t.Helper()
	ctx := t.Context()
	t.Cleanup(func() {
		ctx := context.Background()
		for _, s := range specs {
			_ = e.c.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.Name}})
			_ = e.c.Client.Delete(ctx, &convoy.GPUNode{ObjectMeta: metav1.ObjectMeta{Name: s.Name}})
		}
	})
	for _, g := range gpuNodes {
		status := g.Status
		if err := e.c.Client.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
		g.Status = status
		if err := e.c.Client.Status().Update(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.c.CreateNodes(ctx, specs...); err != nil {
		t.Fatal(err)
	}
}

// gpuNodeWrapper builds GPUNode objects as the node agent publishes them.
type gpuNodeWrapper struct{ convoy.GPUNode }

// makeGPUNode is a node of n healthy GPUs joined by one NVSwitch: one NVLink domain.
func makeGPUNode(name string, n int) *gpuNodeWrapper {
	w := &gpuNodeWrapper{convoy.GPUNode{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	for i := range n {
		w.Status.GPUs = append(w.Status.GPUs, convoy.GPUDevice{Index: int32(i), Product: "NVIDIA H100 80GB HBM3",
			Health: convoy.GPUHealthy, NVLinkDomain: name + "/nvswitch"})
	}
	return w.Islands(seq(0, n))
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// Islands links each group's GPUs by NVLink (one domain per group) and the groups by SYS.
func (w *gpuNodeWrapper) Islands(groups ...[]int) *gpuNodeWrapper {
	island := map[int]int{}
	for k, g := range groups {
		for _, i := range g {
			island[i] = k
		}
	}
	w.Status.Links = nil
	for a := range w.Status.GPUs {
		w.Status.GPUs[a].NVLinkDomain = fmt.Sprintf("%s/nvlink-%d", w.Name, island[a])
		for b := a + 1; b < len(w.Status.GPUs); b++ {
			l := convoy.GPULink{A: int32(a), B: int32(b), Type: convoy.LinkSYS}
			if island[a] == island[b] {
				l.Type, l.NVLinks = convoy.LinkNVLink, 18
			}
			w.Status.Links = append(w.Status.Links, l)
		}
	}
	return w
}

// Unhealthy marks GPUs unhealthy.
func (w *gpuNodeWrapper) Unhealthy(indices ...int) *gpuNodeWrapper {
	for _, i := range indices {
		w.Status.GPUs[i].Health = convoy.GPUUnhealthy
		w.Status.GPUs[i].HealthReason = "XID 79: GPU has fallen off the bus"
	}
	return w
}

func (w *gpuNodeWrapper) Obj() *convoy.GPUNode {
	w.Status.Summarize()
	return w.DeepCopy()
}

// gpuNodesFor is a healthy one-domain GPUNode for every spec.
func gpuNodesFor(specs []framework.NodeSpec) []*convoy.GPUNode {
	var out []*convoy.GPUNode
	for _, s := range specs {
		out = append(out, makeGPUNode(s.Name, s.GPUs).Obj())
	}
	return out
}

// gangWrapper builds a gang as the operator creates it: a PodGroup with minMember = all pods,
// and worker pods labelled and annotated per Convoy's contract.
type gangWrapper struct {
	pg   *schedv1alpha1.PodGroup
	pods []*corev1.Pod
}

func makeGang(ns, name string, workers, gpus int) *gangWrapper {
	w := &gangWrapper{pg: &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: int32(workers)},
	}}
	for r := range workers {
		p := makePod(ns, fmt.Sprintf("%s-worker-%d", name, r), gpus)
		p.Labels = map[string]string{
			schedv1alpha1.PodGroupLabel: name,
			convoy.LabelJobName:         name,
			convoy.LabelReplicaRole:     "worker",
			convoy.LabelReplicaRank:     strconv.Itoa(r),
		}
		w.pods = append(w.pods, p)
	}
	return w
}

func makePod(ns, name string, gpus int) *corev1.Pod {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("128Mi"),
		framework.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			Containers: []corev1.Container{{Name: "worker", Image: "trainer:test",
				Resources: corev1.ResourceRequirements{Requests: res, Limits: corev1.ResourceList{framework.ResourceGPU: res[framework.ResourceGPU]}}}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// Topology sets the convoy.dev/topology-level and -mode annotations on the PodGroup and pods.
func (w *gangWrapper) Topology(level convoy.TopologyLevel, mode convoy.TopologyMode) *gangWrapper {
	a := map[string]string{convoy.AnnotationTopologyLevel: string(level), convoy.AnnotationTopologyMode: string(mode)}
	w.pg.Annotations = a
	for _, p := range w.pods {
		p.Annotations = a
	}
	return w
}

// Launcher makes the rank-0 pod a launcher of gpus GPUs beside the workers.
func (w *gangWrapper) Launcher(gpus int) *gangWrapper {
	p := w.pods[0]
	p.Labels[convoy.LabelReplicaRole] = "launcher"
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	p.Spec.Containers[0].Resources.Requests[framework.ResourceGPU] = q
	p.Spec.Containers[0].Resources.Limits[framework.ResourceGPU] = q
	return w
}

// CPU sets the CPUs each pod asks.
func (w *gangWrapper) CPU(q string) *gangWrapper {
	for _, p := range w.pods {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(q)
	}
	return w
}

// MasterCPU sets the CPUs the rank-0 pod asks, a master that asks more or less than its workers.
func (w *gangWrapper) MasterCPU(q string) *gangWrapper {
	w.pods[0].Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(q)
	return w
}

// Priority sets the pods' PriorityClass.
func (w *gangWrapper) Priority(class string) *gangWrapper {
	for _, p := range w.pods {
		p.Spec.PriorityClassName = class
	}
	return w
}

// MinMember sets the PodGroup's minMember below its pods: an elastic gang.
func (w *gangWrapper) MinMember(n int32) *gangWrapper {
	w.pg.Spec.MinMember = n
	return w
}

// create creates the PodGroup, then the pods.
func (w *gangWrapper) create(t *testing.T, c client.Client) *gangWrapper {
	t.Helper()
	if err := c.Create(t.Context(), w.pg); err != nil {
		t.Fatal(err)
	}
	for _, p := range w.pods {
		if err := c.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// names returns the gang's pod names.
func (w *gangWrapper) names() []string {
	var out []string
	for _, p := range w.pods {
		out = append(out, p.Name)
	}
	return out
}

// wantBoundOn waits for the one pod of g to bind and reports an error naming what when it is
// not on node.
func wantBoundOn(t *testing.T, c client.Client, g *gangWrapper, node, what string) {
	t.Helper()
	if got := waitBound(t, c, g.pg.Namespace, g.names(), bindTimeout)[0].Spec.NodeName; got != node {
		t.Errorf("%s is on %s, want %s", what, got, node)
	}
}

// get returns the current state of the named pods (nil for a pod that is gone).
func get(t *testing.T, c client.Client, ns string, names []string) []*corev1.Pod {
	t.Helper()
	out := make([]*corev1.Pod, len(names))
	for i, n := range names {
		var p corev1.Pod
		err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: n}, &p)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		default:
			out[i] = &p
		}
	}
	return out
}

// waitUnschedulable waits until every named pod's PodScheduled message contains want, and fails
// the test for any pod bound.
func waitUnschedulable(t *testing.T, c client.Client, ns string, names []string, want string) {
	t.Helper()
	var pods []*corev1.Pod
	util.Eventually(t, 200*time.Millisecond, 30*time.Second, "every pod of the gang to show why it is unschedulable", func() (bool, string) {
		pods = get(t, c, ns, names)
		return all(pods, func(p *corev1.Pod) bool { return strings.Contains(unschedulableMessage(p), want) }), describe(pods)
	})
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s is bound to %s", p.Name, p.Spec.NodeName)
		}
	}
}

// waitBound waits until every named pod is bound and returns them.
func waitBound(t *testing.T, c client.Client, ns string, names []string, timeout time.Duration) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	util.Eventually(t, 200*time.Millisecond, timeout, fmt.Sprintf("pods %v to bind", names), func() (bool, string) {
		pods = get(t, c, ns, names)
		return all(pods, func(p *corev1.Pod) bool { return p != nil && p.Spec.NodeName != "" }), describe(pods)
	})
	return pods
}

func all(pods []*corev1.Pod, f func(*corev1.Pod) bool) bool {
	return !slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return !f(p) })
}

// unschedulableMessage is the PodScheduled=False message the scheduler left on the pod.
func unschedulableMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

func describe(pods []*corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		if p == nil {
			parts = append(parts, "<deleted>")
			continue
		}
		s := p.Name + "@" + p.Spec.NodeName
		if m := unschedulableMessage(p); m != "" {
			s += " (" + m + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
