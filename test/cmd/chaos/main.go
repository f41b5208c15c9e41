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

// Command chaos starts a local cluster with the whole Convoy stack on a simulated GPU fleet, breaks
// it in every way of test/chaos while TrainingJobs run, and prints what a user would have seen as a
// table: `make chaos`, or `go run ./test/cmd/chaos -short` for the sizes `make test` runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/convoy-dev/convoy/test/chaos"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
)

func main() {
	// -short picks the defaults the other flags start from.
	short := slices.Contains(os.Args[1:], "-short") || slices.Contains(os.Args[1:], "--short")
	cfg := chaos.Full()
	if short {
		cfg = chaos.Short()
	}
	flags := flag.CommandLine
	flags.Bool("short", false, "Every scenario small, the sizes of the test in make test; the flags below override them.")
	flags.IntVar(&cfg.Racks, "racks", cfg.Racks, "Racks of 4 nodes × 8 H100 GPUs in the fleet.")
	flags.IntVar(&cfg.Jobs, "jobs", cfg.Jobs, "R1: TrainingJobs of 4 to 8 workers × 1 to 8 GPUs.")
	flags.IntVar(&cfg.Kills, "kills", cfg.Kills, "R1: operator SIGKILLs at random moments.")
	flags.IntVar(&cfg.BindingKills, "binding-kills", cfg.BindingKills, "R2: scheduler SIGKILLs while a gang binds.")
	flags.IntVar(&cfg.PermitKills, "permit-kills", cfg.PermitKills, "R2: scheduler SIGKILLs while a gang waits at Permit.")
	flags.IntVar(&cfg.ControlPlaneJobs, "control-plane-jobs", cfg.ControlPlaneJobs, "TrainingJobs through the API server's restart, and through Kueue's downtime.")
	flags.DurationVar(&cfg.KueueDown, "kueue-down", cfg.KueueDown, "How long Kueue stays down.")
	flags.IntVar(&cfg.Failovers, "failovers", cfg.Failovers, "R5: leader SIGKILLs, alternately of the operator and the scheduler.")
	flags.IntVar(&cfg.FailoverJobs, "failover-jobs", cfg.FailoverJobs, "R5: TrainingJobs through the failovers.")
	flags.Func("failover-epochs", fmt.Sprintf("R5: epochs of a second each job runs, so that jobs run at every kill (default %d).", cfg.FailoverEpochs), func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		cfg.FailoverEpochs = int32(n)
		return err
	})
	flags.IntVar(&cfg.WebhookJobs, "webhook-jobs", cfg.WebhookJobs, "TrainingJobs while a pod admission webhook takes 9 s for each pod.")
	flags.DurationVar(&cfg.Grace, "grace", cfg.Grace, "How long a gang may be partly bound before it counts as partial.")
	flags.DurationVar(&cfg.Deadline, "deadline", cfg.Deadline, "How long jobs have after a scenario's last fault before they count as stuck.")
	flags.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "Seed of the job sizes and kill moments.")
	scenarios := flags.String("scenarios", "", "Comma-separated scenarios to run, of R1, R2, control-plane, R5, nodes, webhook and "+realNodes+" (default: all; "+realNodes+" needs root and `make images`).")
	stateDir := flags.String("state-dir", "", "Keep the cluster's state and every component's log here (default: a temporary directory, removed unless the run fails).")
	flag.Parse()
	real := true
	if *scenarios != "" {
		cfg.Scenarios = strings.Split(*scenarios, ",")
		real = slices.Contains(cfg.Scenarios, realNodes)
		cfg.Scenarios = slices.DeleteFunc(cfg.Scenarios, func(s string) bool { return s == realNodes })
	}
	began := time.Now()
	cfg.Log = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	// The API server's warnings to the runner's client (a dry run a slow webhook left unchecked) go to stderr.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var results []chaos.Result
	var err error
	if *scenarios == "" || len(cfg.Scenarios) > 0 {
		results, err = run(ctx, cfg, *stateDir)
	}
	if real && err == nil {
		var res []chaos.Result
		res, err = runReal(ctx, *stateDir, cfg.Log)
		results = append(results, res...)
	}
	if perr := chaos.Print(os.Stdout, results); perr != nil && err == nil {
		err = perr
	}
	for _, res := range results {
		if (!res.Met || len(res.Slow) > 0) && err == nil {
			err = fmt.Errorf("%s: target not met", res.Scenario)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// realNodes is the scenario of test/chaos RealNodes, on a cluster of its own.
const realNodes = "real-nodes"

// run runs the scenarios of cfg on the simulated fleet.
func run(ctx context.Context, cfg chaos.Config, stateDir string) ([]chaos.Result, error) {
	return onCluster(ctx, framework.Options{StateDir: stateDir, AddToScheme: chaos.AddToScheme}, func(c *framework.Cluster) ([]chaos.Result, error) {
		r, err := chaos.Setup(ctx, c, cfg)
		if err != nil {
			return nil, err
		}
		return r.Run(ctx)
	})
}

// runReal starts Convoy on real nodes (test/e2e/realstack) and runs test/chaos RealNodes there.
func runReal(ctx context.Context, stateDir string, log func(format string, args ...any)) ([]chaos.Result, error) {
	if stateDir != "" {
		stateDir = filepath.Join(stateDir, realNodes)
	}
	return onCluster(ctx, framework.Options{StateDir: stateDir, RealNodes: true, AddToScheme: realstack.AddToScheme}, func(c *framework.Cluster) ([]chaos.Result, error) {
		e, err := realstack.Start(ctx, c, log)
		if err != nil {
			return nil, err
		}
		return chaos.RealNodes(ctx, e, "chaos-real-nodes", log)
	})
}

// onCluster starts a cluster with opts and the stack's kwok, runs f on it and stops it; a cluster
// whose run failed keeps its state and logs.
func onCluster(ctx context.Context, opts framework.Options, f func(*framework.Cluster) ([]chaos.Result, error)) (results []chaos.Result, err error) {
	if opts.KwokArgs, err = stack.KwokArgs(ctx); err != nil {
		return nil, err
	}
	opts.Log = os.Stderr
	c, err := framework.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.KeepStateDir()
			fmt.Fprintf(os.Stderr, "State and logs kept in %s\n", c.StateDir)
		}
		if serr := c.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	return f(c)
}
