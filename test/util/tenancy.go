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
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
)

// TenancyPolicies are the admission policies of deploy/tenancy.
var TenancyPolicies = []string{"convoy-priority-trainingjobs", "convoy-priority-trainingsweeps", "convoy-priority-pods", "convoy-gang-pods", "convoy-service-accounts", "convoy-gpu-pods", "convoy-elastic-size"}

// InstallTenancy applies deploy/tenancy as a platform team would and waits until its policies
// type-checked, without warnings, and refuse a job at class high in namespace default, which is
// granted none. Cleanup takes the policies away and waits until that job is accepted again: the
// other tests of a shared cluster meet no policy.
func InstallTenancy(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyKustomization(ctx, c, filepath.Join(root, "deploy", "tenancy"), "tenancy-test"); err != nil {
		t.Fatalf("applying deploy/tenancy: %v", err)
	}
	t.Cleanup(func() {
		for _, name := range TenancyPolicies {
			_ = c.Client.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})
			_ = c.Client.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		// The test's context is done by now.
		var err error
		if wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err = c.Client.Create(ctx, probeJob(), client.DryRunAll)
			return err == nil, nil
		}) != nil {
			t.Errorf("the tenancy policies still apply after they were deleted: %v", err)
		}
	})
	for _, name := range TenancyPolicies {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		EventuallyErr(t, 20*time.Millisecond, 10*time.Second, "policy "+name+" type-checked", func() (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKey{Name: name}, p)
			return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.TypeChecking != nil, err
		})
		if w := p.Status.TypeChecking.ExpressionWarnings; len(w) != 0 {
			t.Errorf("policy %s: type-checking warnings %+v", name, w)
		}
	}
	// Admission policies take effect a moment after they are created.
	EventuallyErr(t, 20*time.Millisecond, 30*time.Second, "the policy to refuse a job at class high", func() (bool, error) {
		err := c.Client.Create(ctx, probeJob(), client.DryRunAll)
		return apierrors.IsForbidden(err), err
	})
}

// probeJob is the job at class high that InstallTenancy creates with dry run.
func probeJob() *v1alpha1.TrainingJob {
	return utiltesting.MakeTrainingJob("tenancy-probe", metav1.NamespaceDefault).Scheduling(v1alpha1.SchedulingSpec{PriorityClassName: "high"}).Obj()
}

// ServiceAccountClient creates ServiceAccount ns/name, binds the ClusterRole role to it in ns and
// returns a client that acts as it, with a token from the TokenRequest API, once the API server's
// authorizer grants it every rule of role (its RBAC cache sees a new binding a moment later).
func ServiceAccountClient(t *testing.T, c *framework.Cluster, ns, name, role string) client.Client {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		},
	} {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cr := &rbacv1.ClusterRole{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: role}, cr); err != nil {
		t.Fatal(err)
	}
	for _, rule := range cr.Rules {
		if len(rule.Verbs) == 0 || len(rule.Resources) == 0 || len(rule.APIGroups) == 0 {
			continue
		}
		resource, subresource, _ := strings.Cut(rule.Resources[0], "/")
		WaitGranted(t, c, ns, name, authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: resource, Subresource: subresource}})
	}
	cfg, err := c.ServiceAccountConfig(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// WaitGranted waits until the API server's authorizer grants ServiceAccount ns/name the access
// spec asks (its user and groups are filled in): RBAC's cache sees a new binding a moment after it
// is created, and a component that asks the API server (a delegated authorizer) may cache the
// refusal.
func WaitGranted(t testing.TB, c *framework.Cluster, ns, name string, spec authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	spec.User = serviceaccount.MakeUsername(ns, name)
	spec.Groups = append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)
	EventuallyErr(t, 20*time.Millisecond, 30*time.Second, fmt.Sprintf("%s granted %+v%+v", spec.User, ptr.Deref(spec.ResourceAttributes, authorizationv1.ResourceAttributes{}),
		ptr.Deref(spec.NonResourceAttributes, authorizationv1.NonResourceAttributes{})), func() (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: spec}
		err := c.Client.Create(t.Context(), sar)
		return err == nil && sar.Status.Allowed, err
	})
}

// WantPriorityRefused fails the test unless err is a refusal whose message names the class, the
// namespace and the command that grants the class (grant: the classes the command lists).
func WantPriorityRefused(t testing.TB, what string, err error, class, ns, grant string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s was accepted, want it refused", what)
		return
	}
	for _, want := range []string{
		"priority class " + class + " is not granted to namespace " + ns,
		"kubectl annotate namespace " + ns + " convoy.dev/priority-classes=" + grant + " --overwrite",
	} {
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a refusal that says %q", what, err, want)
		}
	}
}
