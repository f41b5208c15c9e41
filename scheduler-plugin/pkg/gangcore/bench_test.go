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

package gangcore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner/synth"
)

// BenchmarkPlanFor measures GangPlacement's PreFilter work: the first pod of a 16×8-GPU gang plans
// the whole gang on a fleet half full of bound pods (a new plan each time); an 8×8-GPU gang
// required in one rack, without and with two parameter servers, does the same; so does a gang of pods that
// keep apart by hostname; the first plan again with 200 other gangs' plans open, whose slots
// every plan keeps off; and a later pod checks its slot, alone and with those 200 plans open.
func BenchmarkPlanFor(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		nodes, inv := benchFleet(n)
		var pods []*corev1.Pod
		for i, node := range nodes {
			if i%2 == 0 { // half the nodes hold two 4-GPU pods
				for k := range 2 {
					pods = append(pods, lone("busy", fmt.Sprintf("p-%d-%d", i, k), 4).Node(node.Name).
						Annotation(AnnotationGPUIndices, []string{"0,1,2,3", "4,5,6,7"}[k]).Obj())
				}
			}
		}
		var gang, apart []*corev1.Pod
		for r := range 16 {
			gang = append(gang, member("ns", "job", r, 8).Obj())
		}
		// Half of it, 8×8 GPUs, required in one rack (a rack's free nodes), without and with two
		// parameter servers (the plan checks their room).
		inRack := func(name string, servers int) []*corev1.Pod {
			var out []*corev1.Pod
			for r := range 8 + servers {
				w := member("ns", name, r, 8)
				if r >= 8 {
					w = member("ns", name, r, 0).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8"})
				}
				out = append(out, inOneRack(w))
			}
			return out
		}
		rack, tf := inRack("rack", 0), inRack("tf", 2)
		for r := range 16 {
			apart = append(apart, member("ns", "apart", r, 2).PodAntiAffinity(corev1.LabelHostname,
				&metav1.LabelSelector{MatchLabels: map[string]string{schedv1alpha1.PodGroupLabel: "apart"}}, st.PodAntiAffinityWithRequiredReq).Obj())
		}
		// 200 other gangs of two 2-GPU pods, planned before the last case: a backlog's open plans.
		var others []*corev1.Pod
		for k := range 200 {
			for r := range 2 {
				others = append(others, member("ns", fmt.Sprintf("other-%d", k), r, 2).Obj())
			}
		}
		h := newHarness(b, nodes, slices.Concat(pods, gang, apart, rack, tf, others), inv...)
		ctx := context.Background()
		infos := h.nodeInfos()
		newPlan := func(key string, pod *corev1.Pod) func(b *testing.B) {
			return func(b *testing.B) {
				for b.Loop() {
					h.state.mu.Lock()
					h.state.book.remove(key)
					h.state.mu.Unlock()
					if _, st := h.state.PlanFor(ctx, pod, infos); !st.IsSuccess() {
						b.Fatal(st)
					}
				}
			}
		}
		b.Run(fmt.Sprintf("nodes=%d/new-plan", n), newPlan("ns/job", gang[0]))
		b.Run(fmt.Sprintf("nodes=%d/new-plan-rack", n), newPlan("ns/rack", rack[0]))
		b.Run(fmt.Sprintf("nodes=%d/new-plan-rack-servers", n), newPlan("ns/tf", tf[0]))
		// A gang of 16 2-GPU pods that keep apart by hostname: InterPodAffinity filters every node
		// with free GPUs, and the plan caps each node at one pod.
		b.Run(fmt.Sprintf("nodes=%d/new-plan-apart", n), newPlan("ns/apart", apart[0]))
		b.Run(fmt.Sprintf("nodes=%d/follow-plan", n), func(b *testing.B) {
			for b.Loop() {
				if _, st := h.state.PlanFor(ctx, gang[1], infos); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
		for i := 0; i < len(others); i += 2 {
			if _, st := h.state.PlanFor(ctx, others[i], infos); !st.IsSuccess() {
				b.Fatal(st)
			}
		}
		b.Run(fmt.Sprintf("nodes=%d/new-plan-200-open", n), newPlan("ns/job", gang[0]))
		b.Run(fmt.Sprintf("nodes=%d/follow-plan-200-open", n), func(b *testing.B) {
			for b.Loop() {
				if _, st := h.state.PlanFor(ctx, gang[1], infos); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}

// BenchmarkPreemptFor measures GangPreemption's choice on a full fleet: every node holds two
// low-priority 4-GPU pods, each a gang of its own, and a 16×8-GPU gang preempts. With cpu=45, the
// victims' pods hold 45 CPUs each of the node's 96 and the gang's pods ask 90: every node's CPU
// bounds the gang there, so the view gives the planner each node's spare CPU and what each victim
// holds (Node.Spare, Holder.Uses); with cpu=0 only GPUs count.
func BenchmarkPreemptFor(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, cpu := range []int{0, 45} {
			nodes, inv := benchFleet(n)
			var pods []*corev1.Pod
			cpus := func(n int) map[corev1.ResourceName]string {
				return map[corev1.ResourceName]string{corev1.ResourceCPU: itoa(n)}
			}
			for i, node := range nodes {
				for k := range 2 {
					pods = append(pods, member("low", fmt.Sprintf("j-%d-%d", i, k), 0, 4).Priority(1).Req(cpus(cpu)).Node(node.Name).
						Annotation(AnnotationGPUIndices, []string{"0,1,2,3", "4,5,6,7"}[k]).Obj())
				}
			}
			var gang []*corev1.Pod
			for r := range 16 {
				gang = append(gang, member("ns", "urgent", r, 8).Priority(10).Req(cpus(2*cpu)).Obj())
			}
			h := newHarness(b, nodes, slices.Concat(pods, gang), inv...)
			ctx := context.Background()
			infos := h.nodeInfos()
			b.Run(fmt.Sprintf("nodes=%d/cpu=%d", n, cpu), func(b *testing.B) {
				for b.Loop() {
					h.state.mu.Lock()
					h.state.book.remove("ns/urgent")
					delete(h.state.preemptions.inProgress, "ns/urgent")
					h.state.mu.Unlock()
					v, st := h.state.PreemptFor(ctx, gang[0], infos, PreemptOptions{Wait: time.Minute})
					if !st.IsSuccess() {
						b.Fatal(st)
					}
					if len(v.Pods) != 32 {
						b.Fatalf("evicts %d pods, want 32: two on each of 16 nodes", len(v.Pods))
					}
				}
			})
		}
	}
}

// benchFleet is synth's default fleet of n 8-GPU nodes, each with its GPUNode of healthy GPUs.
func benchFleet(n int) ([]*corev1.Node, []*convoy.GPUNode) {
	f := synth.DefaultFleet(n)
	nodes, inv := make([]*corev1.Node, 0, n), make([]*convoy.GPUNode, 0, n)
	for i := range n {
		w := f.Node(i)
		node := fakeNode(w.Name, w.Rack, 8)
		node.Labels[convoy.LabelTopologyZone], node.Labels[convoy.LabelTopologyBlock] = w.Zone, w.Block
		nodes = append(nodes, node)
		inv = append(inv, inventory(w.Name, 8))
	}
	return nodes, inv
}

// BenchmarkFleetView measures the planner's view of a 5,000-node fleet for a new gang's plan, on a
// snapshot the scheduler's cache updates in place, as it does between cycles: the fleet 77% used
// (used GPUs per node cycling 8, 8, 6, 8, 4, 8, 7, 0) with 20 other gangs' plans open. unchanged:
// nothing changed since the last view; binds: 14 pods (a gang of the fits mix) bound or deleted
// since, on 14 nodes; classes: the same, for gangs of two classes in turn (their pods ask 1 and 2
// CPUs).
func BenchmarkFleetView(b *testing.B) {
	const n = 5000
	nodes, inv := benchFleet(n)
	used := []int{8, 8, 6, 8, 4, 8, 7, 0}
	var pods []*corev1.Pod
	for i, node := range nodes {
		for k, gpus := range splitGPUs(used[i%len(used)]) {
			pods = append(pods, lone("busy", fmt.Sprintf("p-%d-%d", i, k), gpus).Node(node.Name).Obj())
		}
	}
	var gang, other, others []*corev1.Pod
	for r := range 16 {
		gang = append(gang, member("ns", "job", r, 1).Obj())
		other = append(other, member("ns", "cpu2", r, 1).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2"}).Obj())
	}
	for k := range 20 {
		for r := range 4 {
			others = append(others, member("ns", fmt.Sprintf("other-%d", k), r, 2).Obj())
		}
	}
	h := newHarness(b, nodes, slices.Concat(pods, gang, other, others), inv...)
	ctx := context.Background()
	logger := klog.Background()
	sc, infos := h.liveSnapshot(pods)
	for i := 0; i < len(others); i += 4 {
		if _, st := h.state.PlanFor(ctx, others[i], infos()); !st.IsSuccess() {
			b.Fatal(st)
		}
	}
	view := func(list []fwk.NodeInfo, pod *corev1.Pod) {
		s := h.state
		s.mu.Lock()
		defer s.mu.Unlock()
		g := s.gangOf(pod)
		elig, err := s.eligibilityFor(ctx, pod, g, list)
		if err != nil {
			b.Fatal(err)
		}
		if s.keptView(ctx, list, viewOptions{gang: g, elig: elig}) == nil {
			b.Fatal("no kept view")
		}
	}
	b.Run("nodes=5000/unchanged", func(b *testing.B) {
		list := infos()
		for b.Loop() {
			view(list, gang[0])
		}
	})
	// 14 1-GPU pods on the empty nodes (used 0), bound in one iteration and deleted in the next.
	var batch []*corev1.Pod
	for i := 7; len(batch) < 14; i += len(used) {
		batch = append(batch, lone("binds", fmt.Sprintf("b-%d", i), 1).Node(nodes[i].Name).Obj())
	}
	bound := false
	rebind := func() {
		for _, p := range batch {
			var err error
			if bound {
				err = sc.RemovePod(logger, p)
			} else {
				err = sc.AddPod(logger, p)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		bound = !bound
	}
	b.Run("nodes=5000/binds", func(b *testing.B) {
		for b.Loop() {
			rebind()
			view(infos(), gang[0])
		}
	})
	b.Run("nodes=5000/classes", func(b *testing.B) {
		turn := 0
		for b.Loop() {
			rebind()
			view(infos(), []*corev1.Pod{gang[0], other[0]}[turn%2])
			turn++
		}
	})
}

// splitGPUs splits n used GPUs of a node into pods of 4, 2 and 1 GPUs.
func splitGPUs(n int) []int {
	var out []int
	for _, size := range []int{4, 2, 1} {
		for ; n >= size; n -= size {
			out = append(out, size)
		}
	}
	return out
}

// BenchmarkGate measures GangGate's PreEnqueue for every pod of a complete, unplanned gang of 64
// pods, once each: all but the leader wait for its plan.
func BenchmarkGate(b *testing.B) {
	var pods []*corev1.Pod
	for r := range 64 {
		pods = append(pods, member("ns", "job", r, 8).Obj())
	}
	h := newHarness(b, nil, pods)
	h.state.SetPodGroup(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"},
		Spec: schedv1alpha1.PodGroupSpec{MinMember: 64}})
	for b.Loop() {
		for _, p := range pods {
			if ok, _ := h.state.Gate(p); ok != (p == pods[0]) {
				b.Fatalf("pod %s let through: %v", p.Name, ok)
			}
		}
	}
}
