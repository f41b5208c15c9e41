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

package nodeagent

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/podgpus"
)

func observe(t *testing.T, profile string) (Observation, *nvmlmock.Server) {
	t.Helper()
	return observeWith(t, profile, nvmlmock.Options{Seed: "node-a"})
}

func observeWith(t *testing.T, profile string, opts nvmlmock.Options) (Observation, *nvmlmock.Server) {
	t.Helper()
	srv, err := nvmlmock.New(profile, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := gpuinfo.Open(srv, gpuinfo.Options{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return Observation{Static: r.Static(), Samples: r.Sample()}, srv
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func TestBuildStatus(t *testing.T) {
	obs, _ := observe(t, nvmlmock.ProfileH100x8)
	obs.Samples[5] = gpuinfo.Sample{Health: convoy.GPUUnhealthy, Reason: "Row remapping pending: the GPU needs a reset"}
	obs.XIDs = map[int]string{2: "XID 79: GPU has fallen off the bus"}
	obs.Holders = podgpus.Holders{0: "team-a/train-0", 1: "team-a/train-0", 5: "team-b/eval"}
	var conds []metav1.Condition
	s := BuildStatus(obs, &conds, t0.Add(300*time.Millisecond))

	if s.Capacity != 8 || s.Healthy != 6 || s.Free != 4 || s.Product != "NVIDIA H100 80GB HBM3" {
		t.Errorf("summary: capacity %d, healthy %d, free %d, product %q; want 8, 6, 4 (2 held), NVIDIA H100 80GB HBM3",
			s.Capacity, s.Healthy, s.Free, s.Product)
	}
	type gpu struct {
		Health      convoy.GPUHealth
		Reason      string
		AllocatedTo string
	}
	var got []gpu
	for _, g := range s.GPUs {
		got = append(got, gpu{g.Health, g.HealthReason, g.AllocatedTo})
	}
	healthy := gpu{Health: convoy.GPUHealthy}
	want := []gpu{
		{convoy.GPUHealthy, "", "team-a/train-0"},
		{convoy.GPUHealthy, "", "team-a/train-0"},
		{convoy.GPUUnhealthy, "XID 79: GPU has fallen off the bus", ""},
		healthy, healthy,
		{convoy.GPUUnhealthy, "Row remapping pending: the GPU needs a reset", "team-b/eval"},
		healthy, healthy,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GPUs (-want,+got):\n%s", diff)
	}
	if len(s.Links) != 28 || s.DriverVersion != "550.90.07" || s.CUDAVersion != "12.4" {
		t.Errorf("links %d, driver %q, CUDA %q", len(s.Links), s.DriverVersion, s.CUDAVersion)
	}
	wantCond := []metav1.Condition{{
		Type: convoy.GPUNodeNVMLAvailable, Status: metav1.ConditionTrue, Reason: convoy.GPUNodeReasonInitialized,
		Message: "NVML 12.550.90.07 (driver 550.90.07) lists 8 GPUs", LastTransitionTime: metav1.NewTime(t0),
	}}
	if diff := cmp.Diff(wantCond, s.Conditions); diff != "" {
		t.Errorf("conditions (-want,+got):\n%s", diff)
	}
}

func TestBuildStatusWithoutNVML(t *testing.T) {
	var conds []metav1.Condition
	s := BuildStatus(Observation{InitErr: &gpuinfo.InitError{Op: "Init", Return: 12}}, &conds, t0)
	if s.Capacity != 0 || len(s.GPUs) != 0 || len(s.Conditions) != 1 {
		t.Fatalf("status without NVML: %+v", s)
	}
	c := s.Conditions[0]
	if c.Status != metav1.ConditionFalse || c.Reason != convoy.GPUNodeReasonLibraryNotFound || c.Message == "" {
		t.Errorf("condition %+v; want False, LibraryNotFound, with a message", c)
	}
	// NVML comes back: the condition turns True with a new transition time.
	obs, _ := observe(t, nvmlmock.ProfilePCIe4)
	s = BuildStatus(obs, &conds, t0.Add(time.Minute))
	if c := s.Conditions[0]; c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&metav1.Time{Time: t0.Add(time.Minute)}) {
		t.Errorf("after NVML returned: %+v", c)
	}
	// Nothing changes: neither does the transition time.
	s = BuildStatus(obs, &conds, t0.Add(2*time.Minute))
	if c := s.Conditions[0]; !c.LastTransitionTime.Equal(&metav1.Time{Time: t0.Add(time.Minute)}) {
		t.Errorf("transition time moved without a transition: %v", c.LastTransitionTime)
	}
}

func TestSameStatus(t *testing.T) {
	obs, _ := observe(t, nvmlmock.ProfileA100x8)
	var conds []metav1.Condition
	base := BuildStatus(obs, &conds, t0)
	cases := map[string]struct {
		change func(s *convoy.GPUNodeStatus)
		same   bool
	}{
		"nothing":            {change: func(*convoy.GPUNodeStatus) {}, same: true},
		"utilization":        {change: func(s *convoy.GPUNodeStatus) { s.GPUs[3].Utilization = ptr.To[int32](97) }, same: true},
		"memory in use":      {change: func(s *convoy.GPUNodeStatus) { s.GPUs[3].MemoryUsedMiB = ptr.To[int64](40000) }, same: true},
		"heartbeat":          {change: func(s *convoy.GPUNodeStatus) { s.ObservedTime = &metav1.Time{Time: t0} }, same: true},
		"health":             {change: func(s *convoy.GPUNodeStatus) { s.GPUs[3].Health = convoy.GPUUnhealthy }},
		"holder":             {change: func(s *convoy.GPUNodeStatus) { s.GPUs[3].AllocatedTo = "team-a/p" }},
		"MIG mode":           {change: func(s *convoy.GPUNodeStatus) { s.GPUs[3].MIGMode = "Enabled" }},
		"a link":             {change: func(s *convoy.GPUNodeStatus) { s.Links[0].Type = convoy.LinkSYS }},
		"driver":             {change: func(s *convoy.GPUNodeStatus) { s.DriverVersion = "560.0" }},
		"condition":          {change: func(s *convoy.GPUNodeStatus) { s.Conditions[0].Message = "x" }},
		"a GPU disappears":   {change: func(s *convoy.GPUNodeStatus) { s.GPUs = s.GPUs[:7] }},
		"summary (free) off": {change: func(s *convoy.GPUNodeStatus) { s.Free-- }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			changed := base.DeepCopy()
			tc.change(changed)
			if got := SameStatus(&base, changed); got != tc.same {
				t.Errorf("SameStatus = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestGFDLabels(t *testing.T) {
	obs, _ := observe(t, nvmlmock.ProfileH100x8)
	var conds []metav1.Condition
	s := BuildStatus(obs, &conds, t0)
	want := map[string]string{
		convoy.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3",
		convoy.LabelGPUMemory:  "81559",
		convoy.LabelGPUCount:   "8",
	}
	if diff := cmp.Diff(want, GFDLabels(&s)); diff != "" {
		t.Errorf("labels (-want,+got):\n%s", diff)
	}
	gb200, _ := observeWith(t, nvmlmock.ProfileGB200x4, nvmlmock.Options{Seed: "node-a", FabricCluster: "rack-1"})
	s = BuildStatus(gb200, &conds, t0)
	if got := GFDLabels(&s)[convoy.LabelGPUClique]; !strings.HasSuffix(got, ".1") || strings.Contains(got, "/") {
		t.Errorf("%s of a GB200 tray = %q, want <cluster UUID>.1", convoy.LabelGPUClique, got)
	}
	if got := GFDLabels(&convoy.GPUNodeStatus{}); len(got) != 0 {
		t.Errorf("labels of a node without GPUs: %v", got)
	}
	if got := labelValue(" NVIDIA A100-SXM4-80GB (rev. 2)/x "); got != "NVIDIA-A100-SXM4-80GB-rev.-2x" {
		t.Errorf("labelValue = %q", got)
	}
}

// nodeWithLabels is a node whose labels were set by the given managers, as managedFields record it.
func nodeWithLabels(owners map[string]map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{}}}
	for manager, labels := range owners {
		raw := `{"f:metadata":{"f:labels":{`
		first := true
		for k, v := range labels {
			n.Labels[k] = v
			if !first {
				raw += ","
			}
			raw += `"f:` + k + `":{}`
			first = false
		}
		raw += `}}}`
		n.ManagedFields = append(n.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(raw),
		})
	}
	return n
}

func TestLabelsToApply(t *testing.T) {
	desired := map[string]string{convoy.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", convoy.LabelGPUMemory: "81559", convoy.LabelGPUCount: "8"}
	cases := map[string]struct {
		node      *corev1.Node
		desired   map[string]string
		want      map[string]string
		wantApply bool
	}{
		"a bare node gets every label": {
			node: nodeWithLabels(nil), desired: desired, want: desired, wantApply: true,
		},
		"GPU Feature Discovery owns the product: the agent leaves it": {
			node: nodeWithLabels(map[string]map[string]string{
				"nfd-master": {convoy.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3-SXM"},
			}),
			desired:   desired,
			want:      map[string]string{convoy.LabelGPUMemory: "81559", convoy.LabelGPUCount: "8"},
			wantApply: true,
		},
		"already applied: nothing to write": {
			node: nodeWithLabels(map[string]map[string]string{
				FieldManager: desired,
				"kubelet":    {"kubernetes.io/hostname": "node-a"},
			}),
			desired: desired, want: desired,
		},
		"a value changed": {
			node: nodeWithLabels(map[string]map[string]string{
				FieldManager: {convoy.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", convoy.LabelGPUMemory: "81559", convoy.LabelGPUCount: "7"},
			}),
			desired: desired, want: desired, wantApply: true,
		},
		"GPUs gone: release the agent's labels": {
			node:    nodeWithLabels(map[string]map[string]string{FieldManager: desired}),
			desired: map[string]string{}, want: map[string]string{}, wantApply: true,
		},
		"the same value set by someone else is not ours": {
			node: nodeWithLabels(map[string]map[string]string{
				"kubectl-label": {convoy.LabelGPUCount: "8"},
				FieldManager:    {convoy.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", convoy.LabelGPUMemory: "81559"},
			}),
			desired: desired,
			want:    map[string]string{convoy.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", convoy.LabelGPUMemory: "81559"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, apply := LabelsToApply(tc.node, tc.desired, FieldManager)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("labels (-want,+got):\n%s", diff)
			}
			if apply != tc.wantApply {
				t.Errorf("apply = %v, want %v", apply, tc.wantApply)
			}
		})
	}
}

func TestHealthChanges(t *testing.T) {
	gpus := []convoy.GPUDevice{
		{Index: 0, Health: convoy.GPUHealthy},
		{Index: 1, Health: convoy.GPUUnhealthy},
		{Index: 2, Health: convoy.GPUHealthy},
		{Index: 3, Health: convoy.GPUUnhealthy},
	}
	before := map[int32]convoy.GPUHealth{0: convoy.GPUHealthy, 1: convoy.GPUHealthy, 2: convoy.GPUUnhealthy, 3: convoy.GPUUnhealthy}
	unhealthy, recovered := healthChanges(before, gpus)
	if len(unhealthy) != 1 || unhealthy[0].Index != 1 || len(recovered) != 1 || recovered[0].Index != 2 {
		t.Errorf("unhealthy %v, recovered %v; want GPU 1 turned unhealthy and GPU 2 recovered", unhealthy, recovered)
	}
	// First poll with no published status: only unhealthy GPUs are news.
	unhealthy, recovered = healthChanges(map[int32]convoy.GPUHealth{}, gpus)
	if len(unhealthy) != 2 || len(recovered) != 0 {
		t.Errorf("first poll: unhealthy %v, recovered %v; want GPUs 1 and 3 unhealthy, none recovered", unhealthy, recovered)
	}
}
