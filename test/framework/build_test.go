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

package framework_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/test/framework"
)

// TestBuildBinariesBuildsEveryBinaryAndRebuildsWhatChanged: each binary is in bin/ under its name
// (a symbolic link where the package is named otherwise), a static one too, and a second Build
// after a source changed leaves the changed program in bin/.
func TestBuildBinariesBuildsEveryBinaryAndRebuildsWhatChanged(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	program := func(says string) string {
		return "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(" + strconv.Quote(says) + ") }\n"
	}
	write("go.mod", "module example.com/build\n\ngo 1.25\n")
	write("cmd/kept/main.go", program("kept"))
	write("cmd/edited/main.go", program("before"))
	write("cmd/static/main.go", program("static"))
	bins := []framework.Binary{
		{Name: "kept", Package: "./cmd/kept"},
		{Name: "renamed", Package: "./cmd/edited"},
		{Name: "static", Package: "./cmd/static", Static: true},
	}
	bin := filepath.Join(root, "bin")
	build := func() {
		t.Helper()
		var log strings.Builder
		if err := framework.BuildBinaries(t.Context(), root, bins, &log); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		if err := framework.CheckBinaries(bin, "kept", "renamed", "static"); err != nil {
			t.Fatal(err)
		}
	}
	says := func(name, want string) {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), filepath.Join(bin, name)).Output()
		if err != nil {
			t.Fatalf("bin/%s: %v", name, err)
		}
		if string(out) != want {
			t.Errorf("bin/%s printed %q, want %q", name, out, want)
		}
	}

	build()
	says("kept", "kept")
	says("renamed", "before")
	says("static", "static")
	if target, err := os.Readlink(filepath.Join(bin, "renamed")); err != nil || target != "edited" {
		t.Errorf("bin/renamed links to %q (%v), want edited", target, err)
	}
	write("cmd/edited/main.go", program("after"))
	build()
	says("renamed", "after")
	says("kept", "kept")
}

func TestBuildBinariesRefusesTwoExecutablesOfOneName(t *testing.T) {
	err := framework.BuildBinaries(t.Context(), t.TempDir(), []framework.Binary{
		{Name: "kube-scheduler", Package: "k8s.io/kubernetes/cmd/kube-scheduler"},
		{Name: "convoy-scheduler", Package: "./cmd/kube-scheduler"},
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "bin/kube-scheduler") {
		t.Errorf("err = %v, want one naming bin/kube-scheduler", err)
	}
}

// TestKueueVersionIsTheModuleGoModPins: the version the framework reports, stamps into bin/kueue
// and takes Kueue's release manifests of is the version the binary is built from.
func TestKueueVersionIsTheModuleGoModPins(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Version}}", framework.KueueModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s in %s: %v", framework.KueueModule, root, err)
	}
	if got := strings.TrimSpace(string(out)); got != framework.KueueVersion {
		t.Errorf("go.mod pins %s %s, framework.KueueVersion is %s", framework.KueueModule, got, framework.KueueVersion)
	}
}
