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

package queue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// teamLabel makes a namespace a team's, as deploy/queue labels team-a and team-b: Kueue manages
// its jobs that name no queue (deploy/kueue/controller_manager_config.yaml).
const teamLabel = "convoy.dev/team"

// teamNamespace makes the test's namespace a team's, with a ClusterQueue of gpus GPUs and its
// LocalQueue "default".
func (e *env) teamNamespace(gpus int64) {
	e.t.Helper()
	e.kubectl("label", "namespace", e.ns, teamLabel+"="+e.ns)
	e.create(clusterQueue(e.ns, "", gpus, nil, nil, kueue.ClusterQueuePreemption{}))
	e.create(utiltestingapi.MakeLocalQueue("default", e.ns).ClusterQueue(e.ns).Obj())
	// Once Kueue has seen the LocalQueue, the label and the queue are in the operator's cache too.
	e.eventually("LocalQueue default to be active", func() (bool, string) {
		lq := &kueue.LocalQueue{}
		if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: "default"}, lq); err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(lq.Status.Conditions, kueue.LocalQueueActive), fmt.Sprint(lq.Status.Conditions)
	})
}

// noPodsFor checks that the job has no pod, now and for a while.
func (e *env) noPodsFor(job string, d time.Duration) {
	e.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if pods := e.pods(e.ns, job); len(pods) > 0 {
			e.t.Fatalf("job %s has pods %v while Kueue has not admitted it", job, podNames(pods))
		}
	}
}

// TestJobWithoutAQueueInATeamNamespaceRunsOnlyWithinTheTeamsQuota: in a team's namespace a job
// that names no queue is Kueue's: it waits, suspended and without pods, in the namespace's
// LocalQueue "default" until its ClusterQueue has room, then runs; without a LocalQueue "default"
// it waits all the same. In a namespace that is no
// team's, the same job runs at once, as without Kueue.
func TestJobWithoutAQueueInATeamNamespaceRunsOnlyWithinTheTeamsQuota(t *testing.T) {
	e := newEnv(t)
	e.teamNamespace(8)
	e.create(trainingJob(e.ns, "unnamed", "", "", 2, 8))

	queued := e.waitJob(e.ns, "unnamed", "waiting in the default LocalQueue with Kueue's reason", func(j *convoy.TrainingJob) bool {
		c := condition(j, convoy.ConditionQueued)
		return c != nil && strings.Contains(c.Message, "nvidia.com/gpu")
	})
	if msg := condition(queued, convoy.ConditionQueued).Message; !strings.Contains(msg, `ClusterQueue "`+e.ns+`" (LocalQueue "default")`) {
		t.Errorf("Queued condition %q does not say it waits in LocalQueue default", msg)
	}
	if !queued.IsSuspended() || queued.QueueName() != "default" {
		t.Errorf("spec.suspend %v, queue %q; want a suspended job in LocalQueue default", queued.Spec.Suspend, queued.QueueName())
	}
	e.noPodsFor("unnamed", 2*time.Second)

	e.kubectl("patch", "clusterqueue", e.ns, "--type", "json",
		"-p", `[{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": 16}]`)
	e.waitJob(e.ns, "unnamed", "admitted after the quota was raised", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && j.Status.Admission.ClusterQueue == e.ns
	})
	e.startGang(e.ns, "unnamed", 2)

	// In a team's namespace without a LocalQueue default, such a job is Kueue's all the same: it
	// waits, and never runs outside the quota.
	bare := e.ns + "-bare"
	e.createNamespace(bare)
	e.kubectl("label", "namespace", bare, teamLabel+"="+e.ns)
	e.create(trainingJob(bare, "unnamed", "", "", 2, 8))
	e.waitJob(bare, "unnamed", "Queued without a LocalQueue", func(j *convoy.TrainingJob) bool {
		c := condition(j, convoy.ConditionQueued)
		return j.IsSuspended() && c != nil && strings.Contains(c.Message, `no LocalQueue "default"`)
	})
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if pods := e.pods(bare, "unnamed"); len(pods) > 0 {
			t.Fatalf("a job without a queue in a team's namespace runs outside the quota: pods %v", podNames(pods))
		}
	}

	// Outside the teams' namespaces a job without a queue is nobody's: it runs at once.
	other := e.ns + "-free"
	e.createNamespace(other)
	e.create(trainingJob(other, "unnamed", "", "", 2, 8))
	free := e.waitJob(other, "unnamed", "admitted at once", func(j *convoy.TrainingJob) bool {
		return reasonOf(j, convoy.ConditionAdmitted) == convoy.ReasonNoQueue
	})
	e.eventually("the free job's 2 pods", func() (bool, string) {
		n := len(e.pods(other, "unnamed"))
		return n == 2, strings.Repeat("pod ", n)
	})
	if free.IsSuspended() || free.QueueName() != "" || len(e.workloads(free)) != 0 {
		t.Errorf("spec.suspend %v, queue %q, %d Workloads; want a job that Kueue leaves alone", free.Spec.Suspend, free.QueueName(), len(e.workloads(free)))
	}
}

