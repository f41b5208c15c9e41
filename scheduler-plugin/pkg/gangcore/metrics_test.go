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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

// meter reads a counter, gauge or histogram the way a test can compare before and after.
type meter struct {
	t testing.TB
}

func (m meter) counter(c metrics.CounterMetric) float64 {
	m.t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	if err != nil {
		m.t.Fatal(err)
	}
	return v
}

func (m meter) gauge(g metrics.GaugeMetric) float64 {
	m.t.Helper()
	v, err := testutil.GetGaugeMetricValue(g)
	if err != nil {
		m.t.Fatal(err)
	}
	return v
}

func (m meter) histogram(name string) (count uint64, sum float64) {
	m.t.Helper()
	vec, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, name, nil)
	if err != nil {
		m.t.Fatal(err)
	}
	return vec.GetAggregatedSampleCount(), vec.GetAggregatedSampleSum()
}

// TestMetricsFollowAGang: a gang's plan, its binding and the time its pods waited, a gang that
// does not fit, and a plan dropped when the cluster changes show in Convoy's scheduler metrics.
func TestMetricsFollowAGang(t *testing.T) {
	created := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	nodes := []*corev1.Node{fakeNode("a", "r1", 8), fakeNode("b", "r1", 8), fakeNode("c", "r1", 8)}
	fits := []*corev1.Pod{member("ns", "fits", 0, 4).Obj(), member("ns", "fits", 1, 4).Obj()}
	fits[0].CreationTimestamp = metav1.NewTime(created.Add(2 * time.Second))
	fits[1].CreationTimestamp = metav1.NewTime(created)
	tooBig := []*corev1.Pod{member("ns", "big", 0, 8).Obj(), member("ns", "big", 1, 8).Obj(), member("ns", "big", 2, 8).Obj()}
	stale := []*corev1.Pod{member("ns", "stale", 0, 8).Obj(), member("ns", "stale", 1, 8).Obj()}
	all := append(append(append([]*corev1.Pod{}, fits...), tooBig...), stale...)
	h := newHarness(t, nodes, all, inventory("a", 8), inventory("b", 8), inventory("c", 8))
	h.state.now = func() time.Time { return created.Add(30 * time.Second) }
	ctx := context.Background()
	m := meter{t}
	planned, unschedulable := gangPlans.WithLabelValues(planPlanned), gangPlans.WithLabelValues(planUnschedulable)
	changed := gangPlansDropped.WithLabelValues(dropClusterChanged)
	p0, u0, c0, open0 := m.counter(planned), m.counter(unschedulable), m.counter(changed), m.gauge(gangsPlanned)
	n0, s0 := m.histogram("convoy_scheduler_gang_time_to_bound_seconds")

	// One plan for both pods of the gang; the second follows it.
	slots := map[string]string{}
	for _, p := range fits {
		st, status := h.state.PlanFor(ctx, p, h.nodeInfos())
		if !status.IsSuccess() {
			t.Fatalf("PlanFor(%s) = %v", p.Name, status)
		}
		slots[p.Name] = st.Slot.Node
	}
	if got := m.counter(planned) - p0; got != 1 {
		t.Errorf("gang_plans_total{result=planned} rose by %v, want 1: the gang's second pod follows its plan", got)
	}
	if got := m.gauge(gangsPlanned) - open0; got != 1 {
		t.Errorf("gangs_planned rose by %v while the gang binds, want 1", got)
	}
	for _, p := range fits {
		h.state.Reserve(p, slots[p.Name])
		h.state.Bound(p)
	}
	if got := m.gauge(gangsPlanned) - open0; got != 0 {
		t.Errorf("gangs_planned is %v above where it began once the gang bound, want 0", got)
	}
	n, s := m.histogram("convoy_scheduler_gang_time_to_bound_seconds")
	if n-n0 != 1 || s-s0 != 30 {
		t.Errorf("gang_time_to_bound_seconds got %d observation(s) summing %vs, want 1 of 30s: from its first pod's creation to its last binding", n-n0, s-s0)
	}

	// The scheduler's cache now holds the gang's pods on their node.
	var onA []*corev1.Pod
	for _, p := range fits {
		p = p.DeepCopy()
		p.Spec.NodeName = slots[p.Name]
		onA = append(onA, p)
	}
	h.setPods(onA...)

	// Three 8-GPU pods do not fit the two free nodes: the gang is found unschedulable once; its other pods
	// fail fast on that verdict without planning again.
	for _, p := range tooBig {
		if _, status := h.state.PlanFor(ctx, p, h.nodeInfos()); status.IsSuccess() {
			t.Fatalf("PlanFor(%s) placed a gang that does not fit", p.Name)
		}
	}
	if got := m.counter(unschedulable) - u0; got != 1 {
		t.Errorf("gang_plans_total{result=unschedulable} rose by %v, want 1", got)
	}

	// A plan whose GPUs another scheduler's pods take is dropped when the gang's next pod comes.
	if _, status := h.state.PlanFor(ctx, stale[0], h.nodeInfos()); !status.IsSuccess() {
		t.Fatalf("PlanFor(%s) = %v", stale[0].Name, status)
	}
	h.setPods(append(onA, lone("ns", "x", 1).Node("b").Obj(), lone("ns", "y", 1).Node("c").Obj())...)
	if _, status := h.state.PlanFor(ctx, stale[1], h.nodeInfos()); status.IsSuccess() {
		t.Fatalf("PlanFor(%s) placed 2 × 8 GPUs where 7 and 7 are free", stale[1].Name)
	}
	if got := m.counter(changed) - c0; got != 1 {
		t.Errorf("gang_plans_dropped_total{reason=cluster_changed} rose by %v, want 1", got)
	}
	if got := m.gauge(gangsPlanned) - open0; got != 0 {
		t.Errorf("gangs_planned is %v above where it began once the plan was dropped, want 0", got)
	}
}

