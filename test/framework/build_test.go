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
	"path/filepath"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/test/framework"
)

func TestBuildBinariesRebuildsPinnedBinariesOnlyWhenGoModChanges(t *testing.T) {
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
	write("go.mod", "module example.com/build\n\ngo 1.25\n")
	write("cmd/pinned/main.go", "package main\n\nfunc main() {}\n")
	write("cmd/project/main.go", "package main\n\nfunc main() {}\n")
	bins := []framework.Binary{
		{Name: "pinned", Package: "./cmd/pinned"},
		{Name: "renamed", Package: "./cmd/project", Project: true},
	}
	build := func() string {
		t.Helper()
		var log strings.Builder
		if err := framework.BuildBinaries(t.Context(), root, bins, &log); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		return log.String()
	}

	if log := build(); !strings.Contains(log, "./cmd/pinned") || !strings.Contains(log, "./cmd/project") {
		t.Errorf("first build did not build both binaries:\n%s", log)
	}
	if err := framework.CheckBinaries(filepath.Join(root, "bin"), "pinned", "renamed"); err != nil {
		t.Fatal(err)
	}
	if log := build(); strings.Contains(log, "./cmd/pinned") || !strings.Contains(log, "./cmd/project") {
		t.Errorf("second build must skip the pinned binary and rebuild the project one:\n%s", log)
	}
	write("go.mod", "module example.com/build\n\ngo 1.25\n\n// changed\n")
	if log := build(); !strings.Contains(log, "./cmd/pinned") {
		t.Errorf("a changed go.mod must rebuild the pinned binary:\n%s", log)
	}
}
