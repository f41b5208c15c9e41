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
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/file"
	"oras.land/oras-go/v2/registry/remote"
)

// Registry is the name of the OCI registry's binary and process (CNCF Distribution's registry,
// built by Build).
const Registry = "registry"

// registryConfig is the registry's configuration: images on the file system, plain HTTP, no
// authentication, no access log, warnings and errors only (a HEAD for a blob or tag the registry
// lacks, which every push asks first, is logged as an error).
const registryConfig = `version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
  secret: %q
`

// StartRegistry runs an OCI registry as a process of the cluster, listening on addr (host:port;
// "" picks a free port on 127.0.0.1) over plain HTTP without authentication, storing images under
// <StateDir>/registry. It returns the registry's address once /v2/ answers; containerd and
// go-containerregistry reach it as an insecure registry.
func (c *Cluster) StartRegistry(ctx context.Context, addr string) (string, error) {
	if err := CheckBinaries(c.BinDir, Registry); err != nil {
		return "", err
	}
	if addr == "" {
		ports, err := FreePorts(1)
		if err != nil {
			return "", err
		}
		addr = hostPort(ports[0])
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("registry address %q: %w", addr, err)
	}
	dir := filepath.Join(c.StateDir, Registry)
	if err := os.MkdirAll(filepath.Join(dir, "storage"), 0o755); err != nil {
		return "", err
	}
	config := filepath.Join(dir, "config.yml")
	// The secret signs upload state: one registry needs no shared one, but warns without it.
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	content := fmt.Sprintf(registryConfig, filepath.Join(dir, "storage"), addr, hex.EncodeToString(secret))
	if err := os.WriteFile(config, []byte(content), 0o644); err != nil {
		return "", err
	}
	// OTEL_TRACES_EXPORTER=none: the registry would otherwise export traces to an OTLP collector.
	if err := c.StartProcess(Registry, Registry, []string{"serve", config}, []string{"OTEL_TRACES_EXPORTER=none"}); err != nil {
		return "", err
	}
	if err := c.WaitHealthy(ctx, Registry, "http://"+addr+"/v2/"); err != nil {
		return "", err
	}
	return addr, nil
}

// PullArtifact pulls registry/repository:tag over plain HTTP with oras-go into dir, as `oras pull`
// does, and returns the manifest's digest, the manifest and each layer's file by its title.
func PullArtifact(ctx context.Context, registry, repository, tag, dir string) (string, ocispec.Manifest, map[string][]byte, error) {
	var m ocispec.Manifest
	repo, err := remote.NewRepository(registry + "/" + repository)
	if err != nil {
		return "", m, nil, err
	}
	repo.PlainHTTP = true
	dst, err := file.New(dir)
	if err != nil {
		return "", m, nil, err
	}
	defer dst.Close()
	desc, err := oras.Copy(ctx, repo, tag, dst, tag, oras.DefaultCopyOptions)
	if err != nil {
		return "", m, nil, fmt.Errorf("pulling %s/%s:%s: %w", registry, repository, tag, err)
	}
	raw, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		return "", m, nil, err
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", m, nil, err
	}
	files := map[string][]byte{}
	for _, l := range m.Layers {
		name := l.Annotations[ocispec.AnnotationTitle]
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", m, nil, fmt.Errorf("layer %s: %w", name, err)
		}
		files[name] = data
	}
	return desc.Digest.String(), m, files, nil
}
