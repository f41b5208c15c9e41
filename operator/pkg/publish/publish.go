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

// Package publish pushes a TrainingJob's final checkpoint to an OCI registry as an artifact, with
// oras-go: each file of the checkpoint one layer, titled with its path in the checkpoint (so that
// `oras pull` restores the directory), under an image manifest of ArtifactType annotated with the
// job, the checkpoint's epoch and the job's latest metrics. The convoy-publish binary runs it in
// the publish pod the operator starts when a job with spec.output.model completes. The checkpoint
// is read through an os.Root: nothing outside it is read, whatever symbolic links or ".." it holds.
package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Media types of the artifact.
const (
	// ArtifactType is the manifest's artifactType: a model checkpoint published by Convoy.
	ArtifactType = "application/vnd.convoy.model.v1"
	// FileMediaType is each layer's: one file of the checkpoint, as it was written.
	FileMediaType = "application/vnd.convoy.model.file.v1"
)

// Manifest annotations, besides org.opencontainers.image.created, which oras sets.
const (
	AnnotationJob        = "dev.convoy.job"
	AnnotationEpoch      = "dev.convoy.epoch"
	AnnotationMetrics    = "dev.convoy.metrics"
	AnnotationCheckpoint = "dev.convoy.checkpoint"
)

// Options say what to push where.
type Options struct {
	// Checkpoint is the checkpoint's path: a directory (every regular file under it is pushed) or
	// one file; or an s3://, gs:// or az:// URI, whose objects are downloaded to a temporary
	// directory first (see fetchObjects).
	Checkpoint string
	// Root is a directory the checkpoint lies in that its writers cannot replace (the volume's
	// mount point): no directory on the way from it to the checkpoint may be a symbolic link.
	// "" is the checkpoint's own directory. For a checkpoint on object storage, the job's prefix,
	// s3://, gs:// or az://<bucket>/<prefix>, which it must lie under.
	Root string
	// Reference is the target, registry/repository:tag.
	Reference string
	// DockerConfig is a Docker config.json with the registry's credentials; "" pushes anonymously.
	DockerConfig string
	// PlainHTTP talks to the registry over HTTP instead of HTTPS.
	PlainHTTP bool
	// Annotations go on the manifest.
	Annotations map[string]string
}

// Result is what was pushed; the publish pod writes it as its termination message.
type Result struct {
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
}

// ParseReference parses an OCI reference that names a registry, a repository and a tag.
func ParseReference(ref string) (registry.Reference, error) {
	r, err := registry.ParseReference(ref)
	if err != nil {
		return r, err
	}
	if err := r.ValidateReferenceAsTag(); err != nil {
		return r, fmt.Errorf("%q has no tag: name one, for example %s:v1", ref, r.Registry+"/"+r.Repository)
	}
	return r, nil
}

// Push pushes the checkpoint and returns the reference and the manifest's digest.
func Push(ctx context.Context, o Options) (Result, error) {
	ref, err := ParseReference(o.Reference)
	if err != nil {
		return Result{}, err
	}
	if o.Root != "" && o.DockerConfig != "" {
		if rel, err := filepath.Rel(filepath.Clean(o.Root), filepath.Clean(o.DockerConfig)); err == nil && filepath.IsLocal(rel) {
			return Result{}, fmt.Errorf("the registry credentials %s lie in the checkpoint storage %s: mount them elsewhere", o.DockerConfig, o.Root)
		}
	}
	if IsObjectURI(o.Checkpoint) {
		dir, err := os.MkdirTemp("", "checkpoint-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(dir)
		if err := fetchObjects(ctx, o.Root, o.Checkpoint, dir); err != nil {
			return Result{}, err
		}
		o.Checkpoint, o.Root = dir, ""
	}
	src, err := openCheckpoint(o.Root, o.Checkpoint)
	if err != nil {
		return Result{}, err
	}
	defer src.root.Close()
	layers, err := src.describe()
	if err != nil {
		return Result{}, err
	}
	manifest, err := oras.PackManifest(ctx, src.Store, oras.PackManifestVersion1_1, ArtifactType,
		oras.PackManifestOptions{Layers: layers, ManifestAnnotations: o.Annotations})
	if err != nil {
		return Result{}, fmt.Errorf("packing the manifest: %w", err)
	}
	if err := src.Tag(ctx, manifest, ref.Reference); err != nil {
		return Result{}, err
	}
	repo, err := remote.NewRepository(ref.Registry + "/" + ref.Repository)
	if err != nil {
		return Result{}, err
	}
	repo.PlainHTTP = o.PlainHTTP
	client := &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache()}
	if o.DockerConfig != "" {
		creds, err := credentials.NewStore(o.DockerConfig, credentials.StoreOptions{})
		if err != nil {
			return Result{}, fmt.Errorf("reading the registry credentials %s: %w", o.DockerConfig, err)
		}
		client.Credential = credentials.Credential(creds)
	}
	repo.Client = client
	pushed, err := oras.Copy(ctx, src, ref.Reference, repo, ref.Reference, oras.DefaultCopyOptions)
	if err != nil {
		return Result{}, fmt.Errorf("pushing to %s: %w", o.Reference, err)
	}
	return Result{Reference: ref.String(), Digest: pushed.Digest.String()}, nil
}

