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
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// KubernetesVersion is the version of the Kubernetes binaries Build produces; it matches the
// k8s.io/kubernetes version pinned in go.mod.
const KubernetesVersion = "v1.36.3"

// VersionLDFlags stamp KubernetesVersion into a binary. Without them kubectl and Kueue refuse the
// server's unstamped version ("could not parse pre-release").
var VersionLDFlags = strings.Join([]string{
	"-X k8s.io/component-base/version.gitVersion=" + KubernetesVersion,
	"-X k8s.io/component-base/version.gitMajor=1",
	"-X k8s.io/component-base/version.gitMinor=36",
	"-X k8s.io/client-go/pkg/version.gitVersion=" + KubernetesVersion,
	"-X k8s.io/client-go/pkg/version.gitMajor=1",
	"-X k8s.io/client-go/pkg/version.gitMinor=36",
}, " ")

// Binary is one executable that Build puts in the bin directory.
type Binary struct {
	// Name is the executable's file name in the bin directory.
	Name string
	// Package is the main package to build: an import path, or a path starting with "./" relative to
	// the module root (this repository's, or Module's when Module is set).
	Package string
	// Module, when set, is "path@version" of a module with its own go.mod (kwok, the Kueue manager)
	// that cannot share this repository's build list. It is built inside its directory in the module
	// cache, which `go mod download -json` reports.
	Module string
	// LDFlags are passed to go build as -ldflags.
	LDFlags string
	// Static builds with CGO_ENABLED=0: an executable that needs no libc, for an image without one.
	Static bool
	// Project marks a binary built from this repository's own code. Project binaries are built on
	// every Build, which the Go build cache keeps cheap; the others are rebuilt only when go.mod,
	// go.sum, the Go version or their spec changes.
	Project bool
}

// Binaries is everything Build builds: the local control plane and, as they are added, Convoy's
// own commands (Project: true) and more external components (Module: "path@version").
var Binaries = []Binary{
	{Name: "etcd", Package: "./test/cmd/etcd"},
	{Name: "kube-apiserver", Package: "k8s.io/kubernetes/cmd/kube-apiserver", LDFlags: VersionLDFlags},
	{Name: "kube-controller-manager", Package: "k8s.io/kubernetes/cmd/kube-controller-manager", LDFlags: VersionLDFlags},
	// The default scheduler of a cluster with real nodes (Options.RealNodes).
	{Name: "kube-scheduler", Package: "k8s.io/kubernetes/cmd/kube-scheduler", LDFlags: VersionLDFlags},
	{Name: "kubectl", Package: "k8s.io/kubernetes/cmd/kubectl", LDFlags: VersionLDFlags},
	// The real nodes' kubelet and kube-proxy (StartRealNode).
	{Name: "kubelet", Package: "k8s.io/kubernetes/cmd/kubelet", LDFlags: VersionLDFlags},
	{Name: "kube-proxy", Package: "k8s.io/kubernetes/cmd/kube-proxy", LDFlags: VersionLDFlags},
	{Name: "kwok", Module: "sigs.k8s.io/kwok@v0.7.0", Package: "./cmd/kwok"},
	{Name: KueueManager, Module: KueueModule, Package: "./cmd/kueue", LDFlags: KueueLDFlags},
	{Name: Kueuectl, Module: KueueModule, Package: "./cmd/kueuectl", LDFlags: KueueLDFlags},
	{Name: "localcluster", Package: "./test/cmd/localcluster", Project: true},
	{Name: "convoy-operator", Package: "./operator/cmd/convoy-operator", Project: true},
	{Name: "convoy-scheduler", Package: "./scheduler-plugin/cmd/kube-scheduler", LDFlags: VersionLDFlags, Project: true},
	{Name: "convoy-node-agent", Package: "./scheduler-plugin/cmd/convoy-node-agent", Project: true},
	{Name: "simtrainer", Package: "./test/cmd/simtrainer", Project: true},
	{Name: "simdeviceplugin", Package: "./test/cmd/simdeviceplugin", Project: true},
	{Name: "pause", Package: "./test/cmd/pause", Static: true, Project: true},
	{Name: "registry", Module: "github.com/distribution/distribution/v3@v3.1.2", Package: "./cmd/registry"},
	{Name: "coredns", Module: "github.com/coredns/coredns@v1.14.7", Package: ".", Static: true},
	// Helm, for the chart in deploy/helm (test/integration/chart).
	{Name: "helm", Module: "helm.sh/helm/v4@v4.3.1", Package: "./cmd/helm"},
}

// stampFile records what the non-project binaries in the bin directory were built from.
const stampFile = ".build-stamp"

// Build builds Binaries into <root>/bin, where root is the repository root. See BuildBinaries.
func Build(ctx context.Context, root string, log io.Writer) error {
	return BuildBinaries(ctx, root, Binaries, log)
}

