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

// Command trace replays the public Alibaba GPU cluster trace of 2023 (shared/traces/alibaba-gpu-2023:
// 1,523 nodes, 1,213 of them with GPUs, and pod lists of production tasks) against three placement
// policies in one run, the way the FGD paper ("Beware of Fragmentation", USENIX ATC '23) fills a
// cluster: tasks drawn from the trace, seed-fixed, arrive one after another and never leave, until
// the GPUs they ask reach a share of the cluster's. Each policy places every task on its own copy
// of the cluster:
//
//   - convoy: Convoy's planner (scheduler-plugin/pkg/planner) places each GPU task as GangPlacement
//     does, as a gang of one, on the nodes upstream's NodeResourcesFit Filter admits; tasks without
//     GPUs go where upstream's default scoring puts them, as in Convoy's profile.
//   - kube-scheduler: upstream kube-scheduler 1.34's default placement, its NodeResourcesFit Filter
//     and its default Score plugins for resources (NodeResourcesFit LeastAllocated and
//     NodeResourcesBalancedAllocation, weight 1 each), called in process; the first node of the
//     best score wins where kube-scheduler draws one at random.
//   - kube-scheduler-binpack: the same with NodeResourcesFit's MostAllocated strategy over CPU,
//     memory and nvidia.com/gpu (weights 1, 1 and 3), the bin packing the Kubernetes documentation
//     shows for extended resources.
//   - first-fit: the first node NodeResourcesFit admits, as the scheduler benchmark's binder does.
//
// It prints, for each pod list, the GPU tasks placed and turned away, the GPUs allocated when the
// first GPU task was turned away and at the end, the free GPUs stranded on partly used nodes, and
// the time each policy took per task.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	kubeschedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
	"github.com/convoy-dev/convoy/test/bench/alibaba"
)

