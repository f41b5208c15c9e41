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
	"strings"
	"testing"
)

// TestRealNetIndex reads CONVOY_REAL_NET's values, and refuses others with an error that names
// the variable and what it takes.
func TestRealNetIndex(t *testing.T) {
	for v, want := range map[string]int{"": 0, "0": 0, "1": 1, "9": 9} {
		if got, err := realNetIndex(v); err != nil || got != want {
			t.Errorf("realNetIndex(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"10", "-1", "a", " 1"} {
		if _, err := realNetIndex(v); err == nil || !strings.Contains(err.Error(), RealNetEnv+"=") || !strings.Contains(err.Error(), "0–9") {
			t.Errorf("realNetIndex(%q): %v; want an error naming %s and 0–9", v, err, RealNetEnv)
		}
	}
}
