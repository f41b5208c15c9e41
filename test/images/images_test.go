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

package images_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

// buildPause builds test/cmd/pause static into a temporary bin directory and returns it.
func buildPause(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, images.Pause), "./test/cmd/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./test/cmd/pause: %v\n%s", err, out)
	}
	return binDir
}

// pauseSpec is the pause image of Specs without its Debian base, which needs apt: the users and
// application layers are what this test is about.
func pauseSpec(t *testing.T, binDir string) images.Spec {
	t.Helper()
	specs, err := images.Select(images.Specs(t.TempDir(), binDir), []string{images.Pause})
	if err != nil {
		t.Fatal(err)
	}
	s := specs[0]
	s.Base = nil
	return s
}

func newBuilder(t *testing.T) *images.Builder {
	t.Helper()
	return &images.Builder{OutDir: t.TempDir(), CacheDir: t.TempDir(), Version: "test"}
}

func TestPauseImageRunsItsBinaryAsNonRoot(t *testing.T) {
	binDir := buildPause(t)
	b := newBuilder(t)
	results, err := b.Build(t.Context(), []images.Spec{pauseSpec(t, binDir)})
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Cached {
		t.Error("first build reported the image up to date")
	}
	img, err := images.LocalImage(b.OutDir, images.Pause)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d != results[0].Digest {
		t.Errorf("layout holds %s, Build reported %s", d, results[0].Digest)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/pause"}) {
		t.Errorf("entrypoint %q, want [/pause]", cfg.Config.Entrypoint)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	for _, label := range []string{"org.opencontainers.image.source", "org.opencontainers.image.version"} {
		if cfg.Config.Labels[label] == "" {
			t.Errorf("no %s label: %v", label, cfg.Config.Labels)
		}
	}

	files := imageFiles(t, img)
	want, err := os.ReadFile(filepath.Join(binDir, images.Pause))
	if err != nil {
		t.Fatal(err)
	}
	if f := files["pause"]; f == nil || f.hdr.Mode != 0o755 || !bytes.Equal(f.data, want) {
		t.Errorf("/pause is not the binary with mode 0755: %+v", f)
	}
	if f := files["etc/passwd"]; f == nil || !strings.Contains(string(f.data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user 65532: %+v", f)
	}
	if f := files["etc/group"]; f == nil || !strings.Contains(string(f.data), "nonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot group 65532: %+v", f)
	}
	if f := files["home/nonroot"]; f == nil || f.hdr.Uid != 65532 || f.hdr.Gid != 65532 {
		t.Errorf("/home/nonroot is not nonroot's: %+v", f)
	}
	if f := files["tmp"]; f == nil || f.hdr.Mode != 0o1777 {
		t.Errorf("/tmp is not world-writable and sticky: %+v", f)
	}
}

func TestImagesAreRebuiltOnlyWhenTheirInputsChange(t *testing.T) {
	binDir := buildPause(t)
	spec := pauseSpec(t, binDir)
	b := newBuilder(t)
	build := func() images.Result {
		t.Helper()
		results, err := b.Build(t.Context(), []images.Spec{spec})
		if err != nil {
			t.Fatal(err)
		}
		return results[0]
	}
	first := build()
	if second := build(); !second.Cached || second.Digest != first.Digest {
		t.Errorf("second build: cached %t, digest %s; want the first's %s, cached", second.Cached, second.Digest, first.Digest)
	}

	// The same inputs give the same digest in another layout, with another cache.
	other := newBuilder(t)
	results, err := other.Build(t.Context(), []images.Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Digest != first.Digest {
		t.Errorf("a build elsewhere gave %s, want %s: builds are not reproducible", results[0].Digest, first.Digest)
	}

	f, err := os.OpenFile(filepath.Join(binDir, images.Pause), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	changed := build()
	if changed.Cached || changed.Digest == first.Digest {
		t.Errorf("after the binary changed: cached %t, digest %s; want a new image", changed.Cached, changed.Digest)
	}
	// The layout keeps only the new image's blobs.
	blobs, err := os.ReadDir(filepath.Join(b.OutDir, images.Pause, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 4 { // manifest, config, users layer, application layer
		t.Errorf("layout holds %d blobs, want 4", len(blobs))
	}
}

func TestDynamicallyLinkedBinaryNeedsGlibcBase(t *testing.T) {
	spec := pauseSpec(t, t.TempDir())
	// Debian's coreutils are linked against glibc.
	trueBin, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	spec.Files[0].Src = trueBin
	_, err = newBuilder(t).Build(t.Context(), []images.Spec{spec})
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("building %s on a base without libc6: %v, want a 'dynamically linked' error", trueBin, err)
	}
}

func TestRefNamesImagesUnderConvoy(t *testing.T) {
	if got, want := images.Ref("10.98.0.1:5000", "pause"), "10.98.0.1:5000/convoy/pause:dev"; got != want {
		t.Errorf("Ref = %q, want %q", got, want)
	}
}

type imageFile struct {
	hdr  *tar.Header
	data []byte
}

// imageFiles returns the image's flattened file system by path, without a leading or trailing "/".
func imageFiles(t *testing.T, img v1.Image) map[string]*imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]*imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = &imageFile{hdr: h, data: data}
	}
}
