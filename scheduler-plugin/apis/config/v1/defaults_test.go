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
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	utilruntime.Must(config.AddToScheme(s))
	return s
}

// TestDefaults checks the args a platform team gets from an empty args block, and that a value it
// sets, false and zero included, is kept.
func TestDefaults(t *testing.T) {
	// placement is the defaulted GangPlacementArgs with edit applied.
	placement := func(edit func(*GangPlacementArgs)) *GangPlacementArgs {
		a := &GangPlacementArgs{
			TopologyPreset:        ptr.To("convoy"),
			GPUResourceName:       ptr.To("nvidia.com/gpu"),
			PlanTimeoutSeconds:    ptr.To[int64](90),
			MaxConcurrentBindings: ptr.To[int32](64),
			BookingTimeoutSeconds: ptr.To[int64](300),
			NodePacking:           ptr.To("FewestNodes"),
		}
		edit(a)
		return a
	}
	custom := func(a *GangPlacementArgs) {
		a.TopologyPreset = nil
		a.TopologyLevels = []TopologyLevel{{Name: "pod", NodeLabel: "example.com/pod"}, {Name: "rack", NodeLabel: "example.com/rack"}}
		a.GPUResourceName, a.PlanTimeoutSeconds, a.MaxConcurrentBindings = ptr.To("example.com/gpu"), ptr.To[int64](30), ptr.To[int32](900)
		a.NodePacking = ptr.To("PartlyUsedFirst")
	}
	cases := map[string]struct {
		args runtime.Object
		want runtime.Object
	}{
		"empty GangPlacementArgs": {
			args: &GangPlacementArgs{},
			want: placement(func(*GangPlacementArgs) {}),
		},
		"GangPlacementArgs set in full": {
			args: func() *GangPlacementArgs { a := &GangPlacementArgs{}; custom(a); return a }(),
			want: placement(custom),
		},
		"GangPlacementArgs with only a rack label": {
			args: &GangPlacementArgs{RackLabel: ptr.To("example.com/rack")},
			want: placement(func(a *GangPlacementArgs) { a.TopologyPreset, a.RackLabel = nil, ptr.To("example.com/rack") }),
		},
		"empty GangPreemptionArgs": {
			args: &GangPreemptionArgs{},
			want: &GangPreemptionArgs{PreemptLonePods: ptr.To(true), VictimTerminationSeconds: ptr.To[int64](120)},
		},
		"GangPreemptionArgs set to false and zero": {
			args: &GangPreemptionArgs{PreemptLonePods: ptr.To(false), VictimTerminationSeconds: ptr.To[int64](0)},
			want: &GangPreemptionArgs{PreemptLonePods: ptr.To(false), VictimTerminationSeconds: ptr.To[int64](0)},
		},
	}
	s := newScheme()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s.Default(tc.args)
			if diff := cmp.Diff(tc.want, tc.args); diff != "" {
				t.Errorf("defaulted args (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestConversion checks that the scheme converts defaulted v1 args to the internal args the
// plugins read, and back.
func TestConversion(t *testing.T) {
	cases := map[string]struct {
		v1       runtime.Object
		internal runtime.Object
		want     runtime.Object
	}{
		"GangPlacementArgs": {
			v1:       &GangPlacementArgs{RackLabel: ptr.To("example.com/rack"), NodePacking: ptr.To("PartlyUsedFirst")},
			internal: &config.GangPlacementArgs{},
			want: &config.GangPlacementArgs{RackLabel: "example.com/rack", GPUResourceName: "nvidia.com/gpu", PlanTimeoutSeconds: 90, MaxConcurrentBindings: 64,
				NodePacking: config.NodePackingPartlyUsedFirst, BookingTimeoutSeconds: 300},
		},
		"GangPreemptionArgs": {
			v1:       &GangPreemptionArgs{PreemptLonePods: ptr.To(false)},
			internal: &config.GangPreemptionArgs{},
			want:     &config.GangPreemptionArgs{PreemptLonePods: false, VictimTerminationSeconds: 120},
		},
	}
	s := newScheme()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s.Default(tc.v1)
			if err := s.Convert(tc.v1, tc.internal, nil); err != nil {
				t.Fatalf("converting to the internal args: %v", err)
			}
			if diff := cmp.Diff(tc.want, tc.internal); diff != "" {
				t.Errorf("internal args (-want,+got):\n%s", diff)
			}
			back := tc.v1.DeepCopyObject()
			if err := s.Convert(tc.internal, back, nil); err != nil {
				t.Fatalf("converting back to v1: %v", err)
			}
			if diff := cmp.Diff(tc.v1, back); diff != "" {
				t.Errorf("v1 args after a round trip (-want,+got):\n%s", diff)
			}
		})
	}
}
