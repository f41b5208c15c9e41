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

// Package scheduler tests Convoy's scheduler as a user sees it: the real convoy-scheduler binary
// (bin/convoy-scheduler, upstream kube-scheduler with Coscheduling, GangPlacement and
// GangPreemption) run with deploy/scheduler/config.yaml and deploy/scheduler/rbac.yaml against the
// real kube-apiserver, with kwok GPU nodes and GPUNode objects the tests write.
package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

const (
	schedulerProcess = "convoy-scheduler"
	schedulerBinary  = "convoy-scheduler"
	schedulerName    = "convoy-scheduler"

	lowPriority  = "convoy-test-low"
	highPriority = "convoy-test-high"
)

func TestMain(m *testing.M) {
	// A pod held by a finalizer stays Terminating, as with a kubelet: a preempted gang's pods
	// can be kept while the test changes the cluster around them.
	kwokArgs, err := framework.KwokArgs(context.Background(), framework.PodDeleteKeepingFinalizers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	framework.Main(m, framework.Options{KwokArgs: kwokArgs,
		AddToScheme: []func(*runtime.Scheme) error{convoy.AddToScheme, schedv1alpha1.AddToScheme}})
}

// env is the package's shared setup: CRDs, RBAC, priority classes and the running scheduler.
type env struct {
	c       *framework.Cluster
	root    string
	port    int
	cfgPath string
	// kubeconfig is the scheduler's ServiceAccount's: it also checks the tokens and access of
	// callers of its secure port (/metrics) with it, as it does in-cluster.
	kubeconfig string
}

var (
	envOnce sync.Once
	envErr  error
	shared  *env
)

// setup returns the shared environment, starting the scheduler on first use.
func setup(t *testing.T) *env {
	t.Helper()
	c := framework.Shared(t)
	envOnce.Do(func() {
		shared, envErr = newEnv(context.Background(), c)
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return shared
}

func newEnv(ctx context.Context, c *framework.Cluster) (*env, error) {
	if err := framework.CheckBinaries(c.BinDir, schedulerBinary); err != nil {
		return nil, fmt.Errorf("%w; build it with: go build -ldflags %q -o bin/convoy-scheduler ./scheduler-plugin/cmd/convoy-scheduler", err, framework.VersionLDFlags)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	podGroupCRDs, err := framework.ModuleDir(ctx, root, "sigs.k8s.io/scheduler-plugins")
	if err != nil {
		return nil, err
	}
	if err := c.InstallCRDs(ctx, filepath.Join(root, "deploy", "crd", "bases"), filepath.Join(podGroupCRDs, "config", "crd", "bases")); err != nil {
		return nil, err
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "convoy-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if err := applyFile(ctx, c.Client, filepath.Join(root, "deploy", "scheduler", "rbac.yaml")); err != nil {
		return nil, err
	}
	for name, value := range map[string]int32{lowPriority: 100, highPriority: 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if err := c.Client.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	e := &env{c: c, root: root}
	if err := e.writeConfig(ctx, "config.yaml"); err != nil {
		return nil, err
	}
	return e, e.startScheduler(ctx)
}

// writeConfig writes deploy/scheduler/<file> with the ServiceAccount's kubeconfig and without
// leader election: the shipped profiles, unchanged but for edits.
func (e *env) writeConfig(ctx context.Context, file string, edits ...func(cfg map[string]any)) error {
	kubeconfig, err := e.c.ServiceAccountKubeconfig(ctx, "convoy-system", "convoy-scheduler")
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(e.root, "deploy", "scheduler", file))
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return err
	}
	for _, edit := range edits {
		edit(cfg)
	}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = conn
	e.kubeconfig = kubeconfig
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	e.cfgPath = filepath.Join(e.c.StateDir, "convoy-scheduler.yaml")
	return os.WriteFile(e.cfgPath, out, 0o644)
}

// startScheduler starts bin/convoy-scheduler and waits until it is ready to schedule.
func (e *env) startScheduler(ctx context.Context) error {
	ports, err := framework.FreePorts(1)
	if err != nil {
		return err
	}
	port := ports[0]
	e.port = port
	args := []string{"--config=" + e.cfgPath, fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1", "--v=3",
		"--authentication-kubeconfig=" + e.kubeconfig, "--authorization-kubeconfig=" + e.kubeconfig}
	if err := e.c.StartProcess(schedulerProcess, schedulerBinary, args, nil); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return e.c.WaitHealthy(ctx, schedulerProcess, fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
}

func (e *env) stopScheduler() error { return e.c.StopProcess(schedulerProcess) }

// restartWith restarts the scheduler with deploy/scheduler/<file> and edits, and with the shipped
// config.yaml again when the test ends.
func (e *env) restartWith(t *testing.T, file string, edits ...func(cfg map[string]any)) {
	t.Helper()
	if err := e.stopScheduler(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := e.stopScheduler(); err != nil {
			t.Error(err)
		}
		if err := e.writeConfig(ctx, "config.yaml"); err != nil {
			t.Fatal(err)
		}
		if err := e.startScheduler(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if err := e.writeConfig(t.Context(), file, edits...); err != nil {
		t.Fatal(err)
	}
	if err := e.startScheduler(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// schedulerLog returns the scheduler's log so far.
func (e *env) schedulerLog() string {
	for _, p := range e.c.Processes() {
		if p.Name == schedulerProcess {
			data, _ := os.ReadFile(p.LogFile)
			return string(data)
		}
	}
	return ""
}

// applyFile creates or updates every object of a multi-document YAML file.
func applyFile(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := util.ApplyYAML(ctx, c, data, "convoy-scheduler-test"); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
