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

// Command promrules writes the rule groups of a PrometheusRule as the plain rule file that
// promtool and Prometheus read, so that deploy/monitoring keeps one source of its alerts:
//
//	go run ./test/cmd/promrules [-tests DIR] deploy/monitoring/prometheusrule.yaml > rules.yaml
//
// With -tests it also fails when an alert has no promtool test in DIR that expects it to fire.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/convoy-dev/convoy/test/monitoring"
)

func main() {
	tests := flag.String("tests", "", "directory of promtool rule tests that must expect every alert to fire")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: promrules [-tests DIR] PROMETHEUSRULE.yaml")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *tests); err != nil {
		fmt.Fprintln(os.Stderr, "promrules:", err)
		os.Exit(1)
	}
}

func run(file, tests string) error {
	groups, err := monitoring.ReadRules(file)
	if err != nil {
		return err
	}
	if tests != "" {
		missing, err := monitoring.UntestedAlerts(monitoring.Alerts(groups), tests)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return fmt.Errorf("no test in %s expects these alerts to fire: %s", tests, strings.Join(missing, ", "))
		}
	}
	out, err := monitoring.RuleFile(groups)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}
