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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// sdkManifest is the file the SDK writes last into a checkpoint it saved on object storage
// (sdk/python/src/convoy/_objcheckpoint.py); rank-<r>.json list each rank's shard.
const sdkManifest = "manifest.json"

var rankList = regexp.MustCompile(`^rank-\d+\.json$`)

// fetchS3 downloads the checkpoint at uri, s3://bucket/prefix, into dir. uri must lie under root,
// the job's own prefix: nothing else is read. The client is configured from the environment
// (AWS_ENDPOINT_URL, AWS_REGION, the job's credentials Secret as AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY), so the bucket sees the job's own identity. A checkpoint the SDK saved is
// published once its manifest is there (never half written), without the SDK's lists, its one
// rank's files at the top when it has one rank; any other prefix, every object under it.
func fetchS3(ctx context.Context, root, uri, dir string) error {
	bucket, prefix, err := splitS3(uri)
	if err != nil {
		return err
	}
	if root == "" || !underURI(uri, root) {
		return fmt.Errorf("the checkpoint %s is not under %s, the job's checkpoint prefix: publishing reads nothing else", uri, root)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("configuring the S3 client: %w", err)
	}
	if cfg.Region == "" {
		// spec.checkpoint.storage.s3Region unset: the default of boto3 and the SDK, which an
		// S3-compatible server ignores.
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		// S3-compatible servers on a plain host name or address have no bucket sub-domains.
		o.UsePathStyle = cfg.BaseEndpoint != nil
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	var keys []string
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing %s: %w", uri, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), prefix+"/"))
		}
	}
	names, err := publishedNames(ctx, client, bucket, prefix, uri, keys)
	if err != nil {
		return err
	}
	for key, name := range names {
		if err := getObject(ctx, client, bucket, prefix+"/"+key, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			return fmt.Errorf("reading %s/%s: %w", uri, key, err)
		}
	}
	return nil
}

// publishedNames maps the keys under the checkpoint (relative to it) that are published to their
// names in the artifact.
func publishedNames(ctx context.Context, client *s3.Client, bucket, prefix, uri string, keys []string) (map[string]string, error) {
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
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(prefix + "/" + sdkManifest)})
		if err != nil {
			return nil, fmt.Errorf("reading %s/%s: %w", uri, sdkManifest, err)
		}
		var m struct {
			World int `json:"world"`
		}
		err = json.NewDecoder(out.Body).Decode(&m)
		out.Body.Close()
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

func getObject(ctx context.Context, client *s3.Client, bucket, key, dst string) error {
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, out.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// splitS3 splits s3://bucket/prefix; the prefix has no "." or ".." segment nor a trailing "/".
func splitS3(uri string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if !ok || bucket == "" || prefix == "" || path.Clean(prefix) != prefix || strings.HasPrefix(prefix, "/") || strings.HasPrefix(prefix, "..") {
		return "", "", fmt.Errorf("%q is not an S3 checkpoint URI, s3://bucket/prefix", uri)
	}
	return bucket, prefix, nil
}

// underURI reports whether uri lies strictly below root.
func underURI(uri, root string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSuffix(uri, "/"), strings.TrimSuffix(root, "/")+"/")
	return ok && rest != ""
}

// IsObjectURI reports whether the checkpoint is on object storage that Push reads itself.
func IsObjectURI(checkpoint string) bool { return strings.HasPrefix(checkpoint, "s3://") }
