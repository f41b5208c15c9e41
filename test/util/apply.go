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

package util

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/convoy-dev/convoy/test/framework"
)

// ApplyYAML server-side applies every object of a multi-document YAML stream as fieldOwner,
// taking over fields another manager holds, as kubectl apply --server-side --force-conflicts would.
func ApplyYAML(ctx context.Context, c client.Client, data []byte, fieldOwner string) error {
	return framework.EachYAMLDoc(data, func(doc []byte) error {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return err
		}
		if len(u.Object) == 0 {
			return nil
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		return nil
	})
}

// Unstructured is obj as an unstructured object, for a server-side apply through
// client.ApplyConfigurationFromUnstructured (c.Apply, c.Status().Apply). It fails the test if obj
// does not convert.
func Unstructured(t testing.TB, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("converting %T: %v", obj, err)
	}
	return &unstructured.Unstructured{Object: u}
}

// ApplyKustomization renders the kustomize base dir with the cluster's bin/kubectl and
// server-side applies every object as fieldOwner: a base from deploy/ installed as a user would.
func ApplyKustomization(ctx context.Context, c *framework.Cluster, dir, fieldOwner string) error {
	out, err := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), "kustomize", dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("kubectl kustomize %s: %w: %s", dir, err, ee.Stderr)
		}
		return err
	}
	return ApplyYAML(ctx, c.Client, out, fieldOwner)
}
