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

// Command scheduler measures Convoy's scheduler against upstream kube-scheduler with Coscheduling
// only and against a binder with no placement logic (the API ceiling), on the local control plane
// with thousands of fake GPU nodes, in one run:
//
//	go build -ldflags "$LDFLAGS" -o bin/convoy-scheduler ./scheduler-plugin/cmd/convoy-scheduler
//	go run ./test/bench/scheduler -nodes 1000,5000 -mixes mixed,whole-node
//
// Nodes are plain Ready Node objects (no kubelet, no kwok: the node lifecycle controller is off so
// they stay schedulable) in 2 zones of 4 blocks of 16-node racks, 8 GPUs each, with a GPUNode each.
// Gangs are a PodGroup with minMember = all its pods, and pods labelled and annotated as the
// operator makes them. Every contender gets a fresh control plane and the same client QPS and burst:
// by default those deploy/scheduler/config.yaml ships.
//
// By default (-arrival burst) every gang exists before the contender starts, as when a queue admits
// a backlog at once: pods/s is then the contender's own rate and the binder's is the API server's
// ceiling. With -arrival stream gangs are created while the contender runs.
//
// It reports pods bound per second, each gang's time to all bound (from the contender's start, or
// from its last pod created when streaming; p50, p99), gangs left unplaced (and how many of them
// would still fit), racks per placed gang against the fewest possible, and free GPUs stranded on
// partly used nodes.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner/synth"
	"github.com/convoy-dev/convoy/test/framework"
)

// Scheduler names a contender.
type Scheduler string

const (
	Convoy Scheduler = "convoy"
	// ConvoyAsyncAPI is Convoy's scheduler with upstream's SchedulerAsyncAPICalls feature gate on
	// (beta in 1.34, off by default): the scheduling loop hands its pod status updates to a
	// dispatcher instead of waiting for them.
	ConvoyAsyncAPI Scheduler = "convoy+async-api"
	// ConvoyPartlyUsedFirst is Convoy's profile with GangPlacement's nodePacking set to
	// PartlyUsedFirst: a gang of several nodes fills its rack's partly used nodes first.
	ConvoyPartlyUsedFirst Scheduler = "convoy+partly-used-first"
	Coscheduling          Scheduler = "coscheduling"
	// CoschedulingBinpack is Coscheduling with NodeResourcesFit's MostAllocated scoring over CPU,
	// memory and GPUs (weights 1, 1, 3): the bin packing the Kubernetes documentation gives for
	// extended resources, the upstream gang setup closest to Convoy's best fit.
	CoschedulingBinpack Scheduler = "coscheduling+binpack"
	// KubeSchedulerMinimal is upstream kube-scheduler 1.36's framework with the fewest plugins that
	// bind a GPU pod where it fits: PrioritySort, NodeResourcesFit's PreFilter and Filter, and
	// DefaultBinder. With no Score plugin it takes the first node that fits. No gang, topology or
	// scoring: what any scheduler built on kube-scheduler pays for its queue, cycle, cache, binding,
	// events and watch, with no placement logic of its own.
	KubeSchedulerMinimal Scheduler = "kube-scheduler-minimal"
	Binder               Scheduler = "binder"
	// BinderEvents is the binder that also records a Scheduled event per pod, as kube-scheduler
	// does.
	BinderEvents Scheduler = "binder+events"
	// BinderEventsWatch is binder+events with a watch of every pod of its own, in protobuf, as
	// kube-scheduler keeps one to know each node's pods (the other binders take the pods from the
	// benchmark's watch): the API server sends each pod change to one more watcher. It is the
	// ceiling of any scheduler built on kube-scheduler.
	BinderEventsWatch Scheduler = "binder+events+watch"
)

// convoy reports whether the contender runs Convoy's profile (deploy/scheduler/config.yaml).
func (s Scheduler) convoy() bool {
	return s == Convoy || s == ConvoyAsyncAPI || s == ConvoyPartlyUsedFirst || s == ConvoyDRA
}

type options struct {
	sizes      []int
	mixes      []synth.Mix
	schedulers []Scheduler
	gangs      int
	seed       uint64
	qps        float32
	burst      int
	stall      time.Duration
	timeout    time.Duration
	binDir     string
	jsonOut    string
	stateDir   string
	verbosity  int
	extraArgs  []string
	// apiServerArgs are appended to kube-apiserver's flags.
	apiServerArgs []string
	stream        bool
	// rate is the gangs created per second when streaming; 0 for as fast as the API server takes
	// them.
	rate float64
	// repeat is how many runs each contender gets, in rounds over the contenders.
	repeat int
	// namespaces is runSpec.namespaces.
	namespaces int
	// dra is whether a DRA contender runs: then every contender's control plane is 1.37's, from
	// controlPlaneBin, with the Workload API on (draFeatureGates).
	dra             bool
	controlPlaneBin string
}

