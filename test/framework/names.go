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
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// A package's tests share one control plane, which keeps what each test created. `go test
// -count=N` runs every test N times in one process: the names of a test's objects must differ
// from run to run.
var (
	runsMu sync.Mutex
	// runs counts each test's runs so far, by name; runOf numbers a running test's run.
	runs  = map[string]int{}
	runOf = map[testing.TB]int{}
)

// dupSuffix is the "#01" the testing package appends to a repeated subtest's name.
var dupSuffix = regexp.MustCompile(`#[0-9]+`)

// Unique returns name on a test's first run in this process and name-2, name-3... on its later
// runs (go test -count=N, or a subtest name repeated). Every call in one run gets the same suffix.
func Unique(t testing.TB, name string) string {
	runsMu.Lock()
	defer runsMu.Unlock()
	n, ok := runOf[t]
	if !ok {
		key := dupSuffix.ReplaceAllString(t.Name(), "")
		runs[key]++
		n = runs[key]
		runOf[t] = n
	}
	if n == 1 {
		return name
	}
	return fmt.Sprintf("%s-%d", name, n)
}

// notDNS is what a namespace name cannot hold.
var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// TestNamespace is a namespace name for the test, from its name (lower case, other characters
// than letters, digits and "-" as "-", at most 50 characters) and Unique.
func TestNamespace(t testing.TB) string {
	ns := notDNS.ReplaceAllString(strings.ToLower(dupSuffix.ReplaceAllString(t.Name(), "")), "-")
	if len(ns) > 50 {
		ns = ns[:50]
	}
	return Unique(t, strings.Trim(ns, "-"))
}
