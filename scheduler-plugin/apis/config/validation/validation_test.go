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
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
)

func valid() config.GangPlacementArgs {
	return config.GangPlacementArgs{ZoneLabel: "topology.kubernetes.io/zone", BlockLabel: "convoy.dev/topology-block",
		RackLabel: "convoy.dev/topology-rack", GPUResourceName: "nvidia.com/gpu", PlanTimeoutSeconds: 90, MaxConcurrentBindings: 64,
		NodePacking: config.NodePackingFewestNodes, BookingTimeoutSeconds: 300, LeaderElectionLease: "convoy-system/convoy-scheduler"}
}

func TestValidateGangPlacementArgs(t *testing.T) {
	cases := map[string]struct {
		change  func(*config.GangPlacementArgs)
		wantErr string
	}{
		"defaults are valid": {change: func(*config.GangPlacementArgs) {}},
		"a label key that is not one": {
			change:  func(a *config.GangPlacementArgs) { a.RackLabel = "rack label" },
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
		"the same label twice": {
			change:  func(a *config.GangPlacementArgs) { a.BlockLabel = a.RackLabel },
			wantErr: `args.rackLabel: Invalid value: "convoy.dev/topology-rack": zoneLabel, blockLabel and rackLabel must be three different labels`,
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
