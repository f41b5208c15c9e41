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

// Package admission measures what convoy-scheduler's placement admission check
// (scheduler-plugin/pkg/admissioncheck) changes when quota exceeds what the fleet can place: the
// time jobs spend admitted by Kueue while their gang has no place, the GPU quota they hold
// meanwhile, and the jobs completed per hour, with plain Kueue + convoy-scheduler and with the
// check, in one run (see README.md):
//
//	make bin
//	go test ./test/bench/admission -run '^$' -bench BenchmarkAdmittedUnplaced -benchtime 1x -timeout 60m [-jobs 24] [-span 60s] [-seed 1]
//
// The stack is test/e2e/stack's (the real kube-apiserver, Kueue manager, convoy-operator,
// convoy-scheduler and simtrainer) on 16 kwok nodes of 8 H100s in 4 racks. One node of every rack
// is held by a pod outside any queue, so 96 of the 128 GPUs are free and no rack has 4 free nodes;
// each mode's ClusterQueue has quota for all 128. The same scripted workload runs in each mode:
// -jobs TrainingJobs arriving over -span at random times, each of 1, 2 or 3 workers × 8 GPUs that
// require one rack, training 20 to 60 epochs of a second. It asserts nothing about time.
package admission

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

var (
	jobs = flag.Int("jobs", 24, "TrainingJobs per mode.")
	span = flag.Duration("span", time.Minute, "Time over which the jobs arrive.")
	seed = flag.Uint64("seed", 1, "Seed of the jobs' arrival times, sizes and lengths.")
)

const (
	product = "NVIDIA-H100-80GB-HBM3"
	// flavor is deploy/queue's ResourceFlavor of on-demand H100 nodes.
	flavor      = "h100-on-demand"
	gpusPerNode = 8
	// sample is how often the run looks at the jobs, their Workloads and pods.
	sample = 500 * time.Millisecond
	// limit bounds one mode's run.
	limit = 30 * time.Minute
	// placementCheck is deploy/queue's AdmissionCheck of the placement check.
	placementCheck = "convoy-placement"
)

// fleet is 1 zone × 2 blocks × 2 racks × 4 nodes of 8 GPUs, as the e2e tests' fleet.
var fleet = framework.Fleet{Zones: 1, BlocksPerZone: 2, RacksPerBlock: 2, NodesPerRack: 4, GPUsPerNode: gpusPerNode,
	Product: product, Labels: map[string]string{stack.LabelCapacityType: "on-demand"}}

func TestMain(m *testing.M) {
	kwokArgs, err := stack.KwokArgs(context.Background())
	if err != nil {
		panic(err)
	}
	framework.BenchMain(m, framework.Options{KwokArgs: kwokArgs, AddToScheme: []func(*runtime.Scheme) error{
		convoy.AddToScheme, kueue.AddToScheme, schedv1alpha1.AddToScheme}})
}

// arrival is one job of the script.
type arrival struct {
	at      time.Duration
	workers int32
	epochs  int32
}

// script returns the workload: n jobs at random times within span, sorted by time.
func script(n int, span time.Duration, seed uint64) []arrival {
	rnd := rand.New(rand.NewPCG(seed, 0))
	out := make([]arrival, n)
	for i := range out {
		out[i] = arrival{at: time.Duration(rnd.Int64N(int64(span))), workers: int32(1 + rnd.IntN(3)), epochs: int32(20 + rnd.IntN(41))}
	}
	// The jobs are named in arrival order.
	slices.SortStableFunc(out, func(a, b arrival) int { return cmp.Compare(a.at, b.at) })
	return out
}

// mode is one ClusterQueue configuration.
type mode struct {
	name   string
	ns     string
	checks *kueue.AdmissionChecksStrategy
}

// result is one mode's measurement.
type result struct {
	completed int
	makespan  time.Duration
	// unplaced is the time summed over jobs that each was admitted while its gang was not bound
	// whole; most is the longest for one job; unplacedGPUs is the GPU quota those jobs held
	// meanwhile, in GPU-seconds.
	unplaced, most time.Duration
	unplacedGPUs   float64
	// reservedGPUs is the GPU quota held by jobs whose quota Kueue reserved (admitted or waiting
	// for their admission checks) while their gang was not bound whole, in GPU-seconds.
	reservedGPUs float64
	// turnaround is the mean time from a job's creation to its completion.
	turnaround time.Duration
}

