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

package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestEnsureChildrenRefusesSquatters: an object with the name of one of the job's children that the
// job does not control is refused, naming its kind and name, whether the operator's cache (which
// holds only objects labelled with a job's name) shows it or not; it is left as it was. The job's
// own child is used even before the cache shows it.
func TestEnsureChildrenRefusesSquatters(t *testing.T) {
	job := utiltesting.MakeTrainingJob("train", "ns").Obj()
	job.UID = "job-uid"
	other := utiltesting.MakeTrainingJob("train", "ns").Obj()
	other.UID = "earlier-job-uid"
	meta := func(name string, labelled bool, owner *convoy.TrainingJob) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Namespace: "ns", Name: name}
		if labelled {
			m.Labels = builder.JobLabels(job)
		}
		if owner != nil {
			m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, convoy.GroupVersion.WithKind("TrainingJob"))}
		}
		return m
	}
	cases := map[string]struct {
		have client.Object
		// conflict is the object ensureChildren names, "" for none.
		conflict string
	}{
		"no object of the name: created": {},
		"an unlabelled ConfigMap, outside the cache": {
			have:     &corev1.ConfigMap{ObjectMeta: meta("train-config", false, nil), Data: map[string]string{"LEARNING_RATE": "999"}},
			conflict: "ConfigMap ns/train-config",
		},
		"a labelled ConfigMap, in the cache": {
			have:     &corev1.ConfigMap{ObjectMeta: meta("train-config", true, nil), Data: map[string]string{"LEARNING_RATE": "999"}},
			conflict: "ConfigMap ns/train-config",
		},
		"the ConfigMap of an earlier job of the same name, outside the cache": {
			have:     &corev1.ConfigMap{ObjectMeta: meta("train-config", false, other)},
			conflict: "ConfigMap ns/train-config",
		},
		"an unlabelled Service": {
			have:     &corev1.Service{ObjectMeta: meta("train", false, nil)},
			conflict: "Service ns/train",
		},
		"an unlabelled NetworkPolicy": {
			have:     &networkingv1.NetworkPolicy{ObjectMeta: meta("train", false, nil)},
			conflict: "NetworkPolicy ns/train",
		},
		"an unlabelled PodDisruptionBudget": {
			have:     &policyv1.PodDisruptionBudget{ObjectMeta: meta("train", false, nil)},
			conflict: "PodDisruptionBudget ns/train",
		},
		"an unlabelled PodGroup": {
			have:     &schedv1alpha1.PodGroup{ObjectMeta: meta("train", false, nil), Spec: schedv1alpha1.PodGroupSpec{MinMember: 100}},
			conflict: "PodGroup ns/train",
		},
		"the job's own ConfigMap, not in the cache yet": {
			have: &corev1.ConfigMap{ObjectMeta: meta("train-config", false, job)},
		},
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, convoy.AddToScheme, schedv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	plugin, err := mlframework.For(job.Spec.Framework)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme)
			if tc.have != nil {
				b = b.WithObjects(tc.have.DeepCopyObject().(client.Object))
			}
			server := b.Build()
			// The operator's cache: objects labelled with a job's name, but for the one a case
			// says the cache has not caught up with.
			cached := interceptor.NewClient(server.(client.WithWatch), interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if err := c.Get(ctx, key, obj, opts...); err != nil {
						return err
					}
					if _, ok := obj.GetLabels()[convoy.LabelJobName]; !ok || metav1.IsControlledBy(obj, job) {
						return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
					}
					return nil
				},
			})
			r := &Reconciler{Client: cached, APIReader: server, Options: builder.Options{DisruptionBudget: true, JobNetworkPolicy: true}}
			err := r.ensureChildren(t.Context(), job, plugin, false)
			got := ""
			if c := (*childConflict)(nil); errors.As(err, &c) {
				got = c.kind + " " + c.namespace + "/" + c.name
			} else if err != nil {
				t.Fatalf("ensureChildren: %v", err)
			}
			if diff := cmp.Diff(tc.conflict, got); diff != "" {
				t.Errorf("conflict (-want,+got):\n%s", diff)
			}
			if tc.have == nil {
				return
			}
			after := tc.have.DeepCopyObject().(client.Object)
			if err := server.Get(t.Context(), client.ObjectKeyFromObject(tc.have), after); err != nil {
				t.Fatal(err)
			}
			if tc.conflict != "" && after.GetResourceVersion() != "999" {
				t.Errorf("the object in the way was written: resourceVersion %s", after.GetResourceVersion())
			}
		})
	}
}
