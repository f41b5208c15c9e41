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

// Package images builds Convoy's container images without Docker: each image is a stack of
// layers assembled with go-containerregistry (a base extracted from Debian packages, a layer with
// the users and a layer with the application) and written as an OCI image layout under
// bin/images/<name>, from which Push copies it to a registry.
//
// Builds are incremental at two levels: a layer of Debian packages is cached under
// CacheDir()/images/layers, keyed on the packages and their versions and shared by every checkout on
// the machine, and an image is rebuilt only when
// the hash of its inputs (its spec, its bases' keys and the bytes of its files) differs from the
// stamp written next to its layout.
package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Tag is the tag every image is pushed under.
const Tag = "dev"

// NonRoot is the user every image runs as: distroless's nonroot, uid and gid 65532.
const NonRoot = "65532:65532"

// Source is the images' org.opencontainers.image.source label.
const Source = "https://github.com/convoy-dev/convoy"

// formatVersion changes whenever the way layers or images are assembled changes, so that stamps
// and cached layers from an older builder are not reused.
const formatVersion = "convoy-images/v1"

// epoch is the time of every file in every layer and the images' creation time: the same inputs
// give the same digests on every machine.
var epoch = time.Unix(0, 0).UTC()

// Ref is the reference of image name in registry (host:port): <registry>/convoy/<name>:dev.
func Ref(registry, name string) string {
	return Repository(registry) + "/" + name + ":" + Tag
}

// Repository is where the images are in registry (host:port): <registry>/convoy.
func Repository(registry string) string {
	return registry + "/convoy"
}

// File is a file copied into an image.
type File struct {
	// Src is the file's path on the build machine.
	Src string
	// Dst is its absolute path in the image.
	Dst string
	// Mode is its permission bits in the image.
	Mode os.FileMode
}

// Dir is a directory tree copied into an image, owned by root, with mode 0755 for directories
// and executables and 0644 for other files.
type Dir struct {
	// Src is the directory on the build machine.
	Src string
	// Dst is its absolute path in the image.
	Dst string
}

// Spec describes one image.
type Spec struct {
	// Name is the image's name: its layout is <OutDir>/<Name>, its reference Ref(registry, Name).
	Name string
	// Description is the org.opencontainers.image.description label.
	Description string
	// Base are the layers of Debian packages the image starts from, bottom first. The layer with
	// the users (/etc/passwd, /etc/group, /home/nonroot, /tmp) always follows them.
	Base []DebLayer
	// Files and Dirs make up the application layer, the top one.
	Files []File
	Dirs  []Dir
	// Entrypoint, Cmd, Env, WorkingDir and Ports (such as "8080/tcp") are the image's config. The
	// user is always NonRoot and PATH is always set.
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	Ports      []string
}

// Builder builds images.
type Builder struct {
	// OutDir holds one OCI layout per image and its stamp.
	OutDir string
	// CacheDir holds the downloaded .deb files (debs/) and the cached layers (images/).
	CacheDir string
	// Version is the org.opencontainers.image.version label.
	Version string
	// Revision, when set, is the org.opencontainers.image.revision label.
	Revision string
	// Log receives a line per step; nil discards them.
	Log io.Writer

	apt    *apt
	layers map[string]*cachedLayer // built layers by cache file
}

// EnvCacheDir, when set, names the directory of the Debian packages and layers instead of CacheDir's
// default.
const EnvCacheDir = "CONVOY_CACHE_DIR"

// CacheDir is where Debian packages and the layers made of them are cached: $CONVOY_CACHE_DIR, or
// convoy/ in the user's cache directory ($XDG_CACHE_HOME or ~/.cache), beside Go's build cache, so
// that a fresh clone on a machine that built the images before does not download and compress the
// same packages again. Every entry is keyed on what it holds, so checkouts of any commit share it.
func CacheDir() string {
	if dir := os.Getenv(EnvCacheDir); dir != "" {
		return dir
	}
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "convoy")
	}
	return filepath.Join(os.TempDir(), "convoy-cache")
}

