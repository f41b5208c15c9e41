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

package gangcore

import (
	"encoding/json"
	"runtime"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
)

// agentGPUNode is the GPUNode the node agent writes for a machine of an NVML mock profile: every
// GPU as gpuinfo reads it, GPU 1 unhealthy, GPU 2 held by a pod, the managedFields of its apply.
func agentGPUNode(tb testing.TB, profile string) *convoy.GPUNode {
	tb.Helper()
	srv, err := nvmlmock.New(profile, nvmlmock.Options{Seed: "node-a"})
	if err != nil {
		tb.Fatal(err)
	}
	r, err := gpuinfo.Open(srv, gpuinfo.Options{NodeName: "node-a"})
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	g := &convoy.GPUNode{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: "convoy-node-agent", Operation: metav1.ManagedFieldsOperationApply, Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:gpus":{}}}`)}}}},
		Status: convoy.GPUNodeStatus{GPUs: slices.Clone(r.Static().GPUs), Links: slices.Clone(r.Static().Links)},
	}
	for i := range g.Status.GPUs {
		g.Status.GPUs[i].Health = convoy.GPUHealthy
		g.Status.GPUs[i].NVLinks = slices.Clone(g.Status.GPUs[i].NVLinks)
	}
	g.Status.GPUs[1].Health = convoy.GPUUnhealthy
	g.Status.GPUs[2].AllocatedTo = "team-a/llm-worker-0"
	return g
}

// TestCachedGPUNodeKeepsWhatPlansRead: the GPUNode informer's transform drops the agent's per-GPU
// NVLink lists and the managedFields, and the State's inventory of the object (health, holders,
// UUIDs, link scores, NVLink domains) stays the same.
func TestCachedGPUNodeKeepsWhatPlansRead(t *testing.T) {
	for _, profile := range []string{nvmlmock.ProfileH100x8, nvmlmock.ProfileA100x8, nvmlmock.ProfileNVLinkPairs8, nvmlmock.ProfileGB200x4} {
		t.Run(profile, func(t *testing.T) {
			g := agentGPUNode(t, profile)
			lists := 0
			for _, d := range g.Status.GPUs {
				lists += len(d.NVLinks)
			}
			if lists == 0 {
				t.Fatalf("profile %s lists no NVLinks per GPU: nothing to drop", profile)
			}
			want := newGPUNode(g.DeepCopy())
			out, err := cachedGPUNode(g)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*convoy.GPUNode)
			if got.ManagedFields != nil {
				t.Errorf("managedFields kept: %v", got.ManagedFields)
			}
			for _, d := range got.Status.GPUs {
				if d.NVLinks != nil {
					t.Errorf("GPU %d keeps %d NVLinks", d.Index, len(d.NVLinks))
				}
			}
			if n := newGPUNode(got); !n.equal(want) {
				t.Errorf("inventory of the cached GPUNode = %+v, want %+v", n, want)
			}
		})
	}
}

// BenchmarkCachedGPUNode reports the heap a GPUNode of an 8-GPU DGX H100, as the agent writes it,
// holds in the scheduler's cache, decoded from its JSON, without and with the informer's
// transform: 1,000 of them kept at once.
func BenchmarkCachedGPUNode(b *testing.B) {
	raw, err := json.Marshal(agentGPUNode(b, nvmlmock.ProfileH100x8))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		transform func(any) (any, error)
	}{
		{"as-written", func(in any) (any, error) { return in, nil }},
		{"cached", cachedGPUNode},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 1000
			var perNode float64
			for b.Loop() {
				kept := make([]*convoy.GPUNode, n)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range kept {
					g := &convoy.GPUNode{}
					if err := json.Unmarshal(raw, g); err != nil {
						b.Fatal(err)
					}
					out, _ := tc.transform(g)
					kept[i] = out.(*convoy.GPUNode)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perNode = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(float64(len(raw)), "JSON-bytes/GPUNode")
			b.ReportMetric(perNode, "heap-bytes/GPUNode")
		})
	}
}
