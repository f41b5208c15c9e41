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

// Package queue measures what the Kueue integration costs: how fast the same Kueue admits
// TrainingJobs, whose Workloads Convoy's operator makes through Kueue's jobframework, and batch/v1
// Jobs of the same shape, whose Workloads Kueue's own job integration makes, in one run:
//
//	make bin
//	go test ./test/bench/queue -run '^$' -bench BenchmarkAdmission -benchtime 1x -timeout 30m [-jobs 1000]
//
// The cluster is test/framework's (kube-apiserver, etcd, kube-controller-manager, kwok) with the
// real Kueue manager configured by deploy/kueue and the operator with the queue integration and
// its webhook (test/util/queuetest), all on this machine. Each kind gets its own namespace and its own
// ClusterQueue with identical quotas, large enough for every job: admission is limited by the
// components, never by quota. Jobs are created by 16 clients sharing one rate limit (200 QPS); no
// scheduler runs, so admitted pods stay Pending.
//
// It reports, per kind, admissions per second from the first create to the last admission, and the
// p50 and p99 of each job's time from its create call returning to its Workload being Admitted as
// seen by a watch; then the TrainingJob rate relative to the Job rate. It asserts nothing about
// time.
package queue

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
	"github.com/convoy-dev/convoy/test/util/queuetest"
)

var (
	jobs   = flag.Int("jobs", 1000, "Jobs of each kind to admit.")
	warmup = flag.Int("warmup", 50, "Jobs of each kind admitted first, unmeasured.")
)

// Each job is a gang of podsPerJob pods, each with one GPU, one cpu and 1Gi of memory.
const (
	podsPerJob = 2
	creators   = 16
	flavor     = "bench-h100"
)

func TestMain(m *testing.M) {
	framework.BenchMain(m, framework.Options{AddToScheme: []func(*runtime.Scheme) error{
		convoy.AddToScheme, kueue.AddToScheme, schedv1alpha1.AddToScheme}})
}

// kind is one of the two contenders.
type kind struct {
	name string
	// object returns job i, named name, in namespace, for LocalQueue "q".
	object func(namespace, name string) client.Object
	// ownerKind is the kind of the Workloads' owner.
	ownerKind string
}

var kinds = []kind{
	{name: "batch/v1 Job", ownerKind: "Job", object: func(namespace, name string) client.Object {
		res := corev1.ResourceList{convoy.ResourceGPU: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{convoy.QueueNameLabel: "q"}},
			Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](podsPerJob), Completions: ptr.To[int32](podsPerJob),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "trainer", Image: "trainer:1",
						Resources: corev1.ResourceRequirements{Requests: res, Limits: corev1.ResourceList{convoy.ResourceGPU: resource.MustParse("1")}}}},
				}},
			},
		}
	}},
	{name: "TrainingJob", ownerKind: "TrainingJob", object: func(namespace, name string) client.Object {
		job := utiltesting.MakeTrainingJob(name, namespace).Workers(podsPerJob).GPUs(1).Resources("1", "1Gi").Queue("q").Obj()
		job.UID = ""
		return job
	}},
}

// result is one kind's measurement.
type result struct {
	// writes are the API server's create, update, patch and delete requests per job, by resource.
	writes   map[string]float64
	jobs     int
	rate     float64
	p50, p99 time.Duration
	// workloadP50 is the median time from a job's create to its Workload's creation.
	workloadP50 time.Duration
}