func main() {
	var o options
	var sizes, mixes, schedulers string
	flag.StringVar(&sizes, "nodes", "5000", "comma-separated fleet sizes")
	flag.StringVar(&mixes, "mixes", "mixed,whole-node,fits", "comma-separated gang mixes: mixed (1, 2, 4 or 8 GPUs per worker), whole-node (8), fits (1, 2, 4 or 8, each half as common as the one below: the gangs fit the fleet), clique (1 to 36 4-GPU workers on GB200 NVL72 cliques of 18 nodes, not run by default)")
	flag.StringVar(&schedulers, "schedulers", "convoy,coscheduling,coscheduling+binpack,binder,binder+events+watch", "comma-separated contenders: convoy, convoy+dra (on ResourceSlices and ResourceClaimTemplates instead of nvidia.com/gpu), kube-scheduler-1.37+dra (upstream 1.37 with DRA and gang scheduling), convoy+async-api (with kube-scheduler's SchedulerAsyncAPICalls feature gate on), convoy+partly-used-first (GangPlacement's nodePacking: PartlyUsedFirst), coscheduling, coscheduling+binpack (Coscheduling with MostAllocated scoring), kube-scheduler-minimal (kube-scheduler with PrioritySort, NodeResourcesFit's filter and DefaultBinder only: the framework's own cost), binder, binder+events (the binder recording kube-scheduler's Scheduled event per pod), binder+events+watch (that binder with a pod watch of its own, as kube-scheduler has)")
	flag.IntVar(&o.gangs, "gangs", 0, "gangs per run; 0 for one per 5 nodes (1,000 at 5,000 nodes)")
	flag.Uint64Var(&o.seed, "seed", 42, "seed of the gang mix")
	qps := flag.Float64("qps", 0, "client QPS of every scheduler and binder; 0: clientConnection.qps of deploy/scheduler/config.yaml, as shipped")
	flag.IntVar(&o.burst, "burst", 0, "client burst of every scheduler and binder; 0: clientConnection.burst of deploy/scheduler/config.yaml")
	flag.DurationVar(&o.stall, "stall", 60*time.Second, "end a run when no pod binds for this long after the last gang is created")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest run")
	flag.StringVar(&o.binDir, "bin-dir", "", "directory with the control plane and convoy-scheduler; default bin/")
	flag.StringVar(&o.jsonOut, "json", "", "also write the results to this file")
	arrival := flag.String("arrival", "burst", "burst: every gang exists before the contender starts (throughput, time to drain a backlog); stream: gangs are created while it runs (latency from each gang's last pod created)")
	flag.Float64Var(&o.rate, "rate", 0, "with -arrival stream, gangs arriving per second, a Poisson process of -seed (each gang's pods created one after another on its arrival); 0: as fast as the API server takes them, 32 gangs at a time")
	flag.StringVar(&o.stateDir, "state-dir", "", "keep each run's control plane state and logs under this directory")
	flag.IntVar(&o.verbosity, "v", -1, "every scheduler's log verbosity; -1: the --v deploy/scheduler's Deployment gives convoy-scheduler, as shipped")
	flag.IntVar(&o.namespaces, "namespaces", 1, "spread the gangs over this many namespaces, round robin (bench-0, bench-1...); 1 puts them all in bench")
	flag.IntVar(&o.repeat, "repeat", 1, "runs per contender, in rounds over the contenders; the table shows each contender's run of median pods/s, with every run's pods/s and gang p99 beside it")
	extra := flag.String("scheduler-args", "", "space-separated extra flags for the schedulers, e.g. for profiling")
	flag.StringVar(&o.controlPlaneBin, "k8s137-bin", "", "directory with Kubernetes 1.37's kube-apiserver, kube-controller-manager and kube-scheduler (make bench-scheduler-dra builds them), the control plane of every contender when a +dra one runs; default bin/k8s-1.37")
	apiExtra := flag.String("apiserver-args", "", "space-separated extra flags for kube-apiserver, e.g. --profiling=true")
	flag.Parse()
	o.qps = float32(*qps)
	if o.verbosity < 0 {
		v, err := shippedVerbosity()
		if err != nil {
			fail(err)
		}
		o.verbosity = v
	}
	if o.repeat < 1 {
		fail(fmt.Errorf("-repeat: %d is not a number of runs", o.repeat))
	}
	o.extraArgs = strings.Fields(*extra)
	o.apiServerArgs = strings.Fields(*apiExtra)
	switch *arrival {
	case "burst":
	case "stream":
		o.stream = true
	default:
		fail(fmt.Errorf("-arrival: %q is neither burst nor stream", *arrival))
	}
	if o.rate < 0 || o.rate > 0 && !o.stream {
		fail(fmt.Errorf("-rate: %v needs -arrival stream and a rate above 0", o.rate))
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 16 {
			fail(fmt.Errorf("-nodes: %q is not a fleet size", s))
		}
		o.sizes = append(o.sizes, n)
	}
	for _, m := range strings.Split(mixes, ",") {
		i := slices.IndexFunc(synth.Mixes, func(x synth.Mix) bool { return x.Name == strings.TrimSpace(m) })
		if i < 0 {
			fail(fmt.Errorf("-mixes: unknown mix %q", m))
		}
		o.mixes = append(o.mixes, synth.Mixes[i])
	}
	for _, s := range strings.Split(schedulers, ",") {
		switch sc := Scheduler(strings.TrimSpace(s)); sc {
		case Convoy, ConvoyAsyncAPI, ConvoyPartlyUsedFirst, ConvoyDRA, Coscheduling, CoschedulingBinpack, KubeSchedulerMinimal, KubeScheduler137DRA, Binder, BinderEvents, BinderEventsWatch:
			o.schedulers = append(o.schedulers, sc)
			o.dra = o.dra || sc.dra()
		default:
			fail(fmt.Errorf("-schedulers: unknown contender %q", s))
		}
	}
	if o.binDir == "" {
		dir, err := framework.DefaultBinDir()
		if err != nil {
			fail(err)
		}
		o.binDir = dir
	}
	if err := framework.CheckBinaries(o.binDir, "etcd", "kube-apiserver", "kube-controller-manager", "kwok", "convoy-scheduler"); err != nil {
		fail(err)
	}
	if o.dra {
		o.controlPlaneBin = cmp.Or(o.controlPlaneBin, filepath.Join(o.binDir, "k8s-1.37"))
		if err := framework.CheckBinaries(o.controlPlaneBin, "kube-apiserver", "kube-controller-manager", "kube-scheduler"); err != nil {
			fail(fmt.Errorf("%w (make bench-scheduler-dra builds them)", err))
		}
	}
	if o.qps == 0 || o.burst == 0 {
		qps, burst, err := shippedClientConnection()
		if err != nil {
			fail(err)
		}
		o.qps, o.burst = cmp.Or(o.qps, qps), cmp.Or(o.burst, burst)
	}
	fmt.Fprintf(os.Stderr, "client QPS %g / burst %d; load average %s\n", o.qps, o.burst, framework.LoadAverage())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var results []*Result
	for _, nodes := range o.sizes {
		for _, mix := range o.mixes {
			gangs := o.gangs
			if gangs == 0 {
				gangs = nodes / 5
			}
			spec := runSpec{fleet: mix.FleetOf(nodes), mix: mix, gangs: synth.Gangs(o.seed, gangs, mix), namespaces: o.namespaces}
			runs := make([][]*Result, len(o.schedulers))
			for round := range o.repeat {
				for i, sc := range o.schedulers {
					fmt.Fprintf(os.Stderr, "== %d nodes, %d %s gangs, %s", nodes, gangs, mix.Name, sc)
					if o.namespaces > 1 {
						fmt.Fprintf(os.Stderr, ", in %d namespaces", o.namespaces)
					}
					if o.repeat > 1 {
						fmt.Fprintf(os.Stderr, ", run %d of %d", round+1, o.repeat)
					}
					fmt.Fprintln(os.Stderr)
					r, err := run(ctx, o, spec, sc)
					if err != nil {
						fail(err)
					}
					fmt.Fprintln(os.Stderr, r.line())
					runs[i] = append(runs[i], r)
				}
			}
			for _, rs := range runs {
				results = append(results, median(rs))
			}
		}
	}
	fmt.Printf("client QPS %g / burst %d, %d CPUs, load average after: %s\n\n", o.qps, o.burst, runtime.NumCPU(), framework.LoadAverage())
	fmt.Println(table(results))
	if o.jsonOut != "" {
		data, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(o.jsonOut, data, 0o644); err != nil {
			fail(err)
		}
	}
}

