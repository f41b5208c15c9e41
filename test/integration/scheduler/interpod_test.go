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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
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
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 4, GPUsPerNode: 8})

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
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
	busy, free := specs[0].Name, specs[1].Name

	t.Run("its-own-term", func(t *testing.T) {
		ns := e.namespace(t)
		noisy := makePod(ns, "noisy", 4)
		noisy.Labels = map[string]string{"app": "noisy"}
		runOn(t, e.c.Client, noisy, busy)
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
		loner.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: podTerm(convoy.LabelReplicaRole, "worker", corev1.LabelHostname)}}
		runOn(t, e.c.Client, loner, busy)
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
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2, NodesPerRack: 2, GPUsPerNode: 8})
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
	e.fleet(t, framework.Fleet{Zones: 2, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 1, GPUsPerNode: 8})

	gang := makeGang(ns, "by-zone", 2, 8).Affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: podTerm(schedv1alpha1.PodGroupLabel, "by-zone", framework.LabelZone)}}).
		create(t, e.c.Client)
	want := ns + `/by-zone needs pod anti-affinity among its own pods by "` + framework.LabelZone +
		`" (spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]): Convoy keeps a gang's pods apart by kubernetes.io/hostname only; use that topologyKey`
	waitUnschedulable(t, e.c.Client, ns, gang.names(), want)
}

// hostPort gives the pods' container a host port.
func (w *gangWrapper) hostPort(port int32) *gangWrapper {
	for _, p := range w.pods {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}
	}
	return w
}

// TestGangWithHostPortsTakesOneNodePerPod: pods that use a host port bind one per node, and not
// beside a running pod that holds the port, where packing GPUs alone would put them.
func TestGangWithHostPortsTakesOneNodePerPod(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 3, GPUsPerNode: 8})
	holder := makePod(ns, "port-holder", 4)
	holder.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 2222, HostPort: 2222}}
	runOn(t, e.c.Client, holder, specs[0].Name)

	gang := makeGang(ns, "sshd", 2, 2).hostPort(2222).create(t, e.c.Client)
	pods := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)
	n := perNode(pods)
	if len(n) != 2 || n[specs[0].Name] != 0 {
		t.Errorf("pods by node = %v, want one on each of %s and %s (%s holds the port)", n, specs[1].Name, specs[2].Name, specs[0].Name)
	}
}

// TestGangMovesOffANodeAFilterRejects: a filter the plan does not model (here VolumeBinding: the
// pod's volume lives on one node) rejects the planned node; the gang is planned again without it
// and binds where the volume is.
func TestGangMovesOffANodeAFilterRejects(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
	packed, volumeNode := specs[0].Name, specs[1].Name
	// Best fit alone takes the 4 free GPUs of the packed node.
	occupy(t, e.c.Client, ns, packed, 4)

	class := ns + "-local"
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/data"}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "data"},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{volumeNode}}},
			}}}},
		},
	}
	// Bound as the PV controller leaves a claim, without waiting for its next sync.
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data", Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := e.c.Client.Create(t.Context(), pvc); err != nil {
		t.Fatal(err)
	}
	pv.Spec.ClaimRef.UID = pvc.UID
	if err := e.c.Client.Create(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Client.Delete(context.Background(), pv) })
	// The PV controller then marks both Bound, at its next sync (every 15 s); the scheduler
	// reads them after that.
	util.Eventually(t, 200*time.Millisecond, 2*bindTimeout, "the volume and claim to show Bound", func() (bool, string) {
		var v corev1.PersistentVolume
		var c corev1.PersistentVolumeClaim
		if err := e.c.Client.Get(t.Context(), client.ObjectKeyFromObject(pv), &v); err != nil {
			return false, err.Error()
		}
		if err := e.c.Client.Get(t.Context(), client.ObjectKeyFromObject(pvc), &c); err != nil {
			return false, err.Error()
		}
		return v.Status.Phase == corev1.VolumeBound && c.Status.Phase == corev1.ClaimBound, string(v.Status.Phase) + "/" + string(c.Status.Phase)
	})

	gang := makeGang(ns, "with-data", 1, 4)
	gang.pods[0].Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	gang.create(t, e.c.Client)
	if p := waitBound(t, e.c.Client, ns, gang.names(), bindTimeout)[0]; p.Spec.NodeName != volumeNode {
		t.Errorf("the pod went to %s, want %s (where its volume is)", p.Spec.NodeName, volumeNode)
	}
}

// TestPreemptionEvictsTheGangAntiAffinityForbids: a high-priority gang that keeps away from a
// low-priority gang's pods, in a cluster whose only free GPUs are beside them, evicts that gang
// and binds there.
func TestPreemptionEvictsTheGangAntiAffinityForbids(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})

	noisy := makeGang(ns, "noisy", 1, 4).Priority(lowPriority)
	noisy.pods[0].Labels["app"] = "noisy"
	victim := waitBound(t, e.c.Client, ns, noisy.create(t, e.c.Client).names(), bindTimeout)[0]
	other := specs[0].Name
	if victim.Spec.NodeName == other {
		other = specs[1].Name
	}
	// The other node is full with a pod of the preemptor's priority: no victim there.
	filler := makePod(ns, "filler", 8)
	filler.Spec.PriorityClassName = highPriority
	runOn(t, e.c.Client, filler, other)

	wantUrgentBoundTo(t, e, ns, 2, victim.Spec.NodeName, "(where the evicted gang was)")
	if p := get(t, e.c.Client, ns, noisy.names())[0]; p != nil && p.UID == victim.UID && p.DeletionTimestamp == nil {
		t.Errorf("the noisy gang's pod %s was not evicted", p.Name)
	}
}

