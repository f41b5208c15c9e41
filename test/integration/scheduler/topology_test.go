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
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
)

const labelClique = "nvidia.com/gpu.clique"

// nvl72 is a rack of n 4-GPU nodes, those of cliques[i] in that multi-node NVLink domain ("" for
// none), named <rack>-<i>.
func nvl72(rack string, cliques ...string) []framework.NodeSpec {
	var out []framework.NodeSpec
	for i, c := range cliques {
		s := framework.NodeSpec{Name: fmt.Sprintf("%s-%d", rack, i), GPUs: 4, Zone: "z", Block: "b", Rack: rack}
		if c != "" {
			s.Labels = map[string]string{labelClique: c}
		}
		out = append(out, s)
	}
	return out
}

// TestGangLandsInOneClique: with the shipped levels (zone, block, rack, clique), a 4×4-GPU gang
// that asks for nothing lands inside the one NVL72 clique that holds it, not on the rack of
// unlabelled nodes that is fuller; one that asks for the clique by its node label and fits in
// none is told the best clique's room.
func TestGangLandsInOneClique(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	specs := append(nvl72("rack-a", "", "", "", "", ""), nvl72("rack-b", "uuid.1", "uuid.1", "uuid.1", "uuid.1", "uuid.2", "uuid.2")...)
	e.nodes(t, specs, gpuNodesFor(specs)...)
	// rack-a is the fuller rack: without cliques the gang would take it.
	occupy(t, e.c.Client, ns, "rack-a-4", 4)

	gang := makeGang(ns, "nvl", 4, 4).create(t, e.c.Client)
	got := perNode(waitBound(t, e.c.Client, ns, gang.names(), bindTimeout))
	want := map[string]int{"rack-b-0": 1, "rack-b-1": 1, "rack-b-2": 1, "rack-b-3": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the gang's pods per node (-want,+got):\n%s", diff)
	}

	big := makeGang(ns, "big", 3, 4).Topology(labelClique, convoy.TopologyRequired).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, big.names(),
		ns+"/big needs 3 pod(s) × 4 GPU(s) in one clique; the best clique (z/b/rack-b/uuid.2) has room for 2 pods (8 free GPUs)")
}

// TestTopographLevels: with topologyPreset topograph, a gang that asks for one leaf lands in the
// leaf that holds it, and one that asks for a rack, a level the scheduler does not have, waits
// with a message that names the scheduler's levels.
func TestTopographLevels(t *testing.T) {
	e := setup(t)
	ns := e.namespace(t)
	topograph := func(name, spine, leaf string) framework.NodeSpec {
		return framework.NodeSpec{Name: name, GPUs: 8, Labels: map[string]string{
			"network.topology.nvidia.com/core": "core", "network.topology.nvidia.com/spine": spine, "network.topology.nvidia.com/leaf": leaf}}
	}
	specs := []framework.NodeSpec{topograph("n0", "s0", "l0"), topograph("n1", "s0", "l1"), topograph("n2", "s1", "l2"), topograph("n3", "s1", "l2")}
	e.nodes(t, specs, gpuNodesFor(specs)...)
	e.restartWith(t, "config.yaml", func(cfg map[string]any) {
		for _, p := range cfg["profiles"].([]any) {
			for _, pc := range p.(map[string]any)["pluginConfig"].([]any) {
				if pc := pc.(map[string]any); pc["name"] == "GangPlacement" {
					args := pc["args"].(map[string]any)
					delete(args, "topologyLevels")
					args["topologyPreset"] = "topograph"
				}
			}
		}
	})

	gang := makeGang(ns, "leaf", 2, 8).Topology("leaf", convoy.TopologyRequired).create(t, e.c.Client)
	got := perNode(waitBound(t, e.c.Client, ns, gang.names(), bindTimeout))
	if diff := cmp.Diff(map[string]int{"n2": 1, "n3": 1}, got); diff != "" {
		t.Errorf("the gang's pods per node (-want,+got):\n%s", diff)
	}

	rack := makeGang(ns, "rack", 1, 8).Topology(convoy.TopologyRack, convoy.TopologyRequired).create(t, e.c.Client)
	waitUnschedulable(t, e.c.Client, ns, rack.names(),
		`topology level "rack" (spec.scheduling.topology.level) is none of the scheduler's levels: core (network.topology.nvidia.com/core), spine (network.topology.nvidia.com/spine), leaf (network.topology.nvidia.com/leaf), accelerator (network.topology.nvidia.com/accelerator), node, nvlink, cluster; name one of them or its node label`)
}
