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

package framework

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// EnvBinDir, when set, names the directory holding the binaries instead of <repository root>/bin.
const EnvBinDir = "CONVOY_BIN_DIR"

// EnvControlPlaneBin, when set, names a directory whose kube-apiserver and kube-controller-manager
// every cluster runs instead of the bin directory's: `make test-e2e` sets it to bin/k8s-1.37 (K8S=1.36: unset).
const EnvControlPlaneBin = "CONVOY_CONTROL_PLANE_BIN"

// EnvKeepState, when set to anything but "", keeps a test package's state directory, with every
// component's log, when its tests pass too: to read what the scheduler did in a passing run.
const EnvKeepState = "CONVOY_KEEP_STATE"

var (
	sharedMu sync.Mutex
	shared   *Cluster
)

// Main starts one cluster for a test package, runs the package's tests against it and stops it:
//
//	func TestMain(m *testing.M) { framework.Main(m, framework.Options{}) }
//
// Tests reach the cluster with Shared. A cluster that cannot start (binaries missing: run
// `make bin`) fails the package; it is never skipped. When a test fails, or $CONVOY_KEEP_STATE is
// set, the state directory with every component's log is kept and its path printed.
func Main(m *testing.M, opts Options) {
	os.Exit(runMain(m, opts))
}

// BenchMain is Main for a package of benchmarks: it starts the cluster only when `go test` runs
// benchmarks (-bench), so that a plain `go test ./...` builds the package and starts nothing.
func BenchMain(m *testing.M, opts Options) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	Main(m, opts)
}

func runMain(m *testing.M, opts Options) int {
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	sharedMu.Lock()
	shared = c
	sharedMu.Unlock()

	code := m.Run()
	if code != 0 || os.Getenv(EnvKeepState) != "" {
		c.KeepStateDir()
		fmt.Fprintf(os.Stderr, "Control plane state and logs kept in %s\n", c.StateDir)
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stopping the control plane: %v\n", err)
		code = 1
	}
	return code
}

// Shared returns the cluster Main started, failing t when the package's TestMain does not call Main.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		t.Fatal("no shared cluster: the package's TestMain must call framework.Main")
	}
	return shared
}

// RepoRoot returns the repository root: the nearest directory above the working directory, or
// the working directory itself, that holds a go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or above it")
		}
		dir = parent
	}
}

// DefaultBinDir returns $CONVOY_BIN_DIR, or else <repository root>/bin.
func DefaultBinDir() (string, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("locating bin/: %w; set %s", err, EnvBinDir)
	}
	return filepath.Join(root, "bin"), nil
}
