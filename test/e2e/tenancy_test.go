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

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/util"
)

// team makes a team's namespace as a platform team does (deploy/queue/teams.yaml): labelled
// convoy.dev/team, with its ClusterQueue of gpus GPUs and the LocalQueues training and default.
func (e *env) team(name string, gpus int) *env {
	e.t.Helper()
	te := &env{Stack: e.Stack, t: e.t, k: e.k, ns: e.ns + "-" + name, podSecurity: e.podSecurity}
	te.queue(gpus)
	must(e.t, e.k.Patch(e.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: te.ns,
		Labels: map[string]string{"convoy.dev/team": te.ns}}}, client.Merge))
	must(e.t, e.k.Create(e.t.Context(), utiltestingapi.MakeLocalQueue("default", te.ns).ClusterQueue(te.ns).Obj()))
	return te
}

// TestHostileTenant: two teams share the fleet, each in its namespace with convoy-tenant bound to
// a ServiceAccount (deploy/tenancy installed). Team A's member tries every way around its quota,
// its priority grant and its teammates' jobs, and at the other team; each attempt is refused with
// a message that says why, or leaves nothing to gain. A member bound to edit cannot slip a pod into
// a teammate's gang. Meanwhile team B's job runs and completes with nothing lost.
func TestHostileTenant(t *testing.T) {
	e := setup(t)
	a, b := e.team("a", 24), e.team("b", 16)
	util.InstallTenancy(t, e.Cluster)
	mallory := util.ServiceAccountClient(t, e.Cluster, a.ns, "mallory", "convoy-tenant")
	bob := util.ServiceAccountClient(t, e.Cluster, b.ns, "bob", "convoy-tenant")
	// A member of team A bound to the built-in edit role, which creates pods.
	eve := util.ServiceAccountClient(t, e.Cluster, a.ns, "eve", "edit")
	ctx := t.Context()
	must(t, e.k.Create(ctx, utiltestingapi.MakeLocalQueue("b-only", b.ns).ClusterQueue(b.ns).Obj()))

	steady := b.job("steady", 2, 8, "normal")
	// simtrainer's accuracy reaches the target at the last epoch.
	steady.Spec.Hyperparameters.Epochs = ptr.To[int32](5)
	steady.Spec.SuccessPolicy = &convoy.SuccessPolicy{TargetAccuracy: ptr.To(0.9)}
	must(t, bob.Create(ctx, steady))

	// Team A: a ConfigMap in the way of a teammate's job, that job, two jobs that name no queue
	// and each take 16 of the team's 24 GPUs, and a job naming team B's queue.
	must(t, mallory.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "squatted-config", Namespace: a.ns},
		Data: map[string]string{"hyperparameters.json": `{"learning_rate": 1}`}}))
	must(t, mallory.Create(ctx, a.job("squatted", 1, 8, "normal")))
	for _, name := range []string{"hog-1", "hog-2"} {
		hog := a.job(name, 2, 8, "")
		hog.Spec.Scheduling.Queue = ""
		must(t, mallory.Create(ctx, hog))
	}
	elsewhere := a.job("elsewhere", 1, 8, "")
	elsewhere.Spec.Scheduling.Queue = "b-only"
	must(t, mallory.Create(ctx, elsewhere))

	t.Run("attacks", func(t *testing.T) {
		t.Run("no queue name runs only within the team's quota", func(t *testing.T) {
			t.Parallel()
			tenantQuota(t, a, mallory)
		})
		t.Run("a class the namespace is not granted", func(t *testing.T) {
			t.Parallel()
			util.WantPriorityRefused(t, "a job at class high", mallory.Create(ctx, a.job("urgent", 2, 8, "high")), "high", a.ns, "low,normal,high")
		})
		t.Run("an elastic job's admitted size", func(t *testing.T) {
			t.Parallel()
			job := a.job("stretch", 3, 8, "normal")
			job.Spec.MinWorkers, job.Spec.Elastic, job.Spec.Suspend = ptr.To[int32](1), &convoy.ElasticSpec{}, ptr.To(true)
			// A queue that does not exist keeps it from taking the hogs' quota (and preempting one)
			// while tenantQuota watches them; the size is refused at admission to the API all the same.
			job.Spec.Scheduling.Queue = "parked"
			job.Annotations = map[string]string{convoy.AnnotationElasticWorkers: "3"}
			wantSizeRefused(t, "an elastic job created with its size set", convoy.AnnotationElasticWorkers, mallory.Create(ctx, job.DeepCopy(), client.DryRunAll))
			job.Annotations = map[string]string{convoy.AnnotationElasticAdmitted: "3"}
			wantSizeRefused(t, "an elastic job created with its starting size set", convoy.AnnotationElasticAdmitted, mallory.Create(ctx, job.DeepCopy(), client.DryRunAll))
			job.Annotations = nil
			must(t, mallory.Create(ctx, job))
			raised := job.DeepCopy()
			raised.Annotations = map[string]string{convoy.AnnotationElasticWorkers: "3"}
			wantSizeRefused(t, "an elastic job's size raised", convoy.AnnotationElasticWorkers, mallory.Patch(ctx, raised, client.MergeFrom(job)))
		})
		t.Run("another team's queue", func(t *testing.T) {
			t.Parallel()
			job := util.WaitJob(t, e.k, 200*time.Millisecond, timeout, client.ObjectKey{Namespace: a.ns, Name: "elsewhere"}, "told its queue does not exist",
				func(j *convoy.TrainingJob) bool {
					c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionAdmitted)
					return c != nil && strings.Contains(c.Message, "LocalQueue b-only doesn't exist")
				})
			if job.Status.Admission != nil || len(podsOf(t, e.k, a.ns, "elsewhere")) != 0 {
				t.Errorf("a job naming another namespace's queue was admitted (%+v) or has pods", job.Status.Admission)
			}
			err := mallory.Create(ctx, b.job("intruder", 2, 8, "normal"))
			wantForbidden(t, "a job in team B's namespace", err)
		})
		t.Run("a teammate's children squatted", func(t *testing.T) {
			t.Parallel()
			job := util.WaitJob(t, e.k, 200*time.Millisecond, timeout, client.ObjectKey{Namespace: a.ns, Name: "squatted"}, "in ChildConflict",
				func(j *convoy.TrainingJob) bool {
					return meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionChildConflict)
				})
			c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionChildConflict)
			if c.Reason != convoy.ReasonNameTaken || !strings.Contains(c.Message, "squatted-config") {
				t.Errorf("ChildConflict = %s: %s, want %s naming ConfigMap squatted-config", c.Reason, c.Message, convoy.ReasonNameTaken)
			}
			if pods := podsOf(t, e.k, a.ns, "squatted"); len(pods) != 0 {
				t.Errorf("a job whose ConfigMap is squatted has %d pods, want none", len(pods))
			}
			cm := &corev1.ConfigMap{}
			must(t, e.k.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: "squatted-config"}, cm))
			if cm.Data["hyperparameters.json"] != `{"learning_rate": 1}` || metav1.GetControllerOf(cm) != nil {
				t.Errorf("the operator took the squatted ConfigMap over: %+v", cm)
			}
		})
		t.Run("what the role does not grant", func(t *testing.T) {
			t.Parallel()
			tenantForbidden(t, e, a, b, mallory)
		})
		t.Run("a pod that claims a teammate's gang", func(t *testing.T) {
			t.Parallel()
			gangClaims(t, a, eve)
		})
	})

	done := util.WaitState(t, e.k, 200*time.Millisecond, timeout, client.ObjectKeyFromObject(steady), convoy.StateCompleted)
	if c := meta.FindStatusCondition(done.Status.Conditions, convoy.ConditionCompleted); c == nil || c.Reason != convoy.ReasonTargetAccuracy {
		t.Errorf("team B's job: Completed = %+v, want reason %s", c, convoy.ReasonTargetAccuracy)
	}
	if done.Status.RestartCount != 0 || done.Status.CurrentEpoch != 5 || meta.FindStatusCondition(done.Status.Conditions, convoy.ConditionPreempted) != nil {
		t.Errorf("team B's job lost work: restarts %d, epoch %d of 5, conditions %s",
			done.Status.RestartCount, done.Status.CurrentEpoch, util.ConditionSummary(done.Status.Conditions))
	}
}

