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
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// TestKeptViewMatchesFreshView checks the fleet view kept between plans against a view made anew
// after each of 400 random changes to a 48-node fleet on a snapshot the scheduler's cache updates
// in place: pods bound and deleted (with and without their GPU indices), GPUNodes changed, nodes
// tainted, gangs of five classes planned, their pods reserved, bound and unreserved, plans dropped,
// nodes avoided. Every node of the kept view must be the fresh view's, for two gangs after each change, mostly
// of one class.
func TestKeptViewMatchesFreshView(t *testing.T) {
	nodes, inv := benchFleet(48)
	cpu := func(n string) map[corev1.ResourceName]string {
		return map[corev1.ResourceName]string{corev1.ResourceCPU: n}
	}
	var gangs [][]*corev1.Pod
	for _, g := range []struct {
		name       string
		pods, gpus int
		edit       func(w int, p *corev1.Pod)
	}{
		{"a", 4, 2, nil},
		{"b", 3, 1, nil},
		{"c", 2, 4, func(_ int, p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "t", Operator: corev1.TolerationOpExists}}
		}},
		{"d", 2, 1, func(_ int, p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("40")
		}},
		{"e", 2, 2, func(_ int, p *corev1.Pod) { p.Spec.Priority = ptr.To(int32(5)) }},
	} {
		var pods []*corev1.Pod
		for r := range g.pods {
			p := member("ns", g.name, r, g.gpus).Req(cpu("1")).Obj()
			if g.edit != nil {
				g.edit(r, p)
			}
			pods = append(pods, p)
		}
		gangs = append(gangs, pods)
	}
	h := newHarness(t, nodes, slices.Concat(gangs...), inv[:40]...)
	ctx := context.Background()
	logger := klog.Background()
	sc, infos := h.liveSnapshot(nil)
	s := h.state
	rng := rand.New(rand.NewPCG(1, 2))
	var bound, assumed []*corev1.Pod
	used := map[string]int{}
	check := func(step int, what string) {
		t.Helper()
		list := infos()
		// Mostly gangs of the default class, which share the kept view from one change to the next.
		pick := []int{0, 1, 0, 1, 0, 1, 2, 3, 4}
		for _, k := range []int{pick[rng.IntN(len(pick))], pick[rng.IntN(len(pick))]} {
			pods := gangs[k]
			pod := pods[rng.IntN(len(pods))]
			s.mu.Lock()
			g := s.gangOf(pod)
			if len(g.pending) == 0 {
				s.mu.Unlock()
				continue
			}
			elig, err := s.eligibilityFor(ctx, pod, g, list)
			if err != nil {
				t.Fatal(err)
			}
			kept := s.keptView(ctx, list, viewOptions{gang: g, elig: elig})
			if kept == nil {
				t.Fatalf("step %d (%s): no kept view", step, what)
			}
			got := slices.Clone(kept.Nodes)
			fresh, _ := s.view(ctx, list, viewOptions{gang: g, elig: elig})
			s.mu.Unlock()
			if diff := cmp.Diff(nodeFacts(fresh.Nodes), nodeFacts(got), samePointer); diff != "" {
				t.Fatalf("step %d (%s), gang %s: the kept view differs from a fresh one (-fresh,+kept):\n%s", step, what, g.key, diff)
			}
		}
	}
	for step := range 400 {
		var what string
		switch op := rng.IntN(9); op {
		case 0, 1: // a lone pod bound on a node with room, with or without its GPU indices
			i := rng.IntN(len(nodes))
			n := 1 + rng.IntN(2)
			if used[nodes[i].Name]+n > 8 {
				continue
			}
			w := lone("busy", fmt.Sprintf("p-%d", step), n).Node(nodes[i].Name)
			if op == 0 {
				u := used[nodes[i].Name]
				w = w.Annotation(AnnotationGPUIndices, FormatGPUIndices(planner.FirstGPUs(u+n)&^planner.FirstGPUs(u)))
			}
			p := w.Obj()
			if err := sc.AddPod(logger, p); err != nil {
				t.Fatal(err)
			}
			used[nodes[i].Name] += n
			bound = append(bound, p)
			what = "bind " + p.Name
		case 2: // a bound pod deleted
			if len(bound) == 0 {
				continue
			}
			k := rng.IntN(len(bound))
			p := bound[k]
			if err := sc.RemovePod(logger, p); err != nil {
				t.Fatal(err)
			}
			bound = slices.Delete(bound, k, k+1)
			what = "delete " + p.Name
		case 3: // a GPUNode reports a GPU unhealthy, or healthy again
			g := inventory(nodes[rng.IntN(40)].Name, 8)
			if rng.IntN(2) == 0 {
				g.Status.GPUs[7].Health = convoy.GPUUnhealthy
			}
			s.SetGPUNode(g)
			what = "gpunode " + g.Name
		case 4: // a node tainted, or untainted
			old := nodes[rng.IntN(len(nodes))]
			n := old.DeepCopy()
			n.Spec.Taints = nil
			if rng.IntN(2) == 0 {
				n.Spec.Taints = []corev1.Taint{{Key: "t", Effect: corev1.TaintEffectNoSchedule}}
			}
			sc.UpdateNode(logger, old, n)
			nodes[slices.Index(nodes, old)] = n
			what = "taint " + n.Name
		case 5: // a gang planned
			pods := gangs[rng.IntN(len(gangs))]
			s.PlanFor(ctx, pods[0], infos())
			what = "plan " + GangKey(pods[0])
		case 6: // a planned pod reserved and assumed on its slot's node, or bound
			pods := gangs[rng.IntN(len(gangs))]
			p := pods[rng.IntN(len(pods))]
			s.mu.Lock()
			pl := s.book.plans[GangKey(p)]
			var sl *slot
			if pl != nil {
				sl = pl.slots[p.UID]
			}
			s.mu.Unlock()
			if sl == nil || sl.phase == slotBound {
				continue
			}
			if sl.phase == slotReserved {
				s.Bound(p)
				what = "bound " + p.Name
				break
			}
			s.Reserve(p, sl.Node)
			a := p.DeepCopy()
			a.Spec.NodeName = sl.Node
			if err := sc.AssumePod(logger, a); err != nil {
				t.Fatal(err)
			}
			assumed = append(assumed, a)
			what = "reserve " + p.Name
		case 7: // an assumed pod unreserved: its gang's plan is dropped
			if len(assumed) == 0 {
				continue
			}
			k := rng.IntN(len(assumed))
			a := assumed[k]
			assumed = slices.Delete(assumed, k, k+1)
			if err := sc.ForgetPod(logger, a); err != nil {
				continue
			}
			s.Unreserve(a)
			what = "unreserve " + a.Name
		case 8: // a node avoided by a gang, or a plan dropped
			pods := gangs[rng.IntN(len(gangs))]
			key := GangKey(pods[0])
			s.mu.Lock()
			if rng.IntN(2) == 0 {
				node := nodes[rng.IntN(len(nodes))].Name
				s.avoid.add(key, node, avoidance{plugin: "X", message: "no", at: s.now(), ttl: time.Hour})
				what = "avoid " + node + " for " + key
			} else if s.book.plans[key] != nil {
				s.dropPlanLocked(key, dropClusterChanged, "test")
				what = "drop " + key
			}
			s.mu.Unlock()
		}
		check(step, what)
	}
}

// samePointer compares GPU topologies by pointer: a node's comes from its GPUNode, once.
var samePointer = cmp.Comparer(func(a, b *planner.GPUTopology) bool { return a == b })

// nodeFact is what a view says of a node.
type nodeFact struct {
	Name                                string
	Domains                             []string
	GPUs, Unhealthy, MaxPods, SpreadCap int
	Free                                planner.GPUSet
	Indexed, Excluded                   bool
	Spare                               []int64
	CPU, Memory                         int64
	Fill                                int32
	Topology                            *planner.GPUTopology
	Requires                            []int
	Holders                             int
}

func nodeFacts(nodes []planner.Node) []nodeFact {
	out := make([]nodeFact, len(nodes))
	for i, n := range nodes {
		out[i] = nodeFact{Name: n.Name, Domains: n.Domains, GPUs: n.GPUs, Unhealthy: n.Unhealthy, MaxPods: n.MaxPods, SpreadCap: n.SpreadCap,
			Free: n.Free, Indexed: n.Indexed, Excluded: n.Excluded, Spare: n.Spare, CPU: n.CPU, Memory: n.Memory, Fill: n.Fill,
			Topology: n.Topology, Requires: n.Requires, Holders: len(n.Holders)}
	}
	return out
}