// TestPreemptionMetricsCountGangsAndLonePods: making room for an 8-GPU pod on a node that a
// lower-priority gang and a lower-priority pod of no gang share evicts both, and the metrics
// count one preemption, one victim of each kind and two pods.
func TestPreemptionMetricsCountGangsAndLonePods(t *testing.T) {
	nodes := []*corev1.Node{fakeNode("a", "r1", 8)}
	pods := []*corev1.Pod{
		member("ns", "low", 0, 4).Priority(1).Node("a").Annotation(AnnotationGPUIndices, "0,1,2,3").Obj(),
		lone("ns", "stray", 4).Priority(1).Node("a").Annotation(AnnotationGPUIndices, "4,5,6,7").Obj(),
	}
	urgent := member("ns", "urgent", 0, 8).Priority(10).Obj()
	h := newHarness(t, nodes, append(pods, urgent), inventory("a", 8))
	m := meter{t}
	gangs, lone := preemptionVictims.WithLabelValues("gang"), preemptionVictims.WithLabelValues("pod")
	p0, g0, l0, n0 := m.counter(gangPreemptions), m.counter(gangs), m.counter(lone), m.counter(preemptionVictimPods)

	v, status := h.state.PreemptFor(context.Background(), urgent, h.nodeInfos(), PreemptOptions{LonePods: true, Wait: time.Minute})
	if !status.IsSuccess() {
		t.Fatalf("PreemptFor() = %v", status)
	}
	RecordPreemption(v)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"gang_preemptions_total", m.counter(gangPreemptions) - p0, 1},
		{`preemption_victims_total{kind="gang"}`, m.counter(gangs) - g0, 1},
		{`preemption_victims_total{kind="pod"}`, m.counter(lone) - l0, 1},
		{"preemption_victim_pods_total", m.counter(preemptionVictimPods) - n0, 2},
	} {
		if c.got != c.want {
			t.Errorf("%s rose by %v, want %v (victims %v)", c.name, c.got, c.want, v.Gangs)
		}
	}
}
