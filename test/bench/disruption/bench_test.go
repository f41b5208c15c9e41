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

// Package disruption measures the work a preempted gang loses, in epochs since the checkpoint it
// resumes from, with and without the operator's checkpoint before a stop, over a scripted run of
// many Kueue preemptions (see README.md):
//
//	go test ./test/bench/disruption -run '^$' -bench BenchmarkWorkLost -benchtime 1x -timeout 30m [-preemptions 20]
//
// The cluster is test/framework's with the real Kueue manager and the operator (test/util/queuetest)
// and deploy/queue's priority classes. Each preemption: a low-priority gang of 2 × 8 GPUs runs in
// a ClusterQueue of 16 GPUs; the benchmark plays its training code through the real progress
// endpoint, reporting a random number of epochs (1 to 3 × the checkpoint frequency) and a
// checkpoint every -frequency epochs; then a high-priority gang of the same shape preempts it.
// While it stops, the training code answers a checkpoint request in a reply at once. Work lost is
// the epochs reported minus the epoch of the checkpoint the job would resume from. With
// preemptionGraceSeconds 0 the gang stops at once, as without coordination; with 60 the operator
// asks first. It also reports how long the preemptor waited, from its creation to its admission.
package disruption

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
	"github.com/convoy-dev/convoy/test/util/queuetest"
)

var (
	preemptions = flag.Int("preemptions", 20, "Preemptions per mode.")
	frequency   = flag.Int("frequency", 5, "Epochs between the gang's periodic checkpoints.")
	seed        = flag.Uint64("seed", 1, "Seed of the epochs trained before each preemption.")
)

const (
	product = "NVIDIA-H100-80GB-HBM3"
	flavor  = "h100"
	timeout = 2 * time.Minute
)

func TestMain(m *testing.M) {
	framework.BenchMain(m, framework.Options{AddToScheme: []func(*runtime.Scheme) error{
		convoy.AddToScheme, kueue.AddToScheme, schedv1alpha1.AddToScheme}})
}

// mode is a run of preemptions with one preemptionGraceSeconds.
type mode struct {
	name  string
	grace int32
}

// outcome is one preemption's measurement.
type outcome struct {
	lost int32
	wait time.Duration
}

func BenchmarkWorkLost(b *testing.B) {
	env := queuetest.StartShared(b, queuetest.Options{})
	c, ctx := env.Cluster, b.Context()
	if out, err := env.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(env.Root, "deploy/queue/priorities.yaml")); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	nodes := []framework.NodeSpec{{Name: "h100-0", GPUs: 8, GPUProduct: product}, {Name: "h100-1", GPUs: 8, GPUProduct: product}}
	if err := c.CreateNodes(ctx, nodes...); err != nil {
		b.Fatal(err)
	}
	if err := c.Client.Create(ctx, utiltestingapi.MakeResourceFlavor(flavor).NodeLabel(convoy.LabelGPUProduct, product).Obj()); err != nil {
		b.Fatal(err)
	}
	modes := []mode{{"stopped at once (preemptionGraceSeconds 0)", 0}, {"checkpoint before the stop (preemptionGraceSeconds 60)", 60}}
	results := map[string][]outcome{}
	for range b.N {
		for _, m := range modes {
			r := &run{b: b, ctx: ctx, env: env, c: c, ns: fmt.Sprintf("bench-grace-%d", m.grace), grace: m.grace,
				rnd: rand.New(rand.NewPCG(*seed, 0))}
			r.setup()
			for i := range *preemptions {
				results[m.name] = append(results[m.name], r.preempt(i))
			}
		}
	}
	fmt.Printf("\n%d preemptions per mode; periodic checkpoint every %d epochs; epochs before each preemption 1 to %d (seed %d)\n\n",
		*preemptions, *frequency, 3**frequency, *seed)
	fmt.Printf("| mode | epochs lost per preemption (mean) | max | preemptor's wait p50 | p90 |\n|---|---|---|---|---|\n")
	for _, m := range modes {
		out := results[m.name]
		var sum, most int32
		var waits []time.Duration
		for _, o := range out {
			sum += o.lost
			most = max(most, o.lost)
			waits = append(waits, o.wait)
		}
		slices.Sort(waits)
		mean := float64(sum) / float64(len(out))
		fmt.Printf("| %s | %.2f | %d | %s | %s |\n", m.name, mean, most,
			waits[len(waits)/2].Round(10*time.Millisecond), waits[len(waits)*9/10].Round(10*time.Millisecond))
		b.ReportMetric(mean, fmt.Sprintf("epochs-lost/grace-%ds", m.grace))
	}
}

// run is one mode's namespace and ClusterQueue.
type run struct {
	b     *testing.B
	ctx   context.Context
	env   *queuetest.Env
	c     *framework.Cluster
	ns    string
	grace int32
	rnd   *rand.Rand
}

func (r *run) must(err error) {
	r.b.Helper()
	if err != nil {
		r.b.Fatal(err)
	}
}

