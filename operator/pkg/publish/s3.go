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
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// s3Bucket is an S3 bucket.
type s3Bucket struct {
	client *s3.Client
	name   string
}

// openS3 opens an S3 bucket with the client configured from the environment (AWS_ENDPOINT_URL,
// AWS_REGION, the job's credentials Secret as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or its
// ServiceAccount's IRSA or Pod Identity).
func openS3(ctx context.Context, name string) (bucket, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("configuring the S3 client: %w", err)
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
	return s3Bucket{client: client, name: name}, nil
}

func (b s3Bucket) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	pages := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{Bucket: &b.name, Prefix: &prefix})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

func (b s3Bucket) open(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.name, Key: &key})
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}
