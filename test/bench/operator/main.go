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

// Command operator measures how fast Convoy's operator turns TrainingJobs into pods, side by side
// with Kubeflow's training-operator v1.9.2 turning PyTorchJobs into pods and with a plain client
// creating the same number of pods (the API server's ceiling), in one run:
//
//	go build -o bin/convoy-operator ./operator/cmd/convoy-operator
//	go run ./test/bench/operator -jobs 1000
//
// Every contender gets a fresh local control plane (test/framework; no scheduler, no nodes: pods
// only need to exist). Convoy's operator runs with the flags it ships with (its client QPS and burst
// included) unless -qps or -convoy-args says otherwise; training-operator with its best measured
// setting (-peer-qps). The jobs, each of 8 pods (Convoy: 8
// workers; PyTorchJob: 1 master and 7 workers), are all submitted at once, and a metadata watch
// notes when each pod appears. The operators run as separate processes from bin/, so their CPU
// seconds and peak RSS are read from /proc.
//
// It reports the time from the first submission until every pod exists, the per-job time from
// the job's creation to its last pod observed (p50, p99), pods per second, the operator's CPU
// seconds during the batch and peak RSS, and the API server's CPU seconds during the batch.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/convoy-dev/convoy/test/framework"
)

// System names a contender.
type System string

const (
	Convoy System = "convoy"
	// Convoy32 is convoy-operator with --max-concurrent-reconciles=32.
	Convoy32         System = "convoy-32"
	TrainingOperator System = "training-operator"
	// TrainingOperator32 is training-operator with --controller-threads=32.
	TrainingOperator32 System = "training-operator-32"
	// APICeiling is a plain client creating the pods itself.
	APICeiling System = "api"
)

type options struct {
	systems           []System
	jobs              int
	podsPerJob        int
	qps               float32
	burst             int
	peerQPS           float32
	peerBurst         int
	timeout           time.Duration
	binDir            string
	stateDir          string
	convoyExtraArgs   []string
	trainingOperator  string
	creators          int
	trainingOpThreads int
}

func main() {
	var o options
	systems := flag.String("systems", "convoy,convoy-32,training-operator,training-operator-32,api", "comma-separated contenders: convoy (its default 16 concurrent reconciles), convoy-32 (32), training-operator (its default single worker), training-operator-32 (32 workers), api (a plain client creating the pods)")
	flag.IntVar(&o.jobs, "jobs", 1000, "jobs submitted at once")
	qps := flag.Float64("qps", 0, "client QPS of convoy-operator (--kube-api-qps); 0: deploy/operator's, else the binary's default")
	flag.IntVar(&o.burst, "burst", 0, "client burst of convoy-operator (--kube-api-burst); 0: deploy/operator's, else the binary's default")
	peerQPS := flag.Float64("peer-qps", 1000, "client QPS of training-operator")
	flag.IntVar(&o.peerBurst, "peer-burst", 2000, "client burst of training-operator")
	flag.IntVar(&o.creators, "creators", 32, "goroutines submitting jobs (and creating pods for the api ceiling)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest wait for one contender's pods")
	flag.StringVar(&o.binDir, "bin-dir", "", "directory with the control plane, convoy-operator and training-operator; default bin/")
	flag.StringVar(&o.stateDir, "state-dir", "", "keep each run's control plane state and logs under this directory")
	extra := flag.String("convoy-args", "", "space-separated extra flags for convoy-operator")
	flag.Parse()
	o.podsPerJob = 8
	o.qps, o.peerQPS = float32(*qps), float32(*peerQPS)
	o.trainingOpThreads = 32
	o.convoyExtraArgs = strings.Fields(*extra)
	for _, s := range strings.Split(*systems, ",") {
		switch sys := System(strings.TrimSpace(s)); sys {
		case Convoy, Convoy32, TrainingOperator, TrainingOperator32, APICeiling:
			o.systems = append(o.systems, sys)
		default:
			fail(fmt.Errorf("-systems: unknown contender %q", s))
		}
	}
	if o.jobs < 1 {
		fail(fmt.Errorf("-jobs must be at least 1"))
	}
	if o.binDir == "" {
		dir, err := framework.DefaultBinDir()
		if err != nil {
			fail(err)
		}
		o.binDir = dir
	}
	if err := framework.CheckBinaries(o.binDir, "etcd", "kube-apiserver", "kube-controller-manager", "kwok", "convoy-operator"); err != nil {
		fail(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, sys := range o.systems {
		if sys == TrainingOperator || sys == TrainingOperator32 {
			path, err := ensureTrainingOperator(ctx, o.binDir)
			if err != nil {
				fail(err)
			}
			o.trainingOperator = path
			break
		}
	}

	fmt.Fprintf(os.Stderr, "load average before: %s\n", framework.LoadAverage())
	var results []*Result
	for _, sys := range o.systems {
		fmt.Fprintf(os.Stderr, "== %s: %d jobs x %d pods (load average %s)\n", sys, o.jobs, o.podsPerJob, framework.LoadAverage())
		r, err := run(ctx, o, sys)
		if err != nil {
			fail(fmt.Errorf("%s: %w", sys, err))
		}
		fmt.Fprintln(os.Stderr, r.line())
		fmt.Fprintf(os.Stderr, "%s: API writes during the batch: %s\n", sys, r.Writes)
		results = append(results, r)
	}
	fmt.Printf("%d jobs x %d pods, convoy-operator %s, training-operator client QPS %g / burst %d, %d CPUs, load average after: %s\n\n",
		o.jobs, o.podsPerJob, o.convoyRate(), o.peerQPS, o.peerBurst, numCPU(), framework.LoadAverage())
	fmt.Println(table(results))
}

// convoyRate says which client rate convoy-operator runs with.
func (o options) convoyRate() string {
	if o.qps == 0 && o.burst == 0 {
		return "with its shipped client QPS and burst"
	}
	return fmt.Sprintf("client QPS %g / burst %d (0: shipped)", o.qps, o.burst)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "operator benchmark:", err)
	os.Exit(1)
}