// NewBuilder returns a Builder for the repository at root: layouts in <root>/bin/images, caches
// in CacheDir(), the version and revision from git (or "dev" without it).
func NewBuilder(root string) *Builder {
	version, revision := gitVersion(root)
	return &Builder{
		OutDir:   filepath.Join(root, "bin", "images"),
		CacheDir: CacheDir(),
		Version:  version,
		Revision: revision,
	}
}

// Result is what Build did for one image.
type Result struct {
	Name string
	// Dir is the image's OCI layout.
	Dir string
	// Digest is the image manifest's digest.
	Digest v1.Hash
	// Size is the sum of the compressed layers, as a registry stores and a node pulls them.
	Size int64
	// Cached is true when the layout was already up to date.
	Cached bool
	// Duration is how long the build of this image took.
	Duration time.Duration
}

// Build builds every spec into <OutDir>/<Name> that is not up to date, in order.
func (b *Builder) Build(ctx context.Context, specs []Spec) ([]Result, error) {
	results := make([]Result, 0, len(specs))
	for _, s := range specs {
		began := time.Now()
		r, err := b.build(ctx, s)
		if err != nil {
			return results, fmt.Errorf("building image %s: %w", s.Name, err)
		}
		r.Duration = time.Since(began)
		results = append(results, r)
	}
	return results, nil
}

func (b *Builder) build(ctx context.Context, s Spec) (Result, error) {
	if err := s.validate(); err != nil {
		return Result{}, err
	}
	r := Result{Name: s.Name, Dir: filepath.Join(b.OutDir, s.Name)}
	bases, err := b.resolveBase(ctx, s.Base)
	if err != nil {
		return r, err
	}
	cfg := b.configFile(s)
	stamp, err := inputsStamp(s, cfg, bases)
	if err != nil {
		return r, err
	}
	stampPath := r.Dir + ".stamp"
	if old, err := os.ReadFile(stampPath); err == nil && string(old) == stamp {
		if img, err := LocalImage(b.OutDir, s.Name); err == nil {
			b.logf("%s: up to date", s.Name)
			r.Cached = true
			return r, describe(img, &r)
		}
	}
	// A half-written layout must not look up to date.
	if err := os.Remove(stampPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return r, err
	}
	if err := checkLinkage(s, bases); err != nil {
		return r, err
	}

	img, err := b.assemble(ctx, s, cfg, bases)
	if err != nil {
		return r, err
	}
	if err := writeLayout(r.Dir, img); err != nil {
		return r, err
	}
	if err := describe(img, &r); err != nil {
		return r, err
	}
	b.logf("%s: wrote %s (%s, %s)", s.Name, r.Dir, r.Digest, HumanSize(r.Size))
	return r, os.WriteFile(stampPath, []byte(stamp), 0o644)
}

// assemble stacks the image's layers, building those that are not cached, under cfg.
func (b *Builder) assemble(ctx context.Context, s Spec, cfg *v1.ConfigFile, bases []resolvedLayer) (v1.Image, error) {
	var adds []mutate.Addendum
	for _, rl := range bases {
		l, err := b.debLayer(ctx, rl)
		if err != nil {
			return nil, err
		}
		adds = append(adds, addendum(l, "debian packages: "+rl.layer.Name))
	}
	users, err := b.usersLayer()
	if err != nil {
		return nil, err
	}
	adds = append(adds, addendum(users, "users root and nonroot (65532)"))
	app, err := b.appLayer(s)
	if err != nil {
		return nil, fmt.Errorf("application layer: %w", err)
	}
	adds = append(adds, addendum(app, "application: "+s.Name))

	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	return mutate.Append(img, adds...)
}

