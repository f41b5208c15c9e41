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

package validation

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
)

func valid() config.GangPlacementArgs {
	return config.GangPlacementArgs{TopologyPreset: "convoy", GPUResourceName: "nvidia.com/gpu", PlanTimeoutSeconds: 90, MaxConcurrentBindings: 64,
		NodePacking: config.NodePackingFewestNodes, BookingTimeoutSeconds: 300, LeaderElectionLease: "convoy-system/convoy-scheduler"}
}

func TestValidateGangPlacementArgs(t *testing.T) {
	cases := map[string]struct {
		change  func(*config.GangPlacementArgs)
		wantErr string
	}{
		"defaults are valid":    {change: func(*config.GangPlacementArgs) {}},
		"the deprecated labels": {change: func(a *config.GangPlacementArgs) { a.TopologyPreset, a.RackLabel = "", "example.com/rack" }},
		"a deprecated label key that is not one": {
			change:  func(a *config.GangPlacementArgs) { a.TopologyPreset, a.RackLabel = "", "rack label" },
			wantErr: `args.rackLabel: Invalid value: "rack label": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		},
		"a booking timeout of zero": {
			change:  func(a *config.GangPlacementArgs) { a.BookingTimeoutSeconds = 0 },
			wantErr: `args.bookingTimeoutSeconds: Invalid value: 0: must be a positive number of seconds, e.g. 300`,
		},
		"a lease without its namespace": {
			change:  func(a *config.GangPlacementArgs) { a.LeaderElectionLease = "convoy-scheduler" },
			wantErr: `args.leaderElectionLease: Invalid value: "convoy-scheduler": must be namespace/name of the scheduler's Lease, e.g. convoy-system/convoy-scheduler`,
		},
		"the same deprecated label twice": {
			change:  func(a *config.GangPlacementArgs) { a.TopologyPreset, a.BlockLabel = "", "convoy.dev/topology-rack" },
			wantErr: `args.rackLabel: Invalid value: "convoy.dev/topology-rack": each level needs a node label of its own`,
		},
		"a deprecated label beside a preset": {
			change:  func(a *config.GangPlacementArgs) { a.RackLabel = "example.com/rack" },
			wantErr: `args.rackLabel: Invalid value: "example.com/rack": zoneLabel, blockLabel and rackLabel are deprecated: name every level in topologyLevels instead`,
		},
		"the topograph preset": {change: func(a *config.GangPlacementArgs) { a.TopologyPreset = "topograph" }},
		"the EKS preset":       {change: func(a *config.GangPlacementArgs) { a.TopologyPreset = "eks" }},
		"the GKE preset":       {change: func(a *config.GangPlacementArgs) { a.TopologyPreset = "gke" }},
		"a preset Convoy does not know": {
			change:  func(a *config.GangPlacementArgs) { a.TopologyPreset = "aks" },
			wantErr: `args.topologyPreset: Unsupported value: "aks": supported values: "convoy", "eks", "gke", "topograph"`,
		},
		"no topology": {
			change:  func(a *config.GangPlacementArgs) { a.TopologyPreset = "" },
			wantErr: `args.topologyLevels: Required value: name the cluster's topology levels, or a topologyPreset (convoy, topograph, eks, gke)`,
		},
		"levels of its own": {change: func(a *config.GangPlacementArgs) {
			a.TopologyPreset = ""
			a.TopologyLevels = []config.TopologyLevel{{Name: "hall", NodeLabel: "example.com/hall"}, {Name: "nvl", NodeLabel: "nvidia.com/gpu.clique"}}
		}},
		"levels beside a preset": {
			change: func(a *config.GangPlacementArgs) {
				a.TopologyLevels = []config.TopologyLevel{{Name: "hall", NodeLabel: "example.com/hall"}}
			},
			wantErr: `args.topologyPreset: Invalid value: "convoy": set topologyPreset or topologyLevels, not both`,
		},
		"a level named as a built-in one": {
			change: func(a *config.GangPlacementArgs) {
				a.TopologyPreset = ""
				a.TopologyLevels = []config.TopologyLevel{{Name: "hall", NodeLabel: "example.com/hall"}, {Name: "node", NodeLabel: "example.com/node"}}
			},
			wantErr: `args.topologyLevels[1].name: Invalid value: "node": node, nvlink and cluster are the built-in levels: name the level otherwise, e.g. rack`,
		},
		"two levels of one name": {
			change: func(a *config.GangPlacementArgs) {
				a.TopologyPreset = ""
				a.TopologyLevels = []config.TopologyLevel{{Name: "rack", NodeLabel: "example.com/hall"}, {Name: "Rack", NodeLabel: "example.com/rack"}}
			},
			wantErr: `[args.topologyLevels[1].name: Invalid value: "Rack": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'), args.topologyLevels[1].name: Duplicate value: "Rack"]`,
		},
		"the hostname as a level": {
			change: func(a *config.GangPlacementArgs) {
				a.TopologyPreset = ""
				a.TopologyLevels = []config.TopologyLevel{{Name: "host", NodeLabel: "kubernetes.io/hostname"}}
			},
			wantErr: `args.topologyLevels[0].nodeLabel: Invalid value: "kubernetes.io/hostname": the node is a level of its own: leave kubernetes.io/hostname out`,
		},
		"seven levels": {
			change: func(a *config.GangPlacementArgs) {
				a.TopologyPreset = ""
				for i := range 7 {
					a.TopologyLevels = append(a.TopologyLevels, config.TopologyLevel{Name: fmt.Sprintf("l%d", i), NodeLabel: fmt.Sprintf("example.com/l%d", i)})
				}
			},
			wantErr: `args.topologyLevels: Too many: 7: must have at most 6 items`,
		},
		"no GPU resource": {
			change:  func(a *config.GangPlacementArgs) { a.GPUResourceName = "" },
			wantErr: `args.gpuResourceName: Required value: name the GPU extended resource, e.g. nvidia.com/gpu`,
		},
		"no plan timeout": {
			change:  func(a *config.GangPlacementArgs) { a.PlanTimeoutSeconds = 0 },
			wantErr: `args.planTimeoutSeconds: Invalid value: 0: must be a positive number of seconds`,
		},
		"no Binding allowed": {
			change:  func(a *config.GangPlacementArgs) { a.MaxConcurrentBindings = 0 },
			wantErr: `args.maxConcurrentBindings: Invalid value: 0: must be a positive number of Binding requests, e.g. 64`,
		},
		"packing partly used nodes first": {
			change: func(a *config.GangPlacementArgs) { a.NodePacking = config.NodePackingPartlyUsedFirst },
		},
		"a node packing Convoy does not know": {
			change:  func(a *config.GangPlacementArgs) { a.NodePacking = "BinPack" },
			wantErr: `args.nodePacking: Unsupported value: "BinPack": supported values: "FewestNodes", "PartlyUsedFirst"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := valid()
			tc.change(&a)
			err := ValidateGangPlacementArgs(field.NewPath("args"), &a)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("ValidateGangPlacementArgs() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func TestValidateGangPreemptionArgs(t *testing.T) {
	if err := ValidateGangPreemptionArgs(field.NewPath("args"), &config.GangPreemptionArgs{VictimTerminationSeconds: 120}); err != nil {
		t.Errorf("valid args: %v", err)
	}
	want := "args.victimTerminationSeconds: Invalid value: -1: must be a positive number of seconds"
	if err := ValidateGangPreemptionArgs(field.NewPath("args"), &config.GangPreemptionArgs{VictimTerminationSeconds: -1}); err == nil || err.Error() != want {
		t.Errorf("ValidateGangPreemptionArgs() = %v, want %q", err, want)
	}
}
