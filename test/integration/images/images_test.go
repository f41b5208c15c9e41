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

// Package images tests Convoy's container images against a real OCI registry: every image of
// test/images is built (incrementally, with the Debian layers cached in .cache), pushed to
// CNCF Distribution's registry started by the framework, and pulled back with its digest.
package images

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

func TestMain(m *testing.M) {
	// Only the registry is needed: no kwok, no controllers.
	framework.Main(m, framework.Options{WithoutKwok: true, WithoutControllerManager: true})
}

func TestImagesPushedToTheRegistryPullBackWithTheirDigests(t *testing.T) {
	c := framework.Shared(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.CheckBinaries(c.BinDir, images.Operator, images.Scheduler, images.NodeAgent,
		images.Pause, images.CoreDNS, framework.KueueManager); err != nil {
		t.Fatal(err)
	}
	registry, err := c.StartRegistry(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}

	b := images.NewBuilder(root)
	b.OutDir = t.TempDir()
	b.Log = testLog{t}
	specs := images.Specs(root, c.BinDir)
	began := time.Now()
	results, err := b.Build(t.Context(), specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		t.Logf("built %s: %s in %.1fs", r.Name, images.HumanSize(r.Size), r.Duration.Seconds())
	}
	t.Logf("built %d images in %.1fs", len(results), time.Since(began).Seconds())

	began = time.Now()
	pushed, err := images.Push(t.Context(), b.OutDir, registry, images.Names(specs))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %d images to %s in %.1fs", len(pushed), registry, time.Since(began).Seconds())

	for _, r := range results {
		ref, err := name.ParseReference(images.Ref(registry, r.Name), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref, remote.WithContext(t.Context()))
		if err != nil {
			t.Fatalf("pulling %s: %v", ref, err)
		}
		digest, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if digest != r.Digest || pushed[r.Name] != r.Digest {
			t.Errorf("%s: the registry has %s, Push reported %s, the layout holds %s", ref, digest, pushed[r.Name], r.Digest)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != images.NonRoot {
			t.Errorf("%s runs as %q, want %s", ref, cfg.Config.User, images.NonRoot)
		}
		if r.Name == images.Pause {
			// Every blob of one image, downloaded and checked against its digest and diff ID.
			if err := validate.Image(img); err != nil {
				t.Errorf("%s: %v", ref, err)
			}
		}
	}

	// The registry has every blob now: a second push uploads none.
	began = time.Now()
	if _, err := images.Push(t.Context(), b.OutDir, registry, images.Names(specs)); err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed again in %.1fs", time.Since(began).Seconds())

	// A release (make images REGISTRY=...): the images deploy/images names, under a path of the
	// registry, tagged v<VERSION>.
	version, err := images.Version(root)
	if err != nil {
		t.Fatal(err)
	}
	repository := registry + "/acme/ml"
	released, err := images.Publish(t.Context(), b.OutDir, repository, version, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range images.Release {
		want := images.ReleaseRef(repository, n, version)
		if !strings.HasSuffix(want, "/"+n+":v"+version) {
			t.Errorf("release reference %s, want <repository>/%s:v%s", want, n, version)
		}
		ref, err := name.ParseReference(want, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(ref, remote.WithContext(t.Context()))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if desc.Digest != released[n] || desc.Digest != pushed[n] {
			t.Errorf("%s: the registry has %s, Publish reported %s, the build made %s", ref, desc.Digest, released[n], pushed[n])
		}
	}
}

// testLog writes the builder's lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
