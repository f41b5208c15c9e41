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

// Package cloudlabels tests Convoy on nodes labelled as GKE labels them, none of Convoy's or
// Karpenter's labels on them: the whole stack from test/e2e/stack with the operator's
// --spot-node-label and deploy/queue's spot flavors set to cloud.google.com/gke-spot=true, and
// convoy-scheduler's GangPlacement on the gke topology preset.
package cloudlabels

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

func TestMain(m *testing.M) { stack.Main(m) }

const (
	timeout     = 90 * time.Second
	product     = "NVIDIA-H100-80GB-HBM3"
	gkeSpot     = "cloud.google.com/gke-spot"
	gkeBlock    = "cloud.google.com/gce-topology-block"
	gkeSubblock = "cloud.google.com/gce-topology-subblock"
)

// gkeNode is an H100 node with GKE's labels only: zone, block and subblock, and gke-spot when spot.
// Spot nodes have no taint, so that only a job's capacity keeps it off them or on them.
func gkeNode(name, block, subblock string, spot bool) framework.NodeSpec {
	labels := map[string]string{convoy.LabelTopologyZone: "us-central1-a", gkeBlock: block, gkeSubblock: subblock}
	if spot {
		labels[gkeSpot] = "true"
	}
	return framework.NodeSpec{Name: name, GPUs: 8, GPUProduct: product, Labels: labels}
}

// TestCapacityAndPlacementFollowTheClustersLabels: an on-demand job asking for one block goes to
// block b1's on-demand nodes, spread over two subblocks, where block b2's two spot nodes in one
// subblock would hold it tighter; a spot job asking for one subblock goes to the spot nodes. Each
// job's status.resources.placement names the zone, block and subblocks its pods landed in.
func TestCapacityAndPlacementFollowTheClustersLabels(t *testing.T) {
	c := framework.Shared(t)
	ctx := t.Context()
	nodes := []framework.NodeSpec{
		gkeNode("od-0", "b1", "s1", false), gkeNode("od-1", "b1", "s2", false),
		gkeNode("spot-0", "b2", "s3", true), gkeNode("spot-1", "b2", "s3", true),
	}
	if err := c.CreateNodes(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	_, err := stack.Start(ctx, c, stack.Options{SpotNodeLabel: gkeSpot + "=true", TopologyPreset: config.TopologyPresetGKE})
	if err != nil {
		t.Fatal(err)
	}
	k := c.Client
	ns := framework.TestNamespace(t)
	must(t, k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	quota := func(flavor string) kueue.FlavorQuotas {
		return *utiltestingapi.MakeFlavorQuotas(flavor).Resource(framework.ResourceGPU, "16").
			Resource(corev1.ResourceCPU, "10k").Resource(corev1.ResourceMemory, "100Ti").Obj()
	}
	cq := utiltestingapi.MakeClusterQueue(ns).
		NamespaceSelector(&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}).
		ResourceGroup(quota("h100-on-demand"), quota("h100-spot")).Obj()
	must(t, k.Create(ctx, cq))
	t.Cleanup(func() { _ = k.Delete(context.Background(), cq) })
	must(t, k.Create(ctx, utiltestingapi.MakeLocalQueue("training", ns).ClusterQueue(ns).Obj()))

	for _, tc := range []struct {
		name     string
		capacity convoy.CapacityType
		level    convoy.TopologyLevel
		want     []string
	}{
		{name: "on-demand", capacity: convoy.CapacityOnDemand, level: "block", want: []string{"od-0", "od-1"}},
		{name: "spot", capacity: convoy.CapacitySpot, level: "subblock", want: []string{"spot-0", "spot-1"}},
	} {
		job := &convoy.TrainingJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name},
			Spec: convoy.TrainingJobSpec{
				Model: "llama-3-8b", Dataset: "s3://corpus/en", Framework: convoy.FrameworkPyTorch,
				NumWorkers: 2, GPUsPerWorker: ptr.To[int32](8), Image: "trainer:1",
				Scheduling: &convoy.SchedulingSpec{Queue: "training", Capacity: tc.capacity,
					Topology: &convoy.TopologySpec{Level: tc.level}},
			},
		}
		must(t, k.Create(ctx, job))
		util.WaitState(t, k, 200*time.Millisecond, timeout, client.ObjectKeyFromObject(job), convoy.StateRunning)

		pods := &corev1.PodList{}
		must(t, k.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{convoy.LabelJobName: tc.name}))
		var got []string
		domains := map[string][]string{}
		for _, p := range pods.Items {
			got = append(got, p.Spec.NodeName)
			node := &corev1.Node{}
			must(t, k.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node))
			for _, key := range []string{convoy.LabelTopologyZone, gkeBlock, gkeSubblock} {
				if v := node.Labels[key]; !slices.Contains(domains[key], v) {
					domains[key] = append(domains[key], v)
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s job's pods are on nodes %q, want %q", tc.name, got, tc.want)
		}
		for _, d := range domains {
			slices.Sort(d)
		}
		want := fmt.Sprintf("%d nodes; zone: %s; block: %s; subblock: %s", len(tc.want),
			strings.Join(domains[convoy.LabelTopologyZone], ", "), strings.Join(domains[gkeBlock], ", "), strings.Join(domains[gkeSubblock], ", "))
		util.WaitJob(t, k, 200*time.Millisecond, timeout, client.ObjectKeyFromObject(job), "to report placement "+want, func(j *convoy.TrainingJob) bool {
			return j.Status.Resources != nil && j.Status.Resources.Placement == want
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
