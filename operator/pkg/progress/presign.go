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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// PresignExpiry is how long a pre-signed URL is valid.
const PresignExpiry = 15 * time.Minute

// The operations a pod may ask a pre-signed URL for.
const (
	PresignPut    = "put"
	PresignGet    = "get"
	PresignList   = "list"
	PresignDelete = "delete"
)

// PresignRequest is the body of POST .../presign: the operation and the object key (for list, the
// key prefix) in the job's bucket; continuationToken pages a list.
type PresignRequest struct {
	Op                string `json:"op"`
	Key               string `json:"key"`
	ContinuationToken string `json:"continuationToken,omitempty"`
}

// PresignReply is the URL to send the request to, with its method, valid until expires; for a
// list on Azure, which no SAS confines to a prefix, the keys themselves, one page, and the
// continuationToken of the next.
type PresignReply struct {
	Method            string    `json:"method,omitempty"`
	URL               string    `json:"url,omitempty"`
	Expires           time.Time `json:"expires"`
	Keys              []string  `json:"keys,omitempty"`
	ContinuationToken string    `json:"continuationToken,omitempty"`
}

// PresignScope returns why a pod of attempt may not have op on key in the job's bucket (or
// container), or nil: reads (get, list) lie under root, the job's checkpoint URI; writes (put,
// delete) under attemptURI, the current attempt's directory, and only from a pod of that attempt.
func PresignScope(root, attemptURI string, podAttempt, jobAttempt int32, op, key string) error {
	scheme, rest, _ := strings.Cut(root, "://")
	bucket, _, _ := strings.Cut(rest, "/")
	uri := scheme + "://" + bucket + "/" + key
	switch op {
	case PresignGet, PresignList:
		// A list's prefix is a string prefix: <root> alone would list <root>2/ too.
		if !Under(uri, root) || (op == PresignList && uri == root) {
			return fmt.Errorf("%s %s: the job may read only under its prefix %s/", op, uri, root)
		}
	case PresignPut, PresignDelete:
		if podAttempt != jobAttempt {
			return fmt.Errorf("%s %s: the pod is of attempt %d and the job is at attempt %d (status.restartCount): only the current attempt writes", op, uri, podAttempt, jobAttempt)
		}
		if !Under(uri, attemptURI) || uri == attemptURI {
			return fmt.Errorf("%s %s: the job may write only under its current attempt's prefix %s/", op, uri, attemptURI)
		}
	default:
		return fmt.Errorf("op %q: ask for put, get, list or delete", op)
	}
	return nil
}

// presignList signs a ListObjectsV2 request (the SDK's presign client signs no lists) for the
// operator's endpoint (path style) or, without one, the bucket's AWS virtual host.
func (s *Server) presignList(ctx context.Context, bucket, region, prefix, token string) (*v4.PresignedHTTPRequest, error) {
	base := "https://" + bucket + ".s3." + region + ".amazonaws.com/"
	if e := s.S3Presign.BaseEndpoint; e != nil {
		base = strings.TrimSuffix(*e, "/") + "/" + bucket + "/"
	}
	q := url.Values{"list-type": {"2"}, "prefix": {prefix}, "X-Amz-Expires": {strconv.Itoa(int(PresignExpiry / time.Second))}}
	if token != "" {
		q.Set("continuation-token", token)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	creds, err := s.S3Presign.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	signed, header, err := v4.NewSigner().PresignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", region, s.Clock.Now())
	return &v4.PresignedHTTPRequest{URL: signed, Method: http.MethodGet, SignedHeader: header}, err
}

// presign answers POST .../presign for a pod of a job whose spec.checkpoint.storage.s3Access (or
// azureAccess) is presigned: a URL signed with the operator's S3 credentials (or a SAS of its
// Azure account) for one operation within PresignScope.
func (s *Server) presign(w http.ResponseWriter, req *http.Request) {
	s.setup()
	ctx := req.Context()
	key := types.NamespacedName{Namespace: req.PathValue("namespace"), Name: req.PathValue("name")}
	if !s.clients.allow(req.RemoteAddr) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("more than %d requests a second from %s; retry later", clientRate, req.RemoteAddr), http.StatusTooManyRequests)
		return
	}
	job, pod, code, err := s.authorize(ctx, req, key)
	if err != nil {
		if busy := (reviewBusy{}); errors.As(err, &busy) {
			w.Header().Set("Retry-After", busy.retryAfterSeconds())
		}
		http.Error(w, err.Error(), code)
		return
	}
	cp := job.Spec.Checkpoint
	if cp == nil || !cp.Enabled || cp.Storage == nil || (cp.Storage.S3Access != convoy.S3AccessPresigned && cp.Storage.AzureAccess != convoy.AzureAccessPresigned) {
		http.Error(w, fmt.Sprintf("TrainingJob %s has neither spec.checkpoint.storage.s3Access nor azureAccess presigned", key), http.StatusForbidden)
		return
	}
	azure := cp.Storage.AzureAccess == convoy.AzureAccessPresigned
	if !azure && s.presigner == nil {
		http.Error(w, "the operator signs no S3 URLs: start it with --s3-presign and S3 credentials of its own", http.StatusNotImplemented)
		return
	}
	if azure && s.AzurePresign == nil {
		http.Error(w, "the operator signs no Azure SAS: start it with --azure-presign and a storage account key of its own", http.StatusNotImplemented)
		return
	}
	r := PresignRequest{}
	dec := json.NewDecoder(io.LimitReader(req.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		http.Error(w, "the body is not a presign request: "+err.Error(), http.StatusBadRequest)
		return
	}
	attempt, _ := strconv.ParseInt(pod.Labels[convoy.LabelRestartAttempt], 10, 32)
	if err := PresignScope(s.CheckpointURI(job), s.AttemptCheckpointURI(job), int32(attempt), job.Status.RestartCount, r.Op, r.Key); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if azure {
		reply, err := s.presignAzure(ctx, cp.Storage.AzureContainer, r)
		s.presigned(w, key, reply, err)
		return
	}
	bucket := cp.Storage.S3Bucket
	expiry := func(o *s3.PresignOptions) { o.Expires = PresignExpiry }
	region := func(o *s3.Options) {
		if cp.Storage.S3Region != "" {
			o.Region = cp.Storage.S3Region
		}
	}
	opt := s3.WithPresignClientFromClientOptions(region)
	var out *v4.PresignedHTTPRequest
	switch r.Op {
	case PresignPut:
		out, err = s.presigner.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &r.Key}, expiry, opt)
	case PresignGet:
		out, err = s.presigner.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &r.Key}, expiry, opt)
	case PresignDelete:
		out, err = s.presigner.PresignDeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &r.Key}, expiry, opt)
	case PresignList:
		out, err = s.presignList(ctx, bucket, cmp.Or(cp.Storage.S3Region, s.S3Presign.Region, "us-east-1"), r.Key, r.ContinuationToken)
	}
	var reply PresignReply
	if err == nil {
		reply = PresignReply{Method: out.Method, URL: out.URL, Expires: s.Clock.Now().Add(PresignExpiry).UTC()}
	}
	s.presigned(w, key, reply, err)
}

// presigned writes the reply, or that signing failed.
func (s *Server) presigned(w http.ResponseWriter, key types.NamespacedName, reply PresignReply, err error) {
	if err != nil {
		ctrl.Log.WithName("progress").Error(err, "Pre-signing", "trainingJob", key.String())
		http.Error(w, "pre-signing failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}