// tenantQuota: of two jobs that name no queue, each of 16 GPUs, in a team of 24, Kueue admits one
// from the team's LocalQueue default and the other waits, told why; unsuspending the waiting one
// (spec.suspend=false) gives it no pod.
func tenantQuota(t *testing.T, a *env, mallory client.Client) {
	ctx := t.Context()
	var running, waiting *convoy.TrainingJob
	util.Eventually(t, 200*time.Millisecond, timeout, "one hog running, the other waiting for quota", func() (bool, string) {
		running, waiting = nil, nil
		var states []string
		for _, name := range []string{"hog-1", "hog-2"} {
			j := &convoy.TrainingJob{}
			if err := a.k.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: name}, j); err != nil {
				return false, err.Error()
			}
			states = append(states, util.JobSummary(j))
			c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionAdmitted)
			switch {
			case j.Status.State == convoy.StateRunning:
				running = j
			case c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "nvidia.com/gpu"):
				waiting = j
			}
		}
		return running != nil && waiting != nil, strings.Join(states, "; ")
	})
	wls := &kueue.WorkloadList{}
	must(t, a.k.List(ctx, wls, client.InNamespace(a.ns)))
	for _, wl := range wls.Items {
		if owner := metav1.GetControllerOf(&wl); owner != nil && strings.HasPrefix(owner.Name, "hog-") && wl.Spec.QueueName != "default" {
			t.Errorf("Workload %s of %s is in LocalQueue %q, want default", wl.Name, owner.Name, wl.Spec.QueueName)
		}
	}

	// Unsuspending the waiting job: the operator sees it and creates no pod for it.
	suspended := ptr.Deref(waiting.Spec.Suspend, false)
	patch := []byte(`{"spec":{"suspend":false}}`)
	if err := mallory.Patch(ctx, waiting, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Logf("spec.suspend=false refused: %v", err)
	}
	j := util.WaitJob(t, a.k, 200*time.Millisecond, timeout, client.ObjectKeyFromObject(waiting), "seen by the operator", func(j *convoy.TrainingJob) bool {
		return j.Status.ObservedGeneration >= waiting.Generation
	})
	if pods := podsOf(t, a.k, a.ns, waiting.Name); len(pods) != 0 || j.Status.Admission != nil {
		t.Errorf("unsuspended, the job waiting for quota got %d pods (admission %+v), want none", len(pods), j.Status.Admission)
	}
	gpus := 0
	pods := &corev1.PodList{}
	must(t, a.k.List(ctx, pods, client.InNamespace(a.ns)))
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			gpus += int(c.Resources.Requests.Name("nvidia.com/gpu", "").Value())
		}
	}
	if gpus > 24 {
		t.Errorf("team A's pods ask %d GPUs, more than its quota of 24", gpus)
	}
	t.Logf("running %s, waiting %s (spec.suspend %v, then %v): %s", running.Name, waiting.Name, suspended, ptr.Deref(j.Spec.Suspend, false), util.JobSummary(j))
}

