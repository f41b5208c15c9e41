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
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// benchFleet is an agent serving n fake nodes, set up once per size for all runs of a benchmark.
type benchFleet struct {
	run    *agentRun
	nodes  []string
	report map[string]float64 // measured once, at set-up
}

var (
	benchMu     sync.Mutex
	benchFleets = map[int]*benchFleet{}
)

const benchPoll = time.Second

// BenchmarkAgent measures one agent process serving 1 and 1,000 fake H100 nodes against the real
// API server. ns/op is the time from a GPU fault (an ECC error, raised as an NVML event) to a watch
// of the GPUNode showing it. It also reports, measured once per size: the time to publish every
// node's GPUNode and labels from a cold start (initial-publish-s), the mean latency of a status write
// (status-write-ms), and over 5 s in which nothing changes: the test process's CPU (the agent's,
// with its informers and the Go runtime) per node poll (cpu-us/poll) and per second (cpu-ms/s),
// the API writes (quiet-writes) and the live heap after a GC (heap-MB).
//
//	go test ./test/integration/nodeagent -run '^$' -bench BenchmarkAgent -benchtime 10x
func BenchmarkAgent(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			f := fleet(b, n)
			i := 0
			b.ResetTimer()
			for range b.N {
				node, gpu := f.nodes[i%len(f.nodes)], i%8
				i++
				waitHealth(b, node, gpu, convoy.GPUUnhealthy, func() error {
					return f.run.fleet.Inject(node, gpu, nvmlmock.Fault{Kind: nvmlmock.FaultECC})
				})
				b.StopTimer()
				// Recovered at the next poll.
				waitHealth(b, node, gpu, convoy.GPUHealthy, func() error { return f.run.fleet.Clear(node, gpu) })
				b.StartTimer()
			}
			for k, v := range f.report {
				b.ReportMetric(v, k)
			}
		})
	}
}

func fleet(b *testing.B, n int) *benchFleet {
	benchMu.Lock()
	defer benchMu.Unlock()
	if f, ok := benchFleets[n]; ok {
		return f
	}
	c := cluster(b)
	ctx := context.Background()
	f := &benchFleet{report: map[string]float64{}}
	// The agent's log lines would land in the middle of the benchmark's result lines.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	var specs []framework.NodeSpec
	for i := range n {
		name := fmt.Sprintf("bench-%d-%04d", n, i)
		f.nodes = append(f.nodes, name)
		specs = append(specs, framework.NodeSpec{Name: name, GPUs: 8, Labels: map[string]string{"convoy.dev/bench": fmt.Sprint(n)}})
	}
	if err := c.CreateNodes(ctx, specs...); err != nil {
		b.Fatal(err)
	}
	sa, err := c.ServiceAccountConfig(ctx, agentNamespace, simulatorSA)
	if err != nil {
		b.Fatal(err)
	}
	sa.QPS, sa.Burst = 500, 1000
	began := time.Now()
	f.run = newAgent(b, sa, nvmlmock.ProfileH100x8, nodeagent.Options{
		Nodes: f.nodes, PollInterval: benchPoll, Heartbeat: time.Hour,
	})
	util.EventuallyErr(b, 20*time.Millisecond, 5*time.Minute, fmt.Sprintf("%d GPUNodes published", n), func() (bool, error) {
		list := &convoy.GPUNodeList{}
		if err := c.Client.List(ctx, list); err != nil {
			return false, err
		}
		done := 0
		for _, g := range list.Items {
			if strings.HasPrefix(g.Name, fmt.Sprintf("bench-%d-", n)) && g.Status.Healthy == 8 {
				done++
			}
		}
		return done == n, fmt.Errorf("%d of %d", done, n)
	})
	// Then the labels: published means no more writes for three poll intervals.
	for last := -1.0; ; {
		w := f.run.writes(b)
		if w == last {
			break
		}
		last = w
		time.Sleep(3 * benchPoll)
	}
	f.report["initial-publish-s"] = time.Since(began).Seconds() - 3*benchPoll.Seconds()
	sum, count := f.run.histogram(b, "convoy_node_agent_publish_duration_seconds", map[string]string{"kind": "status"})
	f.report["status-write-ms"] = sum / count * 1000

	// Steady state: a quiet window.
	writes, polls, cpu := f.run.writes(b), f.run.polls(b), processCPU()
	time.Sleep(5 * time.Second)
	used := processCPU() - cpu
	f.report["cpu-us/poll"] = used.Seconds() * 1e6 / (f.run.polls(b) - polls)
	f.report["cpu-ms/s"] = used.Seconds() * 1000 / 5
	f.report["quiet-writes"] = f.run.writes(b) - writes
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	f.report["heap-MB"] = float64(ms.HeapAlloc) / (1 << 20)
	benchFleets[n] = f
	return f
}

// waitHealth watches node's GPUNode, runs change, and waits until GPU gpu has the wanted health.
func waitHealth(b *testing.B, node string, gpu int, want convoy.GPUHealth, change func() error) {
	c := cluster(b)
	wc, err := client.NewWithWatch(c.RESTConfig, client.Options{Scheme: c.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := wc.Watch(ctx, &convoy.GPUNodeList{}, client.MatchingFields{"metadata.name": node})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	if err := change(); err != nil {
		b.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if g, ok := ev.Object.(*convoy.GPUNode); ok && len(g.Status.GPUs) > gpu && g.Status.GPUs[gpu].Health == want {
			return
		}
	}
	b.Fatalf("GPU %d of %s not %s after 30s", gpu, node, want)
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// histogram returns the sum and count of a histogram's samples whose labels include want.
func (r *agentRun) histogram(t testing.TB, name string, want map[string]string) (sum, count float64) {
	t.Helper()
	families, err := r.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			sum += m.GetHistogram().GetSampleSum()
			count += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, count
}
