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

// Package api tests the TrainingJob and GPUNode CRDs as a user meets them: applied to a real
// kube-apiserver, defaulted and validated by the schema and its CEL rules, and printed by kubectl.
package api

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{AddToScheme: []func(*runtime.Scheme) error{v1alpha1.AddToScheme}})
}

// cluster returns the shared control plane with Convoy's CRDs installed.
func cluster(t *testing.T) *framework.Cluster {
	t.Helper()
	c := framework.Shared(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(context.Background(), filepath.Join(root, "deploy", "crd", "bases")); err != nil {
		t.Fatalf("installing the CRDs: %v", err)
	}
	return c
}
