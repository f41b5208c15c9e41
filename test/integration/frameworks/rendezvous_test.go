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

// Package frameworks runs the real training frameworks with the environment Convoy's operator
// writes into a gang's pods, one local process per pod, and checks that they form one job: every
// process joins, knows its rank and the world size, and a collective sums over all of them.
//
// It needs python3 with PyTorch or JAX (the GPU machine's image has both); where a framework is
// missing its test skips, saying so. No GPU is used: PyTorch runs gloo and JAX its CPU backend,
// since what is checked is the rendezvous, not the GPUs. The one change to what the operator
// writes is the master's DNS name (<job>-worker-0.<job>.<namespace>.svc, which only the job's
// headless Service resolves), replaced by 127.0.0.1.
package frameworks

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	testframework "github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// TestPyTorchWithTorchrun runs each pod's command as `torchrun train.py`: torchrun reads its
// arguments from the PET_ variables, 2 nodes × 2 processes (gpusPerWorker), and sets each
// process's RANK, LOCAL_RANK and WORLD_SIZE.
func TestPyTorchWithTorchrun(t *testing.T) {
	needPython(t, "torch")
	job := gang(t, convoy.FrameworkPyTorch, 2, 2)
	script := writeScript(t, pytorchScript)
	out := runGang(t, job, func(*corev1.Pod) []string { return []string{"python3", "-m", "torch.distributed.run", script} })
	checkLines(t, out, []string{
		"rank 0 of 4 local 0 sum 10", "rank 1 of 4 local 1 sum 10",
		"rank 2 of 4 local 0 sum 10", "rank 3 of 4 local 1 sum 10",
	})
}

// TestPyTorchInitProcessGroup runs each pod's command as a script that calls
// init_process_group itself (env://): one process per pod, from MASTER_ADDR, MASTER_PORT,
// WORLD_SIZE and RANK.
func TestPyTorchInitProcessGroup(t *testing.T) {
	needPython(t, "torch")
	job := gang(t, convoy.FrameworkPyTorch, 3, 1)
	script := writeScript(t, pytorchScript)
	out := runGang(t, job, func(*corev1.Pod) []string { return []string{"python3", script} })
	checkLines(t, out, []string{"rank 0 of 3 local - sum 6", "rank 1 of 3 local - sum 6", "rank 2 of 3 local - sum 6"})
}

// pytorchScript joins the process group and all-reduces rank+1.
const pytorchScript = `
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
print("rank %d of %d local %s sum %d" % (dist.get_rank(), dist.get_world_size(), os.environ.get("LOCAL_RANK", "-"), t.item()), flush=True)
dist.destroy_process_group()
`

// TestJAX runs deploy/samples/jax.yaml: each pod's own command and args, the script that passes
// the three JAX_ variables to jax.distributed.initialize (which reads only JAX_COORDINATOR_ADDRESS
// by itself).
func TestJAX(t *testing.T) {
	needPython(t, "jax")
	root, err := testframework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "samples", "jax.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job := &convoy.TrainingJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatalf("deploy/samples/jax.yaml: %v", err)
	}
	job.Spec.Networking = &convoy.NetworkingSpec{MasterPort: int32(util.FreePort(t))}
	out := runGang(t, job, func(pod *corev1.Pod) []string {
		c := pod.Spec.Containers[0]
		return append(slices.Clone(c.Command), c.Args...)
	})
	n := int(job.Spec.NumWorkers)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("process %d of %d, %d devices", i, n, n))
	}
	checkLines(t, out, want)
}

// writeScript writes a training script for torchrun, which takes a file, not -c.
func writeScript(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "train.py")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// gang is a TrainingJob of the framework with the given workers and GPUs per worker, its
// rendezvous on a free local port.
func gang(t *testing.T, fw convoy.Framework, workers, gpus int32) *convoy.TrainingJob {
	t.Helper()
	return utiltesting.MakeTrainingJob("llm", "team-a").Framework(fw).Workers(workers).GPUs(gpus).
		MasterPort(int32(util.FreePort(t))).Command([]string{"train"}).Obj()
}

// runGang starts one process per pod of the job with the pod's environment and returns every
// line they printed. command gives a pod's command by its name.
func runGang(t *testing.T, job *convoy.TrainingJob, command func(pod *corev1.Pod) []string) []string {
	t.Helper()
	plugin, err := mlframework.For(job.Spec.Framework)
	if err != nil {
		t.Fatal(err)
	}
	master := mlframework.Host(job, mlframework.Master)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		lines []string
		wg    sync.WaitGroup
	)
	for _, pod := range builder.Pods(job, plugin, builder.Options{}) {
		env := podEnv(t, pod, master)
		argv := command(pod)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Env = append(cmd.Env, "JAX_PLATFORMS=cpu", "CUDA_VISIBLE_DEVICES=", "PYTHONUNBUFFERED=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("pod %s: %v\n%s", pod.Name, err, tail(stderr.String(), 20))
			}
			for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				if l != "" {
					lines = append(lines, l)
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(lines)
	return lines
}

// podEnv is the training container's environment as KEY=value, the master's DNS name replaced
// by 127.0.0.1. Variables from the downward API or a Secret are left out.
func podEnv(t *testing.T, pod *corev1.Pod, master string) []string {
	t.Helper()
	var env []string
	for _, c := range pod.Spec.Containers {
		if c.Name != builder.ContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env = append(env, e.Name+"="+strings.ReplaceAll(e.Value, master, "127.0.0.1"))
			}
		}
		return env
	}
	t.Fatalf("pod %s has no %s container", pod.Name, builder.ContainerName)
	return nil
}

func checkLines(t *testing.T, got, want []string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the processes printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// needPython skips the test unless python3 imports module.
func needPython(t *testing.T, module string) {
	t.Helper()
	if out, err := exec.Command("python3", "-c", "import "+module).CombinedOutput(); err != nil {
		t.Skipf("needs python3 with %s (the GPU machine's image has it): %v %s", module, err, tail(string(out), 1))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
