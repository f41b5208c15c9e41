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

// Command demoreal tells Convoy's story on real nodes (`make demo-real`): it starts the local
// control plane with two real kubelets running containerd, Convoy's images from a local registry,
// CoreDNS, Kueue, the operator and the scheduler, then runs a real PyTorch TrainingJob, kills one
// worker's process and shows the gang resume from its checkpoint. It needs root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
)

func main() {
	stateDir := flag.String("state-dir", ".convoy-real", "Where the cluster keeps its state and every component's log.")
	keep := flag.Bool("keep", false, "Keep the cluster running after the story, until interrupted.")
	flag.Parse()
	if err := run(*stateDir, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo-real:", err)
		os.Exit(1)
	}
}

func run(stateDir string, keep bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	logf := func(format string, args ...any) {
		fmt.Printf("[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	kwokArgs, err := stack.KwokArgs(ctx)
	if err != nil {
		return err
	}
	c, err := framework.Start(ctx, framework.Options{StateDir: stateDir, RealNodes: true, KwokArgs: kwokArgs,
		AddToScheme: realstack.AddToScheme})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo-real: stopping:", err)
		}
		fmt.Printf("Stopped. Every component's log is in %s/logs\n", c.StateDir)
	}()
	logf("Control plane ready")
	e, err := realstack.Start(ctx, c, logf)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Println("The story:")
	res, err := e.RunStory(ctx, "demo", os.Stdout)
	if err != nil {
		return err
	}
	m := res.Final.Status.Metrics
	fmt.Printf("\nSummary: %s after %d restart(s); resumed from epoch %d after %s was killed at checkpointed epoch %d",
		res.Final.Status.State, res.Restarts, res.ResumedFrom, res.KilledPod, res.KilledAtEpoch)
	if m != nil && m.Accuracy != nil {
		fmt.Printf("; accuracy %.4f", *m.Accuracy)
	}
	fmt.Printf("; first epoch %.1fs after kubectl apply\n", res.FirstStep.Seconds())
	if keep {
		fmt.Printf("\nThe cluster runs until interrupted: export KUBECONFIG=%s PATH=%s:$PATH\n", c.KubeconfigPath, c.BinDir)
		<-ctx.Done()
	}
	return nil
}