func BenchmarkAdmittedUnplaced(b *testing.B) {
	c := framework.Shared(b)
	ctx := b.Context()
	if err := c.CreateNodes(ctx, fleet.Nodes()...); err != nil {
		b.Fatal(err)
	}
	if _, err := stack.Start(ctx, c, stack.Options{
		Agents:     []stack.AgentPool{{Profile: "h100-8", Selector: framework.LabelGPUProduct + "=" + product}},
		SimTrainer: time.Second,
	}); err != nil {
		b.Fatal(err)
	}
	fragment(b, c)
	work := script(*jobs, *span, *seed)
	modes := []mode{
		{name: "Kueue + convoy-scheduler", ns: "bench-plain"},
		{name: "Kueue + convoy-scheduler + placement check", ns: "bench-check",
			checks: &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: placementCheck}}}},
	}
	results := make([]result, len(modes))
	for range b.N {
		for i, m := range modes {
			results[i] = run(b, c, m, work)
		}
	}
	gpus := 0
	for _, a := range work {
		gpus += int(a.workers) * gpusPerNode
	}
	fmt.Printf("\n%d TrainingJobs (%d GPUs in all) arriving over %s (seed %d), each 1 to 3 workers × 8 GPUs in one rack, 20 to 60 epochs of 1 s;\n"+
		"16 nodes × 8 GPUs in 4 racks, one node of each held outside the queue: 96 GPUs placeable, quota 128.\n\n", len(work), gpus, *span, *seed)
	fmt.Printf("| mode | admitted but unplaced: total | longest job | quota held admitted but unplaced | quota reserved but unplaced | completed | makespan | jobs/hour | mean creation to completion |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|\n")
	for i, m := range modes {
		r := results[i]
		fmt.Printf("| %s | %s | %s | %.0f GPU·s | %.0f GPU·s | %d/%d | %s | %.0f | %s |\n", m.name,
			r.unplaced.Round(100*time.Millisecond), r.most.Round(100*time.Millisecond), r.unplacedGPUs, r.reservedGPUs,
			r.completed, len(work), r.makespan.Round(time.Second), float64(r.completed)/r.makespan.Hours(), r.turnaround.Round(time.Second))
		b.ReportMetric(r.unplacedGPUs, "admitted-unplaced-GPU-s/"+m.ns)
	}
}

// fragment binds a pod of 8 GPUs, outside any queue, to the first node of every rack.
func fragment(b *testing.B, c *framework.Cluster) {
	ctx := b.Context()
	const ns = "bench-fillers"
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	if err := util.WaitDefaultServiceAccount(b.Context(), c.Client, ns); err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range fleet.Nodes() {
		rack := n.Rack
		if seen[rack] {
			continue
		}
		seen[rack] = true
		gpus := corev1.ResourceList{framework.ResourceGPU: resource.MustParse(strconv.Itoa(gpusPerNode))}
		if err := c.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "filler-" + n.Name},
			Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "c", Image: "filler:1",
				Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}}}}); err != nil {
			b.Fatal(err)
		}
	}
}

// queue creates the mode's namespace, its ClusterQueue of 128 GPUs and the LocalQueue "q".
func queue(b *testing.B, c *framework.Cluster, m mode) {
	ctx := b.Context()
	cq := utiltestingapi.MakeClusterQueue(m.ns).
		NamespaceSelector(&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: m.ns}}).
		ResourceGroup(*utiltestingapi.MakeFlavorQuotas(flavor).
			Resource(framework.ResourceGPU, "128").Resource(corev1.ResourceCPU, "10k").Resource(corev1.ResourceMemory, "100Ti").Obj()).
		Obj()
	cq.Spec.AdmissionChecksStrategy = m.checks
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.ns}},
		cq,
		utiltestingapi.MakeLocalQueue("q", m.ns).ClusterQueue(m.ns).Obj(),
	} {
		if err := c.Client.Create(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	if err := util.WaitDefaultServiceAccount(b.Context(), c.Client, m.ns); err != nil {
		b.Fatal(err)
	}
}

func job(ns string, i int, a arrival) *convoy.TrainingJob {
	return &convoy.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("job-%02d", i)},
		Spec: convoy.TrainingJobSpec{
			Model: "llama-3-8b", Dataset: "s3://corpus/en", Framework: convoy.FrameworkPyTorch,
			NumWorkers: a.workers, GPUsPerWorker: ptr.To[int32](gpusPerNode), Image: "trainer:1",
			Hyperparameters: &convoy.Hyperparameters{Epochs: ptr.To(a.epochs)},
			Scheduling: &convoy.SchedulingSpec{Queue: "q",
				Topology: &convoy.TopologySpec{Level: convoy.TopologyRack}},
		},
	}
}

