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
	// A multipart upload of one S3 object (CreateMultipartUpload, UploadPart,
	// CompleteMultipartUpload, AbortMultipartUpload): writes, as put is.
	PresignCreateMultipart   = "create-multipart"
	PresignUploadPart        = "upload-part"
	PresignCompleteMultipart = "complete-multipart"
	PresignAbortMultipart    = "abort-multipart"
)

// PresignRequest is the body of POST .../presign: the operation and the object key (for list, the
// key prefix) in the job's bucket; continuationToken pages a list; uploadId (and partNumber, from
// 1) name a multipart upload's part.
type PresignRequest struct {
	Op                string `json:"op"`
	Key               string `json:"key"`
	ContinuationToken string `json:"continuationToken,omitempty"`
	UploadID          string `json:"uploadId,omitempty"`
	PartNumber        int32  `json:"partNumber,omitempty"`
}

// PresignReply is the URL to send the request to, with its method, valid until expires; for a
// list on GCS or Azure, which no signed URL confines to a prefix, the keys themselves, one page, and the
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
	case PresignPut, PresignDelete, PresignCreateMultipart, PresignUploadPart, PresignCompleteMultipart, PresignAbortMultipart:
		if podAttempt != jobAttempt {
			return fmt.Errorf("%s %s: the pod is of attempt %d and the job is at attempt %d (status.restartCount): only the current attempt writes", op, uri, podAttempt, jobAttempt)
		}
		if !Under(uri, attemptURI) || uri == attemptURI {
			return fmt.Errorf("%s %s: the job may write only under its current attempt's prefix %s/", op, uri, attemptURI)
		}
	default:
		return fmt.Errorf("op %q: ask for put, get, list, delete or a multipart upload's create-multipart, upload-part, complete-multipart, abort-multipart", op)
	}
	return nil
}

// presignRaw signs a request the SDK's presign client does not (ListObjectsV2, and a multipart
// upload's create, complete and abort): method on key (a list: the bucket) with query, for the
// operator's endpoint (path style) or, without one, the bucket's AWS virtual host.
func (s *Server) presignRaw(ctx context.Context, method, bucket, region, key string, q url.Values) (*v4.PresignedHTTPRequest, error) {
	base := "https://" + bucket + ".s3." + region + ".amazonaws.com/"
	if e := s.S3Presign.BaseEndpoint; e != nil {
		base = strings.TrimSuffix(*e, "/") + "/" + bucket + "/"
	}
	q.Set("X-Amz-Expires", strconv.Itoa(int(PresignExpiry/time.Second)))
	// An empty value is sent as "uploads=" (CreateMultipartUpload), which S3 reads as "uploads".
	req, err := http.NewRequestWithContext(ctx, method, base+(&url.URL{Path: key}).EscapedPath()+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	creds, err := s.S3Presign.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	signed, header, err := v4.NewSigner().PresignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", region, s.Clock.Now())
	return &v4.PresignedHTTPRequest{URL: signed, Method: method, SignedHeader: header}, err
}

// rawOps are the operations presignRaw signs: the method, the key and the query of each.
var rawOps = map[string]struct {
	method string
	key    func(PresignRequest) string
	query  func(PresignRequest) url.Values
}{
	PresignList: {http.MethodGet, func(PresignRequest) string { return "" }, func(r PresignRequest) url.Values {
		q := url.Values{"list-type": {"2"}, "prefix": {r.Key}}
		if r.ContinuationToken != "" {
			q.Set("continuation-token", r.ContinuationToken)
		}
		return q
	}},
	PresignCreateMultipart:   {http.MethodPost, requestKey, func(PresignRequest) url.Values { return url.Values{"uploads": {""}} }},
	PresignCompleteMultipart: {http.MethodPost, requestKey, func(r PresignRequest) url.Values { return url.Values{"uploadId": {r.UploadID}} }},
	PresignAbortMultipart:    {http.MethodDelete, requestKey, func(r PresignRequest) url.Values { return url.Values{"uploadId": {r.UploadID}} }},
}

func requestKey(r PresignRequest) string { return r.Key }

// presign answers POST .../presign for a pod of a job whose spec.checkpoint.storage.s3Access (or
// gcsAccess, azureAccess) is presigned: a URL signed with the operator's S3 credentials (or its
// GCS service account key, a SAS of its Azure account) for one operation within PresignScope.
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
	if cp == nil || !cp.Enabled || cp.Storage == nil || (cp.Storage.S3Access != convoy.S3AccessPresigned && cp.Storage.AzureAccess != convoy.AzureAccessPresigned && cp.Storage.GCSAccess != convoy.GCSAccessPresigned) {
		http.Error(w, fmt.Sprintf("TrainingJob %s has none of spec.checkpoint.storage.s3Access, gcsAccess and azureAccess presigned", key), http.StatusForbidden)
		return
	}
	azure, gcs := cp.Storage.AzureAccess == convoy.AzureAccessPresigned, cp.Storage.GCSAccess == convoy.GCSAccessPresigned
	switch {
	case azure && s.AzurePresign == nil:
		http.Error(w, "the operator signs no Azure SAS: start it with --azure-presign and a storage account key of its own", http.StatusNotImplemented)
		return
	case gcs && s.GCSPresign == nil:
		http.Error(w, "the operator signs no GCS URLs: start it with --gcs-presign and a service account key of its own", http.StatusNotImplemented)
		return
	case !azure && !gcs && s.presigner == nil:
		http.Error(w, "the operator signs no S3 URLs: start it with --s3-presign and S3 credentials of its own", http.StatusNotImplemented)
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
	if _, ok := azureOps[r.Op]; azure && !ok && r.Op != PresignList {
		http.Error(w, fmt.Sprintf("op %q: an Azure blob is written in one Put Blob; ask for put, get, list or delete", r.Op), http.StatusBadRequest)
		return
	}
	if _, ok := gcsMethods[r.Op]; gcs && !ok && r.Op != PresignList {
		http.Error(w, fmt.Sprintf("op %q: a GCS object is written in one upload; ask for put, get, list or delete", r.Op), http.StatusBadRequest)
		return
	}
	if gcs {
		reply, err := s.presignGCS(ctx, cp.Storage.GCSBucket, r)
		s.presigned(w, key, reply, err)
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
	case PresignUploadPart:
		out, err = s.presigner.PresignUploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &r.Key, UploadId: &r.UploadID, PartNumber: &r.PartNumber}, expiry, opt)
	default:
		out, err = s.presignRaw(ctx, rawOps[r.Op].method, bucket, cmp.Or(cp.Storage.S3Region, s.S3Presign.Region, "us-east-1"), rawOps[r.Op].key(r), rawOps[r.Op].query(r))
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
