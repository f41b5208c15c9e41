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

package operator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// TestStoredStringMixedPrecisionStillRuns: a TrainingJob stored while mixedPrecision was a
// string ("bf16") is read by the operator after the CRD makes it a boolean, runs with the same
// MIXED_PRECISION as before, gets its status written to Completed, and its other fields can still
// be changed: the API server lets the unchanged old value through (CRD validation ratcheting).
func TestStoredStringMixedPrecisionStillRuns(t *testing.T) {
	e := newEnv(t)
	current := e.trainingJobCRD(t.Context())
	restored := false
	restore := func(ctx context.Context) {
		if restored {
			return
		}
		restored = true
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := e.trainingJobCRD(ctx)
			crd.Object["spec"] = current.Object["spec"]
			return e.k.Update(ctx, crd)
		}); err != nil {
			t.Fatalf("restoring the TrainingJob CRD: %v", err)
		}
		// The current schema is in force once it accepts a boolean.
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			return e.k.Create(ctx, trainingJobWithMixedPrecision(e.ns, "probe", true), client.DryRunAll) == nil, nil
		})
		if err != nil {
			t.Fatalf("waiting for the restored TrainingJob CRD to accept mixedPrecision true: %v", err)
		}
	}
	t.Cleanup(func() { restore(context.Background()) })

	// The CRD as it was when mixedPrecision was a string: no precision field, no rule for it.
	legacy := e.trainingJobCRD(t.Context())
	hp := hyperparametersSchema(t, legacy)
	props := hp["properties"].(map[string]any)
	props["mixedPrecision"] = map[string]any{"type": "string", "enum": []any{"no", "fp16", "bf16", "fp8"}}
	delete(props, "precision")
	delete(hp, "x-kubernetes-validations")
	if err := e.k.Update(t.Context(), legacy); err != nil {
		t.Fatal(err)
	}
	e.eventually("a job stored with mixedPrecision bf16 under the old schema", func() (bool, string) {
		err := e.k.Create(t.Context(), trainingJobWithMixedPrecision(e.ns, "legacy", "bf16"))
		return err == nil, fmt.Sprint(err)
	})
	restore(t.Context())

	e.startOperator()
	e.waitPods("legacy", 1, 0)
	if job := e.job("legacy"); job.Spec.Hyperparameters.MixedPrecisionMode() != "bf16" {
		t.Errorf("the stored job reads as hyperparameters %+v, want mixed precision bf16", job.Spec.Hyperparameters)
	}
	if cm := e.configMap("legacy-config"); cm.Data["MIXED_PRECISION"] != "bf16" {
		t.Errorf("MIXED_PRECISION = %q, want bf16 as before", cm.Data["MIXED_PRECISION"])
	}
	e.runToCompletion("legacy", 1)

	e.patchSpec("legacy", `{"spec": {"ttlSecondsAfterFinished": 3600}}`)
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(convoy.GroupVersion.WithKind("TrainingJob"))
	if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "legacy"}, stored); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedFieldNoCopy(stored.Object, "spec", "hyperparameters", "mixedPrecision"); got != "bf16" {
		t.Errorf("stored mixedPrecision = %#v, want the unchanged \"bf16\"", got)
	}
}

func (e *env) trainingJobCRD(ctx context.Context) *unstructured.Unstructured {
	e.t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := e.k.Get(ctx, client.ObjectKey{Name: "trainingjobs.convoy.dev"}, crd); err != nil {
		e.t.Fatal(err)
	}
	return crd
}

// hyperparametersSchema is the CRD's schema of spec.hyperparameters, to edit in place.
func hyperparametersSchema(t *testing.T, crd *unstructured.Unstructured) map[string]any {
	t.Helper()
	versions, _, _ := unstructured.NestedFieldNoCopy(crd.Object, "spec", "versions")
	list, _ := versions.([]any)
	if len(list) != 1 {
		t.Fatalf("the CRD has versions %v, want 1", versions)
	}
	hp, _, _ := unstructured.NestedFieldNoCopy(list[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "hyperparameters")
	m, ok := hp.(map[string]any)
	if !ok {
		t.Fatalf("no spec.hyperparameters schema in the CRD")
	}
	return m
}

func trainingJobWithMixedPrecision(ns, name string, mixedPrecision any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"model": "resnet18", "dataset": "mnist", "numWorkers": int64(1),
			"hyperparameters": map[string]any{"epochs": int64(2), "mixedPrecision": mixedPrecision},
		},
	}}
	u.SetGroupVersionKind(convoy.GroupVersion.WithKind("TrainingJob"))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