// tracked is what the run saw of one job.
type tracked struct {
	created, completed time.Time
	gpus               int
	unplaced           time.Duration
}

// run plays the script in mode m: it creates each job at its time and samples, every 500 ms, which
// jobs are admitted (or have quota reserved) with their gang not bound whole, until every job
// completed.
func run(b *testing.B, c *framework.Cluster, m mode, work []arrival) result {
	ctx := b.Context()
	k := c.Client
	queue(b, c, m)
	jobsByName := map[string]*tracked{}
	var r result
	start := time.Now()
	last := start
	next := 0
	for {
		now := time.Now()
		for ; next < len(work) && now.Sub(start) >= work[next].at; next++ {
			j := job(m.ns, next, work[next])
			if err := k.Create(ctx, j); err != nil {
				b.Fatal(err)
			}
			jobsByName[j.Name] = &tracked{created: time.Now(), gpus: int(work[next].workers) * gpusPerNode}
		}
		dt := now.Sub(last)
		last = now
		list, wls, pods := &convoy.TrainingJobList{}, &kueue.WorkloadList{}, &corev1.PodList{}
		for _, l := range []client.ObjectList{list, wls, pods} {
			if err := k.List(ctx, l, client.InNamespace(m.ns)); err != nil {
				b.Fatal(err)
			}
		}
		reserved, admitted := map[string]bool{}, map[string]bool{}
		for _, wl := range wls.Items {
			if len(wl.OwnerReferences) > 0 {
				owner := wl.OwnerReferences[0].Name
				reserved[owner] = meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
				admitted[owner] = meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
			}
		}
		bound := map[string]int{}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				bound[p.Labels[convoy.LabelJobName]]++
			}
		}
		done := 0
		for _, j := range list.Items {
			t := jobsByName[j.Name]
			if t == nil {
				continue
			}
			if !t.completed.IsZero() {
				done++
				continue
			}
			if j.Status.State == convoy.StateCompleted {
				t.completed = now
				done++
				continue
			}
			if j.Status.State == convoy.StateFailed {
				b.Fatalf("%s/%s failed: %+v", m.ns, j.Name, j.Status.Conditions)
			}
			if bound[j.Name] >= int(j.Spec.NumWorkers) {
				continue
			}
			if admitted[j.Name] {
				t.unplaced += dt
				r.unplacedGPUs += float64(t.gpus) * dt.Seconds()
			}
			if reserved[j.Name] {
				r.reservedGPUs += float64(t.gpus) * dt.Seconds()
			}
		}
		if done == len(work) {
			break
		}
		if now.Sub(start) > limit {
			b.Fatalf("%s: %d of %d jobs completed after %s", m.name, done, len(work), limit)
		}
		time.Sleep(sample - time.Since(now))
	}
	var turnaround time.Duration
	for _, t := range jobsByName {
		r.completed++
		r.unplaced += t.unplaced
		r.most = max(r.most, t.unplaced)
		r.makespan = max(r.makespan, t.completed.Sub(start))
		turnaround += t.completed.Sub(t.created)
	}
	r.turnaround = turnaround / time.Duration(len(jobsByName))
	cleanup(b, c, m)
	return r
}

// cleanup deletes the mode's jobs and waits until their pods are gone, so the next mode finds the
// fleet as this one did.
func cleanup(b *testing.B, c *framework.Cluster, m mode) {
	ctx := b.Context()
	k := c.Client
	if err := k.DeleteAllOf(ctx, &convoy.TrainingJob{}, client.InNamespace(m.ns)); err != nil {
		b.Fatal(err)
	}
	_ = k.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(m.ns), client.GracePeriodSeconds(0))
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := k.List(ctx, pods, client.InNamespace(m.ns)); err != nil {
			return false, nil
		}
		return len(pods.Items) == 0, nil
	}); err != nil {
		b.Fatalf("waiting for %s's pods to go: %v", m.ns, err)
	}
}
