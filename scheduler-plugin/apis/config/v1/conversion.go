package v1

import (
	"k8s.io/utils/ptr"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
)

// Convert_v1_GangPlacementArgs_To_config_GangPlacementArgs converts defaulted v1 args to the
// internal type.
func Convert_v1_GangPlacementArgs_To_config_GangPlacementArgs(in *GangPlacementArgs, out *config.GangPlacementArgs) error { //nolint:revive // the conversion naming convention of Kubernetes APIs
	out.ZoneLabel = ptr.Deref(in.ZoneLabel, "")
	out.BlockLabel = ptr.Deref(in.BlockLabel, "")
	out.RackLabel = ptr.Deref(in.RackLabel, "")
	out.GPUResourceName = ptr.Deref(in.GPUResourceName, "")
	out.PlanTimeoutSeconds = ptr.Deref(in.PlanTimeoutSeconds, 0)
	out.MaxConcurrentBindings = ptr.Deref(in.MaxConcurrentBindings, 0)
	out.NodePacking = config.NodePacking(ptr.Deref(in.NodePacking, ""))
	return nil
}

// Convert_config_GangPlacementArgs_To_v1_GangPlacementArgs converts internal args to v1.
func Convert_config_GangPlacementArgs_To_v1_GangPlacementArgs(in *config.GangPlacementArgs, out *GangPlacementArgs) error { //nolint:revive // the conversion naming convention of Kubernetes APIs
	out.ZoneLabel = ptr.To(in.ZoneLabel)
	out.BlockLabel = ptr.To(in.BlockLabel)
	out.RackLabel = ptr.To(in.RackLabel)
	out.GPUResourceName = ptr.To(in.GPUResourceName)
	out.PlanTimeoutSeconds = ptr.To(in.PlanTimeoutSeconds)
	out.MaxConcurrentBindings = ptr.To(in.MaxConcurrentBindings)
	out.NodePacking = ptr.To(string(in.NodePacking))
	return nil
}

// Convert_v1_GangPreemptionArgs_To_config_GangPreemptionArgs converts defaulted v1 args to the
// internal type.
func Convert_v1_GangPreemptionArgs_To_config_GangPreemptionArgs(in *GangPreemptionArgs, out *config.GangPreemptionArgs) error { //nolint:revive // the conversion naming convention of Kubernetes APIs
	out.PreemptLonePods = ptr.Deref(in.PreemptLonePods, false)
	out.VictimTerminationSeconds = ptr.Deref(in.VictimTerminationSeconds, 0)
	return nil
}

// Convert_config_GangPreemptionArgs_To_v1_GangPreemptionArgs converts internal args to v1.
func Convert_config_GangPreemptionArgs_To_v1_GangPreemptionArgs(in *config.GangPreemptionArgs, out *GangPreemptionArgs) error { //nolint:revive // the conversion naming convention of Kubernetes APIs
	out.PreemptLonePods = ptr.To(in.PreemptLonePods)
	out.VictimTerminationSeconds = ptr.To(in.VictimTerminationSeconds)
	return nil
}
