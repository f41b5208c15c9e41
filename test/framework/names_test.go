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

package framework_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/test/framework"
)

// TestUnique names a test's objects alike within a run and apart across runs of the same test.
func TestUnique(t *testing.T) {
	var got []string
	for range 2 {
		t.Run("Sub_Test", func(t *testing.T) {
			got = append(got, framework.Unique(t, "node"), framework.Unique(t, "ns"), framework.TestNamespace(t))
		})
	}
	// On the first run of this test in the process (go test -count=1):
	// node, ns, testunique-sub-test, then node-2, ns-2, testunique-sub-test-2.
	first, second := got[:3], got[3:]
	for _, run := range [][]string{first, second} {
		sfx := strings.TrimPrefix(run[0], "node")
		if run[1] != "ns"+sfx || run[2] != "testunique-sub-test"+sfx {
			t.Errorf("one run's names %v do not share the suffix %q", run, sfx)
		}
	}
	if slices.Equal(first, second) {
		t.Errorf("two runs named their objects alike: %v", first)
	}
}