// BuildBinaries builds bins into <root>/bin and writes the go commands it runs and their output to
// log. Binaries that are not Project binaries are skipped when all of them exist and the stamp
// file in bin/ matches go.mod, go.sum, the Go version and their specs.
func BuildBinaries(ctx context.Context, root string, bins []Binary, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	binDir := filepath.Join(root, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}

	var pinned, project []Binary
	for _, b := range bins {
		if b.Name == "" || b.Package == "" {
			return fmt.Errorf("binary %+v needs a Name and a Package", b)
		}
		if b.Project {
			project = append(project, b)
		} else {
			pinned = append(pinned, b)
		}
	}

	if len(pinned) == 0 {
		// Only project binaries: the stamp describes the pinned set and must stay as it is.
		return buildGroup(ctx, root, binDir, project, log)
	}
	stamp, err := buildStamp(ctx, root, pinned)
	if err != nil {
		return err
	}
	stampPath := filepath.Join(binDir, stampFile)
	if old, err := os.ReadFile(stampPath); err == nil && string(old) == stamp && allExist(binDir, pinned) {
		fmt.Fprintf(log, "Binaries in %s are up to date with go.mod and go.sum\n", binDir)
	} else {
		// A half-built set must not look up to date.
		_ = os.Remove(stampPath)
		if err := buildGroup(ctx, root, binDir, pinned, log); err != nil {
			return err
		}
		if err := os.WriteFile(stampPath, []byte(stamp), 0o644); err != nil {
			return err
		}
	}
	return buildGroup(ctx, root, binDir, project, log)
}

// buildGroup builds bins: this module's packages with one go build per set of ldflags (go links
// them in parallel), each external module in its own directory.
func buildGroup(ctx context.Context, root, binDir string, bins []Binary, log io.Writer) error {
	type batch struct {
		ldflags string
		pkgs    []string
	}
	var batches []*batch
	byFlags := map[string]*batch{}
	for _, b := range bins {
		switch {
		case b.Module != "":
			if err := buildExternal(ctx, root, binDir, b, log); err != nil {
				return err
			}
		case path.Base(b.Package) != b.Name || b.Static:
			// go build -o dir/ names executables after the package; other names, and other
			// environments, need their own go build.
			if err := goBuild(ctx, root, cgoEnv(b), b.LDFlags, filepath.Join(binDir, b.Name), []string{b.Package}, log); err != nil {
				return err
			}
		default:
			bt := byFlags[b.LDFlags]
			if bt == nil {
				bt = &batch{ldflags: b.LDFlags}
				byFlags[b.LDFlags] = bt
				batches = append(batches, bt)
			}
			bt.pkgs = append(bt.pkgs, b.Package)
		}
	}
	for _, bt := range batches {
		if err := goBuild(ctx, root, nil, bt.ldflags, binDir+string(filepath.Separator), bt.pkgs, log); err != nil {
			return err
		}
	}
	return nil
}

// buildExternal builds b inside its module's directory in the module cache, so it uses that
// module's own go.mod and go.sum. The directory is read-only, which go build does not mind.
func buildExternal(ctx context.Context, root, binDir string, b Binary, log io.Writer) error {
	dir, err := ModuleDir(ctx, root, b.Module)
	if err != nil {
		return err
	}
	// The module's own go.mod decides everything: no workspace, and none of this repository's
	// GOFLAGS (a -modfile or -mod=vendor would point at the wrong module).
	env := append([]string{"GOWORK=off", "GOFLAGS=-buildvcs=false -mod=readonly"}, cgoEnv(b)...)
	return goBuild(ctx, dir, env, b.LDFlags, filepath.Join(binDir, b.Name), []string{b.Package}, log)
}

// cgoEnv is the environment that builds b as its Static field asks.
func cgoEnv(b Binary) []string {
	if b.Static {
		return []string{"CGO_ENABLED=0"}
	}
	return nil
}

// ModuleDir returns the directory of module ("path@version") in the module cache, downloading it
// when it is missing. root is where the go command runs (the repository root).
func ModuleDir(ctx context.Context, root, module string) (string, error) {
	dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	dl.Dir = root
	dl.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	dl.Stderr = &stderr
	out, err := dl.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s%s", module, err, stderr.String(), out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", module, mod.Error)
	}
	return mod.Dir, nil
}

func goBuild(ctx context.Context, dir string, env []string, ldflags, out string, pkgs []string, log io.Writer) error {
	args := []string{"build"}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	args = append(args, "-o", out)
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = log
	cmd.Stderr = log
	fmt.Fprintf(log, "(cd %s && go %s)\n", dir, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w", strings.Join(pkgs, " "), dir, err)
	}
	return nil
}

// buildStamp hashes everything the pinned binaries depend on besides this repository's code.
func buildStamp(ctx context.Context, root string, bins []Binary) (string, error) {
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil && (name != "go.sum" || !errors.Is(err, os.ErrNotExist)) {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	goVersion, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	fmt.Fprintf(h, "go %s\n", bytes.TrimSpace(goVersion))
	for _, b := range bins {
		fmt.Fprintf(h, "%q %q %q %q %t\n", b.Name, b.Package, b.Module, b.LDFlags, b.Static)
	}
	return hex.EncodeToString(h.Sum(nil)) + "\n", nil
}

func allExist(dir string, bins []Binary) bool {
	for _, b := range bins {
		if _, err := os.Stat(filepath.Join(dir, b.Name)); err != nil {
			return false
		}
	}
	return true
}

// CheckBinaries returns an error telling the reader to run `make bin` when one of names is not an
// executable file in dir.
func CheckBinaries(dir string, names ...string) error {
	var missing []string
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s in %s: run `make bin` first (or set %s to a directory holding them)",
			strings.Join(missing, ", "), dir, EnvBinDir)
	}
	return nil
}
