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
package util

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/test/framework"
)

// Kubectl runs the cluster's bin/kubectl as its admin and returns what it printed. kubectl finds
// its plugins, kubectl-kueue among them, in bin/; a plugin takes no flags before its name, so the
// kubeconfig comes from the environment. A failure is an error that quotes the output.
func Kubectl(ctx context.Context, c *framework.Cluster, args ...string) (string, error) {
	return KubectlStdin(ctx, c, "", args...)
}

// KubectlStdin is Kubectl with stdin on kubectl's standard input (none when empty).
func KubectlStdin(ctx context.Context, c *framework.Cluster, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), args...)
	cmd.Env = append(c.KubectlEnv(), "PATH="+c.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// MustKubectl is Kubectl that fails the test when kubectl fails.
func MustKubectl(t testing.TB, c *framework.Cluster, args ...string) string {
	t.Helper()
	out, err := Kubectl(t.Context(), c, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
