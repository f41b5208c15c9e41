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
	"encoding/json"
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
	// Name is the executable's file name in the bin directory. When it differs from the last
	// element of Package, bin/<Name> is a symbolic link to the executable go build names after the
	// package (kubectl finds its plugin kubectl-kueue that way).
	Name string
	// Package is the main package to build: an import path of a module in go.mod's build list, or
	// a path starting with "./" relative to the repository root.
	Package string
	// Dir is the directory, relative to the repository root, of the module whose build list has
	// Package, when it is not the root's go.mod: a tool whose dependencies would pin Convoy's
	// (hack/seaweedfs). Each Dir is a go build of its own.
	Dir string
	// OutDir, when set, is the subdirectory of the bin directory the executable goes to, so that it
	// does not take the place of the machine's own (containerd 2 beside Debian's containerd 1.6).
	// Binaries of one Dir share it.
	OutDir string
	// Static builds with CGO_ENABLED=0: an executable that needs no libc, for an image without one
	// (with Dir: the whole build of Dir; containerd so leaves out its btrfs snapshotter's cgo).
	// It is a go build of its own, with its own compile of every package it imports: keep it to
	// executables that import little (the pause container).
	Static bool
}

// BuildLDFlags are the -ldflags of every binary: the version stamps (VersionLDFlags, Kueue's
// version) and -w, no DWARF: nothing here runs under a debugger, and the linker writes the
// executables in about two thirds of the time. A stamp of a package a binary does not link is
// ignored.
var BuildLDFlags = strings.Join([]string{"-w", KueueLDFlags}, " ")

// Binaries is everything Build builds: the local control plane, the components the tests run
// (kwok, Kueue, CoreDNS, a registry, Helm) and Convoy's own commands. Each is a package of a module
// in go.mod (the components are go.mod's `tool` lines), so one go build compiles the Kubernetes
// libraries once for all of them.
var Binaries = []Binary{
	{Name: "etcd", Package: "./test/cmd/etcd"},
	{Name: "kube-apiserver", Package: "k8s.io/kubernetes/cmd/kube-apiserver"},
	{Name: "kube-controller-manager", Package: "k8s.io/kubernetes/cmd/kube-controller-manager"},
	// The default scheduler of a cluster with real nodes (Options.RealNodes).
	{Name: "kube-scheduler", Package: "k8s.io/kubernetes/cmd/kube-scheduler"},
	{Name: "kubectl", Package: "k8s.io/kubernetes/cmd/kubectl"},
	// The real nodes' kubelet and kube-proxy (StartRealNode).
	{Name: "kubelet", Package: "k8s.io/kubernetes/cmd/kubelet"},
	{Name: "kube-proxy", Package: "k8s.io/kubernetes/cmd/kube-proxy"},
	{Name: "kwok", Package: KwokModule + "/cmd/kwok"},
	{Name: KueueManager, Package: KueueModule + "/cmd/kueue"},
	{Name: Kueuectl, Package: KueueModule + "/cmd/kueuectl"},
	{Name: "registry", Package: "github.com/distribution/distribution/v3/cmd/registry"},
	{Name: "coredns", Package: "github.com/coredns/coredns"},
	// Helm, for the chart in deploy/helm (test/integration/chart).
	{Name: "helm", Package: "helm.sh/helm/v4/cmd/helm"},
	// SeaweedFS, the S3-compatible server (StartS3).
	{Name: S3Server, Package: "github.com/seaweedfs/seaweedfs/weed", Dir: "hack/seaweedfs"},
	// containerd 2, for the real nodes that give containers CDI devices (RealNodeSpec.CDI).
	{Name: "containerd", Package: "github.com/containerd/containerd/v2/cmd/containerd", Dir: "hack/containerd", OutDir: Containerd2Dir, Static: true},
	{Name: "containerd-shim-runc-v2", Package: "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2", Dir: "hack/containerd", OutDir: Containerd2Dir, Static: true},
	{Name: "localcluster", Package: "./test/cmd/localcluster"},
	{Name: "convoy-operator", Package: "./operator/cmd/convoy-operator"},
	{Name: "convoy-scheduler", Package: "./scheduler-plugin/cmd/convoy-scheduler"},
	{Name: "convoy-node-agent", Package: "./scheduler-plugin/cmd/convoy-node-agent"},
	{Name: "convoy-dra-driver", Package: "./scheduler-plugin/cmd/convoy-dra-driver"},
	{Name: "simtrainer", Package: "./test/cmd/simtrainer"},
	{Name: "simdeviceplugin", Package: "./test/cmd/simdeviceplugin"},
	{Name: "pause", Package: "./test/cmd/pause", Static: true},
}

// Build builds Binaries into <root>/bin, where root is the repository root. See BuildBinaries.
func Build(ctx context.Context, root string, log io.Writer) error {
	return BuildBinaries(ctx, root, Binaries, log)
}

// BuildBinaries builds bins into <root>/bin with BuildLDFlags and writes the go commands it runs
// and their output to log. Every binary that is neither Static nor of another module (Dir) comes
// from one go build, which compiles
// each package once and links the executables in parallel; go build leaves an executable that is
// up to date as it is (it links none of them when nothing changed), so a second Build costs seconds.
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
	type group struct {
		dir, out string
		env      []string
		pkgs     []string
	}
	groups := []*group{{}, {env: []string{"CGO_ENABLED=0"}}}
	byDir := map[string]*group{}
	built := map[string]string{}
	for _, b := range bins {
		if b.Name == "" || b.Package == "" {
			return fmt.Errorf("binary %+v needs a Name and a Package", b)
		}
		base := path.Join(b.OutDir, path.Base(b.Package))
		if other, ok := built[base]; ok {
			return fmt.Errorf("%s and %s would both be bin/%s: go build names an executable after its package", other, b.Package, base)
		}
		built[base] = b.Package
		g := groups[0]
		switch {
		case b.Dir != "":
			if g = byDir[b.Dir]; g == nil {
				g = &group{dir: b.Dir, out: b.OutDir}
				if b.Static {
					g.env = []string{"CGO_ENABLED=0"}
				}
				byDir[b.Dir] = g
				groups = append(groups, g)
			}
		case b.Static:
			g = groups[1]
		}
		g.pkgs = append(g.pkgs, b.Package)
	}
	for _, g := range groups {
		if len(g.pkgs) == 0 {
			continue
		}
		if err := goBuild(ctx, filepath.Join(root, g.dir), g.env, BuildLDFlags, filepath.Join(binDir, g.out)+string(filepath.Separator), g.pkgs, log); err != nil {
			return err
		}
	}
	for _, b := range bins {
		if base := path.Base(b.Package); base != b.Name {
			if err := link(filepath.Join(binDir, b.OutDir, b.Name), base); err != nil {
				return err
			}
		}
	}
	return nil
}

// link makes name a symbolic link to target, replacing what was there.
func link(name, target string) error {
	if old, err := os.Readlink(name); err == nil && old == target {
		return nil
	}
	if err := os.RemoveAll(name); err != nil {
		return err
	}
	return os.Symlink(target, name)
}

// ModuleDir returns the directory of module in the module cache, downloading it when it is missing:
// "path@version", or a bare path for the version go.mod's build list has. root is where the go
// command runs (the repository root).
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