func main() {
	dir := flag.String("trace", "", "the trace's directory (default: ../shared/traces/alibaba-gpu-2023 from the repository root)")
	lists := flag.String("pods", "default,multigpu50", "pod lists to replay, comma-separated: openb_pod_list_<name>.csv")
	seed := flag.Uint64("seed", 42, "seed of the tasks' draw")
	arrive := flag.Float64("arrive", 1.0, "stop once the arrived GPU tasks ask this share of the cluster's GPUs")
	jsonOut := flag.String("json", "", "also write the results to this file")
	taint := flag.Bool("taint-gpu-nodes", true, "keep tasks without GPUs off the GPU nodes, as the usual nvidia.com/gpu:NoSchedule taint does; false lets upstream's scoring put them anywhere")
	forecasts := flag.String("forecast", "", "instead, replay the default pod list's GPU tasks with their run times through a ClusterQueue of each of these GPU quotas (comma-separated), comparing predicted to actual starts")
	epochs := flag.Int("epochs", 10, "-forecast: epochs per task, each of its run time / epochs ± jitter")
	jitter := flag.Float64("jitter", 0.5, "-forecast: how much one epoch's length varies, as a share of the mean")
	flag.Parse()
	if *dir == "" {
		*dir = filepath.Join("..", "shared", "traces", "alibaba-gpu-2023")
	}
	if *forecasts != "" {
		var quotas []int
		for _, q := range strings.Split(*forecasts, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(q))
			if err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "-forecast: %q is not a GPU quota (a positive integer)\n", q)
				os.Exit(2)
			}
			quotas = append(quotas, n)
		}
		results, err := runForecast(*dir, "default", quotas, *epochs, *jitter, *seed)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(forecastTable(results))
		return
	}
	var all []*Result
	for _, name := range strings.Split(*lists, ",") {
		results, err := replay(*dir, strings.TrimSpace(name), *seed, *arrive, *taint)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		all = append(all, results...)
	}
	fmt.Print(table(all))
	if *jsonOut != "" {
		data, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(*jsonOut, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// Result is one policy's replay of one pod list.
type Result struct {
	Pods   string `json:"pods"`
	Policy string `json:"policy"`
	// Tasks and GPUTasks arrived; GPUTasksPlaced of them were placed, GPUsTurnedAway is what the
	// others asked; CPUTasksTurnedAway counts the tasks without GPUs turned away.
	Tasks              int `json:"tasks"`
	GPUTasks           int `json:"gpuTasks"`
	GPUTasksPlaced     int `json:"gpuTasksPlaced"`
	GPUsTurnedAway     int `json:"gpusTurnedAway"`
	CPUTasksTurnedAway int `json:"cpuTasksTurnedAway"`
	// CapacityGPUs is the cluster's; AllocatedAtFirstTurnAway the GPUs allocated when the first
	// GPU task was turned away (0 when none was); Allocated at the end.
	CapacityGPUs             int `json:"capacityGPUs"`
	AllocatedAtFirstTurnAway int `json:"allocatedAtFirstTurnAway"`
	Allocated                int `json:"allocated"`
	// Stranded is the free GPUs on partly used nodes at the end; NoRoomBeside the free GPUs on
	// nodes without the CPU or memory of the trace's median 1-GPU task.
	Stranded     int `json:"stranded"`
	NoRoomBeside int `json:"noRoomBeside"`
	// MicrosPerTask is the policy's mean time to choose among the nodes NodeResourcesFit admits:
	// the planner's, upstream's Score plugins', the first-fit scan's.
	MicrosPerTask float64 `json:"microsecondsPerTask"`
}

// task is one row of a pod list.
type task struct {
	name     string
	cpuMilli int64
	memMiB   int64
	gpus     int
	models   []string // gpu_spec: the GPU models it may run on; nil for any
}

// machine is one row of the node list, with the topology this command gives it.
type machine struct {
	name                string
	cpuMilli, memMiB    int64
	gpus                int
	model               string
	zone, block, rackID string
}

// rackSize and the blocks and zones: the trace has no topology, so nodes are put in 16-node racks
// in the order of the node list (which groups nodes of one model), 12 racks a block, 4 blocks a
// zone, as a datacenter is filled.
const (
	rackSize      = 16
	racksPerBlock = 12
	blocksPerZone = 4
)

func replay(dir, list string, seed uint64, arrive float64, taint bool) ([]*Result, error) {
	machines, err := readMachines(filepath.Join(dir, "openb_node_list_all_node.csv"))
	if err != nil {
		return nil, err
	}
	tasks, err := readTasks(filepath.Join(dir, "openb_pod_list_"+list+".csv"))
	if err != nil {
		return nil, err
	}
	capacity := 0
	for _, m := range machines {
		capacity += m.gpus
	}
	// The draw, the same for every policy.
	r := rand.New(rand.NewPCG(seed, 0x7ace))
	var arrivals []int
	for asked := 0; float64(asked) < arrive*float64(capacity); {
		i := r.IntN(len(tasks))
		arrivals = append(arrivals, i)
		asked += tasks[i].gpus
	}
	medCPU, medMem := medianOneGPU(tasks)
	gpuTasks := 0
	for _, i := range arrivals {
		if tasks[i].gpus > 0 {
			gpuTasks++
		}
	}
	fmt.Fprintf(os.Stderr, "%s: %d machines with %d GPUs; %d tasks drawn from %d (%d with GPUs), asking %.0f%% of the GPUs\n",
		list, len(machines), capacity, len(arrivals), len(tasks), gpuTasks, 100*arrive)
	var out []*Result
	for _, p := range []string{"convoy", "kube-scheduler", "kube-scheduler-binpack", "first-fit"} {
		res, err := run(p, machines, tasks, arrivals, medCPU, medMem, taint)
		if err != nil {
			return nil, err
		}
		res.Pods, res.CapacityGPUs = list, capacity
		fmt.Fprintf(os.Stderr, "   %s: %d of %d GPU tasks placed, %d GPUs turned away, %d of %d GPUs allocated (%d at the first turn-away), %d stranded, %.1f µs a task\n",
			p, res.GPUTasksPlaced, res.GPUTasks, res.GPUsTurnedAway, res.Allocated, capacity, res.AllocatedAtFirstTurnAway, res.Stranded, res.MicrosPerTask)
		out = append(out, res)
	}
	return out, nil
}

// cluster is one policy's copy of the machines: the scheduler's NodeInfos, with each node's free
// GPU indices, and the planner's view of them.
type cluster struct {
	machines []machine
	infos    []fwk.NodeInfo
	free     []planner.GPUSet
	view     *planner.Cluster
	fit      *noderesources.Fit
	// taintGPUNodes keeps tasks without GPUs off the GPU nodes, as the usual
	// nvidia.com/gpu:NoSchedule taint does (tolerated by the pods that ask GPUs).
	taintGPUNodes bool
	balanced      *noderesources.BalancedAllocation
	// pack is NodeResourcesFit configured for bin packing GPUs (MostAllocated).
	pack *noderesources.Fit
}

func newCluster(machines []machine, taintGPUNodes bool) (*cluster, error) {
	ctx := context.Background()
	fts := plfeature.Features{}
	var fitArgs kubeschedconfig.NodeResourcesFitArgs
	if err := gangcore.UpstreamArgs(&configv1.NodeResourcesFitArgs{}, &fitArgs); err != nil {
		return nil, err
	}
	fit, err := noderesources.NewFit(ctx, &fitArgs, noDRA{}, fts)
	if err != nil {
		return nil, err
	}
	// Bin packing as the Kubernetes documentation configures it for an extended resource
	// ("Resource Bin Packing": MostAllocated, cpu and memory weight 1, the extended resource 3).
	var packArgs kubeschedconfig.NodeResourcesFitArgs
	if err := gangcore.UpstreamArgs(&configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{
		Type: configv1.MostAllocated,
		Resources: []configv1.ResourceSpec{
			{Name: string(corev1.ResourceCPU), Weight: 1}, {Name: string(corev1.ResourceMemory), Weight: 1},
			{Name: string(convoy.ResourceGPU), Weight: 3},
		},
	}}, &packArgs); err != nil {
		return nil, err
	}
	pack, err := noderesources.NewFit(ctx, &packArgs, noDRA{}, fts)
	if err != nil {
		return nil, err
	}
	var baArgs kubeschedconfig.NodeResourcesBalancedAllocationArgs
	if err := gangcore.UpstreamArgs(&configv1.NodeResourcesBalancedAllocationArgs{}, &baArgs); err != nil {
		return nil, err
	}
	ba, err := noderesources.NewBalancedAllocation(ctx, &baArgs, noDRA{}, fts)
	if err != nil {
		return nil, err
	}
	c := &cluster{machines: machines, taintGPUNodes: taintGPUNodes, fit: fit.(*noderesources.Fit), pack: pack.(*noderesources.Fit),
		balanced: ba.(*noderesources.BalancedAllocation),
		view:     &planner.Cluster{Nodes: make([]planner.Node, len(machines))}}
	for i, m := range machines {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.name, Labels: map[string]string{"gpu-model": m.model}}}
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(m.cpuMilli, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(m.memMiB<<20, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(1000, resource.DecimalSI),
			convoy.ResourceGPU:    *resource.NewQuantity(int64(m.gpus), resource.DecimalSI),
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		c.infos = append(c.infos, ni)
		c.free = append(c.free, planner.FirstGPUs(m.gpus))
		c.view.Nodes[i] = planner.Node{Name: m.name, Zone: m.zone, Block: m.block, Rack: m.rackID, GPUs: m.gpus, Indexed: true, CPU: m.cpuMilli, Memory: m.memMiB << 20}
	}
	return c, nil
}

// pod is the task as a pod.
func (t task) pod(uid int) *corev1.Pod {
	req := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(t.cpuMilli, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(t.memMiB<<20, resource.BinarySI),
	}
	if t.gpus > 0 {
		req[convoy.ResourceGPU] = *resource.NewQuantity(int64(t.gpus), resource.DecimalSI)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "trace", Name: fmt.Sprintf("%s-%d", t.name, uid), UID: types.UID(strconv.Itoa(uid))},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "task", Resources: corev1.ResourceRequirements{Requests: req}}}},
	}
}

