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

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner/synth"
	"github.com/convoy-dev/convoy/test/framework"
)

const (
	namespace     = "bench"
	schedulerName = "convoy-scheduler"
	workers       = 32
)

type runSpec struct {
	fleet synth.Fleet
	mix   synth.Mix
	gangs []synth.Gang
	// namespaces spreads the gangs over that many namespaces, round robin (1: all in "bench").
	namespaces int
}

// namespaceNames lists the run's namespaces.
func (s runSpec) namespaceNames() []string {
	if s.namespaces <= 1 {
		return []string{namespace}
	}
	out := make([]string, s.namespaces)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", namespace, i)
	}
	return out
}

// namespaceOf is gang i's namespace.
func (s runSpec) namespaceOf(i int) string {
	names := s.namespaceNames()
	return names[i%len(names)]
}

// benchQPS and benchBurst are the client rate of the benchmark's own client.
const (
	benchQPS   = 1000
	benchBurst = 2000
)

// run measures one contender on a fresh control plane.
func run(ctx context.Context, o options, spec runSpec, sc Scheduler) (*Result, error) {
	stateDir := ""
	if o.stateDir != "" {
		stateDir = filepath.Join(o.stateDir, fmt.Sprintf("%d-%s-%s", spec.fleet.Nodes, spec.mix.Name, sc))
	}
	// Plain Node objects have no kubelet: without the node lifecycle controller they stay Ready
	// and untainted for the whole run.
	kcmArgs := []string{"--controllers=*,-node-lifecycle-controller"}
	apiServerArgs := o.apiServerArgs
	if o.dra {
		// The resource claim controller makes a claim and writes a pod status per pod: at the
		// framework's 100 QPS it would pace the DRA gangs' arrival.
		// It reads a pod's PodGroup only with GenericWorkload on, and makes no claim for a pod
		// that names one otherwise.
		kcmArgs = append(kcmArgs, fmt.Sprintf("--kube-api-qps=%g", o.qps), fmt.Sprintf("--kube-api-burst=%d", o.burst), draFeatureGates)
		apiServerArgs = append([]string{draFeatureGates, draRuntimeConfig}, apiServerArgs...)
	}
	c, err := framework.Start(ctx, framework.Options{
		BinDir:                o.binDir,
		ControlPlaneBinDir:    o.controlPlaneBin,
		StateDir:              stateDir,
		ControllerManagerArgs: kcmArgs,
		APIServerArgs:         apiServerArgs,
		AddToScheme:           []func(*runtime.Scheme) error{convoy.AddToScheme, schedv1alpha1.AddToScheme},
		StartTimeout:          3 * time.Minute,
		// The nodes are plain Node objects: no kwok, whose watch of every bound pod the API server
		// would otherwise have to feed, and re-feed from the start each time it falls behind.
		WithoutKwok: true,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Stop() }()
	// The benchmark's own client (nodes, gangs, its watch) is never what holds a contender back.
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.QPS, cfg.Burst = benchQPS, benchBurst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme})
	if err != nil {
		return nil, err
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	spDir, err := framework.ModuleDir(ctx, root, "sigs.k8s.io/scheduler-plugins")
	if err != nil {
		return nil, err
	}
	if err := c.InstallCRDs(ctx, filepath.Join(root, "deploy", "crd", "bases"), filepath.Join(spDir, "config", "crd", "bases")); err != nil {
		return nil, err
	}
	began := time.Now()
	if err := createFleet(ctx, cs, cl, spec.fleet, sc.dra()); err != nil {
		return nil, err
	}
	what := "GPUNodes"
	if sc.dra() {
		what = "ResourceSlices"
	}
	fmt.Fprintf(os.Stderr, "   %d nodes and %s in %.1fs\n", spec.fleet.Nodes, what, time.Since(began).Seconds())
	for _, ns := range spec.namespaceNames() {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}

	rec := newRecorder(spec)
	watched := namespace
	if spec.namespaces > 1 {
		watched = metav1.NamespaceAll
	}
	// The benchmark's own watch of the pods is in protobuf, as kube-scheduler's and the controller
	// manager's are, so that the API server encodes the same for the observer as for the contender.
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.ContentType = runtime.ContentTypeProtobuf
	watchCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	watchCS, err := kubernetes.NewForConfig(watchCfg)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(watchCS, 0, informers.WithNamespace(watched))
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { rec.observe(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { rec.observe(obj.(*corev1.Pod)) },
	}); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(runCtx.Done())
	factory.WaitForCacheSync(runCtx.Done())

	created := make([]time.Time, len(spec.gangs))
	if !o.stream {
		began := time.Now()
		if err := createGangs(runCtx, cl, spec, sc, created); err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "   %d gangs created in %.1fs before the contender starts\n", len(spec.gangs), time.Since(began).Seconds())
	}
	writesBefore, err := framework.APIRequests(ctx, cs)
	if err != nil {
		return nil, err
	}
	speed := machineSpeed()
	cpuBefore := cpuTimes(c)
	// The contender's clock starts before its process: a scheduler's start on a backlog (informers'
	// lists, its event handlers taking every pending pod) is part of its time to place it, as the
	// binder's informer sync is of the binder's.
	start := time.Now()
	var port int
	switch sc {
	case Convoy, ConvoyAsyncAPI, ConvoyPartlyUsedFirst, ConvoyDRA, Coscheduling, CoschedulingBinpack, KubeSchedulerMinimal, KubeScheduler137DRA:
		if port, err = startScheduler(ctx, c, root, sc, o); err != nil {
			return nil, err
		}
	case Binder, BinderEvents, BinderEventsWatch:
		binderCfg := rest.CopyConfig(cfg)
		binderCfg.QPS, binderCfg.Burst = o.qps, o.burst
		b, err := newBinder(binderCfg, spec.fleet, sc != Binder)
		if err != nil {
			return nil, err
		}
		from := factory
		if sc == BinderEventsWatch {
			// Its own client and watch of every pod, as kube-scheduler's.
			ownCfg := rest.CopyConfig(watchCfg)
			ownCfg.QPS, ownCfg.Burst = o.qps, o.burst
			ownCS, err := kubernetes.NewForConfig(ownCfg)
			if err != nil {
				return nil, err
			}
			from = informers.NewSharedInformerFactory(ownCS, 0)
		}
		go b.run(runCtx, from)
	}

	var createErr error
	var createdAll time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		switch {
		case o.stream && o.rate > 0:
			createErr = streamGangs(runCtx, cl, spec, sc, created, o.rate, o.seed)
		case o.stream:
			createErr = createGangs(runCtx, cl, spec, sc, created)
		default:
			for i := range created {
				created[i] = start
			}
		}
		createdAll = time.Now()
	}()

	total := spec.pods()
	deadline := start.Add(o.timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	creating := true
	lastBound, cpuAtLastBind := 0, cpuBefore
wait:
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-done:
			creating = false
			done = nil
			if createErr != nil {
				return nil, createErr
			}
			if o.stream {
				fmt.Fprintf(os.Stderr, "   %d gangs (%d pods) created in %.1fs\n", len(spec.gangs), total, createdAll.Sub(start).Seconds())
			}
		case <-tick.C:
		}
		bound, last := rec.progress()
		if bound > lastBound {
			lastBound, cpuAtLastBind = bound, cpuTimes(c)
		}
		now := time.Now()
		switch {
		case bound == total && !creating:
		case now.After(deadline):
			fmt.Fprintf(os.Stderr, "   timed out after %s\n", o.timeout)
		case !creating && now.Sub(maxTime(last, createdAll)) > o.stall:
			fmt.Fprintf(os.Stderr, "   no pod bound for %s: done\n", o.stall)
		default:
			continue
		}
		break wait
	}
	r := measure(spec, sc, rec, created, start)
	r.MachineMillis = speed
	r.Stream, r.ArrivalRate = o.stream, o.rate
	r.CPU = cpuSeconds(cpuBefore, cpuTimes(c))
	r.CPUToLastBind = cpuSeconds(cpuBefore, cpuAtLastBind)
	r.PeakRSSMiB = peakRSSMiB(c, "scheduler")
	writesAfter, err := framework.APIRequests(ctx, cs)
	if err != nil {
		return nil, err
	}
	r.Writes, r.APIWrites = contenderWrites(writesBefore, writesAfter)
	r.Reads = contenderReads(writesBefore, writesAfter)
	if sc.convoy() {
		if r.Plans, err = readPlans(ctx, port); err != nil {
			return nil, err
		}
	}
	if n := r.Writes["POST pods/binding"]; n > 0 {
		const served = "POST pods/binding seconds"
		r.BindingMillis = 1000 * (writesAfter[served] - writesBefore[served]) / float64(n)
	}
	if r.BoundPods > 0 {
		r.WritesPerPod = float64(r.APIWrites) / float64(r.BoundPods)
	}
	return r, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// labelClique is the label of a node's multi-node NVLink clique, the shipped config's innermost
