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

package adoption

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/framework"
)

// The labels of an EKS GPU node, as EKS (its instance type and network topology) and GPU Feature
// Discovery set them: the levels of GangPlacement's eks preset.
const (
	labelInstanceType = "node.kubernetes.io/instance-type"
	labelLayer1       = "topology.k8s.aws/network-node-layer-1"
	labelLayer2       = "topology.k8s.aws/network-node-layer-2"
	labelLayer3       = "topology.k8s.aws/network-node-layer-3"
	labelGPUCount     = "nvidia.com/gpu.count"
	// fleetProduct is the GPU of the flavor h100-on-demand that deploy/queue installs.
	fleetProduct = "NVIDIA-H100-80GB-HBM3"
	// fleetLayer3Domains × fleetNodesPerDomain p5.48xlarge nodes of 8 GPUs make the kwok fleet.
	fleetLayer3Domains  = 4
	fleetNodesPerDomain = 4
	fleetGPUsPerNode    = 8
	// fleetPreset is what the test sets the PRESET of docs/install.md's block topology-preset to.
	fleetPreset = "eks"
)

// fleetTaint keeps every pod that does not tolerate GPU nodes off the fleet, as EKS GPU node groups
// are tainted: Kueue, Convoy's Deployments and CoreDNS stay on the real nodes.
var fleetTaint = corev1.Taint{Key: framework.ResourceGPU.String(), Value: "true", Effect: corev1.TaintEffectNoSchedule}

// startFleet creates a kwok fleet of EKS p5.48xlarge nodes in one zone, one layer-1 and two layer-2
// network nodes, fleetLayer3Domains layer-3 network nodes of fleetNodesPerDomain nodes each. Node i
// sits under layer-3 node i % fleetLayer3Domains, so that a placement that ignores the topology
// (nodes in name order) spreads a gang over every layer-3 domain.
func startFleet(ctx context.Context, e *realstack.Env) ([]string, error) {
	var specs []framework.NodeSpec
	var names []string
	for i := range fleetLayer3Domains * fleetNodesPerDomain {
		l3 := i % fleetLayer3Domains
		name := fmt.Sprintf("ip-10-1-%d-%d.ec2.internal", l3, i)
		specs = append(specs, framework.NodeSpec{
			Name: name,
			GPUs: fleetGPUsPerNode,
			Labels: map[string]string{
				framework.LabelZone:       "us-east-1a",
				labelInstanceType:         "p5.48xlarge",
				labelLayer1:               "nn-1",
				labelLayer2:               fmt.Sprintf("nn-2-%d", l3/2),
				labelLayer3:               fmt.Sprintf("nn-3-%d", l3),
				framework.LabelGPUProduct: fleetProduct,
				labelGPUCount:             fmt.Sprint(fleetGPUsPerNode),
				realstack.LabelGPUPresent: "true",
			},
			Taints: []corev1.Taint{fleetTaint},
		})
		names = append(names, name)
	}
	return names, e.Cluster.CreateNodes(ctx, specs...)
}

// fleetJobName is the multi-worker job the fleet trains, in deploy/queue's namespace team-a.
const fleetJobName = "llm"

// fleetJob is what a data scientist of team-a writes for the fleet: a gang of four 8-GPU workers in
// one layer-3 network domain, through the LocalQueue training, tolerating the GPU nodes' taint.
var fleetJob = fmt.Sprintf(`apiVersion: convoy.dev/v1alpha1
kind: TrainingJob
metadata: {name: %s, namespace: team-a}
spec:
  model: llama-8b
  dataset: c4
  numWorkers: %d
  gpusPerWorker: %d
  scheduling:
    queue: training
    topology: {level: layer3}
    tolerations:
    - {key: %s, operator: Exists, effect: NoSchedule}
`, fleetJobName, fleetNodesPerDomain, fleetGPUsPerNode, fleetTaint.Key)

// submitFleetJob applies fleetJob as its user would.
func submitFleetJob(t *testing.T, e *realstack.Env) {
	t.Helper()
	if out, err := e.Kubectl(t.Context(), "apply", "-f", writeTemp(t, []byte(fleetJob))); err != nil {
		t.Fatalf("kubectl apply of the fleet's job: %v\n%s", err, out)
	}
}

// checkFleetJob waits for the fleet's job to be Running and checks that its pods run on the fleet,
// all under one layer-3 network node.
func checkFleetJob(t *testing.T, e *realstack.Env, fleet []string) {
	t.Helper()
	ctx := t.Context()
	ns := "team-a"
	job := &convoy.TrainingJob{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fleetJobName}, job); err != nil {
			return false, err
		}
		return job.Status.State == convoy.StateRunning, nil
	})
	if err != nil {
		describe, _ := e.Kubectl(context.Background(), "describe", "tj", "-n", ns, fleetJobName)
		pods, _ := e.Kubectl(context.Background(), "get", "pods,workloads", "-n", ns, "-o", "wide")
		t.Fatalf("the fleet's job is %s (%v), want Running\n%s\n%s", job.Status.State, err, describe, pods)
	}
	var pods corev1.PodList
	if err := e.Cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{convoy.LabelJobName: fleetJobName}); err != nil {
		t.Fatal(err)
	}
	domains := map[string]bool{}
	for _, p := range pods.Items {
		if !slices.Contains(fleet, p.Spec.NodeName) {
			t.Errorf("pod %s runs on %q, want a node of the kwok fleet", p.Name, p.Spec.NodeName)
			continue
		}
		var node corev1.Node
		if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
			t.Fatal(err)
		}
		domains[node.Labels[labelLayer3]] = true
	}
	if len(pods.Items) != fleetNodesPerDomain {
		t.Errorf("the fleet's job has %d pods, want %d", len(pods.Items), fleetNodesPerDomain)
	}
	if len(domains) != 1 {
		t.Errorf("the fleet's job runs under %d %s domains (%s), want one: %v", len(domains), labelLayer3,
			strings.Join(slices.Sorted(maps.Keys(domains)), ", "), nodesOf(pods.Items))
	}
	t.Logf("The fleet's job %s: %s, pods on %v", fleetJobName, job.Status.State, nodesOf(pods.Items))
}
