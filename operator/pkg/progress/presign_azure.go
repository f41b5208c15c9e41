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
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
)

// AzureAccount is the storage account the operator signs SAS for, with its own key.
type AzureAccount struct {
	// Name is the account's name (AZURE_STORAGE_ACCOUNT).
	Name string
	// Key is its key, base64 (AZURE_STORAGE_KEY).
	Key string
	// BlobEndpoint is its Blob service URL (AZURE_STORAGE_BLOB_ENDPOINT); empty is
	// https://<name>.blob.core.windows.net.
	BlobEndpoint string
}

func (a *AzureAccount) endpoint() string {
	if a.BlobEndpoint != "" {
		return strings.TrimSuffix(a.BlobEndpoint, "/")
	}
	return "https://" + a.Name + ".blob.core.windows.net"
}

// azureOps are the blob permissions and method of each operation but list.
var azureOps = map[string]struct {
	perms  sas.BlobPermissions
	method string
}{
	PresignGet:    {sas.BlobPermissions{Read: true}, http.MethodGet},
	PresignPut:    {sas.BlobPermissions{Create: true, Write: true}, http.MethodPut},
	PresignDelete: {sas.BlobPermissions{Delete: true}, http.MethodDelete},
}

// presignAzure answers r in container: for get, put and delete the blob's URL with a service SAS
// for that blob and operation alone; for list the names under the prefix, which the operator lists
// with its key, since no SAS confines a listing to a prefix.
func (s *Server) presignAzure(ctx context.Context, containerName string, r PresignRequest) (PresignReply, error) {
	cred, err := container.NewSharedKeyCredential(s.AzurePresign.Name, s.AzurePresign.Key)
	if err != nil {
		return PresignReply{}, err
	}
	base := s.AzurePresign.endpoint() + "/" + url.PathEscape(containerName)
	expires := s.Clock.Now().Add(PresignExpiry).UTC()
	if r.Op == PresignList {
		return listAzure(ctx, base, cred, r.Key, r.ContinuationToken, expires)
	}
	op := azureOps[r.Op]
	protocol := sas.ProtocolHTTPS
	if strings.HasPrefix(base, "http://") {
		protocol = sas.ProtocolHTTPSandHTTP // an emulator's endpoint
	}
	q, err := sas.BlobSignatureValues{Protocol: protocol, ExpiryTime: expires, Permissions: op.perms.String(),
		ContainerName: containerName, BlobName: r.Key}.SignWithSharedKey(cred)
	if err != nil {
		return PresignReply{}, err
	}
	blob := (&url.URL{Path: r.Key}).EscapedPath()
	return PresignReply{Method: op.method, URL: base + "/" + blob + "?" + q.Encode(), Expires: expires}, nil
}

// listAzure lists one page of the blob names under prefix.
func listAzure(ctx context.Context, containerURL string, cred *sas.SharedKeyCredential, prefix, marker string, expires time.Time) (PresignReply, error) {
	c, err := container.NewClientWithSharedKeyCredential(containerURL, cred, nil)
	if err != nil {
		return PresignReply{}, err
	}
	o := &container.ListBlobsFlatOptions{Prefix: &prefix}
	if marker != "" {
		o.Marker = &marker
	}
	page, err := c.NewListBlobsFlatPager(o).NextPage(ctx)
	if err != nil {
		return PresignReply{}, fmt.Errorf("listing %s under %s: %w", containerURL, prefix, err)
	}
	reply := PresignReply{Keys: []string{}, Expires: expires}
	for _, b := range page.Segment.BlobItems {
		reply.Keys = append(reply.Keys, *b.Name)
	}
	if page.NextMarker != nil {
		reply.ContinuationToken = *page.NextMarker
	}
	return reply, nil
}
