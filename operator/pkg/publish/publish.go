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
// the publish pod the operator starts when a job with spec.output.model completes.
package publish

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/file"
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
	// one file.
	Checkpoint string
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
	files, root, err := checkpointFiles(o.Checkpoint)
	if err != nil {
		return Result{}, err
	}
	store, err := file.New(root)
	if err != nil {
		return Result{}, err
	}
	defer store.Close()
	layers := make([]ocispec.Descriptor, 0, len(files))
	for _, name := range files {
		desc, err := store.Add(ctx, name, FileMediaType, filepath.Join(root, name))
		if err != nil {
			return Result{}, fmt.Errorf("adding %s: %w", name, err)
		}
		layers = append(layers, desc)
	}
	manifest, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, ArtifactType,
		oras.PackManifestOptions{Layers: layers, ManifestAnnotations: o.Annotations})
	if err != nil {
		return Result{}, fmt.Errorf("packing the manifest: %w", err)
	}
	if err := store.Tag(ctx, manifest, ref.Reference); err != nil {
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
	pushed, err := oras.Copy(ctx, store, ref.Reference, repo, ref.Reference, oras.DefaultCopyOptions)
	if err != nil {
		return Result{}, fmt.Errorf("pushing to %s: %w", o.Reference, err)
	}
	return Result{Reference: ref.String(), Digest: pushed.Digest.String()}, nil
}

// checkpointFiles lists the regular files of the checkpoint, as paths relative to the root they
// are read from: the directory itself, or a file's directory.
func checkpointFiles(path string) ([]string, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("the checkpoint: %w", err)
	}
	if !fi.IsDir() {
		return []string{filepath.Base(path)}, filepath.Dir(path), nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(path, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("listing the checkpoint: %w", err)
	}
	if len(files) == 0 {
		return nil, "", fmt.Errorf("the checkpoint %s holds no files", path)
	}
	slices.Sort(files)
	return files, path, nil
}
