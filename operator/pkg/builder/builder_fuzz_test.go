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

package builder_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/dryrun"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/operator/pkg/testing/apivalidation"
)

// FuzzBuilders decodes a TrainingJob manifest (the seeds are the samples and fixtures of every
// framework), changes fields of it the CRD's schema names, and keeps what the API server would
// store: the CRD's schema, defaults and CEL rules, through k8s.io/apiextensions-apiserver. For such a
// job no builder panics, and every field of a child that the API server's own validation
// (k8s.io/kubernetes) refuses is one the children webhook (dryrun.Explain) names a TrainingJob
// field for, so that kubectl apply refuses the job and says what to change.
func FuzzBuilders(f *testing.F) {
	jobs, err := apivalidation.TrainingJobs()
	if err != nil {
		f.Fatal(err)
	}
	podGroups, err := apivalidation.PodGroups()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, manifest, changes []byte) {
		obj := map[string]any{}
		if err := utiljson.Unmarshal(manifest, &obj); err != nil {
			// Not JSON: the changes apply to the smallest job instead.
			obj = map[string]any{"metadata": map[string]any{"name": "llm"},
				"spec": map[string]any{"model": "m", "dataset": "d", "numWorkers": int64(2)}}
		}
		in := utiltesting.NewFuzzBytes(changes)
		for range in.Intn(8) {
			change(in, obj, jobs.Schema())
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetNamespace("ns")
		stored, errs := jobs.Create(u)
		if len(errs) > 0 {
			return
		}
		job := &convoy.TrainingJob{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(stored.Object, job, true); err != nil {
			t.Fatalf("the API server stores a TrainingJob the operator cannot read: %v", err)
		}
		job.UID = "00000000-0000-0000-0000-000000000001"
		if errs := builder.ValidateHyperparameters(job); len(errs) > 0 {
			return // the webhook refuses it, naming the field
		}
		p, err := mlframework.For(job.Spec.Framework)
		if err != nil {
			t.Fatalf("framework %q of a valid job: %v", job.Spec.Framework, err)
		}
		var secret *corev1.Secret
		if p.NeedsSSHKeys() {
			// Named as the API server names it; the operator records the name for the pods.
			priv, pub := sshKeys(t)
			secret = builder.SSHSecret(job, priv, pub)
			secret.Name = names.SimpleNameGenerator.GenerateName(secret.GenerateName)
			job.Status.SSHSecretName = secret.Name
		}
		opts := builder.Options{ProgressURL: "https://convoy-operator.convoy-system.svc:9443", ProgressCA: []byte("ca")}
		pods := builder.Pods(job, p, opts)
		if got, want := builder.MeetsPodSecurity(job, p, opts), builder.PodsMeet(pods); got != want {
			t.Errorf("status.podSecurity would say %s, but the pods meet %s; spec:\n%s", got, want, specJSON(job))
		}
		children := []client.Object{builder.PodGroup(job, pods, opts), builder.HeadlessService(job), builder.ConfigMap(job, p, opts)}
		for _, pod := range pods {
			children = append(children, pod)
		}
		if svc := builder.MetricsService(job); svc != nil {
			children = append(children, svc)
		}
		if pvc := builder.CheckpointClaim(job); pvc != nil {
			children = append(children, pvc)
		}
		if secret != nil {
			children = append(children, secret)
		}
		for _, child := range children {
			var errs field.ErrorList
			switch c := child.(type) {
			case *corev1.Pod:
				errs = apivalidation.Pod(c)
			case *corev1.Service:
				errs = apivalidation.Service(c)
			case *corev1.ConfigMap:
				errs = apivalidation.ConfigMap(c)
			case *corev1.Secret:
				errs = apivalidation.Secret(c)
			case *corev1.PersistentVolumeClaim:
				errs = apivalidation.PersistentVolumeClaim(c)
			case *schedv1alpha1.PodGroup:
				_, errs = podGroups.Create(c)
			}
			if len(errs) == 0 {
				continue
			}
			// What the webhook gets back from the dry run: the API server's Invalid status.
			causes := apierrors.NewInvalid(child.GetObjectKind().GroupVersionKind().GroupKind(), child.GetName(), errs).Status().Details.Causes
			for i, e := range dryrun.Explain(job, child, causes) {
				if e.Field == "spec" {
					t.Errorf("%T %s: the API server refuses %s (%s), and the webhook names no TrainingJob field for it; spec:\n%s",
						child, child.GetName(), causes[i].Field, causes[i].Message, specJSON(job))
				}
			}
		}
	})
}

var keys struct{ priv, pub []byte }

// sshKeys is one key pair for every run: generating one costs more than the rest of a run.
func sshKeys(t *testing.T) ([]byte, []byte) {
	if keys.priv == nil {
		var err error
		if keys.priv, keys.pub, err = builder.NewSSHKeyPair(); err != nil {
			t.Fatal(err)
		}
	}
	return keys.priv, keys.pub
}

