package gangcore

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner/synth"
)

// BenchmarkPlanFor measures GangPlacement's PreFilter work: the first pod of a 16×8-GPU gang plans
// the whole gang on a fleet half full of bound pods (a new plan each time), and a later pod checks
// its slot, alone and with 200 other gangs' plans open.
func BenchmarkPlanFor(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		f := synth.DefaultFleet(n)
		var nodes []*corev1.Node
		var inv []*convoy.GPUNode
		var pods []*corev1.Pod
		for i := range n {
			w := f.Node(i)
			node := fakeNode(w.Name, w.Rack, 8)
			node.Labels[convoy.LabelTopologyZone], node.Labels[convoy.LabelTopologyBlock] = w.Zone, w.Block
			nodes = append(nodes, node)
			inv = append(inv, inventory(w.Name, 8))
			if i%2 == 0 { // half the nodes hold two 4-GPU pods
				for k := range 2 {
					pods = append(pods, lone("busy", fmt.Sprintf("p-%d-%d", i, k), 4).Node(w.Name).
						Annotation(AnnotationGPUIndices, []string{"0,1,2,3", "4,5,6,7"}[k]).Obj())
				}
			}
		}
		var gang []*corev1.Pod
		for r := range 16 {
			gang = append(gang, member("ns", "job", r, 8).Obj())
		}
		// 200 other gangs of two 2-GPU pods, planned before the last case: a backlog's open plans.
		var others []*corev1.Pod
		for k := range 200 {
			for r := range 2 {
				others = append(others, member("ns", fmt.Sprintf("other-%d", k), r, 2).Obj())
			}
		}
		h := newHarness(b, nodes, append(append(pods, gang...), others...), inv...)
		ctx := context.Background()
		infos := h.nodeInfos()
		b.Run(fmt.Sprintf("nodes=%d/new-plan", n), func(b *testing.B) {
			for b.Loop() {
				h.state.mu.Lock()
				h.state.deletePlanLocked("ns/job")
				h.state.mu.Unlock()
				if _, st := h.state.PlanFor(ctx, gang[0], infos); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
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
		b.Run(fmt.Sprintf("nodes=%d/follow-plan-200-open", n), func(b *testing.B) {
			for b.Loop() {
				if _, st := h.state.PlanFor(ctx, gang[1], infos); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}