func (r *run) setup() {
	k := r.c.Client
	r.must(k.Create(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}))
	r.must(k.Create(r.ctx, utiltestingapi.MakeClusterQueue(r.ns).
		NamespaceSelector(&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: r.ns}}).
		Preemption(kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}).
		ResourceGroup(*utiltestingapi.MakeFlavorQuotas(flavor).
			Resource(convoy.ResourceGPU, "16").Resource(corev1.ResourceCPU, "1000").Resource(corev1.ResourceMemory, "10Ti").Obj()).
		Obj()))
	r.must(k.Create(r.ctx, utiltestingapi.MakeLocalQueue("q", r.ns).ClusterQueue(r.ns).Obj()))
	r.must(util.WaitDefaultServiceAccount(r.ctx, k, r.ns))
}

func (r *run) job(name, priority string) *convoy.TrainingJob {
	job := utiltesting.MakeTrainingJob(name, r.ns).Workers(2).GPUs(8).
		Scheduling(convoy.SchedulingSpec{Queue: "q", PriorityClassName: priority}).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Frequency: int32(*frequency), PreemptionGraceSeconds: ptr.To(r.grace),
			Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}).Obj()
	job.UID = ""
	return job
}

func (r *run) poll(what string, cond wait.ConditionWithContextFunc) {
	r.b.Helper()
	if err := wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, timeout, true, cond); err != nil {
		r.b.Fatalf("waiting for %s: %v", what, err)
	}
}

func (r *run) get(name string) *convoy.TrainingJob {
	r.b.Helper()
	job := &convoy.TrainingJob{}
	r.must(r.c.Client.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: name}, job))
	return job
}

// preempt runs the i-th preemption and returns its outcome.
func (r *run) preempt(i int) outcome {
	low, high := fmt.Sprintf("low-%d", i), fmt.Sprintf("high-%d", i)
	r.must(r.c.Client.Create(r.ctx, r.job(low, "low")))
	rank0 := r.startGang(low)
	epochs := int32(1 + r.rnd.IntN(3**frequency))
	for e := int32(1); e <= epochs; e++ {
		r.report(rank0, "progress", progress.Report{Epoch: ptr.To(e)})
		if e%int32(*frequency) == 0 {
			r.report(rank0, "checkpoint", progress.Checkpoint{Path: fmt.Sprintf("%s/epoch-%d", uri(rank0), e), Epoch: e})
		}
	}
	created := time.Now()
	r.must(r.c.Client.Create(r.ctx, r.job(high, "high")))
	answered := false
	r.poll(low+" stopped", func(context.Context) (bool, error) {
		if r.get(low).Status.State == convoy.StateQueued {
			return true, nil
		}
		// The training code reports as it trains on; a reply may ask for a checkpoint.
		reply, err := r.env.Report(r.ctx, rank0, "progress", progress.Report{Epoch: ptr.To(epochs)})
		if err == nil && reply.CheckpointRequested && !answered {
			answered = true
			r.report(rank0, "checkpoint", progress.Checkpoint{Path: fmt.Sprintf("%s/epoch-%d", uri(rank0), epochs), Epoch: epochs})
		}
		return false, nil
	})
	r.poll(high+" admitted", func(context.Context) (bool, error) { return r.get(high).Status.Admission != nil, nil })
	o := outcome{lost: epochs, wait: time.Since(created)}
	if cp := r.get(low).Status.Checkpoint; cp != nil {
		o.lost = epochs - cp.Epoch
	}
	for _, name := range []string{low, high} {
		r.must(client.IgnoreNotFound(r.c.Client.Delete(r.ctx, r.get(name), client.PropagationPolicy(metav1.DeletePropagationBackground))))
	}
	r.poll("the jobs' pods and Workloads gone", func(ctx context.Context) (bool, error) {
		pods, wls := &corev1.PodList{}, &kueue.WorkloadList{}
		if err := r.c.Client.List(ctx, pods, client.InNamespace(r.ns)); err != nil {
			return false, nil
		}
		if err := r.c.Client.List(ctx, wls, client.InNamespace(r.ns)); err != nil {
			return false, nil
		}
		return len(pods.Items) == 0 && len(wls.Items) == 0, nil
	})
	return o
}

// startGang binds the job's two pods to the two nodes, as a scheduler would, and returns rank 0's
// pod once the job runs.
func (r *run) startGang(name string) *corev1.Pod {
	var pods []corev1.Pod
	r.poll("2 pods of "+name, func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := r.c.Client.List(ctx, list, client.InNamespace(r.ns), client.MatchingLabels{convoy.LabelJobName: name}); err != nil {
			return false, nil
		}
		pods = list.Items
		return len(pods) == 2, nil
	})
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return strings.Compare(a.Labels[convoy.LabelReplicaRank], b.Labels[convoy.LabelReplicaRank])
	})
	for i := range pods {
		r.must(r.c.Clientset.CoreV1().Pods(r.ns).Bind(r.ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pods[i].Name, Namespace: r.ns, UID: pods[i].UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: fmt.Sprintf("h100-%d", i)},
		}, metav1.CreateOptions{}))
	}
	r.poll(name+" running", func(context.Context) (bool, error) { return r.get(name).Status.State == convoy.StateRunning, nil })
	return &pods[0]
}

func (r *run) report(pod *corev1.Pod, kind string, body any) {
	r.b.Helper()
	_, err := r.env.Report(r.ctx, pod, kind, body)
	r.must(err)
}

func uri(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Containers[0].Env {
		if v.Name == "CONVOY_CHECKPOINT_URI" {
			return v.Value
		}
	}
	return ""
}