func (s Spec) validate() error {
	if s.Name == "" || strings.ContainsAny(s.Name, "/: ") {
		return fmt.Errorf("image name %q: want a plain name", s.Name)
	}
	if len(s.Entrypoint) == 0 {
		return errors.New("no entrypoint")
	}
	for _, f := range s.Files {
		if !filepath.IsAbs(f.Dst) {
			return fmt.Errorf("file %s: destination %q is not absolute", f.Src, f.Dst)
		}
	}
	for _, d := range s.Dirs {
		if !filepath.IsAbs(d.Dst) {
			return fmt.Errorf("directory %s: destination %q is not absolute", d.Src, d.Dst)
		}
	}
	return nil
}

// defaultPath is the PATH of every image, as in Debian's images.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// configFile is s's image configuration; Append fills in the layers' diff IDs and history.
func (b *Builder) configFile(s Spec) *v1.ConfigFile {
	labels := map[string]string{
		"org.opencontainers.image.title":   s.Name,
		"org.opencontainers.image.source":  Source,
		"org.opencontainers.image.version": b.Version,
	}
	if s.Description != "" {
		labels["org.opencontainers.image.description"] = s.Description
	}
	if b.Revision != "" {
		labels["org.opencontainers.image.revision"] = b.Revision
	}
	var ports map[string]struct{}
	if len(s.Ports) > 0 {
		ports = map[string]struct{}{}
		for _, p := range s.Ports {
			ports[p] = struct{}{}
		}
	}
	return &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			User:         NonRoot,
			Entrypoint:   s.Entrypoint,
			Cmd:          s.Cmd,
			Env:          append([]string{defaultPath}, s.Env...),
			WorkingDir:   s.WorkingDir,
			ExposedPorts: ports,
			Labels:       labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}

func addendum(l *cachedLayer, what string) mutate.Addendum {
	return mutate.Addendum{
		Layer:     l,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "convoy test/images: " + what},
	}
}

// inputsStamp hashes everything the image is made of: the builder's format, the config, the
// bases' keys (their packages and versions) and the files' contents.
func inputsStamp(s Spec, cfg *v1.ConfigFile, bases []resolvedLayer) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, formatVersion)
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "config %s\n", cfgJSON)
	for _, rl := range bases {
		fmt.Fprintf(h, "base %s\n", rl.key)
	}
	fmt.Fprintf(h, "users %s\n", usersFiles)
	for _, f := range s.Files {
		sum, err := fileSHA256(f.Src)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "file %q %o %s\n", f.Dst, f.Mode, sum)
	}
	for _, d := range s.Dirs {
		sum, err := treeSHA256(d.Src)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "dir %q %s\n", d.Dst, sum)
	}
	return hex.EncodeToString(h.Sum(nil)) + "\n", nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// treeSHA256 hashes the names, kinds, executable bits and contents of the files under dir.
func treeSHA256(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			fmt.Fprintf(h, "d %q\n", rel)
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "l %q %q\n", rel, target)
		case d.Type().IsRegular():
			sum, err := fileSHA256(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "f %q %t %s\n", rel, info.Mode()&0o111 != 0, sum)
		default:
			return fmt.Errorf("%s: not a regular file, directory or symlink", path)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeLayout writes img as the only image of the OCI layout in dir, tagged Tag, reusing the
// blobs dir already holds and removing those img does not use.
func writeLayout(dir string, img v1.Image) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the layout %s: %w", dir, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		keep[d.Hex] = true
		if cl, ok := l.(*cachedLayer); ok {
			// A hard link instead of a copy of a layer the cache holds (hundreds of MB for the
			// trainer); AppendImage keeps a blob that exists with the right size.
			if err := cl.linkInto(filepath.Join(string(p), "blobs", "sha256", d.Hex)); err != nil {
				return err
			}
		}
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": Tag,
	})); err != nil {
		return fmt.Errorf("writing the image to %s: %w", dir, err)
	}
	for _, f := range []func() (v1.Hash, error){img.Digest, img.ConfigName} {
		d, err := f()
		if err != nil {
			return err
		}
		keep[d.Hex] = true
	}
	return removeBlobsExcept(filepath.Join(string(p), "blobs", "sha256"), keep)
}

