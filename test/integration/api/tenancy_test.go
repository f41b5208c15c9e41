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

package api

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

// teamNamespace creates namespace name labelled convoy.dev/team, as a platform team makes a team's.
func teamNamespace(t *testing.T, c *framework.Cluster, name string) string {
	t.Helper()
	ns := namespace(t, c, name)
	if err := c.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"convoy.dev/team": name}}},
		client.Merge); err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestTenantUsesOnlyGrantedPriorityClasses: as a team member bound to convoy-tenant in its
// namespace, a TrainingJob or a sweep at a class the namespace was not granted is refused with a
// message that names the class and the command that grants it; the default grant (low, normal) is
// accepted; a job cannot be moved to an ungranted class later; the tenant cannot grant itself a
// class; once the platform team grants it, the class is accepted. A team member with the built-in
// edit role cannot go around the grant with a raw pod.
func TestTenantUsesOnlyGrantedPriorityClasses(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	util.InstallTenancy(t, c)
	ns := teamNamespace(t, c, "team-a")
	tenant := util.ServiceAccountClient(t, c, ns, "alice", "convoy-tenant")

	job := func(name, class string) *v1alpha1.TrainingJob {
		return utiltesting.MakeTrainingJob(name, ns).Scheduling(v1alpha1.SchedulingSpec{PriorityClassName: class}).Obj()
	}
	err := tenant.Create(ctx, job("urgent", "high"))
	util.WantPriorityRefused(t, "a job at class high", err, "high", ns, "low,normal,high")
	u := job("urgent-queue-label", "")
	u.Labels = map[string]string{"kueue.x-k8s.io/priority-class": "high"}
	util.WantPriorityRefused(t, "a job whose Kueue label names class high", tenant.Create(ctx, u), "high", ns, "low,normal,high")

	regular := job("regular", "normal")
	if err := tenant.Create(ctx, regular); err != nil {
		t.Fatalf("a job at class normal, granted by default, was refused: %v", err)
	}
	regular.Spec.Scheduling.PriorityClassName = "high"
	util.WantPriorityRefused(t, "moving a job from normal to high", tenant.Update(ctx, regular), "high", ns, "low,normal,high")
	// The job's other fields still change.
	if err := tenant.Get(ctx, client.ObjectKeyFromObject(regular), regular); err != nil {
		t.Fatal(err)
	}
	regular.Spec.Suspend = ptr.To(true)
	if err := tenant.Update(ctx, regular); err != nil {
		t.Errorf("suspending a job at a granted class was refused: %v", err)
	}

	sweep := &unstructured.Unstructured{Object: sweepExample(t, ns, "lr")}
	if err := unstructured.SetNestedField(sweep.Object, "high", "spec", "trialTemplate", "spec", "scheduling", "priorityClassName"); err != nil {
		t.Fatal(err)
	}
	util.WantPriorityRefused(t, "a sweep whose trials run at class high", tenant.Create(ctx, sweep), "high", ns, "low,normal,high")

	// A member with the built-in edit role creates pods: the grant holds for them too, whichever
	// scheduler they name.
	if err := c.Client.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 10000}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	editor := util.ServiceAccountClient(t, c, ns, "bob", "edit")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "raw", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName: "convoy-scheduler", PriorityClassName: "high",
			ServiceAccountName: "bob", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "trainer", Image: "trainer:1"}},
		},
	}
	util.WantPriorityRefused(t, "a raw pod at class high", editor.Create(ctx, pod, client.DryRunAll), "high", ns, "low,normal,high")

	// The tenant can neither grant itself the class nor change what it is allowed.
	nsObj := &corev1.Namespace{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Annotations = map[string]string{"convoy.dev/priority-classes": "low,normal,high"}
	if err := tenant.Update(ctx, nsObj); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant annotating its namespace with a grant: got %v, want Forbidden", err)
	}
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Verb: "update", Resource: "namespaces", Name: ns},
		{Verb: "patch", Group: "convoy.dev", Resource: "trainingjobs", Subresource: "status"},
		{Verb: "create", Group: "kueue.x-k8s.io", Resource: "workloads"},
		{Verb: "update", Group: "kueue.x-k8s.io", Resource: "localqueues"},
		{Verb: "update", Resource: "resourcequotas"},
		{Verb: "create", Resource: "pods"},
	} {
		ra.Namespace = ns
		if allowed(t, tenant, ra) {
			t.Errorf("the tenant may %s %s/%s %s, want not", ra.Verb, ra.Group, ra.Resource, ra.Subresource)
		}
	}
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Verb: "delete", Group: "convoy.dev", Resource: "trainingsweeps"},
		{Verb: "get", Group: "convoy.dev", Resource: "trainingjobs", Subresource: "status"},
		{Verb: "list", Group: "kueue.x-k8s.io", Resource: "workloads"},
		{Verb: "watch", Group: "kueue.x-k8s.io", Resource: "localqueues"},
		{Verb: "get", Resource: "pods", Subresource: "log"},
		{Verb: "list", Resource: "events"},
		{Verb: "create", Resource: "configmaps"},
	} {
		ra.Namespace = ns
		if !allowed(t, tenant, ra) {
			t.Errorf("the tenant may not %s %s/%s %s, want it may", ra.Verb, ra.Group, ra.Resource, ra.Subresource)
		}
	}

	// The platform team grants high with the command the refusal gave.
	util.MustKubectl(t, c, "annotate", "namespace", ns, "convoy.dev/priority-classes=low,normal,high", "--overwrite")
	util.EventuallyErr(t, 20*time.Millisecond, 30*time.Second, "a job at class high accepted once granted", func() (bool, error) {
		err := tenant.Create(ctx, job("urgent", "high"))
		return err == nil, err
	})
	if err := editor.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Errorf("a raw pod at class high, once granted, was refused: %v", err)
	}
}

