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

package scheme_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	spconfig "sigs.k8s.io/scheduler-plugins/apis/config"
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"

	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
	_ "github.com/convoy-dev/convoy/scheduler-plugin/apis/config/scheme"
)

func decode(t *testing.T, data []byte) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	obj, gvk, err := kubeschedulerscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("decoding: %v", err)
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		t.Fatalf("decoded a %v, want KubeSchedulerConfiguration", gvk)
	}
	return cfg
}

func args(t *testing.T, p *schedconfig.KubeSchedulerProfile, name string) runtime.Object {
	t.Helper()
	for _, pc := range p.PluginConfig {
		if pc.Name == name {
			return pc.Args
		}
	}
	t.Fatalf("profile %s has no args for %s", p.SchedulerName, name)
	return nil
}

// TestDeployedConfigs decodes the shipped KubeSchedulerConfigurations as kube-scheduler does and
// checks that they validate and give Convoy's plugins their args.
func TestDeployedConfigs(t *testing.T) {
	cases := map[string]struct {
		file     string
		profiles []string
	}{
		"beside the default scheduler": {file: "config.yaml", profiles: []string{"convoy-scheduler"}},
		"as the default scheduler":     {file: "config-as-default.yaml", profiles: []string{"default-scheduler", "convoy-scheduler"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", "scheduler", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			cfg := decode(t, data)
			if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
				t.Fatalf("the configuration does not validate: %v", err)
			}
			var got []string
			for i := range cfg.Profiles {
				p := &cfg.Profiles[i]
				got = append(got, p.SchedulerName)
				wantPlacement := &config.GangPlacementArgs{GPUResourceName: "nvidia.com/gpu", PlanTimeoutSeconds: 90, MaxConcurrentBindings: 64,
					NodePacking: config.NodePackingFewestNodes, BookingTimeoutSeconds: 300, LeaderElectionLease: cfg.LeaderElection.ResourceNamespace + "/" + cfg.LeaderElection.ResourceName}
				placement := args(t, p, "GangPlacement").(*config.GangPlacementArgs)
				// Both ship the convoy preset's levels, one as the preset, one in full.
				if diff := cmp.Diff(config.TopologyPresets["convoy"], placement.Levels()); diff != "" {
					t.Errorf("GangPlacement levels (-want,+got):\n%s", diff)
				}
				placement.TopologyPreset, placement.TopologyLevels = "", nil
				if diff := cmp.Diff(wantPlacement, placement); diff != "" {
					t.Errorf("GangPlacement args (-want,+got):\n%s", diff)
				}
				wantPreemption := &config.GangPreemptionArgs{PreemptLonePods: true, VictimTerminationSeconds: 120}
				if diff := cmp.Diff(wantPreemption, args(t, p, "GangPreemption")); diff != "" {
					t.Errorf("GangPreemption args (-want,+got):\n%s", diff)
				}
				if _, ok := args(t, p, "Coscheduling").(*spconfig.CoschedulingArgs); !ok {
					t.Errorf("Coscheduling args are not CoschedulingArgs")
				}
				if !disabled(p.Plugins.PostFilter, "DefaultPreemption") {
					t.Errorf("profile %s keeps DefaultPreemption", p.SchedulerName)
				}
			}
			if diff := cmp.Diff(tc.profiles, got); diff != "" {
				t.Errorf("profiles (-want,+got):\n%s", diff)
			}
		})
	}
}

func disabled(set schedconfig.PluginSet, name string) bool {
	for _, p := range set.Disabled {
		if p.Name == name {
			return true
		}
	}
	return false
}

// TestArgsDefaults checks the defaults of args a configuration leaves out.
func TestArgsDefaults(t *testing.T) {
	cases := map[string]struct {
		args          string
		wantPlacement *config.GangPlacementArgs
	}{
		"defaults": {
			args: `{}`,
			wantPlacement: &config.GangPlacementArgs{TopologyPreset: "convoy", GPUResourceName: "nvidia.com/gpu", PlanTimeoutSeconds: 90, MaxConcurrentBindings: 64,
				NodePacking: config.NodePackingFewestNodes, BookingTimeoutSeconds: 300},
		},
		"the topograph preset": {
			args: `{topologyPreset: topograph}`,
			wantPlacement: &config.GangPlacementArgs{TopologyPreset: "topograph", GPUResourceName: "nvidia.com/gpu", PlanTimeoutSeconds: 90, MaxConcurrentBindings: 64,
				NodePacking: config.NodePackingFewestNodes, BookingTimeoutSeconds: 300},
		},
		"levels of its own": {
			args: `{topologyLevels: [{name: hall, nodeLabel: example.com/hall}, {name: clique, nodeLabel: nvidia.com/gpu.clique}]}`,
			wantPlacement: &config.GangPlacementArgs{TopologyLevels: []config.TopologyLevel{{Name: "hall", NodeLabel: "example.com/hall"}, {Name: "clique", NodeLabel: "nvidia.com/gpu.clique"}},
				GPUResourceName: "nvidia.com/gpu", PlanTimeoutSeconds: 90, MaxConcurrentBindings: 64, NodePacking: config.NodePackingFewestNodes, BookingTimeoutSeconds: 300},
		},
		"other rack labels, more Bindings, partly used nodes first": {
			args: `{rackLabel: example.com/rack, blockLabel: example.com/pod, maxConcurrentBindings: 900, nodePacking: PartlyUsedFirst}`,
			wantPlacement: &config.GangPlacementArgs{BlockLabel: "example.com/pod", RackLabel: "example.com/rack", GPUResourceName: "nvidia.com/gpu", PlanTimeoutSeconds: 90, MaxConcurrentBindings: 900,
				NodePacking: config.NodePackingPartlyUsedFirst, BookingTimeoutSeconds: 300},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := decode(t, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: s
  pluginConfig:
  - name: GangPlacement
    args: `+tc.args+`
`))
			if diff := cmp.Diff(tc.wantPlacement, args(t, &cfg.Profiles[0], "GangPlacement")); diff != "" {
				t.Errorf("GangPlacement args (-want,+got):\n%s", diff)
			}
		})
	}
}