// TestPreemptionEvictsTheGangsInTheWay: the only free GPUs are on a node that holds two
// low-priority gangs, and a high-priority pod keeps away from pods labelled app=noisy. When one
// gang is noisy, preemption evicts it alone: the other stays bound and the high-priority pod binds
// beside it. When both are, evicting either alone would not do, and both are evicted.
func TestPreemptionEvictsTheGangsInTheWay(t *testing.T) {
	for _, tc := range []struct {
		name        string
		quietNoisy  bool
		wantEvicted map[string]bool
	}{
		{name: "one of two", wantEvicted: map[string]bool{"loud": true}},
		{name: "both", quietNoisy: true, wantEvicted: map[string]bool{"loud": true, "quiet": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			ns := e.namespace(t)
			specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
			node, other := specs[0].Name, specs[1].Name
			gangs := map[string]*gangWrapper{
				"loud":  makeGang(ns, "loud", 1, 4).Priority(lowPriority),
				"quiet": makeGang(ns, "quiet", 1, 2).Priority(lowPriority),
			}
			gangs["loud"].pods[0].Labels["app"] = "noisy"
			if tc.quietNoisy {
				gangs["quiet"].pods[0].Labels["app"] = "noisy"
			}
			before := map[string]*corev1.Pod{}
			for _, name := range []string{"loud", "quiet"} {
				g := gangs[name]
				g.pods[0].Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
				before[name] = waitBound(t, e.c.Client, ns, g.create(t, e.c.Client).names(), bindTimeout)[0]
			}
			filler := makePod(ns, "filler", 8)
			filler.Spec.PriorityClassName = highPriority
			runOn(t, e.c.Client, filler, other)

			wantUrgentBoundTo(t, e, ns, 2, node, "")
			for name, g := range gangs {
				p := get(t, e.c.Client, ns, g.names())[0]
				evicted := p == nil || p.UID != before[name].UID || p.DeletionTimestamp != nil
				if evicted != tc.wantEvicted[name] {
					t.Errorf("gang %s: evicted %v, want %v (the urgent pod keeps away from app=noisy: %q)", name, evicted, tc.wantEvicted[name], before[name].Labels["app"])
				}
			}
		})
	}
}

// TestPreemptionEvictsTheGangOfAParameterServerInTheWay: the only node with room for a
// high-priority pod holds no GPU pod, only the parameter server (no GPUs) of a low-priority gang
// whose worker holds GPUs on another node, and the high-priority pod keeps away from it.
// Preemption evicts that whole gang, and the pod binds where the parameter server was.
func TestPreemptionEvictsTheGangOfAParameterServerInTheWay(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 3, GPUsPerNode: 8})
	a, b, c := specs[0].Name, specs[1].Name, specs[2].Name

	tf := makeGang(ns, "tf", 1, 2).Priority(lowPriority)
	tf.pods[0].Spec.NodeSelector = map[string]string{corev1.LabelHostname: c}
	ps := makePod(ns, "tf-ps-0", 0)
	ps.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "tf", convoy.LabelJobName: "tf", convoy.LabelReplicaRole: "ps",
		convoy.LabelReplicaRank: "0", "app": "noisy"}
	ps.Spec.PriorityClassName = lowPriority
	ps.Spec.NodeSelector = map[string]string{corev1.LabelHostname: a}
	tf.pods = append(tf.pods, ps)
	tf.pg.Spec.MinMember = 2
	before := waitBound(t, e.c.Client, ns, tf.create(t, e.c.Client).names(), bindTimeout)
	// b is full and c keeps 2 GPUs, too few, with pods of the preemptor's priority.
	for node, gpus := range map[string]int{b: 8, c: 6} {
		filler := makePod(ns, "filler-"+node, gpus)
		filler.Spec.PriorityClassName = highPriority
		runOn(t, e.c.Client, filler, node)
	}

	wantUrgentBoundTo(t, e, ns, 4, a, "(where the parameter server was)")
	for i, p := range get(t, e.c.Client, ns, tf.names()) {
		if p != nil && p.UID == before[i].UID && p.DeletionTimestamp == nil {
			t.Errorf("the tf gang's pod %s was not evicted: the gang is evicted whole", p.Name)
		}
	}
}

// wantUrgentBoundTo creates a high-priority pod of gpus GPUs that keeps away from pods labelled
// app=noisy, and checks that it binds to node (why says what was there).
func wantUrgentBoundTo(t *testing.T, e *env, ns string, gpus int, node, why string) {
	t.Helper()
	urgent := makeGang(ns, "urgent", 1, gpus).Priority(highPriority).Affinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: podTerm("app", "noisy", corev1.LabelHostname)}}).create(t, e.c.Client)
	if p := waitBound(t, e.c.Client, ns, urgent.names(), bindTimeout)[0]; p.Spec.NodeName != node {
		t.Errorf("the urgent pod went to %s, want %s %s", p.Spec.NodeName, node, why)
	}
}
