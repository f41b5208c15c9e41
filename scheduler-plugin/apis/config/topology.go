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
	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// The topology presets: the labellings clusters already carry.
const (
	TopologyPresetConvoy    = "convoy"
	TopologyPresetTopograph = "topograph"
	TopologyPresetEKS       = "eks"
	TopologyPresetGKE       = "gke"
)

// LabelGPUClique is the label GPU Feature Discovery (or Convoy's node agent) puts on the nodes of
// a multi-node NVLink domain.
const LabelGPUClique = convoy.LabelGPUClique

// TopologyPresets are the levels of each preset, outer to inner.
var TopologyPresets = map[string][]TopologyLevel{
	TopologyPresetConvoy: {
		{Name: "zone", NodeLabel: convoy.LabelTopologyZone},
		{Name: "block", NodeLabel: convoy.LabelTopologyBlock},
		{Name: "rack", NodeLabel: convoy.LabelTopologyRack},
		{Name: "clique", NodeLabel: LabelGPUClique},
	},
	TopologyPresetTopograph: {
		{Name: "core", NodeLabel: "network.topology.nvidia.com/core"},
		{Name: "spine", NodeLabel: "network.topology.nvidia.com/spine"},
		{Name: "leaf", NodeLabel: "network.topology.nvidia.com/leaf"},
		// Topograph's accelerator level is the NVLink domain.
		{Name: "accelerator", NodeLabel: "network.topology.nvidia.com/accelerator"},
	},
	TopologyPresetEKS: {
		{Name: "zone", NodeLabel: convoy.LabelTopologyZone},
		{Name: "layer1", NodeLabel: "topology.k8s.aws/network-node-layer-1"},
		{Name: "layer2", NodeLabel: "topology.k8s.aws/network-node-layer-2"},
		{Name: "layer3", NodeLabel: "topology.k8s.aws/network-node-layer-3"},
		{Name: "layer4", NodeLabel: "topology.k8s.aws/network-node-layer-4"},
		{Name: "clique", NodeLabel: LabelGPUClique},
	},
	// cloud.google.com/gce-topology-host is one machine, the node itself: no level of its own.
	TopologyPresetGKE: {
		{Name: "zone", NodeLabel: convoy.LabelTopologyZone},
		{Name: "block", NodeLabel: "cloud.google.com/gce-topology-block"},
		{Name: "subblock", NodeLabel: "cloud.google.com/gce-topology-subblock"},
		{Name: "clique", NodeLabel: LabelGPUClique},
	},
}

// Levels are the topology levels the args configure, outer to inner: TopologyLevels, else the
// deprecated ZoneLabel, BlockLabel and RackLabel (the unset ones the convoy preset's), else
// TopologyPreset's.
func (a *GangPlacementArgs) Levels() []TopologyLevel {
	if len(a.TopologyLevels) > 0 {
		return a.TopologyLevels
	}
	if a.ZoneLabel != "" || a.BlockLabel != "" || a.RackLabel != "" {
		out := append([]TopologyLevel(nil), TopologyPresets[TopologyPresetConvoy][:3]...)
		for i, l := range []string{a.ZoneLabel, a.BlockLabel, a.RackLabel} {
			if l != "" {
				out[i].NodeLabel = l
			}
		}
		return out
	}
	return TopologyPresets[a.TopologyPreset]
}
