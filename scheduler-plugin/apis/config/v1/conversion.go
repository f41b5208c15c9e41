package v1

import (
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/utils/ptr"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
)

// The conversions conversion-gen cannot write: nodePacking is a plain *string in v1 and a
// config.NodePacking in the internal type, and an empty leaderElectionLease stays absent. The rest
// is the generated autoConvert functions'.

// Convert_v1_GangPlacementArgs_To_config_GangPlacementArgs converts defaulted v1 args to the
// internal type.
func Convert_v1_GangPlacementArgs_To_config_GangPlacementArgs(in *GangPlacementArgs, out *config.GangPlacementArgs, s conversion.Scope) error { //nolint:revive // the conversion naming convention of Kubernetes APIs
	if err := autoConvert_v1_GangPlacementArgs_To_config_GangPlacementArgs(in, out, s); err != nil {
		return err
	}
	out.NodePacking = config.NodePacking(ptr.Deref(in.NodePacking, ""))
	return nil
}

// Convert_config_GangPlacementArgs_To_v1_GangPlacementArgs converts internal args to v1.
func Convert_config_GangPlacementArgs_To_v1_GangPlacementArgs(in *config.GangPlacementArgs, out *GangPlacementArgs, s conversion.Scope) error { //nolint:revive // the conversion naming convention of Kubernetes APIs
	if err := autoConvert_config_GangPlacementArgs_To_v1_GangPlacementArgs(in, out, s); err != nil {
		return err
	}
	out.NodePacking = ptr.To(string(in.NodePacking))
	// Without a Lease the field stays absent, as it was written.
	if in.LeaderElectionLease == "" {
		out.LeaderElectionLease = nil
	}
	return nil
}