// TestGPUPodsGoThroughTheQueue: in a team's namespace, a member bound to the built-in edit role
// cannot run GPUs with a pod of its own, asking nvidia.com/gpu or claiming DRA devices (the refusal
// names the container or the claims and says to run a TrainingJob); a pod without GPUs is created,
// and outside team namespaces a GPU pod is too.
func TestGPUPodsGoThroughTheQueue(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	util.InstallTenancy(t, c)
	ns := teamNamespace(t, c, "team-gpu")
	editor := util.ServiceAccountClient(t, c, ns, "dave", "edit")
	pod := func(ns, name string, gpus string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "sidecar", Image: "busybox:1"}, {Name: "trainer", Image: "trainer:1"}}},
		}
		if gpus != "" {
			p.Spec.Containers[1].Resources.Limits = corev1.ResourceList{v1alpha1.ResourceGPU: resource.MustParse(gpus)}
		}
		return p
	}
	util.EventuallyErr(t, 20*time.Millisecond, 30*time.Second, "the policy to refuse a GPU pod", func() (bool, error) {
		err := editor.Create(ctx, pod(ns, "probe", "1"), client.DryRunAll)
		return apierrors.IsForbidden(err), err
	})
	err := editor.Create(ctx, pod(ns, "gpus", "8"), client.DryRunAll)
	if want := "container trainer asks nvidia.com/gpu, which in namespace " + ns + " is used through its queue: run the work as a TrainingJob"; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("a pod of 8 GPUs by a member with edit: got %v, want a refusal saying %q", err, want)
	}
	claiming := pod(ns, "claims", "")
	claiming.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpus")}}
	err = editor.Create(ctx, claiming, client.DryRunAll)
	if want := "pod claims DRA devices (spec.resourceClaims), which in namespace " + ns + " are used through its queue"; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("a pod claiming DRA devices by a member with edit: got %v, want a refusal saying %q", err, want)
	}
	if err := editor.Create(ctx, pod(ns, "cpu-only", ""), client.DryRunAll); err != nil {
		t.Errorf("a pod without GPUs was refused: %v", err)
	}
	other := namespace(t, c, "not-a-team")
	if err := c.Client.Create(ctx, pod(other, "gpus", "8"), client.DryRunAll); err != nil {
		t.Errorf("a GPU pod outside team namespaces was refused: %v", err)
	}
}

// TestTenantUsesOnlyGrantedServiceAccounts: in a team's namespace, a TrainingJob or a sweep that
// runs its pods as a ServiceAccount the namespace was not granted is refused with a message that
// names it and the command that grants it; a job naming none is accepted; once the platform team
// grants the ServiceAccount, the job is accepted and keeps it.
func TestTenantUsesOnlyGrantedServiceAccounts(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	util.InstallTenancy(t, c)
	ns := teamNamespace(t, c, "team-sa")
	tenant := util.ServiceAccountClient(t, c, ns, "carol", "convoy-tenant")
	job := func(name, sa string) *v1alpha1.TrainingJob {
		j := utiltesting.MakeTrainingJob(name, ns).Obj()
		j.Spec.ServiceAccountName = sa
		return j
	}
	refusal := func(what string, err error, sa, grant string) {
		t.Helper()
		for _, want := range []string{
			"spec.serviceAccountName " + sa + " is not granted to namespace " + ns + " (it may use " + "none)",
			"kubectl annotate namespace " + ns + " convoy.dev/service-accounts=" + grant + " --overwrite",
		} {
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: got %v, want a refusal that says %q", what, err, want)
			}
		}
	}
	util.EventuallyErr(t, 20*time.Millisecond, 30*time.Second, "the policy to refuse a job as ServiceAccount ops", func() (bool, error) {
		err := tenant.Create(ctx, job("probe", "ops"), client.DryRunAll)
		return apierrors.IsForbidden(err), err
	})
	refusal("a job as ServiceAccount ops", tenant.Create(ctx, job("as-ops", "ops")), "ops", "ops")
	sweep := &unstructured.Unstructured{Object: sweepExample(t, ns, "lr-as-ops")}
	if err := unstructured.SetNestedField(sweep.Object, "ops", "spec", "trialTemplate", "spec", "serviceAccountName"); err != nil {
		t.Fatal(err)
	}
	refusal("a sweep whose trials run as ops", tenant.Create(ctx, sweep), "ops", "ops")
	plain := job("plain", "")
	if err := tenant.Create(ctx, plain); err != nil {
		t.Fatalf("a job naming no ServiceAccount was refused: %v", err)
	}
	plain.Spec.ServiceAccountName = "ops"
	refusal("moving a job to ServiceAccount ops", tenant.Update(ctx, plain), "ops", "ops")

	util.MustKubectl(t, c, "annotate", "namespace", ns, "convoy.dev/service-accounts=trainer-identity", "--overwrite")
	util.EventuallyErr(t, 20*time.Millisecond, 30*time.Second, "a job as the granted ServiceAccount accepted", func() (bool, error) {
		err := tenant.Create(ctx, job("as-trainer", "trainer-identity"))
		return err == nil, err
	})
	err := tenant.Create(ctx, job("as-ops-2", "ops"))
	if err == nil || !strings.Contains(err.Error(), "(it may use trainer-identity)") || !strings.Contains(err.Error(), "convoy.dev/service-accounts=trainer-identity,ops") {
		t.Errorf("a job as ops beside the grant: got %v, want a refusal naming trainer-identity and the grant trainer-identity,ops", err)
	}
}

// allowed asks the API server whether cl's user may do ra.
func allowed(t *testing.T, cl client.Client, ra authorizationv1.ResourceAttributes) bool {
	t.Helper()
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}
	if err := cl.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}
