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

package adoption

import (
	"strings"
	"testing"
)

func TestBlocks(t *testing.T) {
	md := "# Install\n\n<!-- test: a -->\n```sh\nREGISTRY=x\nkubectl apply -k deploy/crd\n```\n\n```sh\nnot marked\n```\n"
	got, err := Blocks([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["a"] != "REGISTRY=x\nkubectl apply -k deploy/crd\n" {
		t.Errorf("Blocks = %q, want only block a with its two lines", got)
	}
	set, err := SetVariable(got["a"], "REGISTRY", "10.0.0.1:5000/ml")
	if err != nil || !strings.HasPrefix(set, "REGISTRY=10.0.0.1:5000/ml\nkubectl") {
		t.Errorf("SetVariable = %q, %v", set, err)
	}
	if _, err := SetVariable(got["a"], "NAMESPACE", "x"); err == nil {
		t.Error("SetVariable of a variable the block does not set: no error")
	}
	for name, bad := range map[string]string{
		"no fence":  "<!-- test: a -->\ntext\n",
		"unclosed":  "<!-- test: a -->\n```sh\nls\n",
		"twice":     "<!-- test: a -->\n```sh\nls\n```\n<!-- test: a -->\n```sh\nls\n```\n",
		"no name":   "<!-- test: -->\n```sh\nls\n```\n",
		"no closer": "<!-- test: a\n```sh\nls\n```\n",
	} {
		if _, err := Blocks([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