// tenantForbidden: what convoy-tenant does not grant is refused by RBAC, naming the user and the
// verb: Kueue's objects, the gang's PodGroup and pods, the fleet's GPUNodes, the namespace's
// grant, the job's status, and team B's namespace.
func tenantForbidden(t *testing.T, e *env, a, b *env, mallory client.Client) {
	ctx := t.Context()
	gpuNodes := &convoy.GPUNodeList{}
	must(t, e.k.List(ctx, gpuNodes, client.Limit(1)))
	if len(gpuNodes.Items) == 0 {
		t.Fatal("no GPUNode")
	}
	merge := func(obj client.Object, patch string) func() error {
		return func() error { return mallory.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))) }
	}
	om := func(name, ns string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	// A pod that claims hog-1's gang and asks convoy-scheduler to place it.
	gangPod := restrictedPod(a.ns, "hog-1-extra", map[string]string{schedv1alpha1.PodGroupLabel: "hog-1", convoy.LabelJobName: "hog-1"})
	for what, attempt := range map[string]func() error{
		"raising its ClusterQueue's quota": merge(&kueue.ClusterQueue{ObjectMeta: om(a.ns, "")},
			`{"spec":{"resourceGroups":[{"coveredResources":["nvidia.com/gpu"],"flavors":[{"name":"h100-on-demand","resources":[{"name":"nvidia.com/gpu","nominalQuota":128}]}]}]}}`),
		"pointing its LocalQueue at team B's ClusterQueue": merge(&kueue.LocalQueue{ObjectMeta: om("default", a.ns)}, `{"spec":{"clusterQueue":"`+b.ns+`"}}`),
		"creating a LocalQueue": func() error {
			return mallory.Create(ctx, utiltestingapi.MakeLocalQueue("mine", a.ns).ClusterQueue(b.ns).Obj())
		},
		"creating a Workload": func() error {
			return mallory.Create(ctx, utiltestingapi.MakeWorkload("mine", a.ns).Queue("training").Obj())
		},
		"admitting a Workload through its status": func() error {
			return mallory.Status().Patch(ctx, &kueue.Workload{ObjectMeta: om("any", a.ns)}, client.RawPatch(types.MergePatchType, []byte(`{"status":{"conditions":[]}}`)))
		},
		"shrinking a gang's PodGroup":                                merge(&schedv1alpha1.PodGroup{ObjectMeta: om("hog-1", a.ns)}, `{"spec":{"minMember":1}}`),
		"creating a pod of another job's gang, for convoy-scheduler": func() error { return mallory.Create(ctx, gangPod) },
		"deleting a teammate's pod": func() error {
			return mallory.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(a.ns), client.MatchingLabels{convoy.LabelJobName: "hog-1"})
		},
		"marking a GPUNode's GPUs free":     merge(&gpuNodes.Items[0], `{"metadata":{"labels":{"convoy.dev/tampered":"true"}}}`),
		"granting its namespace class high": merge(&corev1.Namespace{ObjectMeta: om(a.ns, "")}, `{"metadata":{"annotations":{"convoy.dev/priority-classes":"low,normal,high"}}}`),
		"creating a priority class": func() error {
			return mallory.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: om("mallory", ""), Value: 1 << 30})
		},
		"writing a job's status": func() error {
			return mallory.Status().Patch(ctx, &convoy.TrainingJob{ObjectMeta: om("hog-1", a.ns)}, client.RawPatch(types.MergePatchType, []byte(`{"status":{"restartCount":0}}`)))
		},
		"reading team B's jobs":       func() error { return mallory.List(ctx, &convoy.TrainingJobList{}, client.InNamespace(b.ns)) },
		"deleting team B's job":       func() error { return mallory.Delete(ctx, &convoy.TrainingJob{ObjectMeta: om("steady", b.ns)}) },
		"reading team B's ConfigMaps": func() error { return mallory.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(b.ns)) },
	} {
		wantForbidden(t, what, attempt())
	}
}

