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
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
)

// azureContainer is an Azure Blob Storage container.
type azureContainer struct {
	client *azblob.Client
	name   string
}

// openAzure opens a blob container with the credentials the SDK's AzureStore reads
// (sdk/python/src/convoy/_azure.py), first found: Azure Workload Identity (AZURE_FEDERATED_TOKEN_FILE,
// AZURE_CLIENT_ID, AZURE_TENANT_ID, which its webhook gives the job's ServiceAccount), an account key
// (AZURE_STORAGE_KEY), a SAS (AZURE_STORAGE_SAS_TOKEN), or AZURE_STORAGE_CONNECTION_STRING. The account
// is AZURE_STORAGE_ACCOUNT (spec.checkpoint.storage.azureStorageAccount), its endpoint
// AZURE_STORAGE_BLOB_ENDPOINT or https://<account>.blob.core.windows.net.
func openAzure(_ context.Context, name string) (bucket, error) {
	client, err := azureClient()
	if err != nil {
		return nil, fmt.Errorf("az://%s: %w", name, err)
	}
	return azureContainer{client: client, name: name}, nil
}

func azureClient() (*azblob.Client, error) {
	account, connection := os.Getenv("AZURE_STORAGE_ACCOUNT"), os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
	endpoint := strings.TrimSuffix(cmp.Or(os.Getenv("AZURE_STORAGE_BLOB_ENDPOINT"), "https://"+account+".blob.core.windows.net"), "/") + "/"
	key, sas := os.Getenv("AZURE_STORAGE_KEY"), strings.TrimPrefix(os.Getenv("AZURE_STORAGE_SAS_TOKEN"), "?")
	switch {
	case account == "" && connection == "":
		return nil, errors.New("no storage account: set spec.checkpoint.storage.azureStorageAccount (AZURE_STORAGE_ACCOUNT)")
	case account != "" && os.Getenv("AZURE_FEDERATED_TOKEN_FILE") != "":
		cred, err := azidentity.NewWorkloadIdentityCredential(nil)
		if err != nil {
			return nil, err
		}
		return azblob.NewClient(endpoint, cred, nil)
	case account != "" && key != "":
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, err
		}
		return azblob.NewClientWithSharedKeyCredential(endpoint, cred, nil)
	case account != "" && sas != "":
		return azblob.NewClientWithNoCredential(endpoint+"?"+sas, nil)
	case connection != "":
		return azblob.NewClientFromConnectionString(connection, nil)
	}
	return nil, errors.New("no credentials: bind the job's serviceAccountName with Azure Workload Identity, " +
		"or give AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN through spec.checkpoint.storage.credentialsSecretRef")
}

func (c azureContainer) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	pages := c.client.NewListBlobsFlatPager(c.name, &azblob.ListBlobsFlatOptions{Prefix: &prefix})
	for pages.More() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, b := range page.Segment.BlobItems {
			keys = append(keys, *b.Name)
		}
	}
	return keys, nil
}

func (c azureContainer) open(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := c.client.DownloadStream(ctx, c.name, key, nil)
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}