func removeBlobsExcept(dir string, keep map[string]bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// LocalImage reads image name from its OCI layout in outDir.
func LocalImage(outDir, name string) (v1.Image, error) {
	p, err := layout.FromPath(filepath.Join(outDir, name))
	if err != nil {
		return nil, fmt.Errorf("image %s: %w (build it first)", name, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("layout %s holds %d manifests, want 1", p, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

func describe(img v1.Image, r *Result) error {
	var err error
	if r.Digest, err = img.Digest(); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	r.Size = 0
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return err
		}
		r.Size += n
	}
	return nil
}

// Push copies the images called names from their layouts in outDir to registry (host:port, plain
// HTTP), each as Ref(registry, name), and returns their digests. Blobs the images share are
// uploaded once, and blobs the registry already has are not uploaded again.
func Push(ctx context.Context, outDir, registry string, names []string) (map[string]v1.Hash, error) {
	refs := map[string]string{}
	for _, n := range names {
		refs[n] = Ref(registry, n)
	}
	return write(ctx, outDir, refs, []name.Option{name.Insecure})
}

// Release are the images a Convoy release publishes, the ones deploy/images names.
var Release = []string{Operator, Scheduler, NodeAgent, DRADriver}

// ReleaseRef is the reference of release image name of version in repository (a registry and a
// path, such as ghcr.io/convoy-dev): <repository>/<name>:v<version>.
func ReleaseRef(repository, name, version string) string {
	return repository + "/" + name + ":v" + version
}

// Version is the release's version, x.y.z, from the VERSION file in root.
func Version(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Publish pushes the Release images from their layouts in outDir to repository, each as
// ReleaseRef, with the credentials of the Docker configuration (~/.docker/config.json, as `docker
// login` writes it), over HTTPS, or plain HTTP where insecure is set; it returns their digests.
func Publish(ctx context.Context, outDir, repository, version string, insecure bool) (map[string]v1.Hash, error) {
	refs := map[string]string{}
	for _, n := range Release {
		refs[n] = ReleaseRef(repository, n, version)
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	return write(ctx, outDir, refs, opts, remote.WithAuthFromKeychain(authn.DefaultKeychain))
}

// write pushes the image of each name in refs, from its layout in outDir, as refs[name].
func write(ctx context.Context, outDir string, refs map[string]string, nameOpts []name.Option, opts ...remote.Option) (map[string]v1.Hash, error) {
	todo := map[name.Reference]remote.Taggable{}
	digests := map[string]v1.Hash{}
	for n, r := range refs {
		img, err := LocalImage(outDir, n)
		if err != nil {
			return nil, err
		}
		ref, err := name.NewTag(r, nameOpts...)
		if err != nil {
			return nil, err
		}
		todo[ref] = img
		if digests[n], err = img.Digest(); err != nil {
			return nil, err
		}
	}
	opts = append(opts, remote.WithContext(ctx), remote.WithJobs(4))
	if err := remote.MultiWrite(todo, opts...); err != nil {
		return nil, fmt.Errorf("pushing %s: %w", strings.Join(slices.Sorted(maps.Values(refs)), ", "), err)
	}
	return digests, nil
}

// Names returns the names of specs, in order.
func Names(specs []Spec) []string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names
}

func (b *Builder) logf(format string, args ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, format+"\n", args...)
	}
}

// HumanSize formats a byte count in KiB, MiB or GiB.
func HumanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// gitVersion returns `git describe --tags --always --dirty` and the commit of the repository at
// root, or "dev" and "" without git.
func gitVersion(root string) (version, revision string) {
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	version = git("describe", "--tags", "--always", "--dirty")
	if version == "" {
		version = "dev"
	}
	return version, git("rev-parse", "HEAD")
}
