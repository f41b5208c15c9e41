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
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

const (
	// FakeGCS is the name of fake-gcs-server's binary and process: a GCS-compatible server, built
	// into bin/ from its own module hack/fakegcs by `make cloud-storage-deps`.
	FakeGCS = "fake-gcs-server"
	// Azurite is the name of the Azure Storage emulator's Blob service binary and process, the npm
	// package azurite that `make cloud-storage-deps` installs and links into bin/.
	Azurite = "azurite-blob"
	// AzuriteAccountName is the storage account StartAzurite's Azurite holds.
	AzuriteAccountName = "convoy"
)

// StartGCS runs fake-gcs-server as a process of the cluster on a free port of 127.0.0.1, over plain
// HTTP, objects in memory. It accepts any credentials, or none. It returns the server's URL, what
// STORAGE_EMULATOR_HOST takes, once its JSON API answers.
func (c *Cluster) StartGCS(ctx context.Context) (string, error) {
	if err := CheckBinaries(c.BinDir, FakeGCS); err != nil {
		return "", fmt.Errorf("%w (make cloud-storage-deps)", err)
	}
	ports, err := FreePorts(1)
	if err != nil {
		return "", err
	}
	args := []string{"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(ports[0]), "-backend", "memory",
		"-log-level", "warn", "-external-url", "http://" + hostPort(ports[0]),
		"-public-host", hostPort(ports[0])} // signed URLs name the server's host: /<bucket>/<object>
	if err := c.StartProcess(FakeGCS, FakeGCS, args, nil); err != nil {
		return "", err
	}
	url := "http://" + hostPort(ports[0])
	if err := c.WaitHealthy(ctx, FakeGCS, url+"/storage/v1/b"); err != nil {
		return "", err
	}
	return url, nil
}

// AzureAccount is a storage account of an Azure Blob service.
type AzureAccount struct {
	// Name is the account's name, AZURE_STORAGE_ACCOUNT.
	Name string
	// Key is the account's key (base64), what SharedKey requests are signed with.
	Key string
	// BlobEndpoint is the account's Blob service URL, http://127.0.0.1:<port>/<name> for Azurite.
	BlobEndpoint string
}

// StartAzurite runs Azurite's Blob service as a process of the cluster on a free port of 127.0.0.1,
// over plain HTTP, blobs in memory, with one account, AzuriteAccountName, of a random key: a request
// not signed with it (SharedKey) or a SAS of it is refused. It returns the account once the service
// answers.
func (c *Cluster) StartAzurite(ctx context.Context) (AzureAccount, error) {
	if err := CheckBinaries(c.BinDir, Azurite); err != nil {
		return AzureAccount{}, fmt.Errorf("%w (make cloud-storage-deps)", err)
	}
	ports, err := FreePorts(1)
	if err != nil {
		return AzureAccount{}, err
	}
	key := make([]byte, 64)
	if _, err := rand.Read(key); err != nil {
		return AzureAccount{}, err
	}
	account := AzureAccount{Name: AzuriteAccountName, Key: base64.StdEncoding.EncodeToString(key),
		BlobEndpoint: "http://" + hostPort(ports[0]) + "/" + AzuriteAccountName}
	args := []string{"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(ports[0]), "--inMemoryPersistence",
		"--silent", "--disableTelemetry"}
	env := []string{"AZURITE_ACCOUNTS=" + account.Name + ":" + account.Key}
	if err := c.StartProcess(Azurite, Azurite, args, env); err != nil {
		return AzureAccount{}, err
	}
	// Every request without credentials is refused: any answer says the service is up.
	client := &http.Client{Timeout: 2 * time.Second}
	err = c.poll(ctx, Azurite, func() (bool, error) {
		resp, err := client.Get(account.BlobEndpoint + "?comp=list")
		if err != nil {
			return false, nil
		}
		return true, resp.Body.Close()
	})
	if err != nil {
		return AzureAccount{}, fmt.Errorf("waiting for %s at %s: %w", Azurite, account.BlobEndpoint, err)
	}
	return account, nil
}