func specJSON(job *convoy.TrainingJob) string {
	data, _ := json.MarshalIndent(struct {
		Name string                 `json:"name"`
		Spec convoy.TrainingJobSpec `json:"spec"`
	}{job.Name, job.Spec}, "", "  ")
	return string(data)
}

// change sets one field of obj, metadata.name or a field of spec at any depth, to a value of the
// schema's type: the bounds, names that are almost valid, long and odd strings.
func change(in *utiltesting.FuzzBytes, obj map[string]any, s *structuralschema.Structural) {
	if in.Intn(8) == 0 {
		meta, _ := obj["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			obj["metadata"] = meta
		}
		meta["name"] = fuzzString(in)
		return
	}
	spec := s.Properties["spec"]
	obj["spec"] = value(in, obj["spec"], &spec, 1)
}

// value returns cur with one change somewhere below it, or a new value, of schema s.
func value(in *utiltesting.FuzzBytes, cur any, s *structuralschema.Structural, depth int) any {
	if s.XIntOrString {
		if in.Bool() {
			return fuzzInt(in, s)
		}
		return utiltesting.Pick(in, "1", "500m", "1Gi", "0", "-1", "1e3", "0.5", "80%", "http", fuzzString(in))
	}
	switch s.Type {
	case "object":
		m, _ := cur.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		if len(s.Properties) > 0 {
			names := slices.Sorted(maps.Keys(s.Properties))
			name := utiltesting.Pick(in, names...)
			if in.Intn(8) == 0 || depth > 12 {
				delete(m, name)
				return m
			}
			prop := s.Properties[name]
			m[name] = value(in, m[name], &prop, depth+1)
			return m
		}
		if ap := s.AdditionalProperties; ap != nil && ap.Structural != nil {
			key := fuzzString(in)
			m[key] = value(in, m[key], ap.Structural, depth+1)
			return m
		}
		if s.XPreserveUnknownFields || (s.AdditionalProperties != nil && s.AdditionalProperties.Bool) {
			m[fuzzString(in)] = fuzzString(in)
		}
		return m
	case "array":
		list, _ := cur.([]any)
		if s.Items == nil || depth > 12 {
			return list
		}
		switch {
		case len(list) > 0 && in.Bool():
			i := in.Intn(len(list))
			list[i] = value(in, list[i], s.Items, depth+1)
		case len(list) > 0 && in.Intn(4) == 0:
			list = list[:len(list)-1]
		default:
			list = append(list, value(in, nil, s.Items, depth+1))
		}
		return list
	case "string":
		if v := s.ValueValidation; v != nil && len(v.Enum) > 0 && in.Intn(8) != 0 {
			return v.Enum[in.Intn(len(v.Enum))].Object
		}
		return fuzzString(in)
	case "integer":
		return fuzzInt(in, s)
	case "number":
		return utiltesting.Pick(in, 0, 1e-9, 0.5, 1, -1, 1e300, math.SmallestNonzeroFloat64, float64(fuzzInt(in, s)))
	case "boolean":
		return in.Bool()
	}
	return cur
}

// fuzzInt is a bound of s, one past it, or another number that breaks something often.
func fuzzInt(in *utiltesting.FuzzBytes, s *structuralschema.Structural) int64 {
	var picks []int64
	if v := s.ValueValidation; v != nil {
		if v.Minimum != nil {
			picks = append(picks, int64(*v.Minimum), int64(*v.Minimum)-1, int64(*v.Minimum)+1)
		}
		if v.Maximum != nil {
			picks = append(picks, int64(*v.Maximum), int64(*v.Maximum)+1, int64(*v.Maximum)-1)
		}
	}
	picks = append(picks, 0, 1, 2, -1, 22, 1023, 1024, 29500, 65535, 65536, math.MaxInt32, math.MinInt32, math.MaxInt32+1, int64(in.Int32()))
	return utiltesting.Pick(in, picks...)
}

// fuzzString is a name or value that is valid somewhere and not elsewhere, or raw fuzz bytes.
func fuzzString(in *utiltesting.FuzzBytes) string {
	switch in.Intn(4) {
	case 0:
		return string(in.Bytes(80))
	case 1:
		return strings.Repeat(utiltesting.Pick(in, "a", "A", "-", "é", "1", "a.b", "a/b"), utiltesting.Pick(in, 1, 15, 47, 48, 49, 63, 64, 253, 254))
	}
	return utiltesting.Pick(in, "", "a", "llm", "LLM", "a-b", "a.b", "a_b", "-a", "a-", "1a", "a b", "/", "/checkpoints", "/a/../b",
		"s3://bucket/path", "..", ".", "nvidia.com/gpu", "example.com/dev", "kubernetes.io/hostname", "team-a", "cpu", "memory",
		"$(HOME)", "key=value", "MY_VAR", "1VAR", "a:b", "Exists", "Equal", "In", "NoSchedule", "TCP", "ghcr.io/org/img:v1",
		fmt.Sprint(in.Int32()))
}
