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
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/util"
)

// TestSquattedChildrenOfEveryKindAreRefused: an unlabelled object created first under the name of
// one of a job's children (its ConfigMap with another learning rate, its rendezvous or metrics
// Service, its PodGroup, PodDisruptionBudget or NetworkPolicy) is never adopted, changed nor
// mounted: the job creates no pods and says which object is in the way in ChildConflict and a
// Warning event. Once the squatter is deleted the job creates its own child and its pods.
func TestSquattedChildrenOfEveryKindAreRefused(t *testing.T) {
	e := newEnv(t)
	e.startOperator(func(o *operator.Options) { o.DisruptionBudget, o.JobNetworkPolicy = true, true })
	port := intstr.FromInt32(1)
	squatters := map[string]client.Object{
		"cm": &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-config"},
			Data: map[string]string{"hyperparameters.json": `{"learningRate":999}`, "LEARNING_RATE": "999"}},
		"svc": &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "attacker"}, Ports: []corev1.ServicePort{{Port: 29500}}}},
		"mon": &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mon-metrics"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "attacker"}, Ports: []corev1.ServicePort{{Port: 9090}}}},
		"pg": &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 100}},
		"pdb": &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &port, Selector: &metav1.LabelSelector{}}},
		"np": &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "np"},
			Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}},
	}
	kinds := map[string]string{"cm": "ConfigMap", "svc": "Service", "mon": "Service", "pg": "PodGroup", "pdb": "PodDisruptionBudget", "np": "NetworkPolicy"}
	created := map[string]client.Object{}
	for job, o := range squatters {
		e.create(o)
		created[job] = o.DeepCopyObject().(client.Object)
	}
	for job := range squatters {
		w := utiltesting.MakeTrainingJob(job, e.ns).Hyperparameters(convoy.Hyperparameters{LearningRate: ptr.To(0.001)})
		if job == "mon" {
			w.Monitoring(convoy.MonitoringSpec{Enabled: true})
		}
		e.create(w.Obj())
	}

	for job, o := range squatters {
		taken := kinds[job] + " " + e.ns + "/" + o.GetName()
		e.eventually(job+"'s ChildConflict naming "+taken, func() (bool, string) {
			c := meta.FindStatusCondition(e.job(job).Status.Conditions, convoy.ConditionChildConflict)
			if c == nil {
				return false, "none"
			}
			return c.Status == metav1.ConditionTrue && c.Reason == convoy.ReasonNameTaken && strings.Contains(c.Message, taken), c.Message
		})
		e.eventually(job+"'s Warning event naming "+taken, func() (bool, string) {
			list := &corev1.EventList{}
			if err := e.k.List(t.Context(), list, client.InNamespace(e.ns)); err != nil {
				return false, err.Error()
			}
			var seen []string
			for _, ev := range list.Items {
				if ev.InvolvedObject.Name == job && ev.Reason == convoy.ReasonNameTaken {
					if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, taken) {
						return true, ""
					}
					seen = append(seen, ev.Type+": "+ev.Message)
				}
			}
			return false, fmt.Sprint(seen)
		})
	}
	for job, o := range squatters {
		if pods := e.pods(job); len(pods) != 0 {
			t.Errorf("job %s created pods while %s %s is in the way", job, kinds[job], o.GetName())
		}
		got := o.DeepCopyObject().(client.Object)
		if err := e.k.Get(t.Context(), client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatalf("squatter %s: %v", o.GetName(), err)
		}
		if len(got.GetOwnerReferences()) != 0 || len(got.GetLabels()) != 0 || got.GetGeneration() != created[job].GetGeneration() {
			t.Errorf("squatter %s %s was adopted or changed: owners %v, labels %v, generation %d (was %d)", kinds[job], o.GetName(),
				got.GetOwnerReferences(), got.GetLabels(), got.GetGeneration(), created[job].GetGeneration())
		}
	}
	if cm := e.configMap("cm-config"); !equality.Semantic.DeepEqual(cm.Data, squatters["cm"].(*corev1.ConfigMap).Data) {
		t.Errorf("the squatted ConfigMap was rewritten: %v", cm.Data)
	}

	for _, o := range squatters {
		if err := e.k.Delete(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	for job, o := range squatters {
		e.waitPods(job, 1, 0)
		e.eventually(job+"'s own "+kinds[job]+" "+o.GetName(), func() (bool, string) {
			got := o.DeepCopyObject().(client.Object)
			err := e.k.Get(t.Context(), client.ObjectKeyFromObject(o), got)
			return err == nil && metav1.IsControlledBy(got, e.job(job)), fmt.Sprint(err, got.GetOwnerReferences())
		})
		e.eventually(job+"'s ChildConflict false", func() (bool, string) {
			c := meta.FindStatusCondition(e.job(job).Status.Conditions, convoy.ConditionChildConflict)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == convoy.ReasonNameFree, fmt.Sprint(c)
		})
	}
	if hp := e.configMap("cm-config").Data["hyperparameters.json"]; !strings.Contains(hp, `"learningRate":0.001`) {
		t.Errorf("cm's own ConfigMap has hyperparameters %s, want its learningRate 0.001", hp)
	}
}

// TestSquattedTrialIsRefused: a TrainingJob created first under the name of a sweep's first trial
// (<sweep>-0) is never taken for a trial, its results never counted: the sweep creates no trial,
// says which job is in the way in ChildConflict and a Warning event, and once it is deleted
// creates its own trials and the condition turns false.
func TestSquattedTrialIsRefused(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	squatter := utiltesting.MakeTrainingJob("tune-0", e.ns).Suspend(true).Obj()
	squatter.Labels = map[string]string{convoy.LabelSweepName: "tune"}
	e.create(squatter)
	template := utiltesting.MakeTrainingJob("", e.ns).Hyperparameters(convoy.Hyperparameters{
		AdditionalParams: map[string]string{"dropout": "${trialParameters.dropout}"}}).Obj()
	e.create(&convoy.TrainingSweep{ObjectMeta: metav1.ObjectMeta{Name: "tune"}, Spec: convoy.TrainingSweepSpec{
		Objective:          convoy.ObjectiveSpec{Type: convoy.ObjectiveMinimize, ObjectiveMetricName: "loss"},
		Algorithm:          convoy.AlgorithmSpec{AlgorithmName: convoy.AlgorithmRandom},
		Parameters:         []convoy.ParameterSpec{{Name: "dropout", ParameterType: convoy.ParameterDouble, FeasibleSpace: convoy.FeasibleSpace{Min: "0", Max: "0.5"}}},
		ParallelTrialCount: ptr.To[int32](2), MaxTrialCount: ptr.To[int32](2),
		TrialTemplate: convoy.TrialTemplate{Spec: template.Spec},
	}})
	sweep := func() *convoy.TrainingSweep {
		sw := &convoy.TrainingSweep{}
		if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "tune"}, sw); err != nil {
			t.Fatal(err)
		}
		return sw
	}
	taken := "TrainingJob " + e.ns + "/tune-0"
	e.eventually("the sweep's ChildConflict naming "+taken, func() (bool, string) {
		c := meta.FindStatusCondition(sweep().Status.Conditions, convoy.ConditionChildConflict)
		if c == nil {
			return false, "none"
		}
		return c.Status == metav1.ConditionTrue && c.Reason == convoy.ReasonNameTaken && strings.Contains(c.Message, taken), c.Message
	})
	e.eventually("the sweep's Warning event naming "+taken, func() (bool, string) {
		list := &corev1.EventList{}
		if err := e.k.List(t.Context(), list, client.InNamespace(e.ns)); err != nil {
			return false, err.Error()
		}
		for _, ev := range list.Items {
			if ev.InvolvedObject.Kind == "TrainingSweep" && ev.Reason == convoy.ReasonNameTaken && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, taken) {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(list.Items), " events")
	})
	jobs := &convoy.TrainingJobList{}
	if err := e.k.List(t.Context(), jobs, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Errorf("the sweep created trials while its first trial's name is taken: %d TrainingJobs", len(jobs.Items))
	}
	if sw := sweep(); sw.Status.Trials != 0 || len(sw.Status.TrialStatuses) != 0 {
		t.Errorf("the sweep counts trials %d, %v; want none", sw.Status.Trials, sw.Status.TrialStatuses)
	}
	if got := e.job("tune-0"); len(got.OwnerReferences) != 0 {
		t.Errorf("the squatter was adopted: owners %v", got.OwnerReferences)
	}

	if err := e.k.Delete(t.Context(), squatter); err != nil {
		t.Fatal(err)
	}
	e.eventually("the sweep's own trials tune-0 and tune-1", func() (bool, string) {
		sw := sweep()
		var seen []string
		for _, name := range []string{"tune-0", "tune-1"} {
			job := &convoy.TrainingJob{}
			if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, job); err != nil || !metav1.IsControlledBy(job, sw) {
				seen = append(seen, fmt.Sprint(name, ": ", err, job.OwnerReferences))
			}
		}
		return len(seen) == 0, fmt.Sprint(seen)
	})
	e.eventually("the sweep's ChildConflict false", func() (bool, string) {
		c := meta.FindStatusCondition(sweep().Status.Conditions, convoy.ConditionChildConflict)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == convoy.ReasonNameFree, fmt.Sprint(c)
	})
}

