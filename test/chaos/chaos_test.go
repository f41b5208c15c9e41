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

package chaos

import (
	"context"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
)

func TestMain(m *testing.M) {
	// The unit tests of the watcher need no cluster.
	flag.Parse()
	if run := flag.Lookup("test.run").Value.String(); run != "" && !regexp.MustCompile(run).MatchString("TestEveryScenarioLosesNothing") {
		os.Exit(m.Run())
	}
	kwokArgs, err := stack.KwokArgs(context.Background())
	if err != nil {
		panic(err)
	}
	framework.Main(m, framework.Options{KwokArgs: kwokArgs, AddToScheme: AddToScheme})
}

// TestEveryScenarioLosesNothing runs every scenario of `make chaos` small, on one stack, and
// fails on any job lost or stuck, any duplicate pod, any partial gang, any double action of two
// leaders, and any scenario whose fault did not land (a binding kill lands when the scheduler dies
// with its gang partly bound). The times are logged, not asserted.
func TestEveryScenarioLosesNothing(t *testing.T) {
	cfg := Short()
	cfg.Log = t.Logf
	r, err := Setup(t.Context(), framework.Shared(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	results, err := r.Run(t.Context())
	var table strings.Builder
	_ = Print(&table, results)
	t.Logf("\n%s", table.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range results {
		if res.Lost+res.Duplicates+res.Partial+res.Stuck > 0 {
			t.Errorf("%s: %d lost, %d duplicate pods, %d partial gangs, %d stuck; want 0", res.Scenario, res.Lost, res.Duplicates, res.Partial, res.Stuck)
		}
		if res.Double > 0 {
			t.Errorf("%s: %d double actions; want 0", res.Scenario, res.Double)
		}
		if res.Missed != "" {
			t.Errorf("%s: the fault did not happen as meant: %s", res.Scenario, res.Missed)
		}
	}
}
