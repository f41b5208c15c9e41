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

// Package sdkstorage runs the Python SDK's gs:// and az:// checkpoint stores against real servers
// that test/framework starts on loopback: fake-gcs-server and Azurite (`make cloud-storage-deps`).
package sdkstorage

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/convoy-dev/convoy/test/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{WithoutKwok: true, WithoutControllerManager: true})
}

// TestStoresAgainstRealServers: sdk/python/tests/test_cloudstorage.py puts, lists, gets and deletes
// checkpoints in a fake-gcs-server bucket and an Azurite container, and Azurite refuses a wrong
// account key. fake-gcs-server accepts any token, or none: no test here can show GCS refusing a
// wrong credential, and none pretends to. None of its tests may skip.
func TestStoresAgainstRealServers(t *testing.T) {
	c := framework.Shared(t)
	gcs, err := c.StartGCS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	azure, err := c.StartAzurite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "python3", "-m", "unittest", "-v", "test_cloudstorage")
	cmd.Dir = filepath.Join(root, "sdk", "python", "tests")
	cmd.Env = append(os.Environ(), "CONVOY_TEST_GCS_ENDPOINT="+gcs, "CONVOY_TEST_AZURE_ACCOUNT="+azure.Name,
		"CONVOY_TEST_AZURE_KEY="+azure.Key, "CONVOY_TEST_AZURE_ENDPOINT="+azure.BlobEndpoint)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the Python tests failed: %v", err)
	}
	if skipped := regexp.MustCompile(`(?m)\.\.\. skipped`).FindAll(out, -1); len(skipped) > 0 {
		t.Errorf("%d Python tests skipped: every one must run against the servers", len(skipped))
	}
}
