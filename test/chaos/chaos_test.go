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

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
)

func TestMain(m *testing.M) {
	// The unit tests of the watcher need no cluster.
	flag.Parse()
	if run := flag.Lookup("test.run").Value.String(); run != "" && !regexp.MustCompile(run).MatchString("TestEveryScenarioLosesNothing") {
		os.Exit(m.Run())
	}
	// The API server's warnings to the runner's client (a dry run a slow webhook left unchecked) go to stderr.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	kwokArgs, err := stack.KwokArgs(context.Background())
	if err != nil {
		panic(err)
	}
	framework.Main(m, framework.Options{KwokArgs: kwokArgs, AddToScheme: AddToScheme})
}

// TestEveryScenarioLosesNothing runs every scenario of `make chaos` small, on one stack, and
// fails on a row whose target is not met: any job lost or stuck, any duplicate pod, any partial
// gang, any double action of two leaders, a gang not resumed from its checkpoint, or a fault that
// did not land (a kill with no job running, a binding kill with the gang not partly bound). Times
// over their targets (a failover, a gang whole again after a fault) are printed: `make chaos`
// fails on them.
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
		if res.Missed != "" {
			t.Errorf("%s: the fault did not happen as meant: %s", res.Scenario, res.Missed)
		}
		if !res.Met {
			t.Errorf("%s: target %q not met: %d lost, %d duplicate pods, %d partial gangs, %d stuck, %d double actions; %s",
				res.Scenario, res.Target, res.Lost, res.Duplicates, res.Partial, res.Stuck, res.Double, res.Times)
		}
		if len(res.Slow) > 0 {
			t.Logf("%s: slower than its target on this machine (a measure for make chaos, not a failure here): %s",
				res.Scenario, strings.Join(res.Slow, "; "))
		}
	}
}
