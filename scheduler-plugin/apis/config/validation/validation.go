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
	"strings"

	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
)

// ValidateGangPlacementArgs checks that the label keys and the resource name are well formed, the
// timeout and the cap on Bindings positive, and the node packing one Convoy knows.
func ValidateGangPlacementArgs(path *field.Path, args *config.GangPlacementArgs) error {
	var errs field.ErrorList
	for _, l := range []struct {
		name, value string
	}{{"zoneLabel", args.ZoneLabel}, {"blockLabel", args.BlockLabel}, {"rackLabel", args.RackLabel}} {
		errs = append(errs, metavalidation.ValidateLabelName(l.value, path.Child(l.name))...)
	}
	if args.ZoneLabel == args.BlockLabel || args.BlockLabel == args.RackLabel || args.ZoneLabel == args.RackLabel {
		errs = append(errs, field.Invalid(path.Child("rackLabel"), args.RackLabel, "zoneLabel, blockLabel and rackLabel must be three different labels"))
	}
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

// ValidateGangPreemptionArgs checks that the wait is positive.
func ValidateGangPreemptionArgs(path *field.Path, args *config.GangPreemptionArgs) error {
	var errs field.ErrorList
	if args.VictimTerminationSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("victimTerminationSeconds"), args.VictimTerminationSeconds, "must be a positive number of seconds"))
	}
	return errs.ToAggregate()
}