// level.
const labelClique = "nvidia.com/gpu.clique"

// pods is the number of pods of all gangs.
func (s runSpec) pods() int {
	n := 0
	for _, g := range s.gangs {
		n += g.Workers
	}
	return n
}

// createFleet creates the nodes, untaints them (the API server's TaintNodesByCondition admission
// marks new nodes not-ready) and publishes a GPUNode for each; with dra, the nodes have no
// nvidia.com/gpu but a ResourceSlice each instead (createDRADevices), as where NVIDIA's DRA driver
// runs without its device plugin.
func createFleet(ctx context.Context, cs kubernetes.Interface, cl client.Client, f synth.Fleet, dra bool) error {
	if dra {
		if err := createDRADevices(ctx, cs, f); err != nil {
			return err
		}
	}
	return parallel(ctx, f.Nodes, func(i int) error {
		w := f.Node(i)
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("96"),
			corev1.ResourceMemory: resource.MustParse("1Ti"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		if !dra {
			capacity[convoy.ResourceGPU] = *resource.NewQuantity(int64(f.GPUsPerNode), resource.DecimalSI)
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: w.Name, Labels: map[string]string{
				convoy.LabelHostname: w.Name, convoy.LabelTopologyZone: w.Zone,
				convoy.LabelTopologyBlock: w.Block, convoy.LabelTopologyRack: w.Rack,
			}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
					LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}},
		}
		if w.Clique != "" {
			node.Labels[labelClique] = w.Clique
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := cs.CoreV1().Nodes().Patch(ctx, w.Name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
			return err
		}
		if dra {
			return nil
		}
		g := &convoy.GPUNode{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}
		if err := cl.Create(ctx, g); err != nil {
			return err
		}
		for j := range f.GPUsPerNode {
			g.Status.GPUs = append(g.Status.GPUs, convoy.GPUDevice{Index: int32(j), Health: convoy.GPUHealthy,
				Product: "NVIDIA H100 80GB HBM3", NVLinkDomain: w.Name + "/nvswitch"})
			for k := j + 1; k < f.GPUsPerNode; k++ {
				g.Status.Links = append(g.Status.Links, convoy.GPULink{A: int32(j), B: int32(k), Type: convoy.LinkNVLink, NVLinks: 18})
			}
		}
		g.Status.Summarize()
		return cl.Status().Update(ctx, g)
	})
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n int, f func(int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := f(i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// createGangs creates each gang's PodGroup (createGangObjects) and pods, a few gangs at a time in
// order, and records when each gang's last pod was created.
func createGangs(ctx context.Context, cl client.Client, spec runSpec, sc Scheduler, created []time.Time) error {
	return parallel(ctx, len(spec.gangs), func(i int) error {
		return createGang(ctx, cl, spec, sc, i, created)
	})
}

// streamGangs creates the gangs as they arrive, rate a second on average, the time between two
// arrivals drawn from an exponential distribution (a Poisson process) of seed: each gang on its
// own goroutine, so that a slow API server delays its pods, not the next gang's arrival.
func streamGangs(ctx context.Context, cl client.Client, spec runSpec, sc Scheduler, created []time.Time, rate float64, seed uint64) error {
	g, ctx := errgroup.WithContext(ctx)
	r := rand.New(rand.NewPCG(seed, 0xa771))
	at := time.Now()
	for i := range spec.gangs {
		at = at.Add(time.Duration(r.ExpFloat64() / rate * float64(time.Second)))
		select {
		case <-ctx.Done():
			return g.Wait()
		case <-time.After(time.Until(at)):
		}
		g.Go(func() error { return createGang(ctx, cl, spec, sc, i, created) })
	}
	return g.Wait()
}

// createGang creates gang i's PodGroup (or Workload), its pods one after another and, for DRA
// contenders, their claims, and records when its last pod was created.
func createGang(ctx context.Context, cl client.Client, spec runSpec, sc Scheduler, i int, created []time.Time) error {
	g, ns := spec.gangs[i], spec.namespaceOf(i)
	if err := createGangObjects(ctx, cl, sc, g, ns); err != nil {
		return err
	}
	for r := range g.Workers {
		pod := gangPod(g, r, ns)
		if sc.dra() {
			if err := cl.Create(ctx, claimGPUs(pod, g)); err != nil {
				return err
			}
		}
		if sc == KubeScheduler137DRA {
			pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(g.Name)}
		}
		if err := cl.Create(ctx, pod); err != nil {
			return err
		}
	}
	created[i] = time.Now()
	return nil
}

// minimalConfig is kube-scheduler-minimal's KubeSchedulerConfiguration: every default plugin off,
// then PrioritySort, NodeResourcesFit at PreFilter and Filter only (its Score would make the
// scheduler look for more feasible nodes than the first) and DefaultBinder.
func minimalConfig() map[string]any {
	return map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"profiles": []any{map[string]any{
			"schedulerName": schedulerName,
			"plugins": map[string]any{
				"multiPoint": map[string]any{"disabled": []any{map[string]any{"name": "*"}}},
				"queueSort":  enabled("PrioritySort"), "preFilter": enabled("NodeResourcesFit"),
				"filter": enabled("NodeResourcesFit"), "bind": enabled("DefaultBinder"),
			},
		}},
	}
}

// enabled is a KubeSchedulerConfiguration plugin set with the named plugins enabled.
func enabled(names ...string) map[string]any {
	var list []any
	for _, n := range names {
		list = append(list, map[string]any{"name": n})
	}
	return map[string]any{"enabled": list}
}

// coschedulingPodGroup is gang g's PodGroup of scheduler-plugins, minMember all its workers.
func coschedulingPodGroup(g synth.Gang, ns string) *schedv1alpha1.PodGroup {
	return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: g.Name},
		Spec: schedv1alpha1.PodGroupSpec{MinMember: int32(g.Workers)}}
}

