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

package progress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
)

// GCSAccount is the service account the operator signs GCS URLs with, by its own key.
type GCSAccount struct {
	// KeyJSON is the service account's JSON key file (GOOGLE_APPLICATION_CREDENTIALS): its
	// client_email and private_key sign the URLs and list the job's prefix.
	KeyJSON []byte
	// Endpoint is an emulator's URL (STORAGE_EMULATOR_HOST, such as fake-gcs-server's): the URLs
	// name its host and the operator lists through it without credentials. Empty is Google's.
	Endpoint string
}

// gcsMethods are the HTTP method of each operation but list.
var gcsMethods = map[string]string{PresignGet: http.MethodGet, PresignPut: http.MethodPut, PresignDelete: http.MethodDelete}

// presignGCS answers r in bucket: for get, put and delete a V4 signed URL of that object and
// method alone; for list the names under the prefix, which the operator lists itself, since no
// signed URL confines a listing to a prefix.
func (s *Server) presignGCS(ctx context.Context, bucket string, r PresignRequest) (PresignReply, error) {
	key, err := google.JWTConfigFromJSON(s.GCSPresign.KeyJSON)
	if err != nil {
		return PresignReply{}, fmt.Errorf("the --gcs-presign key: %w", err)
	}
	expires := s.Clock.Now().Add(PresignExpiry).UTC()
	if r.Op == PresignList {
		return s.listGCS(ctx, bucket, r.Key, r.ContinuationToken, expires)
	}
	o := &storage.SignedURLOptions{Scheme: storage.SigningSchemeV4, GoogleAccessID: key.Email, PrivateKey: key.PrivateKey,
		Method: gcsMethods[r.Op], Expires: expires}
	if e := s.GCSPresign.Endpoint; e != "" {
		u, err := url.Parse(e)
		if err != nil {
			return PresignReply{}, fmt.Errorf("the GCS endpoint %q: %w", e, err)
		}
		o.Hostname, o.Insecure = u.Host, u.Scheme == "http"
	}
	signed, err := storage.SignedURL(bucket, r.Key, o)
	return PresignReply{Method: o.Method, URL: signed, Expires: expires}, err
}

// listGCS lists one page of the object names under prefix.
func (s *Server) listGCS(ctx context.Context, bucket, prefix, token string, expires time.Time) (PresignReply, error) {
	opts := []option.ClientOption{option.WithAuthCredentialsJSON(option.ServiceAccount, s.GCSPresign.KeyJSON)}
	if e := s.GCSPresign.Endpoint; e != "" {
		opts = []option.ClientOption{option.WithEndpoint(strings.TrimSuffix(e, "/") + "/storage/v1/"), option.WithoutAuthentication()}
	}
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return PresignReply{}, err
	}
	defer c.Close()
	it := c.Bucket(bucket).Objects(ctx, &storage.Query{Prefix: prefix})
	p := iterator.NewPager(it, 1000, token)
	var page []*storage.ObjectAttrs
	next, err := p.NextPage(&page)
	if err != nil && !errors.Is(err, iterator.Done) {
		return PresignReply{}, fmt.Errorf("listing gs://%s under %s: %w", bucket, prefix, err)
	}
	reply := PresignReply{Keys: []string{}, ContinuationToken: next, Expires: expires}
	for _, o := range page {
		reply.Keys = append(reply.Keys, o.Name)
	}
	return reply, nil
}
