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

package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLevels checks the levels each way of naming them gives: the presets' labels as the
// clusters carry them, levels in full, and the deprecated labels over the convoy preset's.
func TestLevels(t *testing.T) {
	cases := map[string]struct {
		args GangPlacementArgs
		want []TopologyLevel
	}{
		"convoy": {args: GangPlacementArgs{TopologyPreset: "convoy"}, want: []TopologyLevel{
			{"zone", "topology.kubernetes.io/zone"}, {"block", "convoy.dev/topology-block"}, {"rack", "convoy.dev/topology-rack"},
			{"clique", "nvidia.com/gpu.clique"}}},
		"topograph": {args: GangPlacementArgs{TopologyPreset: "topograph"}, want: []TopologyLevel{
			{"core", "network.topology.nvidia.com/core"}, {"spine", "network.topology.nvidia.com/spine"},
			{"leaf", "network.topology.nvidia.com/leaf"}, {"accelerator", "network.topology.nvidia.com/accelerator"}}},
		"eks": {args: GangPlacementArgs{TopologyPreset: "eks"}, want: []TopologyLevel{
			{"zone", "topology.kubernetes.io/zone"}, {"layer1", "topology.k8s.aws/network-node-layer-1"},
			{"layer2", "topology.k8s.aws/network-node-layer-2"}, {"layer3", "topology.k8s.aws/network-node-layer-3"},
			{"layer4", "topology.k8s.aws/network-node-layer-4"}, {"clique", "nvidia.com/gpu.clique"}}},
		"gke": {args: GangPlacementArgs{TopologyPreset: "gke"}, want: []TopologyLevel{
			{"zone", "topology.kubernetes.io/zone"}, {"block", "cloud.google.com/gce-topology-block"},
			{"subblock", "cloud.google.com/gce-topology-subblock"}, {"clique", "nvidia.com/gpu.clique"}}},
		"levels in full": {args: GangPlacementArgs{TopologyLevels: []TopologyLevel{{"hall", "example.com/hall"}}},
			want: []TopologyLevel{{"hall", "example.com/hall"}}},
		"the deprecated rack label": {args: GangPlacementArgs{RackLabel: "example.com/rack"}, want: []TopologyLevel{
			{"zone", "topology.kubernetes.io/zone"}, {"block", "convoy.dev/topology-block"}, {"rack", "example.com/rack"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.args.Levels()); diff != "" {
				t.Errorf("Levels() (-want,+got):\n%s", diff)
			}
		})
	}
}
