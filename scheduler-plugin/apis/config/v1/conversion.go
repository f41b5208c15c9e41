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

package v1

import (
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/utils/ptr"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
)

// The conversions conversion-gen cannot write: nodePacking is a plain *string in v1 and a
// config.NodePacking in the internal type, and an empty leaderElectionLease, topologyPreset or
// deprecated label stays absent. The rest
// is the generated autoConvert functions'.

// Convert_v1_GangPlacementArgs_To_config_GangPlacementArgs converts defaulted v1 args to the
// internal type.
func Convert_v1_GangPlacementArgs_To_config_GangPlacementArgs(in *GangPlacementArgs, out *config.GangPlacementArgs, s conversion.Scope) error {
	if err := autoConvert_v1_GangPlacementArgs_To_config_GangPlacementArgs(in, out, s); err != nil {
		return err
	}
	out.NodePacking = config.NodePacking(ptr.Deref(in.NodePacking, ""))
	return nil
}

// Convert_config_GangPlacementArgs_To_v1_GangPlacementArgs converts internal args to v1.
func Convert_config_GangPlacementArgs_To_v1_GangPlacementArgs(in *config.GangPlacementArgs, out *GangPlacementArgs, s conversion.Scope) error {
	if err := autoConvert_config_GangPlacementArgs_To_v1_GangPlacementArgs(in, out, s); err != nil {
		return err
	}
	out.NodePacking = ptr.To(string(in.NodePacking))
	// Without a Lease, a preset or a deprecated label the field stays absent, as it was written.
	for _, f := range []**string{&out.LeaderElectionLease, &out.TopologyPreset, &out.ZoneLabel, &out.BlockLabel, &out.RackLabel} {
		if *f != nil && **f == "" {
			*f = nil
		}
	}
	return nil
}
