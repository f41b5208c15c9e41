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

// Package validation validates the Convoy scheduler plugins' args.
package validation

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// ValidateGangPlacementArgs checks that the label keys and the resource name are well formed, the
// timeout and the cap on Bindings positive, and the node packing one Convoy knows.
func ValidateGangPlacementArgs(path *field.Path, args *config.GangPlacementArgs) error {
	errs := validateTopology(path, args)
	if args.GPUResourceName == "" {
		errs = append(errs, field.Required(path.Child("gpuResourceName"), "name the GPU extended resource, e.g. nvidia.com/gpu"))
	} else {
		for _, msg := range validation.IsQualifiedName(args.GPUResourceName) {
			errs = append(errs, field.Invalid(path.Child("gpuResourceName"), args.GPUResourceName, msg))
		}
	}
	if args.PlanTimeoutSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("planTimeoutSeconds"), args.PlanTimeoutSeconds, "must be a positive number of seconds"))
	}
	if args.MaxConcurrentBindings <= 0 {
		errs = append(errs, field.Invalid(path.Child("maxConcurrentBindings"), args.MaxConcurrentBindings, "must be a positive number of Binding requests, e.g. 64"))
	}
	if p := args.NodePacking; p != config.NodePackingFewestNodes && p != config.NodePackingPartlyUsedFirst {
		errs = append(errs, field.NotSupported(path.Child("nodePacking"), p, []config.NodePacking{config.NodePackingFewestNodes, config.NodePackingPartlyUsedFirst}))
	}
	if args.BookingTimeoutSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("bookingTimeoutSeconds"), args.BookingTimeoutSeconds, "must be a positive number of seconds, e.g. 300"))
	}
	if l := args.LeaderElectionLease; l != "" {
		ns, name, ok := strings.Cut(l, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, field.Invalid(path.Child("leaderElectionLease"), l, "must be namespace/name of the scheduler's Lease, e.g. convoy-system/convoy-scheduler"))
		}
	}
	return errs.ToAggregate()
}

// validateTopology checks that the args name the topology levels one way (topologyPreset, a known
// one; topologyLevels; or the deprecated zoneLabel, blockLabel and rackLabel), and that the levels
// are 1 to planner.MaxLevels of distinct names and distinct, well-formed node labels.
func validateTopology(path *field.Path, args *config.GangPlacementArgs) field.ErrorList {
	var errs field.ErrorList
	legacy := args.ZoneLabel != "" || args.BlockLabel != "" || args.RackLabel != ""
	switch {
	case args.TopologyPreset != "" && len(args.TopologyLevels) > 0:
		return append(errs, field.Invalid(path.Child("topologyPreset"), args.TopologyPreset, "set topologyPreset or topologyLevels, not both"))
	case legacy && (args.TopologyPreset != "" || len(args.TopologyLevels) > 0):
		return append(errs, field.Invalid(path.Child("rackLabel"), args.RackLabel, "zoneLabel, blockLabel and rackLabel are deprecated: name every level in topologyLevels instead"))
	case args.TopologyPreset != "" && config.TopologyPresets[args.TopologyPreset] == nil:
		return append(errs, field.NotSupported(path.Child("topologyPreset"), args.TopologyPreset, slices.Sorted(maps.Keys(config.TopologyPresets))))
	case !legacy && args.TopologyPreset == "" && len(args.TopologyLevels) == 0:
		return append(errs, field.Required(path.Child("topologyLevels"), "name the cluster's topology levels, or a topologyPreset (convoy, topograph, eks, gke)"))
	}
	levels := args.Levels()
	if len(levels) > planner.MaxLevels {
		errs = append(errs, field.TooMany(path.Child("topologyLevels"), len(levels), planner.MaxLevels))
	}
	names, labels := map[string]bool{}, map[string]bool{}
	for i, l := range levels {
		namePath, labelPath := path.Child("topologyLevels").Index(i).Child("name"), path.Child("topologyLevels").Index(i).Child("nodeLabel")
		if legacy {
			namePath = path.Child([]string{"zoneLabel", "blockLabel", "rackLabel"}[i])
			labelPath = namePath
		}
		for _, msg := range validation.IsDNS1123Label(l.Name) {
			errs = append(errs, field.Invalid(namePath, l.Name, msg))
		}
		name := strings.ToLower(l.Name)
		switch {
		case name == "node" || name == "nvlink" || name == "cluster":
			errs = append(errs, field.Invalid(namePath, l.Name, "node, nvlink and cluster are the built-in levels: name the level otherwise, e.g. rack"))
		case names[name]:
			errs = append(errs, field.Duplicate(namePath, l.Name))
		}
		names[name] = true
		errs = append(errs, metavalidation.ValidateLabelName(l.NodeLabel, labelPath)...)
		switch {
		case l.NodeLabel == corev1.LabelHostname:
			errs = append(errs, field.Invalid(labelPath, l.NodeLabel, "the node is a level of its own: leave kubernetes.io/hostname out"))
		case labels[l.NodeLabel]:
			errs = append(errs, field.Invalid(labelPath, l.NodeLabel, "each level needs a node label of its own"))
		}
		labels[l.NodeLabel] = true
	}
	return errs
}

// ValidateGangPreemptionArgs checks that the wait is positive.
func ValidateGangPreemptionArgs(path *field.Path, args *config.GangPreemptionArgs) error {
	var errs field.ErrorList
	if args.VictimTerminationSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("victimTerminationSeconds"), args.VictimTerminationSeconds, "must be a positive number of seconds"))
	}
	return errs.ToAggregate()
}
