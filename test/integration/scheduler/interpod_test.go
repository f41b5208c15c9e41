package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
)

// podTerm is a required (anti-)affinity term selecting pods with label key=value, by topologyKey.
func podTerm(key, value, topologyKey string) []corev1.PodAffinityTerm {
	return []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
		TopologyKey:   topologyKey,
	}}
}

// Affinity sets the pods' affinity.
func (w *gangWrapper) Affinity(a *corev1.Affinity) *gangWrapper {
	for _, p := range w.pods {
		p.Spec.Affinity = a
	}
	return w
}

// Spread sets the pods' topology spread constraints.
func (w *gangWrapper) Spread(c ...corev1.TopologySpreadConstraint) *gangWrapper {
	for _, p := range w.pods {
		p.Spec.TopologySpreadConstraints = c
	}
	return w
}

// perNode counts the pods by node.
func perNode(pods []*corev1.Pod) map[string]int {
	out := map[string]int{}
	for _, p := range pods {
		out[p.Spec.NodeName]++
	}
	return out
}

// TestGangPodsKeepApartAsTheyAsk: a gang whose pods ask to be apart by hostname (anti-affinity
// among themselves, or a DoNotSchedule spread) binds whole, as they ask, where a plan that packs
// GPUs tightly would put them all on one node.
func TestGangPodsKeepApartAsTheyAsk(t *testing.T) {
	e := setup(t)
	specs := framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 4, GPUsPerNode: 8}.Nodes()
	e.nodes(t, specs, gpuNodesFor(specs)...)

	t.Run("anti-affinity", func(t *testing.T) {
		ns := e.namespace(t)
		gang := makeGang(ns, "apart", 4, 2).Affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: podTerm(schedv1alpha1.PodGroupLabel, "apart", corev1.LabelHostname)}}).
			create(t, e.c.Client)
		pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
		if n := perNode(pods); len(n) != 4 {
			t.Errorf("pods by node = %v, want the 4 pods on 4 nodes", n)
		}
	})
	t.Run("spread", func(t *testing.T) {
		ns := e.namespace(t)
		gang := makeGang(ns, "spread", 4, 1).Spread(corev1.TopologySpreadConstraint{
			MaxSkew: 2, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{schedv1alpha1.PodGroupLabel: "spread"}},
		}).create(t, e.c.Client)
		pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
		for node, n := range perNode(pods) {
			if n > 2 {
				t.Errorf("%d pods on %s, want at most 2 (maxSkew)", n, node)
			}
		}
	})
}

// TestGangAvoidsNodesOtherPodsRuleOut: a gang's pod goes where its anti-affinity to a running pod,
// and a running pod's anti-affinity to it, allow, not to the node that fits its GPUs best.
func TestGangAvoidsNodesOtherPodsRuleOut(t *testing.T) {
	e := setup(t)
	specs := framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8}.Nodes()
	e.nodes(t, specs, gpuNodesFor(specs)...)
	busy, free := specs[0].Name, specs[1].Name

	t.Run("its-own-term", func(t *testing.T) {
		ns := e.namespace(t)
		noisy := makePod(ns, "noisy", 4)
		noisy.Labels = map[string]string{"app": "noisy"}
		noisy.Spec.SchedulerName, noisy.Spec.NodeName = "other-scheduler", busy
		if err := e.c.Client.Create(t.Context(), noisy); err != nil {
			t.Fatal(err)
		}
		// Best fit alone would take the 4 free GPUs beside the noisy pod.
		gang := makeGang(ns, "quiet", 1, 4).Affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: podTerm("app", "noisy", corev1.LabelHostname)}}).
			create(t, e.c.Client)
		if p := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)[0]; p.Spec.NodeName != free {
			t.Errorf("the pod went to %s, want %s (the node without the pod it keeps away from)", p.Spec.NodeName, free)
		}
	})
	t.Run("a-running-pods-term", func(t *testing.T) {
		ns := e.namespace(t)
		loner := makePod(ns, "loner", 4)
		loner.Spec.SchedulerName, loner.Spec.NodeName = "other-scheduler", busy
		loner.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: podTerm(convoy.LabelReplicaRole, "worker", corev1.LabelHostname)}}
		if err := e.c.Client.Create(t.Context(), loner); err != nil {
			t.Fatal(err)
		}
		gang := makeGang(ns, "worker", 1, 4).create(t, e.c.Client)
		if p := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)[0]; p.Spec.NodeName != free {
			t.Errorf("the pod went to %s, want %s (the node whose running pod does not keep workers away)", p.Spec.NodeName, free)
		}
	})
}

// TestGangAffinityByRackKeepsItInOneRack: affinity among a gang's pods by the rack label is the
// gang's required rack: a gang no rack can hold binds nothing and says so; one that fits binds in
// one rack.
func TestGangAffinityByRackKeepsItInOneRack(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2, NodesPerRack: 2, GPUsPerNode: 8}.Nodes()
	e.nodes(t, specs, gpuNodesFor(specs)...)
	together := func(name string) *corev1.Affinity {
		return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: podTerm(schedv1alpha1.PodGroupLabel, name, framework.LabelRack)}}
	}

	big := makeGang(ns, "big", 3, 8).Affinity(together("big")).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, big.names(), ns+"/big needs 3 pod(s) × 8 GPU(s) in one rack")
	if err := e.c.Clientset.CoreV1().Pods(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: schedv1alpha1.PodGroupLabel + "=big"}); err != nil {
		t.Fatal(err)
	}

	fits := makeGang(ns, "fits", 2, 8).Affinity(together("fits")).create(t, e.c.Client)
	racks := map[string]bool{}
	for _, p := range waitBound(t, e.c.Client, ns, fits.names(), bindTimeout) {
		racks[nodeLabel(t, e.c.Client, p.Spec.NodeName, framework.LabelRack)] = true
	}
	if len(racks) != 1 {
		t.Errorf("the gang's pods are in racks %v, want one", racks)
	}
}

// TestInterPodTermAPlanCannotHonourIsExplained: anti-affinity among a gang's pods by zone is not
// planned; every pod says which field asks it and what to use instead, and none binds.
func TestInterPodTermAPlanCannotHonourIsExplained(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := framework.Fleet{Zones: 2, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8}.Nodes()
	e.nodes(t, specs, gpuNodesFor(specs)...)

	gang := makeGang(ns, "by-zone", 2, 8).Affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: podTerm(schedv1alpha1.PodGroupLabel, "by-zone", framework.LabelZone)}}).
		create(t, e.c.Client)
	want := ns + `/by-zone needs pod anti-affinity among its own pods by "` + framework.LabelZone +
		`" (spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]): Convoy keeps a gang's pods apart by kubernetes.io/hostname only; use that topologyKey`
	waitUnschedulable(t, e.c.Client, ns, gang.names(), want)
}
