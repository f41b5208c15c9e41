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

package realcapacity

import (
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/test/chaos"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/framework"
)

// A real node is taken from under a running gang, its kubelet stopped, then its cable cut (test/chaos
// RealNodes): each time the gang runs whole again on another node from its latest checkpoint, and
// once the node is back the old attempt's containers there are gone, having written nothing after
// and nothing into the new attempt's checkpoints. It logs each fault's row of `make chaos`'s table;
// a time over its target is logged, not failed on (`make chaos` fails on it). It adds a third real
// node, which stays.
func TestGangOnALostNodeRestartsElsewhereFromItsCheckpoint(t *testing.T) {
	e := realstack.Shared(t)
	results, err := chaos.RealNodes(t.Context(), e, framework.TestNamespace(t), t.Logf)
	var table strings.Builder
	if perr := chaos.Print(&table, results); perr != nil {
		t.Error(perr)
	}
	t.Logf("make chaos's rows:\n%s", table.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range results {
		switch {
		case res.Missed != "":
			t.Errorf("%s: the fault did not land: %s", res.Scenario, res.Missed)
		case !res.Met:
			t.Errorf("%s: %s; got %s (lost %d, duplicate pods %d, partial gangs %d)", res.Scenario, res.Target, res.Times, res.Lost, res.Duplicates, res.Partial)
		case len(res.Slow) > 0:
			t.Logf("%s: over its target (a measure, not a test): %s", res.Scenario, strings.Join(res.Slow, "; "))
		}
	}
}