// shippedClientConnection reads the client QPS and burst deploy/scheduler/config.yaml ships.
func shippedClientConnection() (float32, int, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return 0, 0, err
	}
	path := filepath.Join(root, "deploy", "scheduler", "config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	var cfg struct {
		ClientConnection struct {
			QPS   float32 `json:"qps"`
			Burst int     `json:"burst"`
		} `json:"clientConnection"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil || cfg.ClientConnection.QPS <= 0 || cfg.ClientConnection.Burst <= 0 {
		return 0, 0, fmt.Errorf("%s: no clientConnection.qps and burst (%v); give -qps and -burst", path, err)
	}
	return cfg.ClientConnection.QPS, cfg.ClientConnection.Burst, nil
}

// shippedVerbosity reads the --v deploy/scheduler's Deployment gives convoy-scheduler.
func shippedVerbosity() (int, error) {
	const file = "deploy/scheduler/deployment.yaml"
	flags, err := framework.ShippedFlags(file, "convoy-scheduler", "--v")
	if err != nil {
		return 0, err
	}
	if len(flags) != 1 {
		return 0, fmt.Errorf("%s: convoy-scheduler's --v is set %d times; give -v", file, len(flags))
	}
	_, value, _ := strings.Cut(flags[0], "=")
	v, err := strconv.Atoi(value)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s: convoy-scheduler's %s is not a verbosity; give -v", file, flags[0])
	}
	return v, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scheduler benchmark:", err)
	os.Exit(1)
}
