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

// Package nodeagent tests the GPU node agent against a real kube-apiserver: what it publishes, how
// fast a fault shows, that a quiet node costs no writes, which pod holds which GPU, and that an
// agent's token lets it write only its own node's objects.
package nodeagent

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.NewKlogr())
	framework.Main(m, framework.Options{AddToScheme: []func(*runtime.Scheme) error{convoy.AddToScheme}})
}

const (
	agentNamespace = "convoy-system"
	agentSA        = "convoy-node-agent"
	simulatorSA    = "convoy-node-agent-simulator"
	h100Product    = "NVIDIA-H100-80GB-HBM3"
)

var (
	setupOnce sync.Once
	setupErr  error
)

// cluster returns the shared control plane with the CRDs, deploy/node-agent (the DaemonSet's
// RBAC and admission policies), deploy/node-agent/simulator and deploy/dra-driver applied, as a
// user would.
func cluster(t testing.TB) *framework.Cluster {
	t.Helper()
	c := framework.Shared(t)
	setupOnce.Do(func() { setupErr = setup(c) })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return c
}

func setup(c *framework.Cluster) error {
	ctx := context.Background()
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	if err := c.InstallCRDs(ctx, filepath.Join(root, "deploy", "crd", "bases")); err != nil {
		return err
	}
	for _, dir := range []string{"deploy/node-agent/simulator", "deploy/node-agent", "deploy/dra-driver"} {
		if err := util.ApplyKustomization(ctx, c, filepath.Join(root, dir), "nodeagent-test"); err != nil {
			return fmt.Errorf("applying %s: %w", dir, err)
		}
	}
	return nil
}

// createNodes creates fake GPU nodes with the framework's labels, nvidia.com/gpu.product among them.
func createNodes(t testing.TB, c *framework.Cluster, gpus int, names ...string) {
	t.Helper()
	var specs []framework.NodeSpec
	for _, n := range names {
		specs = append(specs, framework.NodeSpec{Name: n, GPUs: gpus, GPUProduct: h100Product})
	}
	if err := c.CreateNodes(context.Background(), specs...); err != nil {
		t.Fatal(err)
	}
}

// agentRun is an agent running in the test process until the test ends.
type agentRun struct {
	fleet    *nvmlmock.Fleet
	registry *prometheus.Registry
	cancel   context.CancelFunc
	done     chan error
}

// startAgent runs an agent with mock NVML of profile, as cfg's identity (the simulator's
// ServiceAccount when nil), until the test ends.
func startAgent(t testing.TB, cfg *rest.Config, profile string, opts nodeagent.Options) *agentRun {
	t.Helper()
	r := newAgent(t, cfg, profile, opts)
	t.Cleanup(r.stop)
	return r
}

// newAgent is startAgent for an agent that outlives the test: a benchmark's, shared by its runs.
func newAgent(t testing.TB, cfg *rest.Config, profile string, opts nodeagent.Options) *agentRun {
	t.Helper()
	c := cluster(t)
	if cfg == nil {
		var err error
		if cfg, err = c.ServiceAccountConfig(context.Background(), agentNamespace, simulatorSA); err != nil {
			t.Fatal(err)
		}
	}
	fleet, err := nvmlmock.NewFleet(profile)
	if err != nil {
		t.Fatal(err)
	}
	if opts.NVML == nil {
		opts.NVML = func(node *corev1.Node) (nvml.Interface, error) {
			return fleet.Server(node.Name, nvmlmock.Options{}), nil
		}
	}
	r := &agentRun{fleet: fleet, registry: prometheus.NewRegistry(), done: make(chan error, 1)}
	opts.Metrics = nodeagent.NewMetrics(r.registry)
	agent, err := nodeagent.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- agent.Run(ctx) }()
	return r
}

func (r *agentRun) stop() {
	r.cancel()
	err := <-r.done
	r.done <- err // stop is idempotent: a second stop reads what the agent ended with
}

// metric sums the samples of a metric family whose labels include want.
func (r *agentRun) metric(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	sum, _ := util.Gathered(t, r.registry, name, want)
	return sum
}

func (r *agentRun) polls(t testing.TB) float64 {
	return r.metric(t, "convoy_node_agent_poll_duration_seconds", nil)
}

func (r *agentRun) writes(t testing.TB) float64 {
	return r.metric(t, "convoy_node_agent_publishes_total", nil)
}

// waitPolls waits until the agent has polled n more times.
func (r *agentRun) waitPolls(t testing.TB, n float64) {
	t.Helper()
	target := r.polls(t) + n
	util.EventuallyErr(t, 20*time.Millisecond, 30*time.Second, fmt.Sprintf("%v more polls", n), func() (bool, error) {
		return r.polls(t) >= target, nil
	})
}

func getGPUNode(t testing.TB, c *framework.Cluster, name string) (*convoy.GPUNode, error) {
	t.Helper()
	g := &convoy.GPUNode{}
	err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, g)
	return g, err
}

// waitGPUNode waits until node's GPUNode satisfies cond and returns it.
func waitGPUNode(t testing.TB, c *framework.Cluster, name string, timeout time.Duration, what string, cond func(*convoy.GPUNode) bool) *convoy.GPUNode {
	t.Helper()
	var g *convoy.GPUNode
	util.EventuallyErr(t, 20*time.Millisecond, timeout, fmt.Sprintf("GPUNode %s: %s", name, what), func() (bool, error) {
		var err error
		if g, err = getGPUNode(t, c, name); err != nil {
			return false, err
		}
		return cond(g), fmt.Errorf("status %+v", g.Status)
	})
	return g
}

func published(capacity, healthy int32) func(*convoy.GPUNode) bool {
	return func(g *convoy.GPUNode) bool {
		return g.Status.Capacity == capacity && g.Status.Healthy == healthy && g.Status.ObservedTime != nil
	}
}

// nodeEvents lists the Events about a node with the given reason.
func nodeEvents(t testing.TB, c *framework.Cluster, node, reason string) []eventsv1.Event {
	t.Helper()
	list, err := c.Clientset.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func waitEvent(t testing.TB, c *framework.Cluster, node, reason string) eventsv1.Event {
	t.Helper()
	var found []eventsv1.Event
	util.EventuallyErr(t, 20*time.Millisecond, 10*time.Second, fmt.Sprintf("a %s Event on node %s", reason, node), func() (bool, error) {
		found = nodeEvents(t, c, node, reason)
		return len(found) > 0, nil
	})
	return found[0]
}

func getNode(t testing.TB, c *framework.Cluster, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

func isForbidden(err error) bool { return apierrors.IsForbidden(err) }
