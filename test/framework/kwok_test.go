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
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/convoy-dev/convoy/test/framework"
)

// TestKwokArgsReplacesStagesByName: the config keeps the default node and pod stages, puts a stage of
// the same name in place of the default one and adds a stage of a new name.
func TestKwokArgsReplacesStagesByName(t *testing.T) {
	extra := strings.Replace(framework.PodDeleteKeepingFinalizers, "name: pod-delete", "name: convoy-extra", 1)
	args, err := framework.KwokArgs(t.Context(), framework.PodDeleteKeepingFinalizers, extra)
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != 1 || !strings.HasPrefix(args[0], "--config=") {
		t.Fatalf("KwokArgs() = %q, want one --config", args)
	}
	data, err := os.ReadFile(strings.TrimPrefix(args[0], "--config="))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	deleteKeepsFinalizers := false
	if err := framework.EachYAMLDoc(data, func(doc []byte) error {
		var stage struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &stage); err != nil {
			return err
		}
		names = append(names, stage.Metadata.Name)
		if stage.Metadata.Name == "pod-delete" {
			deleteKeepsFinalizers = strings.Contains(string(doc), "'.metadata.finalizers'")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pod-delete", "convoy-extra"}, names); diff != "" {
		t.Errorf("stages in the config (-want,+got):\n%s", diff)
	}
	if !deleteKeepsFinalizers {
		t.Errorf("the config's pod-delete stage is kwok's default, want PodDeleteKeepingFinalizers:\n%s", data)
	}
	if _, err := framework.KwokArgs(t.Context(), "kind: Stage\n"); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("KwokArgs() with a stage of no name = %v, want an error naming metadata.name", err)
	}
}