// gangClaims: a member who may create pods (the edit role) cannot make one part of a TrainingJob,
// whose gang convoy-scheduler would count it in (by label, or by spec.schedulingGroup) and whose
// Services would select it, nor relabel
// one of its own pods so, nor run GPUs with a pod outside the queue; it creates, and changes, a pod
// of its own.
func gangClaims(t *testing.T, a *env, eve client.Client) {
	ctx := t.Context()
	for label, value := range map[string]string{schedv1alpha1.PodGroupLabel: "hog-1", convoy.LabelJobName: "hog-1", convoy.LabelTrainingJob: "hog-2"} {
		claim := restrictedPod(a.ns, "claim", map[string]string{label: value})
		claim.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		err := eve.Create(ctx, claim, client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "label "+label+"="+value+" makes a pod part of TrainingJob "+value) {
			t.Errorf("a pod labelled %s=%s: got %v, want it refused naming the label and the job", label, value, err)
		}
	}
	// Nor can it name the job's scheduling.k8s.io PodGroup, where the cluster serves it (1.37).
	if servesWorkloadAPI(t) {
		claim := restrictedPod(a.ns, "claim", nil)
		claim.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		claim.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("hog-1")}
		err := eve.Create(ctx, claim, client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "spec.schedulingGroup.podGroupName hog-1 makes a pod part of a gang") {
			t.Errorf("a pod naming PodGroup hog-1: got %v, want it refused naming the field", err)
		}
	}
	// Nor can it run GPUs outside the team's quota with a pod of no job.
	err := eve.Create(ctx, restrictedPod(a.ns, "gpus", map[string]string{"app": "notebook"}), client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "asks nvidia.com/gpu, which in namespace "+a.ns+" is used through its queue") {
		t.Errorf("a pod of 8 GPUs of no job: got %v, want it refused, GPUs going through the queue", err)
	}
	own := restrictedPod(a.ns, "own", map[string]string{"app": "notebook"})
	own.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	must(t, eve.Create(ctx, own))
	label := func(key, value string) error {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
		return eve.Patch(ctx, own, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	if err := label(schedv1alpha1.PodGroupLabel, "hog-1"); !apierrors.IsForbidden(err) {
		t.Errorf("relabelling a pod into gang hog-1: got %v, want Forbidden", err)
	}
	if err := label("app", "lab"); err != nil {
		t.Errorf("relabelling a pod of no gang was refused: %v", err)
	}
}

// restrictedPod is a pod of 8 GPUs for convoy-scheduler that meets Pod Security restricted.
func restrictedPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName: "convoy-scheduler", AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "trainer", Image: "trainer:1",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				Resources:       corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}},
		},
	}
}

// wantSizeRefused fails the test unless err is convoy-elastic-size's refusal, naming the annotation
// and the fix.
func wantSizeRefused(t *testing.T, what, annotation string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "annotation "+annotation+" (unset to 3) is the size Kueue") ||
		!strings.Contains(err.Error(), "leave it out of your change") {
		t.Errorf("%s: got %v, want it refused naming the annotation", what, err)
	}
}

// wantForbidden fails the test unless err is RBAC's refusal, which names the ServiceAccount.
func wantForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:serviceaccount:`) {
		t.Errorf("%s: got %v, want Forbidden naming the tenant", what, err)
	}
}

// podsOf lists the pods of job name in namespace ns.
func podsOf(t *testing.T, c client.Client, ns, name string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	must(t, c.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{convoy.LabelJobName: name}))
	return pods.Items
}
