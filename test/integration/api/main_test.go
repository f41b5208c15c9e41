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