// feasible returns the nodes upstream's NodeResourcesFit Filter admits for the pod, of a model
// the task accepts, and, with taintGPUNodes, GPU nodes only to tasks that ask GPUs.
func (c *cluster) feasible(ctx context.Context, cs fwk.CycleState, t task, p *corev1.Pod) []bool {
	out := make([]bool, len(c.infos))
	if _, s := c.fit.PreFilter(ctx, cs, p, c.infos); !s.IsSuccess() {
		return out
	}
	for i, ni := range c.infos {
		out[i] = (t.models == nil || slices.Contains(t.models, c.machines[i].model)) &&
			(t.gpus > 0 || c.machines[i].gpus == 0 || !c.taintGPUNodes) && c.fit.Filter(ctx, cs, p, ni).IsSuccess()
	}
	return out
}

// bestScore is kube-scheduler's choice among the feasible nodes: the highest sum of fit's
// (NodeResourcesFit with its scoring strategy) and NodeResourcesBalancedAllocation's scores, the
// first of equals.
func (c *cluster) bestScore(ctx context.Context, cs fwk.CycleState, fit *noderesources.Fit, p *corev1.Pod, ok []bool) int {
	fit.PreScore(ctx, cs, p, c.infos)
	skipBalanced := !c.balanced.PreScore(ctx, cs, p, c.infos).IsSuccess()
	best, bestScore := -1, int64(-1)
	for i, ni := range c.infos {
		if !ok[i] {
			continue
		}
		s, _ := fit.Score(ctx, cs, p, ni)
		if !skipBalanced {
			b, _ := c.balanced.Score(ctx, cs, p, ni)
			s += b
		}
		if s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// choose places the task by policy and returns its node and GPUs, or -1, and the time the policy
// took to choose among the feasible nodes (the Filter pass, the same for all, not counted).
func (c *cluster) choose(policy string, t task, p *corev1.Pod) (int, planner.GPUSet, time.Duration) {
	ctx := context.Background()
	cs := framework.NewCycleState()
	ok := c.feasible(ctx, cs, t, p)
	start := time.Now()
	i, gpus := c.chooseAmong(ctx, cs, policy, t, p, ok)
	return i, gpus, time.Since(start)
}

func (c *cluster) chooseAmong(ctx context.Context, cs fwk.CycleState, policy string, t task, p *corev1.Pod, ok []bool) (int, planner.GPUSet) {
	switch {
	case policy == "first-fit":
		if i := slices.Index(ok, true); i >= 0 {
			return i, c.free[i].Lowest(t.gpus)
		}
		return -1, 0
	case policy == "convoy" && t.gpus > 0:
		limits := gangcore.LimitsOf(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}), convoy.ResourceGPU)
		for i := range c.view.Nodes {
			c.view.Nodes[i].Free = c.free[i]
			c.view.Nodes[i].Excluded = !ok[i]
			c.view.Nodes[i].MaxPods = limits.MaxPods(c.infos[i])
			c.view.Nodes[i].Fill = limits.Fill(c.infos[i])
		}
		pl, err := c.view.Place(planner.Gang{Key: p.Name, Pods: 1, GPUsPerPod: t.gpus})
		if err != nil {
			var u *planner.Unplaceable
			if !errors.As(err, &u) {
				panic(err)
			}
			return -1, 0
		}
		a := pl.Assignments[0]
		return a.NodeIndex(), planner.NewGPUSet(a.GPUs...)
	default:
		fit := c.fit
		if policy == "kube-scheduler-binpack" {
			fit = c.pack
		}
		i := c.bestScore(ctx, cs, fit, p, ok)
		if i < 0 {
			return -1, 0
		}
		return i, c.free[i].Lowest(t.gpus)
	}
}

