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

package main

import (
	"strings"
	"testing"
)

// TestBrokenNamesAreFound: against this repository's code, each kind of name that does not exist
// is reported on its line, and the same names spelled right are not.
func TestBrokenNamesAreFound(t *testing.T) {
	idx, err := index("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ good, bad, want string }{
		{"[install](../../docs/install.md#images)", "[install](../../docs/install.md#imagez)", "has no heading #imagez"},
		{"[install](../../docs/install.md)", "[install](../../docs/instal.md)", "does not exist"},
		{"`make test-unit`", "`make test-units`", "make target test-units does not exist"},
		{"`--job-network-policy`", "`--job-network-policies`", "flag --job-network-policies"},
		{"`spec.checkpoint.storage.prefix`", "`spec.checkpoint.storage.prefixes`", "field spec.checkpoint.storage.prefixes exists in no Convoy CRD"},
		{"`spec.gpusPerWorker`", "`spec.gpuPerWorkers`", "(spec.gpusPerWorker?)"},
		{"`CONVOY_CHECKPOINT_URI`", "`CONVOY_CHECKPOINT_URL`", "environment variable CONVOY_CHECKPOINT_URL"},
		{"`convoy_gpu_healthy{node=\"n1\",gpu=\"0\"}`", "`convoy_gpu_healthy{node=\"n1\",card=\"0\"}`", "has no label card"},
		{"`trainingjob_loss`", "`trainingjob_losses`", "metric trainingjob_losses is registered by no code"},
		{"the POD SECURITY column", "the SECURITY column of `kubectl get tj`", "printer column SECURITY"},
		{"`operator/pkg/builder/pod.go`", "`operator/pkg/builder/pods.go`", "path operator/pkg/builder/pods.go"},
		{"<q>waiting for gang team-a/llm to be planned</q>", "<q>waiting for gang team-a/llm to be scheduled</q>", "is no format the code prints"},
		{"<q>team-a/llm needs 4 pod(s) × 8 GPU(s) in one rack; the best rack (r2) has room for 2 pods (16 free GPUs)</q>",
			"<q>team-a/llm needs 4 nodes × 8 free GPUs in one rack; the best rack has 2</q>", "is no format the code prints"},
	} {
		if got := idx.checkFile("hack/docscheck/x.md", "intro\n"+tc.good+"\n"); len(got) != 0 {
			t.Errorf("%s: reported %q, want nothing", tc.good, got)
		}
		got := idx.checkFile("hack/docscheck/x.md", "intro\n"+tc.bad+"\n")
		if len(got) != 1 || !strings.HasPrefix(got[0], "2: ") || !strings.Contains(got[0], tc.want) {
			t.Errorf("%s: reported %q, want one problem on line 2 saying %q", tc.bad, got, tc.want)
		}
	}
}

func TestShellBlocksNameRepositoryPaths(t *testing.T) {
	idx, err := index("../..")
	if err != nil {
		t.Fatal(err)
	}
	block := func(cmd string) string { return "intro\n```sh\n" + cmd + "\n```\n" }
	if got := idx.checkFile("hack/docscheck/x.md", block("kubectl apply --server-side -k deploy/default  # Convoy")); len(got) != 0 {
		t.Errorf("an existing path: reported %q, want nothing", got)
	}
	got := idx.checkFile("hack/docscheck/x.md", block("kubectl apply --server-side -k deploy/defaults"))
	if len(got) != 1 || !strings.HasPrefix(got[0], "3: ") || !strings.Contains(got[0], "path deploy/defaults does not exist") {
		t.Errorf("a missing path: reported %q, want one problem on line 3 naming deploy/defaults", got)
	}
}
