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
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/convoy-dev/convoy/test/framework"
)

// A PodGroup whose minMember is below its pods (an elastic job, as Kubeflow's elastic PyTorchJob
// or a Ray cluster makes them) runs once minMember pods are placed: Coscheduling's Permit lets it
// through then, and GangPlacement places as many of its pods as fit.

// TestElasticGangStartsWithWhatFits: four 8-GPU pods with minMember 2 on three free nodes. The
// three lowest ranks bind; the fourth says it waits for room, and binds on a node added later.
// Before, the gang waited whole for four nodes, though Coscheduling would let it run on two.
func TestElasticGangStartsWithWhatFits(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 3, GPUsPerNode: 8})

	gang := makeGang(ns, "elastic", 4, 8).MinMember(2).create(t, e.c.Client)
	names := gang.names()
	waitBound(t, e.c.Client, ns, names[:3], bindTimeout)
	waitUnschedulable(t, e.c.Client, ns, names[3:],
		ns+"/elastic needs 1 pod(s) × 8 GPU(s); the cluster has room for 0 pods (0 free GPUs on 0 nodes); "+
			"the gang has its PodGroup's minMember (2) of pods bound, and its other pods wait for room")

	extra := []framework.NodeSpec{{Name: "elastic-extra", GPUs: 8, CPU: "96", Memory: "1Ti", Zone: "zone-0", Block: "block-0-0", Rack: "rack-0-0-0"}}
	e.nodes(t, extra, gpuNodesFor(extra)...)
	if p := waitBound(t, e.c.Client, ns, names[3:], bindTimeout)[0]; p.Spec.NodeName != "elastic-extra" {
		t.Errorf("%s bound to %s, want the new node elastic-extra", p.Name, p.Spec.NodeName)
	}
}

// TestElasticGangPreemptsForItsMinMemberOnly: two nodes, each held by a low-priority job. A
// high-priority gang of two 8-GPU pods with minMember 1 evicts one job and binds its first pod
// there; its second pod waits for room and evicts nothing. Before, it evicted both jobs.
func TestElasticGangPreemptsForItsMinMemberOnly(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	e.fleet(t, framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 2, GPUsPerNode: 8})
	lowA := makeGang(ns, "low-a", 1, 8).Priority(lowPriority).create(t, e.c.Client)
	lowB := makeGang(ns, "low-b", 1, 8).Priority(lowPriority).create(t, e.c.Client)
	low := slices.Concat(lowA.names(), lowB.names())
	waitBound(t, e.c.Client, ns, low, bindTimeout)

	urgent := makeGang(ns, "urgent", 2, 8).MinMember(1).Priority(highPriority).create(t, e.c.Client)
	names := urgent.names()
	waitBound(t, e.c.Client, ns, names[:1], bindTimeout)
	waitUnschedulable(t, e.c.Client, ns, names[1:], "the gang has its PodGroup's minMember (1) of pods bound, and its other pods wait for room")
	// The second pod's message is set after its PostFilter, which found nothing to preempt: one
	// low-priority job is gone, for the first pod, and the other stays.
	left := slices.DeleteFunc(get(t, e.c.Client, ns, low), func(p *corev1.Pod) bool { return p == nil || p.DeletionTimestamp != nil })
	if len(left) != 1 {
		t.Errorf("low-priority jobs left: %s; want one of the two evicted, the other running", describe(get(t, e.c.Client, ns, low)))
	}
}