func run(policy string, machines []machine, tasks []task, arrivals []int, medCPU, medMem int64, taint bool) (*Result, error) {
	c, err := newCluster(machines, taint)
	if err != nil {
		return nil, err
	}
	res := &Result{Policy: policy, Tasks: len(arrivals)}
	allocated := 0
	var spent time.Duration
	for uid, ti := range arrivals {
		t := tasks[ti]
		p := t.pod(uid)
		i, gpus, took := c.choose(policy, t, p)
		spent += took
		if t.gpus > 0 {
			res.GPUTasks++
		}
		if i < 0 {
			if t.gpus == 0 {
				res.CPUTasksTurnedAway++
				continue
			}
			res.GPUsTurnedAway += t.gpus
			if res.AllocatedAtFirstTurnAway == 0 {
				res.AllocatedAtFirstTurnAway = allocated
			}
			continue
		}
		if gpus.Len() != t.gpus {
			return nil, fmt.Errorf("%s gave %s %d GPUs of %d asked", policy, p.Name, gpus.Len(), t.gpus)
		}
		p.Spec.NodeName = c.machines[i].name
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			return nil, err
		}
		c.infos[i].AddPodInfo(pi)
		c.free[i] &^= gpus
		allocated += t.gpus
		if t.gpus > 0 {
			res.GPUTasksPlaced++
		}
	}
	res.Allocated = allocated
	res.MicrosPerTask = float64(spent.Microseconds()) / float64(len(arrivals))
	for i, m := range c.machines {
		free := c.free[i].Len()
		if free > 0 && free < m.gpus {
			res.Stranded += free
		}
		req := c.infos[i].GetRequested()
		if free > 0 && (m.cpuMilli-req.GetMilliCPU() < medCPU || m.memMiB-req.GetMemory()>>20 < medMem) {
			res.NoRoomBeside += free
		}
	}
	return res, nil
}

