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
	"errors"
	"fmt"
	"io"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
)

// gcsBucket is a Google Cloud Storage bucket.
type gcsBucket struct {
	client *storage.Client
	*storage.BucketHandle
}

// openGCS opens a GCS bucket with Application Default Credentials: the Google service account of
// the job's ServiceAccount (GKE Workload Identity) from the metadata server, or the key file
// GOOGLE_APPLICATION_CREDENTIALS names; none with STORAGE_EMULATOR_HOST, a GCS-compatible server.
func openGCS(ctx context.Context, name string) (bucket, error) {
	client, err := storage.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("configuring the GCS client: %w", err)
	}
	return gcsBucket{client: client, BucketHandle: client.Bucket(name)}, nil
}

func (b gcsBucket) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := b.Objects(ctx, &storage.Query{Prefix: prefix})
	for {
		o, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return keys, nil
		}
		if err != nil {
			return nil, err
		}
		keys = append(keys, o.Name)
	}
}

func (b gcsBucket) open(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.Object(key).NewReader(ctx)
}

func (b gcsBucket) Close() error { return b.client.Close() }