// gangPod is worker r of g in namespace ns, as the operator makes it: rack-preferred topology.
func gangPod(g synth.Gang, r int, ns string) *corev1.Pod {
	gpus := *resource.NewQuantity(int64(g.GPUsPerWorker), resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("%s-worker-%d", g.Name, r),
			Labels: map[string]string{schedv1alpha1.PodGroupLabel: g.Name, convoy.LabelJobName: g.Name,
				convoy.LabelReplicaRole: "worker", convoy.LabelReplicaRank: strconv.Itoa(r)},
			Annotations: map[string]string{convoy.AnnotationTopologyLevel: string(convoy.TopologyRack),
				convoy.AnnotationTopologyMode: string(convoy.TopologyPreferred)},
		},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			Containers: []corev1.Container{{Name: "worker", Image: "trainer:bench", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi"), convoy.ResourceGPU: gpus},
				Limits:   corev1.ResourceList{convoy.ResourceGPU: gpus},
			}}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// startScheduler runs bin/convoy-scheduler with Convoy's profile (deploy/scheduler/config.yaml;
// for convoy+async-api with the SchedulerAsyncAPICalls feature gate on, for convoy+partly-used-first
// with GangPlacement's nodePacking set to PartlyUsedFirst), with Coscheduling only (and, for
// coscheduling+binpack, MostAllocated scoring) or with kube-scheduler-minimal's plugins, at the
// benchmark's QPS and burst, and waits until it is ready.
func startScheduler(ctx context.Context, c *framework.Cluster, root string, sc Scheduler, o options) (int, error) {
	var cfg map[string]any
	switch {
	case sc == KubeScheduler137DRA:
		cfg = kubeScheduler137Config()
	case sc == KubeSchedulerMinimal:
		cfg = minimalConfig()
	case sc.convoy():
		data, err := os.ReadFile(filepath.Join(root, "deploy", "scheduler", "config.yaml"))
		if err != nil {
			return 0, err
		}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			return 0, err
		}
		if sc == ConvoyPartlyUsedFirst {
			for _, pc := range cfg["profiles"].([]any)[0].(map[string]any)["pluginConfig"].([]any) {
				if pc := pc.(map[string]any); pc["name"] == "GangPlacement" {
					pc["args"].(map[string]any)["nodePacking"] = "PartlyUsedFirst"
				}
			}
		}
	default:
		// Upstream kube-scheduler with Coscheduling as scheduler-plugins documents it; its default
		// plugins (DefaultPreemption included) stay.
		queueSort := enabled("Coscheduling")
		queueSort["disabled"] = []any{map[string]any{"name": "*"}}
		cfg = map[string]any{
			"apiVersion": "kubescheduler.config.k8s.io/v1",
			"kind":       "KubeSchedulerConfiguration",
			"profiles": []any{map[string]any{
				"schedulerName": schedulerName,
				"plugins": map[string]any{"queueSort": queueSort, "preFilter": enabled("Coscheduling"),
					"postFilter": enabled("Coscheduling"), "reserve": enabled("Coscheduling"), "permit": enabled("Coscheduling")},
				"pluginConfig": []any{map[string]any{"name": "Coscheduling", "args": map[string]any{"permitWaitingTimeSeconds": 60}}},
			}},
		}
		if sc == CoschedulingBinpack {
			// "Resource Bin Packing" in the Kubernetes documentation, with GPUs weighing most.
			resource := func(name string, weight int) map[string]any { return map[string]any{"name": name, "weight": weight} }
			profile := cfg["profiles"].([]any)[0].(map[string]any)
			profile["pluginConfig"] = append(profile["pluginConfig"].([]any), map[string]any{"name": "NodeResourcesFit", "args": map[string]any{
				"scoringStrategy": map[string]any{"type": "MostAllocated", "resources": []any{
					resource("cpu", 1), resource("memory", 1), resource(string(convoy.ResourceGPU), 3)}}}})
		}
	}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	cfg["clientConnection"] = map[string]any{"kubeconfig": c.KubeconfigPath, "qps": o.qps, "burst": o.burst}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return 0, err
	}
	path := filepath.Join(c.StateDir, "scheduler.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return 0, err
	}
	ports, err := framework.FreePorts(1)
	if err != nil {
		return 0, err
	}
	port := ports[0]
	// /metrics without a token, as /healthz: the benchmark reads Convoy's metrics at the end.
	args := append([]string{"--config=" + path, fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1",
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics", fmt.Sprintf("--v=%d", o.verbosity)}, o.extraArgs...)
	switch sc {
	case ConvoyAsyncAPI:
		args = append(args, "--feature-gates=SchedulerAsyncAPICalls=true")
	case Coscheduling, CoschedulingBinpack, KubeSchedulerMinimal:
		// Upstream's defaults: convoy-scheduler turns this gate off for Convoy's gangs.
		args = append(args, "--feature-gates=NominatedNodeNameForExpectation=true")
	}
	binary := "convoy-scheduler"
	if sc == KubeScheduler137DRA {
		binary = filepath.Join(o.controlPlaneBin, "kube-scheduler")
		args = append(args, draFeatureGates)
	}
	var env []string
	if sc.convoy() {
		// GOGC and GOMEMLIMIT as deploy/scheduler's Deployment sets them.
		if env, err = framework.ShippedEnv("deploy/scheduler/deployment.yaml", "convoy-scheduler"); err != nil {
			return 0, err
		}
	}
	fmt.Fprintf(os.Stderr, "   scheduler on https://127.0.0.1:%d %s\n", port, strings.Join(env, " "))
	if err := c.StartProcess("scheduler", binary, args, env); err != nil {
		return 0, err
	}
	// As long as a run may take: upstream kube-scheduler 1.37 takes minutes on a backlog of 14,000
	// pods before it is ready.
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := c.WaitHealthy(ctx, "scheduler", fmt.Sprintf("https://127.0.0.1:%d/readyz", port)); err != nil {
		if ctx.Err() == nil {
			return 0, err
		}
		// Its run is over before it began: its row shows what it bound, nothing.
		fmt.Fprintf(os.Stderr, "   scheduler not ready after %.1fs: %v\n", time.Since(began).Seconds(), err)
		return port, nil
	}
	fmt.Fprintf(os.Stderr, "   scheduler ready in %.1fs\n", time.Since(began).Seconds())
	return port, nil
}