// TestSquattedPublishPodIsNeverUsed: an unlabelled pod <job>-publish created before the job
// completes is never taken for its publish step, whose termination message would become
// status.model: the publish step fails, naming the pod, and the job stays Completed.
func TestSquattedPublishPodIsNeverUsed(t *testing.T) {
	e := newEnv(t)
	e.startOperator(func(o *operator.Options) { o.PublishImage = "convoy-operator:test" })
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pub-publish"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "publish", Image: "attacker"}}}})
	e.create(publishJob("pub", e.ns, "registry.example.com/team/pub:v1"))
	e.completeWith("pub", 3)
	job := e.waitModelCondition("pub", convoy.ReasonPublishFailed)
	if c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionModelPublished); !strings.Contains(c.Message, "pod pub-publish") || !strings.Contains(c.Message, "is not the job's") {
		t.Errorf("ModelPublished says %q, want it to name pod pub-publish as not the job's", c.Message)
	}
	if job.Status.Model != nil || job.Status.State != convoy.StateCompleted {
		t.Errorf("status.model %v, state %s; want no model and Completed", job.Status.Model, job.Status.State)
	}
}

// TestMPISecretCannotBeTakenFirst: an MPI job's SSH Secret gets a name the API server generates,
// which status.sshSecretName records and every pod mounts; a Secret created first under the name
// <job>-ssh is neither mounted, adopted nor reported. The operator, with deploy/'s RBAC, may create
// a tenant's Secrets but not read them. A restarted gang keeps its Secret; once that Secret is
// deleted, the next attempt mounts a new one.
func TestMPISecretCannotBeTakenFirst(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	squatter := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hvd-ssh"}, Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("the attacker's key"), "ssh-publickey": []byte("the attacker's key")}}
	e.create(squatter)
	e.create(utiltesting.MakeTrainingJob("hvd", e.ns).Framework(convoy.FrameworkMPI).Workers(2).FailurePolicy(convoy.RestartOnFailure, 3).Obj())

	// ownSecret checks that every pod of attempt mounts the job's own SSH Secret, and returns its name.
	ownSecret := func(attempt int32) string {
		t.Helper()
		pods := e.startGang("hvd", 2, attempt)
		job := e.job("hvd")
		name := job.Status.SSHSecretName
		if !strings.HasPrefix(name, "hvd-ssh-") || len(name) <= len("hvd-ssh-") {
			t.Fatalf("status.sshSecretName = %q, want hvd-ssh-<suffix>", name)
		}
		secret := &corev1.Secret{}
		if err := e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, secret); err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(secret, job) || secret.Type != corev1.SecretTypeSSHAuth || len(secret.Data[corev1.SSHAuthPrivateKey]) < 100 {
			t.Errorf("Secret %s: owners %v, type %s, private key of %d bytes; want the job's, with its key pair", name, secret.OwnerReferences, secret.Type, len(secret.Data[corev1.SSHAuthPrivateKey]))
		}
		for _, pod := range pods {
			var mounted []string
			for _, v := range pod.Spec.Volumes {
				if v.Secret != nil {
					mounted = append(mounted, v.Secret.SecretName)
				}
			}
			if !cmp.Equal(mounted, []string{name}) {
				t.Errorf("pod %s mounts Secrets %v, want [%s]", pod.Name, mounted, name)
			}
		}
		if c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionChildConflict); c != nil {
			t.Errorf("ChildConflict %s: %s; a Secret of another name is no child of the job", c.Status, c.Message)
		}
		return name
	}
	first := ownSecret(0)
	got := &corev1.Secret{}
	if err := e.k.Get(t.Context(), client.ObjectKeyFromObject(squatter), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || string(got.Data[corev1.SSHAuthPrivateKey]) != "the attacker's key" {
		t.Errorf("the Secret hvd-ssh made first was adopted or changed: owners %v", got.OwnerReferences)
	}

	operatorUser := serviceaccount.MakeUsername(operatorNamespace, operatorSA)
	for verb, want := range map[string]bool{"get": false, "list": false, "watch": false, "create": true} {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: operatorUser, Groups: serviceaccount.MakeGroupNames(operatorNamespace),
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: e.ns, Verb: verb, Resource: "secrets"},
		}}
		if err := e.k.Create(t.Context(), review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != want {
			t.Errorf("%s may %s Secrets in a tenant's namespace: %t, want %t", operatorUser, verb, review.Status.Allowed, want)
		}
	}

	e.finishPod("hvd-worker-0", 1)
	if again := ownSecret(1); again != first {
		t.Errorf("the restarted gang mounts Secret %s, want the job's %s", again, first)
	}
	if err := e.k.Delete(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: first}}); err != nil {
		t.Fatal(err)
	}
	e.finishPod(util.WorkerPod("hvd", 0, 1), 1)
	if next := ownSecret(2); next == first {
		t.Errorf("the gang after its Secret %s was deleted mounts it still", first)
	}
}