// medianOneGPU returns the median CPU and memory of the list's 1-GPU tasks.
func medianOneGPU(tasks []task) (int64, int64) {
	var cpus, mems []int64
	for _, t := range tasks {
		if t.gpus == 1 {
			cpus, mems = append(cpus, t.cpuMilli), append(mems, t.memMiB)
		}
	}
	if len(cpus) == 0 {
		return 0, 0
	}
	slices.Sort(cpus)
	slices.Sort(mems)
	return cpus[len(cpus)/2], mems[len(mems)/2]
}

func readMachines(path string) ([]machine, error) {
	rows, err := alibaba.ReadCSV(path)
	if err != nil {
		return nil, err
	}
	var out []machine
	for i, row := range rows {
		m := machine{name: row["sn"], model: row["model"]}
		var err1, err2, err3 error
		m.cpuMilli, err1 = strconv.ParseInt(row["cpu_milli"], 10, 64)
		m.memMiB, err2 = strconv.ParseInt(row["memory_mib"], 10, 64)
		m.gpus, err3 = strconv.Atoi(row["gpu"])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%s row %d: %w", path, i+2, err)
		}
		rack := i / rackSize
		block := rack / racksPerBlock
		m.rackID = fmt.Sprintf("rack-%03d", rack)
		m.block = fmt.Sprintf("block-%d", block)
		m.zone = fmt.Sprintf("zone-%d", block/blocksPerZone)
		out = append(out, m)
	}
	return out, nil
}

func readTasks(path string) ([]task, error) {
	rows, err := alibaba.ReadCSV(path)
	if err != nil {
		return nil, err
	}
	var out []task
	for i, row := range rows {
		t := task{name: row["name"]}
		var err1, err2, err3 error
		t.cpuMilli, err1 = strconv.ParseInt(row["cpu_milli"], 10, 64)
		t.memMiB, err2 = strconv.ParseInt(row["memory_mib"], 10, 64)
		t.gpus, err3 = strconv.Atoi(row["num_gpu"])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%s row %d: %w", path, i+2, err)
		}
		if s := row["gpu_spec"]; s != "" {
			t.models = strings.Split(s, "|")
		}
		out = append(out, t)
	}
	return out, nil
}

func table(results []*Result) string {
	var b strings.Builder
	b.WriteString("| pods | policy | GPU tasks placed / arrived | GPUs turned away | GPUs allocated at the first turn-away | GPUs allocated at the end | stranded GPUs | free GPUs without CPU/memory beside | µs to choose, per task |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		pct := func(n int) string { return fmt.Sprintf("%d (%.1f%%)", n, 100*float64(n)/float64(r.CapacityGPUs)) }
		first := "none turned away"
		if r.GPUsTurnedAway > 0 {
			first = pct(r.AllocatedAtFirstTurnAway)
		}
		fmt.Fprintf(&b, "| %s | %s | %d / %d | %d | %s | %s | %d | %d | %.0f |\n", r.Pods, r.Policy, r.GPUTasksPlaced, r.GPUTasks,
			r.GPUsTurnedAway, first, pct(r.Allocated), r.Stranded, r.NoRoomBeside, r.MicrosPerTask)
	}
	b.WriteString(targets(results))
	return b.String()
}

// targets states, for each pod list, Convoy's target: it turns away no more GPUs than the best of
// the other policies, met or missed.
func targets(results []*Result) string {
	var b strings.Builder
	for _, c := range results {
		if c.Policy != "convoy" {
			continue
		}
		best := (*Result)(nil)
		for _, r := range results {
			if r.Pods == c.Pods && r.Policy != c.Policy && (best == nil || r.GPUsTurnedAway < best.GPUsTurnedAway) {
				best = r
			}
		}
		if best == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n| pods | Convoy's target | Convoy | |\n|---|---|---|---|\n")
		}
		verdict := "**missed**"
		if c.GPUsTurnedAway <= best.GPUsTurnedAway {
			verdict = "met"
		}
		fmt.Fprintf(&b, "| %s | GPUs turned away ≤ the best other policy's | %d against %s's %d | %s |\n", c.Pods, c.GPUsTurnedAway, best.Policy, best.GPUsTurnedAway, verdict)
	}
	return b.String()
}

// noDRA is the framework handle the upstream plugins are made with here, outside a scheduler:
// they ask it only for the DRA manager (NewBalancedAllocation always, NewFit with
// DRAExtendedResource), and the trace's pods claim no DRA devices.
type noDRA struct{ fwk.Handle }

func (noDRA) SharedDRAManager() fwk.SharedDRAManager { return nil }
