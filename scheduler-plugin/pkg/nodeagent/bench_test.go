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
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/podgpus"
)

// BenchmarkPollCompute measures the CPU of what a poll computes for every node, without the API
// server: read the mocked GPUs, assign GPUs to two pods, build the status, compare it with the
// published one, decide about labels. One op polls every node once.
//
//	go test ./scheduler-plugin/pkg/nodeagent -run '^$' -bench BenchmarkPollCompute
func BenchmarkPollCompute(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			type node struct {
				reader     *gpuinfo.Reader
				sim        *podgpus.Simulator
				conditions []metav1.Condition
				published  convoy.GPUNodeStatus
				k8sNode    *corev1.Node
				labels     labelMemo
			}
			pods := []podgpus.Pod{
				{Key: "team-a/train-0", UID: "a", GPUs: 4, Indices: []int{0, 1, 2, 3}},
				{Key: "team-a/eval", UID: "b", GPUs: 2},
			}
			nodes := make([]*node, n)
			for i := range nodes {
				name := fmt.Sprintf("gpu-%04d", i)
				srv, err := nvmlmock.New(nvmlmock.ProfileH100x8, nvmlmock.Options{Seed: name})
				if err != nil {
					b.Fatal(err)
				}
				r, err := gpuinfo.Open(srv, gpuinfo.Options{NodeName: name})
				if err != nil {
					b.Fatal(err)
				}
				sim, err := podgpus.NewSimulator(srv, r.IndexOfUUID)
				if err != nil {
					b.Fatal(err)
				}
				nd := &node{reader: r, sim: sim}
				obs := Observation{Static: r.Static(), Samples: r.Sample(), Holders: sim.Assign(pods, func(int) bool { return true }).Holders}
				nd.published = BuildStatus(obs, &nd.conditions, time.Now())
				nd.k8sNode = nodeWithLabels(map[string]map[string]string{
					FieldManager:  GFDLabels(&nd.published),
					"kubelet":     {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
					"nodeagent.x": {convoy.LabelTopologyRack: "rack-0"},
				})
				nd.k8sNode.ResourceVersion = "1"
				nodes[i] = nd
			}
			b.ResetTimer()
			for range b.N {
				for _, nd := range nodes {
					samples := nd.reader.Sample()
					usable := func(i int) bool { return samples[i].Health == convoy.GPUHealthy }
					obs := Observation{Static: nd.reader.Static(), Samples: samples, Holders: nd.sim.Assign(pods, usable).Holders}
					desired := BuildStatus(obs, &nd.conditions, time.Now())
					if !SameStatus(&nd.published, &desired) {
						b.Fatal("the status changed without a change")
					}
					if _, apply := nd.labels.decide(nd.k8sNode, GFDLabels(&desired), FieldManager); apply {
						b.Fatal("labels to write without a change")
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "us/node-poll")
		})
	}
}