func BenchmarkAdmission(b *testing.B) {
	env := queuetest.StartShared(b, queuetest.Options{})
	c, ctx := env.Cluster, b.Context()
	if err := c.Client.Create(ctx, utiltestingapi.MakeResourceFlavor(flavor).NodeLabel(convoy.LabelGPUProduct, "NVIDIA-H100-80GB-HBM3").Obj()); err != nil {
		b.Fatal(err)
	}
	round := 0
	run := func(k kind, n int) result {
		round++
		r, err := admit(ctx, c, k, fmt.Sprintf("bench-%d", round), n)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	for _, k := range kinds {
		run(k, *warmup)
	}
	// Job, TrainingJob, TrainingJob, Job: each kind runs once early and once late, so that what
	// the cluster accumulates between rounds weighs on both alike.
	order := []int{0, 1, 1, 0}
	results := make([]result, len(kinds))
	for b.Loop() {
		var runs [2][]result
		for _, i := range order {
			runs[i] = append(runs[i], run(kinds[i], *jobs))
		}
		for i := range kinds {
			results[i] = combine(runs[i])
		}
	}
	job, tj := results[0], results[1]
	b.ReportMetric(job.rate, "jobs/s")
	b.ReportMetric(tj.rate, "trainingjobs/s")
	b.ReportMetric(100*(job.rate-tj.rate)/job.rate, "%slower")
	fmt.Printf("\nAdmission of %d jobs of %d pods × 1 GPU each, twice per kind (Job, TrainingJob, TrainingJob, Job), through one Kueue (%s), identical ClusterQueues:\n",
		*jobs, podsPerJob, framework.KueueVersion)
	for i, k := range kinds {
		fmt.Printf("  %-14s %7.1f admitted/s   create→Admitted p50 %-9v p99 %-9v   create→Workload p50 %v\n", k.name, results[i].rate,
			results[i].p50.Round(time.Millisecond), results[i].p99.Round(time.Millisecond), results[i].workloadP50.Round(time.Millisecond))
	}
	fmt.Printf("  API writes per job from the first create to the last admission, by resource and verb:\n")
	for i, k := range kinds {
		fmt.Printf("  %-14s %s\n", k.name, writeSummary(results[i].writes))
	}
	fmt.Printf("  TrainingJob admission rate is %.1f%% of the Job rate (the integration's cost: %+.1f%%)\n\n",
		100*tj.rate/job.rate, 100*(job.rate-tj.rate)/job.rate)
}

// combine is the rate over all runs (jobs over the sum of their durations) and the mean of their
// percentiles.
func combine(runs []result) result {
	var out result
	var jobs, seconds float64
	for _, r := range runs {
		jobs += float64(r.jobs)
		seconds += float64(r.jobs) / r.rate
		out.p50 += r.p50 / time.Duration(len(runs))
		out.p99 += r.p99 / time.Duration(len(runs))
		out.workloadP50 += r.workloadP50 / time.Duration(len(runs))
		if out.writes == nil {
			out.writes = map[string]float64{}
		}
		for res, w := range r.writes {
			out.writes[res] += w / float64(len(runs))
		}
	}
	out.jobs = int(jobs)
	out.rate = jobs / seconds
	return out
}

// admit creates n jobs of kind k in a fresh namespace with its own ClusterQueue, and measures until
// every one's Workload is admitted.
func admit(ctx context.Context, c *framework.Cluster, k kind, namespace string, n int) (result, error) {
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		clusterQueue(namespace, n),
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "q"},
			Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(namespace)}},
	} {
		if err := c.Client.Create(ctx, obj); err != nil {
			return result{}, err
		}
	}
	if err := util.WaitDefaultServiceAccount(ctx, c.Client, namespace); err != nil {
		return result{}, err
	}

	admitted, stop, err := watchAdmissions(ctx, c, namespace, k.ownerKind)
	if err != nil {
		return result{}, err
	}
	defer stop()

	before, err := apiWrites(ctx, c)
	if err != nil {
		return result{}, err
	}
	created := make([]time.Time, n)
	names := make(chan int)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	start := time.Now()
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				if err := c.Client.Create(ctx, k.object(namespace, fmt.Sprintf("job-%d", i))); err != nil {
					errs <- err
					return
				}
				created[i] = time.Now()
			}
		}()
	}
	for i := range n {
		names <- i
	}
	close(names)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return result{}, fmt.Errorf("creating %s: %w", k.name, err)
	}

	var at, wlCreated map[string]time.Time
	deadline := time.Now().Add(20 * time.Minute)
	for at, wlCreated = admitted(); len(at) < n; at, wlCreated = admitted() {
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("%d of %d %ss admitted after 20 minutes", len(at), n, k.name)
		}
		select {
		case <-ctx.Done():
			return result{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	var last time.Time
	latencies, toWorkload := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for i := range n {
		name := fmt.Sprintf("job-%d", i)
		t := at[name]
		if t.After(last) {
			last = t
		}
		latencies = append(latencies, max(t.Sub(created[i]), 0))
		toWorkload = append(toWorkload, max(wlCreated[name].Sub(created[i]), 0))
	}
	slices.Sort(latencies)
	slices.Sort(toWorkload)
	after, err := apiWrites(ctx, c)
	if err != nil {
		return result{}, err
	}
	writes := map[string]float64{}
	for res, w := range after {
		if d := w - before[res]; d > 0 {
			writes[res] = d / float64(n)
		}
	}
	return result{
		writes:      writes,
		jobs:        n,
		rate:        float64(n) / last.Sub(start).Seconds(),
		p50:         latencies[n/2],
		p99:         latencies[n*99/100],
		workloadP50: toWorkload[n/2],
	}, nil
}

// watchAdmissions records when an informer of its own first sees the Workload of each owner of
// ownerKind in namespace, and when it first sees it Admitted; admitted returns copies of both.
func watchAdmissions(ctx context.Context, c *framework.Cluster, namespace, ownerKind string) (admitted func() (at, created map[string]time.Time), stop func(), err error) {
	informers, err := cache.New(c.RESTConfig, cache.Options{Scheme: c.Scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		return nil, nil, err
	}
	inf, err := informers.GetInformer(ctx, &kueue.Workload{})
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	at, seen := map[string]time.Time{}, map[string]time.Time{}
	report := func(obj any) {
		wl, ok := obj.(*kueue.Workload)
		if !ok {
			return
		}
		owner := metav1.GetControllerOf(wl)
		if owner == nil || owner.Kind != ownerKind {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, ok := seen[owner.Name]; !ok {
			seen[owner.Name] = now
		}
		if _, ok := at[owner.Name]; !ok && meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
			at[owner.Name] = now
		}
	}
	if _, err := inf.AddEventHandler(handlerFuncs{add: report, update: func(_, obj any) { report(obj) }}); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		cancel()
		return nil, nil, fmt.Errorf("the Workload informer of %s did not sync", namespace)
	}
	return func() (map[string]time.Time, map[string]time.Time) {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(at), maps.Clone(seen)
	}, cancel, nil
}

// handlerFuncs adapts functions to the informer's handler interface.
type handlerFuncs struct {
	add    func(obj any)
	update func(oldObj, newObj any)
}

func (h handlerFuncs) OnAdd(obj any, _ bool)       { h.add(obj) }
func (h handlerFuncs) OnUpdate(oldObj, newObj any) { h.update(oldObj, newObj) }
func (h handlerFuncs) OnDelete(any)                {}

// clusterQueue admits n jobs of podsPerJob pods at once: quota is never what limits admission.
func clusterQueue(name string, n int) *kueue.ClusterQueue {
	pods := int64(n * podsPerJob)
	return utiltestingapi.MakeClusterQueue(name).
		NamespaceSelector(&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: name}}).
		ResourceGroup(*utiltestingapi.MakeFlavorQuotas(flavor).
			Resource(convoy.ResourceGPU, resource.NewQuantity(pods, resource.DecimalSI).String()).
			Resource(corev1.ResourceCPU, resource.NewQuantity(pods, resource.DecimalSI).String()).
			Resource(corev1.ResourceMemory, resource.NewQuantity(pods<<30, resource.BinarySI).String()).Obj()).
		Obj()
}

var requestTotal = regexp.MustCompile(`^apiserver_request_total\{(.*)\} (\S+)$`)
var label = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiWrites reads the API server's count of mutating requests, by resource (and subresource).
func apiWrites(ctx context.Context, c *framework.Cluster) (map[string]float64, error) {
	rc, err := rest.HTTPClientFor(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.RESTConfig.Host+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := rc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestTotal.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range label.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		default:
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, err
		}
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		res += " " + labels["verb"]
		out[res] += v
	}
	return out, sc.Err()
}

// writeSummary prints the total and the resources with at least 0.1 writes per job.
func writeSummary(writes map[string]float64) string {
	var total float64
	var parts []string
	for _, res := range slices.Sorted(maps.Keys(writes)) {
		total += writes[res]
		if writes[res] >= 0.1 {
			parts = append(parts, fmt.Sprintf("%s %.1f", res, writes[res]))
		}
	}
	return fmt.Sprintf("%.1f: %s", total, strings.Join(parts, ", "))
}
