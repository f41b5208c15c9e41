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
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Server is the name of the S3-compatible server's binary and process: SeaweedFS's weed, built
// by Build from its own module, hack/seaweedfs.
const S3Server = "weed"

// S3Identity is a key pair the S3 server accepts (SigV4) and what it may do. Actions are
// SeaweedFS's: "Admin" (everything), or "Read", "Write", "List" alone (every bucket) or scoped to a
// bucket or a key prefix, "Read:bucket/team-a/*".
type S3Identity struct {
	Name      string   `json:"name"`
	AccessKey string   `json:"-"`
	SecretKey string   `json:"-"`
	Actions   []string `json:"actions"`
}

// ScopedS3Identity is an identity that may read, write, list and delete only under prefix of
// bucket, with a random key pair.
func ScopedS3Identity(name, bucket, prefix string) S3Identity {
	p := bucket + "/" + strings.Trim(prefix, "/") + "/*"
	return S3Identity{Name: name, AccessKey: randomKey(10), SecretKey: randomKey(20),
		Actions: []string{"Read:" + p, "Write:" + p, "List:" + p}}
}

// S3 is a running S3-compatible server.
type S3 struct {
	// Endpoint is its URL, http://host:port (AWS_ENDPOINT_URL).
	Endpoint string
	// Region is the region its clients sign for (AWS_REGION).
	Region string
	// Admin may do everything.
	Admin S3Identity
}

// Env is the environment of a client of the server as identity: AWS_ENDPOINT_URL, AWS_REGION and
// the key pair.
func (s *S3) Env(id S3Identity) []string {
	return []string{"AWS_ENDPOINT_URL=" + s.Endpoint, "AWS_REGION=" + s.Region,
		"AWS_ACCESS_KEY_ID=" + id.AccessKey, "AWS_SECRET_ACCESS_KEY=" + id.SecretKey}
}

// StartS3 runs SeaweedFS (weed mini: master, volume server, filer and S3 gateway in one process)
// as a process of the cluster, its S3 API on host (an address of this machine; "" is 127.0.0.1)
// at a free port, storing objects under <StateDir>/s3, with buckets created and only its admin
// and identities accepted, every request signed (SigV4). It returns once the S3 API answers.
func (c *Cluster) StartS3(ctx context.Context, host string, buckets []string, identities ...S3Identity) (*S3, error) {
	if err := CheckBinaries(c.BinDir, S3Server); err != nil {
		return nil, err
	}
	host = cmp.Or(host, "127.0.0.1")
	ports, err := FreePorts(9)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.StateDir, "s3")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	s := &S3{Endpoint: "http://" + net.JoinHostPort(host, strconv.Itoa(ports[0])), Region: "us-east-1",
		Admin: S3Identity{Name: "admin", AccessKey: randomKey(10), SecretKey: randomKey(20), Actions: []string{"Admin"}}}
	config := filepath.Join(dir, "identities.json")
	if err := writeS3Identities(config, append([]S3Identity{s.Admin}, identities...)); err != nil {
		return nil, err
	}
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	args := []string{"mini", "-dir=" + filepath.Join(dir, "data"), "-ip=" + host, "-ip.bind=" + host,
		"-s3.port=" + p(0), "-s3.port.grpc=" + p(1), "-master.port=" + p(2), "-master.port.grpc=" + p(3),
		"-volume.port=" + p(4), "-volume.port.grpc=" + p(5), "-filer.port=" + p(6), "-filer.port.grpc=" + p(7),
		"-s3.config=" + config,
		"-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam=false",
		"-master.telemetry=false", "-master.volumeSizeLimitMB=64"}
	if err := c.StartProcess(S3Server, S3Server, args, nil); err != nil {
		return nil, err
	}
	if err := c.WaitHealthy(ctx, S3Server, s.Endpoint+"/healthz"); err != nil {
		return nil, err
	}
	// Created here rather than with weed's -bucket, which it does after /healthz answers.
	for _, b := range buckets {
		if _, err := s.Client(s.Admin).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b}); err != nil {
			return nil, fmt.Errorf("creating the bucket %s: %w", b, err)
		}
	}
	return s, nil
}

// writeS3Identities writes SeaweedFS's S3 configuration: the identities and their key pairs.
func writeS3Identities(path string, ids []S3Identity) error {
	type credential struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	type identity struct {
		S3Identity
		Credentials []credential `json:"credentials"`
	}
	var config struct {
		Identities []identity `json:"identities"`
	}
	for _, id := range ids {
		config.Identities = append(config.Identities, identity{id, []credential{{id.AccessKey, id.SecretKey}}})
	}
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// randomKey is n random bytes in hex.
func randomKey(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Client is an S3 client of the server signing as id.
func (s *S3) Client(id S3Identity) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint), Region: s.Region, UsePathStyle: true,
		DisableLogOutputChecksumValidationSkipped: true,
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: id.AccessKey, SecretAccessKey: id.SecretKey}, nil
		})),
	})
}

// Put writes data as bucket/key, signing as id.
func (s *S3) Put(ctx context.Context, id S3Identity, bucket, key string, data []byte) error {
	_, err := s.Client(id).PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	return err
}

// Get reads bucket/key, signing as id.
func (s *S3) Get(ctx context.Context, id S3Identity, bucket, key string) ([]byte, error) {
	out, err := s.Client(id).GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}