// source is what oras copies from: the checkpoint's files, read through root, and the manifest
// and its config in memory.
type source struct {
	*memory.Store
	root  *os.Root
	files []string
	read  map[digest.Digest]string
}

// openCheckpoint opens the checkpoint at path for reading: path must lie in dir (the checkpoint's
// directory when dir is ""), and every directory from dir down to the checkpoint is opened as it
// is, not through a symbolic link. A directory checkpoint is then read through its own root, a
// file checkpoint through its directory's.
func openCheckpoint(dir, path string) (*source, error) {
	path = filepath.Clean(path)
	if dir == "" {
		dir = path
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
			dir = filepath.Dir(path)
		}
	}
	rel, err := filepath.Rel(filepath.Clean(dir), path)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return nil, fmt.Errorf("the checkpoint %s is not under %s, the checkpoint storage: publishing reads nothing else", path, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint: %w", err)
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if rel == "." {
		parts = nil
	}
	for i, name := range parts {
		fi, err := root.Lstat(name)
		if err != nil {
			root.Close()
			return nil, fmt.Errorf("the checkpoint: %w", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 && i < len(parts)-1 {
			root.Close()
			return nil, fmt.Errorf("the checkpoint %s: %s is a symbolic link: publishing follows none on the way to the checkpoint", path, filepath.Join(dir, filepath.Join(parts[:i+1]...)))
		}
		if !fi.IsDir() {
			// A file checkpoint, read through its directory's root.
			return &source{Store: memory.New(), root: root, files: []string{name}}, nil
		}
		sub, err := descend(root, name, fi)
		root.Close()
		if err != nil {
			return nil, fmt.Errorf("the checkpoint %s: %w", path, err)
		}
		root = sub
	}
	files, err := listFiles(root)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("the checkpoint %s: %w", path, err)
	}
	return &source{Store: memory.New(), root: root, files: files}, nil
}

// descend opens the directory name of root, which Lstat saw as fi, refusing one swapped since.
func descend(root *os.Root, name string, fi fs.FileInfo) (*os.Root, error) {
	sub, err := root.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	if now, err := sub.Stat("."); err != nil || !os.SameFile(fi, now) {
		sub.Close()
		return nil, fmt.Errorf("%s changed while it was opened", name)
	}
	return sub, nil
}

// listFiles lists the regular files under root, sorted, as slash-separated paths: a symbolic
// link counts as the file it leads to, inside root; one that leads out of root, or to nothing,
// is an error.
func listFiles(root *os.Root) ([]string, error) {
	var files []string
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			fi, err := root.Stat(p)
			if err != nil {
				return fmt.Errorf("%s is a symbolic link that leads out of the checkpoint or to nothing: remove it (%w)", p, err)
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("it holds no files")
	}
	slices.Sort(files)
	return files, nil
}

// describe reads every file once for its digest and size: one titled layer each.
func (s *source) describe() ([]ocispec.Descriptor, error) {
	s.read = map[digest.Digest]string{}
	layers := make([]ocispec.Descriptor, 0, len(s.files))
	for _, name := range s.files {
		f, err := s.root.Open(name)
		if err != nil {
			return nil, fmt.Errorf("reading the checkpoint's %s: %w", name, err)
		}
		h := digest.Canonical.Digester()
		size, err := io.Copy(h.Hash(), f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the checkpoint's %s: %w", name, err)
		}
		d := h.Digest()
		s.read[d] = name
		layers = append(layers, ocispec.Descriptor{MediaType: FileMediaType, Digest: d, Size: size,
			Annotations: map[string]string{ocispec.AnnotationTitle: name}})
	}
	return layers, nil
}

// Fetch reads a layer from the checkpoint, anything else from memory.
func (s *source) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if name, ok := s.read[desc.Digest]; ok {
		return s.root.Open(name)
	}
	return s.Store.Fetch(ctx, desc)
}

// Exists says whether Fetch has desc.
func (s *source) Exists(ctx context.Context, desc ocispec.Descriptor) (bool, error) {
	if _, ok := s.read[desc.Digest]; ok {
		return true, nil
	}
	return s.Store.Exists(ctx, desc)
}
