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
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
)

// Defaults of the args.
const (
	DefaultPlanTimeoutSeconds       int64 = 90
	DefaultMaxConcurrentBindings    int32 = 64
	DefaultVictimTerminationSeconds int64 = 120
	DefaultNodePacking                    = string(config.NodePackingFewestNodes)
	DefaultBookingTimeoutSeconds    int64 = 300
)

// SetDefaults_GangPlacementArgs sets the defaults of unset fields.
func SetDefaults_GangPlacementArgs(obj *GangPlacementArgs) {
	if obj.TopologyPreset == nil && len(obj.TopologyLevels) == 0 && obj.ZoneLabel == nil && obj.BlockLabel == nil && obj.RackLabel == nil {
		obj.TopologyPreset = ptr.To(config.TopologyPresetConvoy)
	}
	if obj.GPUResourceName == nil {
		obj.GPUResourceName = ptr.To(convoy.ResourceGPU)
	}
	if obj.PlanTimeoutSeconds == nil {
		obj.PlanTimeoutSeconds = ptr.To(DefaultPlanTimeoutSeconds)
	}
	if obj.MaxConcurrentBindings == nil {
		obj.MaxConcurrentBindings = ptr.To(DefaultMaxConcurrentBindings)
	}
	if obj.NodePacking == nil {
		obj.NodePacking = ptr.To(DefaultNodePacking)
	}
	if obj.BookingTimeoutSeconds == nil {
		obj.BookingTimeoutSeconds = ptr.To(DefaultBookingTimeoutSeconds)
	}
}

// SetDefaults_GangPreemptionArgs sets the defaults of unset fields.
func SetDefaults_GangPreemptionArgs(obj *GangPreemptionArgs) {
	if obj.PreemptLonePods == nil {
		obj.PreemptLonePods = ptr.To(true)
	}
	if obj.VictimTerminationSeconds == nil {
		obj.VictimTerminationSeconds = ptr.To(DefaultVictimTerminationSeconds)
	}
}
