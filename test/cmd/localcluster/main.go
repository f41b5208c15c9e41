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

// Command localcluster builds and runs the local control plane of test/framework from the shell:
//
//	localcluster build                         build bin/ (what `make bin` runs)
//	localcluster up --state-dir DIR [fleet]    start a cluster with fake GPU nodes; runs until SIGTERM/SIGINT
//	localcluster down --state-dir DIR          stop the cluster that `up` runs in DIR
//
// `up` writes DIR/localcluster.pid when it starts, DIR/kubeconfig once the API server answers and
// DIR/ready once every node is Ready, so a script can start it in the background and poll.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/monitoring"
)

// Files in the state directory besides the framework's own.
const (
	pidFile   = "localcluster.pid"
	readyFile = "ready"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = build(args)
	case "up":
		err = up(args)
	case "down":
		err = down(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: localcluster build [--root DIR]
       localcluster up --state-dir DIR [--bin-dir DIR] [--zones N] [--blocks-per-zone N] [--racks-per-block N]
                       [--nodes-per-rack N] [--gpus-per-node N] [--gpu-product NAME] [--convoy [--pcie-nodes N]]
       localcluster down --state-dir DIR`)
	os.Exit(2)
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	root := fs.String("root", "", "repository root (default: the nearest directory with a go.mod)")
	_ = fs.Parse(args)
	if *root == "" {
		var err error
		if *root, err = framework.RepoRoot(); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return framework.Build(ctx, *root, os.Stderr)
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	stateDir := fs.String("state-dir", "", "directory for the cluster's state, kubeconfig and logs (required)")
	binDir := fs.String("bin-dir", "", "directory with the binaries (default: $"+framework.EnvBinDir+" or <repo>/bin)")
	fleet := framework.Fleet{}
	fs.IntVar(&fleet.Zones, "zones", 1, "zones in the fake GPU fleet")
	fs.IntVar(&fleet.BlocksPerZone, "blocks-per-zone", 2, "blocks per zone")
	fs.IntVar(&fleet.RacksPerBlock, "racks-per-block", 2, "racks per block")
	fs.IntVar(&fleet.NodesPerRack, "nodes-per-rack", 4, "nodes per rack (0: no nodes)")
	fs.IntVar(&fleet.GPUsPerNode, "gpus-per-node", 8, "nvidia.com/gpu per node")
	fs.StringVar(&fleet.Product, "gpu-product", "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.product label")
	withConvoy := fs.Bool("convoy", false, "also start the whole Convoy stack (test/e2e/stack): Kueue, deploy/, the operator, the scheduler and mock node agents")
	simEpoch := fs.Duration("simtrainer-epoch", 0, "with --convoy: run test/cmd/simtrainer, reporting one epoch of every running job per interval (0: not at all)")
	pcieNodes := fs.Int("pcie-nodes", 0, "with --convoy: a rack of this many 4-GPU PCIe (L40S) nodes besides the fleet")
	_ = fs.Parse(args)
	if *stateDir == "" {
		return errors.New("--state-dir is required")
	}
	dir, err := filepath.Abs(*stateDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if p, ok := runningUp(dir); ok {
		return fmt.Errorf("localcluster up (pid %d) already runs in %s; stop it with: localcluster down --state-dir %s", p.Pid, dir, dir)
	}
	// Written first, so that `down` can stop an `up` that is still starting.
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(dir, pidFile))
	_ = os.Remove(filepath.Join(dir, readyFile))
	defer os.Remove(filepath.Join(dir, readyFile))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	began := time.Now()
	opts := framework.Options{StateDir: dir, BinDir: *binDir, Log: os.Stdout}
	if *withConvoy {
		if opts.KwokArgs, err = stack.KwokArgs(ctx); err != nil {
			return err
		}
	}
	c, err := framework.Start(ctx, opts)
	if err != nil {
		return err
	}
	if err := serve(ctx, c, fleet, *withConvoy, *pcieNodes, *simEpoch, began); err != nil {
		_ = c.Stop()
		return err
	}
	fmt.Println("Stopping the cluster")
	return c.Stop()
}

// serve creates the fleet, marks the cluster ready and waits for a signal or a component's death.
func serve(ctx context.Context, c *framework.Cluster, fleet framework.Fleet, withConvoy bool, pcieNodes int, simEpoch time.Duration, began time.Time) error {
	var nodes []framework.NodeSpec
	if withConvoy {
		// On-demand nodes as Karpenter labels them; deploy/queue's on-demand flavors select the GPU product alone.
		fleet.Labels = map[string]string{stack.LabelCapacityType: "on-demand"}
		nodes = append(fleet.Nodes(), stack.PCIeRack(pcieNodes)...)
	} else {
		nodes = fleet.Nodes()
	}
	if err := c.CreateNodes(ctx, nodes...); err != nil {
		return err
	}
	if withConvoy {
		opts := stack.Options{SimTrainer: simEpoch, Log: func(format string, args ...any) { fmt.Printf(format+"\n", args...) }}
		opts.Agents = append(opts.Agents, stack.AgentPool{Profile: stack.ProfileFor(fleet.Product), Selector: framework.LabelGPUProduct + "=" + fleet.Product})
		if pcieNodes > 0 {
			opts.Agents = append(opts.Agents, stack.AgentPool{Profile: "pcie-4", Selector: framework.LabelGPUProduct + "=" + stack.PCIeProduct})
		}
		s, err := stack.Start(ctx, c, opts)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.StateDir, "progress-url"), []byte(s.ProgressURL+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.StateDir, "scheduler-metrics-url"), []byte(s.SchedulerMetricsURL+"\n"), 0o644); err != nil {
			return err
		}
		if err := startPrometheus(ctx, s); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(c.StateDir, readyFile), []byte(c.KubeconfigPath+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("Cluster ready in %.1fs with %d fake GPU nodes (%d GPUs each)\n", time.Since(began).Seconds(),
		len(nodes), fleet.GPUsPerNode)
	fmt.Printf("  export KUBECONFIG=%s\n  logs in %s\n", c.KubeconfigPath, filepath.Join(c.StateDir, "logs"))

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := c.CheckProcesses(); err != nil {
				return err
			}
		}
	}
}

// downTimeout is how long down waits for `up` to stop its cluster before it kills what is left.
const downTimeout = 20 * time.Second

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	stateDir := fs.String("state-dir", "", "the directory given to up (required)")
	_ = fs.Parse(args)
	if *stateDir == "" {
		return errors.New("--state-dir is required")
	}
	dir, err := filepath.Abs(*stateDir)
	if err != nil {
		return err
	}

	// Read the component list first: an `up` that stops cleanly removes it.
	components, err := framework.RunningProcesses(dir)
	if err != nil {
		return err
	}
	upProc, ours := runningUp(dir)
	if ours {
		fmt.Printf("Stopping localcluster up (pid %d)\n", upProc.Pid)
		_ = syscall.Kill(upProc.Pid, syscall.SIGTERM)
		if !waitGone(downTimeout, upProc) {
			fmt.Printf("Killed localcluster up (pid %d): still running after %s\n", upProc.Pid, downTimeout)
			_ = syscall.Kill(upProc.Pid, syscall.SIGKILL)
		}
	}

	// What is left: `up` was killed, hung, or never cleaned up.
	for _, p := range components {
		if p.Running() {
			fmt.Printf("Killed %s (process group %d)\n", p.Name, p.Pid)
			_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		}
	}
	if ours {
		components = append(components, upProc)
	}
	var left []string
	for _, p := range components {
		if !waitGone(5*time.Second, p) {
			left = append(left, fmt.Sprintf("%s (pid %d)", p.Name, p.Pid))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("still running: %s", strings.Join(left, ", "))
	}
	for _, name := range []string{pidFile, readyFile, framework.PidsFile} {
		_ = os.Remove(filepath.Join(dir, name))
	}
	fmt.Println("Nothing left running")
	return nil
}

// runningUp returns the `up` process recorded in dir's pid file, if it still runs. The pid is only
// ours while it runs a localcluster binary (go build and go run both name it so).
func runningUp(dir string) (framework.Process, bool) {
	p := framework.Process{Name: "localcluster up"}
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return p, false
	}
	if p.Pid, err = strconv.Atoi(strings.TrimSpace(string(data))); err != nil || p.Pid <= 1 {
		return p, false
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Pid))
	p.Binary = strings.TrimSuffix(exe, " (deleted)")
	return p, filepath.Base(p.Binary) == "localcluster" && p.Running()
}

// waitGone waits up to timeout for p to stop running and reports whether it did.
func waitGone(timeout time.Duration, p framework.Process) bool {
	deadline := time.Now().Add(timeout)
	for p.Running() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// startPrometheus runs Prometheus, when it is installed (Debian's prometheus: make
// monitoring-deps), scraping the stack as deploy/monitoring says and evaluating its alerts, and
// writes its URL to the state directory's prometheus-url.
func startPrometheus(ctx context.Context, s *stack.Stack) error {
	binary, err := exec.LookPath("prometheus")
	if err != nil {
		fmt.Println("Prometheus is not installed (make monitoring-deps installs it): the demo runs without it")
		return nil
	}
	groups, err := monitoring.ReadRules(filepath.Join(s.Root, monitoring.Dir, "prometheusrule.yaml"))
	if err != nil {
		return err
	}
	url, err := monitoring.StartPrometheus(ctx, s, binary, filepath.Join(s.Cluster.StateDir, "prometheus"), groups)
	if err != nil {
		return fmt.Errorf("starting Prometheus: %w", err)
	}
	fmt.Printf("Prometheus ready at %s, scraping every component, with deploy/monitoring's alerts\n", url)
	return os.WriteFile(filepath.Join(s.Cluster.StateDir, "prometheus-url"), []byte(url+"\n"), 0o644)
}
