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

package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// sdkManifest is the file the SDK writes last into a checkpoint it saved on object storage
// (sdk/python/src/convoy/_objcheckpoint.py); rank-<r>.json list each rank's shard.
const sdkManifest = "manifest.json"

var rankList = regexp.MustCompile(`^rank-\d+\.json$`)

// bucket reads the objects of one bucket or container with the job's own identity.
type bucket interface {
	// list returns the names of the objects that start with prefix.
	list(ctx context.Context, prefix string) ([]string, error)
	// open reads the object key.
	open(ctx context.Context, key string) (io.ReadCloser, error)
}

// openers open a bucket by its name, for each scheme of the checkpoint URIs the SDK writes.
var openers = map[string]func(ctx context.Context, name string) (bucket, error){
	"s3://": openS3,
	"gs://": openGCS,
	"az://": openAzure,
}

// fetchObjects downloads the checkpoint at uri, s3://, gs:// or az://<bucket>/<prefix>, into dir.
// uri must lie under root, the job's own prefix: nothing else is read. The client is configured
// from the environment the job's pods get (see openS3, openGCS, openAzure), so the bucket sees the
// job's own identity. A checkpoint the SDK saved is published once its manifest is there (never
// half written), without the SDK's lists, its one rank's files at the top when it has one rank;
// any other prefix, every object under it.
func fetchObjects(ctx context.Context, root, uri, dir string) error {
	scheme, name, prefix, err := splitURI(uri)
	if err != nil {
		return err
	}
	if root == "" || !underURI(uri, root) {
		return fmt.Errorf("the checkpoint %s is not under %s, the job's checkpoint prefix: publishing reads nothing else", uri, root)
	}
	b, err := openers[scheme](ctx, name)
	if err != nil {
		return err
	}
	if c, ok := b.(io.Closer); ok {
		defer c.Close()
	}
	keys, err := b.list(ctx, prefix+"/")
	if err != nil {
		return fmt.Errorf("listing %s: %w", uri, err)
	}
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, prefix+"/")
	}
	names, err := publishedNames(ctx, b, prefix, uri, keys)
	if err != nil {
		return err
	}
	for key, name := range names {
		if err := download(ctx, b, prefix+"/"+key, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			return fmt.Errorf("reading %s/%s: %w", uri, key, err)
		}
	}
	return nil
}

// publishedNames maps the keys under the checkpoint (relative to it) that are published to their
// names in the artifact.
func publishedNames(ctx context.Context, b bucket, prefix, uri string, keys []string) (map[string]string, error) {
	names := map[string]string{}
	sdk, world := false, 0
	for _, k := range keys {
		if k == sdkManifest {
			sdk = true
		} else if rankList.MatchString(k) {
			world++
		}
	}
	if !sdk && world > 0 {
		return nil, fmt.Errorf("the checkpoint %s has no %s: it was never completely written", uri, sdkManifest)
	}
	if sdk {
		r, err := b.open(ctx, prefix+"/"+sdkManifest)
		if err != nil {
			return nil, fmt.Errorf("reading %s/%s: %w", uri, sdkManifest, err)
		}
		var m struct {
			World int `json:"world"`
		}
		err = json.NewDecoder(r).Decode(&m)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s/%s: %w", uri, sdkManifest, err)
		}
		world = m.World
	}
	for _, k := range keys {
		if sdk && (k == sdkManifest || rankList.MatchString(k)) {
			continue
		}
		name := k
		if sdk && world == 1 {
			name = strings.TrimPrefix(k, "rank-0/")
		}
		if !filepath.IsLocal(filepath.FromSlash(name)) || strings.HasSuffix(name, "/") {
			return nil, fmt.Errorf("the checkpoint %s holds %s, which is no file name", uri, k)
		}
		names[k] = name
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("the checkpoint %s: it holds no objects", uri)
	}
	return names, nil
}

func download(ctx context.Context, b bucket, key, dst string) error {
	r, err := b.open(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// splitURI splits <scheme>://bucket/prefix; the prefix has no "." or ".." segment nor a trailing "/".
func splitURI(uri string) (scheme, bucket, prefix string, err error) {
	for s := range openers {
		if rest, ok := strings.CutPrefix(uri, s); ok {
			scheme = s
			bucket, prefix, _ = strings.Cut(rest, "/")
			break
		}
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if scheme == "" || bucket == "" || prefix == "" || path.Clean(prefix) != prefix || strings.HasPrefix(prefix, "/") || strings.HasPrefix(prefix, "..") {
		return "", "", "", fmt.Errorf("%q is not a checkpoint URI on object storage, s3://, gs:// or az://<bucket>/<prefix>", uri)
	}
	return scheme, bucket, prefix, nil
}

// underURI reports whether uri lies strictly below root.
func underURI(uri, root string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSuffix(uri, "/"), strings.TrimSuffix(root, "/")+"/")
	return ok && rest != ""
}

// IsObjectURI reports whether the checkpoint is on object storage that Push reads itself.
func IsObjectURI(checkpoint string) bool {
	for s := range openers {
		if strings.HasPrefix(checkpoint, s) {
			return true
		}
	}
	return false
}
