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