// reasonOf is the reason of the job's condition, whatever its status; empty when it has none.
func reasonOf(job *convoy.TrainingJob, condType string) string {
	for _, c := range job.Status.Conditions {
		if c.Type == condType {
			return c.Reason
		}
	}
	return ""
}

// holdSuspension keeps Kueue from suspending the test's jobs again (an admission policy refuses
// every update that sets spec.suspend back to true), until release is called.
func (e *env) holdSuspension() (release func()) {
	e.t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-suspension-" + e.ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"convoy.dev"}, APIVersions: []string{"v1alpha1"},
						Resources: []string{"trainingjobs"}}}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!(has(object.spec.suspend) && object.spec.suspend && (!has(oldObject.spec.suspend) || !oldObject.spec.suspend))",
				Message:    "the test holds spec.suspend false"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: e.ns}}},
		},
	}
	e.create(policy)
	e.create(binding)
	release = func() {
		ctx := context.WithoutCancel(e.t.Context())
		_ = e.k.Delete(ctx, binding)
		_ = e.k.Delete(ctx, policy)
	}
	e.t.Cleanup(release)
	// The policy holds once a job can no longer be suspended.
	probe := trainingJob(e.ns, "probe", "", "", 1, 1)
	probe.Spec.Suspend = ptr.To(false)
	e.create(probe)
	e.eventually("the admission policy to hold spec.suspend", func() (bool, string) {
		err := e.k.Patch(e.t.Context(), probe.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`)))
		if err == nil {
			e.kubectl("patch", "trainingjob", "-n", e.ns, "probe", "--type=merge", "-p", `{"spec":{"suspend":false}}`)
			return false, "spec.suspend could still be set"
		}
		return strings.Contains(err.Error(), "holds spec.suspend"), err.Error()
	})
	return release
}

// TestUnsuspendingAQueuedJobStartsNoPodUntilKueueAdmitsIt: a user who sets spec.suspend to false on
// a job that waits in its queue does not start it: the operator creates no pod while the job's
// Workload is not admitted, and the job's Queued condition says so. (Kueue suspends such a job
// again at once; the test holds that back to see what the operator does meanwhile.)
func TestUnsuspendingAQueuedJobStartsNoPodUntilKueueAdmitsIt(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 8, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	e.create(trainingJob(e.ns, "big", "q", "", 2, 8))
	e.waitJob(e.ns, "big", "queued with Kueue's reason", func(j *convoy.TrainingJob) bool {
		c := condition(j, convoy.ConditionQueued)
		return c != nil && strings.Contains(c.Message, "nvidia.com/gpu")
	})
	release := e.holdSuspension()

	e.kubectl("patch", "trainingjob", "-n", e.ns, "big", "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	held := e.waitJob(e.ns, "big", "Queued: not admitted although spec.suspend is false", func(j *convoy.TrainingJob) bool {
		c := condition(j, convoy.ConditionQueued)
		return !j.IsSuspended() && c != nil && strings.Contains(c.Message, "spec.suspend is false, but Kueue has not admitted the job's Workload")
	})
	if held.Status.State != convoy.StateQueued {
		t.Errorf("state %s, want Queued", held.Status.State)
	}
	e.noPodsFor("big", 3*time.Second)

	release()
	e.waitJob(e.ns, "big", "suspended again by Kueue", func(j *convoy.TrainingJob) bool { return j.IsSuspended() })
	e.noPodsFor("big", time.Second)
}

// childrenWebhookDown points the API server's call of the children webhook at an address where
// nothing listens, as when the operator's webhook server is down, until the test ends.
func (e *env) childrenWebhookDown() {
	e.t.Helper()
	const name = "vtrainingjob.children.convoy.dev"
	set := func(url func(old string) string) {
		// Also at cleanup, once the test's context is done.
		ctx := context.WithoutCancel(e.t.Context())
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := e.k.Get(ctx, client.ObjectKey{Name: "convoy-trainingjob-queue"}, vwc); err != nil {
			e.t.Fatal(err)
		}
		for i := range vwc.Webhooks {
			if wh := &vwc.Webhooks[i]; wh.Name == name {
				wh.ClientConfig.URL = ptr.To(url(*wh.ClientConfig.URL))
			}
		}
		if err := e.k.Update(ctx, vwc); err != nil {
			e.t.Fatal(err)
		}
	}
	var was string
	set(func(old string) string {
		was = old
		return "https://127.0.0.1:1/validate-convoy-dev-v1alpha1-trainingjob-children"
	})
	e.t.Cleanup(func() { set(func(string) string { return was }) })
}

// TestKueueAdmitsAndSuspendsWhileTheChildrenWebhookIsDown: Kueue's writes to a TrainingJob (its
// job reconciler, in the operator, sets spec.suspend and the admitted flavor's node labels) do not
// wait on the children webhook: with its server unreachable, Kueue still starts a job it admits
// and suspends one it evicts. A user's change of a spec is still checked, and refused while the
// webhook cannot be called.
func TestKueueAdmitsAndSuspendsWhileTheChildrenWebhookIsDown(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 8, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	e.create(trainingJob(e.ns, "big", "q", "", 2, 8))
	job := e.waitJob(e.ns, "big", "queued", func(j *convoy.TrainingJob) bool { return condition(j, convoy.ConditionQueued) != nil })
	e.childrenWebhookDown()

	e.kubectl("patch", "clusterqueue", e.ns, "--type", "json",
		"-p", `[{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": 16}]`)
	e.waitJob(e.ns, "big", "started by Kueue (spec.suspend false)", func(j *convoy.TrainingJob) bool { return !j.IsSuspended() })

	if out, err := e.Kubectl(t.Context(), "patch", "trainingjob", "-n", e.ns, "big", "--type=merge", "-p", `{"spec":{"ttlSecondsAfterFinished":60}}`); err == nil ||
		!strings.Contains(out+err.Error(), "vtrainingjob.children.convoy.dev") {
		t.Errorf("a user's spec change went through while the children webhook was down: %v\n%s", err, out)
	}

	wl := e.workloads(job)
	if len(wl) != 1 {
		t.Fatalf("%d Workloads, want 1", len(wl))
	}
	e.kubectl("patch", "workloads.kueue.x-k8s.io", "-n", e.ns, wl[0].Name, "--type=merge", "-p", `{"spec":{"active":false}}`)
	e.waitJob(e.ns, "big", "suspended by Kueue", func(j *convoy.TrainingJob) bool { return j.IsSuspended() })
}
