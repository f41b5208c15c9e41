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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// TestNodeCacheFollowsTheInventory: a node's base is computed once and kept until its GPUNode or
// its pods change; the GPUs each pod holds come from the GPUNode, else the pod's reservation, else
// the highest free ones.
func TestNodeCacheFollowsTheInventory(t *testing.T) {
	opts := Options{Levels: testLevels, GPUResource: convoy.ResourceGPU}
	inv, cache, book := newGPUInventory(), newNodeCache(&opts), newPlanBook()
	node := fakeNode("a", "r1", 8)
	seen := lone("ns", "seen", 2).Node("a").Obj()         // the node agent saw it on GPUs 0 and 1
	reserved := lone("ns", "reserved", 1).Node("a").Obj() // reserved GPU 5 by this scheduler
	unknown := lone("ns", "unknown", 1).Node("a").Obj()   // takes the highest free GPU
	going := lone("ns", "going", 1).Node("a").Obj()
	going.DeletionTimestamp = &metav1.Time{}
	book.reserved[reserved.UID] = reservation{node: "a", gpus: planner.NewGPUSet(5)}
	gn := inventory("a", 8)
	gn.Status.GPUs[0].AllocatedTo, gn.Status.GPUs[1].AllocatedTo = "ns/seen", "ns/seen"
	inv.set("a", newGPUNode(gn))

	ni := framework.NewNodeInfo(seen, reserved, unknown)
	ni.SetNode(node)
	view := func(ni fwk.NodeInfo) *nodeBase {
		gpus, changed := inv.lockForView()
		defer inv.unlockView()
		cache.sync(gpus, changed, 1)
		return cache.at(0, ni, gpus, book)
	}
	first := view(ni)
	if want := planner.NewGPUSet(2, 3, 4, 6); first.pn.Free != want {
		t.Errorf("free GPUs %v, want %v (0,1 seen, 5 reserved, 7 the highest for the unknown pod)", first.pn.Free.Indices(), want.Indices())
	}
	if view(ni) != first {
		t.Error("the base was computed again though nothing changed")
	}
	if len(inv.changed) != 0 {
		t.Errorf("the inventory still marks %v changed after a view read it", inv.changed)
	}

	sick := inventory("a", 8)
	sick.Status.GPUs[2].Health = convoy.GPUUnhealthy
	inv.set("a", newGPUNode(sick))
	second := view(ni)
	if !first.stale || second == first {
		t.Fatal("the base outlived its GPUNode")
	}
	// GPU 2 is sick, and the agent no longer reports the seen pod: it and the unknown pod take
	// the highest free GPUs, 7, 6 and 4.
	if want := planner.NewGPUSet(0, 1, 3); second.pn.Free != want {
		t.Errorf("free GPUs after the GPUNode changed %v, want %v", second.pn.Free.Indices(), want.Indices())
	}

	more := framework.NewNodeInfo(seen, reserved, unknown, going)
	more.SetNode(node)
	third := view(more)
	if third == second || !second.stale {
		t.Fatal("the base outlived a change of the node's pods")
	}
	if gpus, nodes := cache.leaving(1); gpus != 1 || nodes != 1 {
		t.Errorf("leaving = %d GPUs on %d nodes, want 1 on 1", gpus, nodes)
	}

	cache.forget("a")
	if !third.stale || cache.bases["a"] != nil {
		t.Error("the deleted node's base is still cached")
	}
	inv.remove("a")
	if inv.get("a") != nil || !inv.changed["a"] {
		t.Error("the deleted GPUNode is still in the inventory, or not marked changed")
	}
}
