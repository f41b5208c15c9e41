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

package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/convoy-dev/convoy/test/framework"
)

// trainScript stands in for examples/pytorch-digits/train.py: it needs what the real one needs
// (torch, scikit-learn's digits, the SDK on PYTHONPATH) and prints what it found.
const trainScript = `import convoy, sklearn.datasets, torch
digits = sklearn.datasets.load_digits()
x = torch.tensor(digits.data[:8]).float()
print("trained", torch.__version__, convoy.NAME, tuple(torch.nn.Linear(64, 10)(x).shape))
`

// TestTrainerImageRunsTorchAsNonRoot builds the trainer image from Debian's packages, with a
// stand-in script and SDK, unpacks it and runs its entrypoint chrooted as the image's user. The
// Debian layer is cached in images.CacheDir(), shared with `make images`: the first run on a
// machine downloads about 390 MB of packages and takes minutes. It needs root and apt.
func TestTrainerImageRunsTorchAsNonRoot(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	app, sdk := t.TempDir(), filepath.Join(t.TempDir(), "convoy")
	writeFile(t, filepath.Join(app, "train.py"), trainScript)
	writeFile(t, filepath.Join(sdk, "__init__.py"), "NAME = 'stand-in SDK'\n")

	b := NewBuilder(root)
	b.OutDir = t.TempDir()
	b.Log = testLog{t}
	began := time.Now()
	results, err := b.Build(t.Context(), []Spec{TrainerSpec(app, sdk)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s (%s) in %.1fs", Trainer, HumanSize(results[0].Size), time.Since(began).Seconds())

	img, err := LocalImage(b.OutDir, Trainer)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != NonRoot {
		t.Errorf("user %q, want %s", cfg.Config.User, NonRoot)
	}
	if want := []string{"/usr/bin/python3", "/app/train.py"}; !slices.Equal(cfg.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", cfg.Config.Entrypoint, want)
	}
	if !slices.Contains(cfg.Config.Env, "PYTHONPATH=/opt/convoy/sdk") {
		t.Errorf("env %q has no PYTHONPATH=/opt/convoy/sdk", cfg.Config.Env)
	}

	rootfs := stagingDir(t.TempDir(), "test-"+Trainer)
	t.Cleanup(func() { _ = os.RemoveAll(rootfs) })
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	untar := exec.CommandContext(t.Context(), "tar", "-x", "--numeric-owner", "-C", rootfs)
	untar.Stdin = mutate.Extract(img)
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("unpacking the image: %v\n%s", err, out)
	}
	out, err := runIn(t.Context(), rootfs, cfg.Config.Env, append(cfg.Config.Entrypoint, cfg.Config.Cmd...))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); !strings.Contains(got, "trained 1.13") || !strings.Contains(got, "stand-in SDK (8, 10)") {
		t.Errorf("the entrypoint printed %q, want torch 1.13's output with the SDK", got)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testLog writes the builder's lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
