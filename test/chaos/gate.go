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

package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	jobs "github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// bindingGate holds back, in one namespace, the bindings of the pods named in a ConfigMap: a
// ValidatingAdmissionPolicy of the API server refuses a pods/binding CREATE of any pod whose name
// is a key of the ConfigMap, and lets every binding through once the ConfigMap is gone. R2 holds
// back half of a gang so that a scheduler SIGKILLed at its first binding dies with the gang
// partly bound however fast the machine binds.
type bindingGate struct {
	k  client.Client
	ns string
}

const gateName = "chaos-hold-bindings"

// newBindingGate creates the policy and its binding for namespace ns; the gate starts open.
func newBindingGate(ctx context.Context, k client.Client, ns string) (*bindingGate, error) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: gateName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(params.data) || !(request.name in params.data)",
				Message:    "chaos: this pod's binding is held back until the scheduler has been SIGKILLed",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: gateName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: gateName,
			ParamRef: &admissionregistrationv1.ParamRef{Name: gateName,
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := k.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	return &bindingGate{k: k, ns: ns}, nil
}

// hold closes the gate on the workers of job with ranks from..to-1 and waits until the API server
// refuses their bindings: a policy and its parameters reach the admission plugin through informers.
func (g *bindingGate) hold(ctx context.Context, job string, from, to int) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: gateName}, Data: map[string]string{}}
	for rank := from; rank < to; rank++ {
		cm.Data[workerName(job, rank)] = "held"
	}
	if err := g.k.Create(ctx, cm); err != nil {
		return err
	}
	// A dry-run binding of a held pod that does not exist yet: refused by the policy once it is in
	// force, NotFound before.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: workerName(job, to-1)}}
	deadline := time.Now().Add(time.Minute)
	for {
		err := g.k.SubResource("binding").Create(ctx, probe, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: probe.Name},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "nowhere"},
		}, client.DryRunAll)
		switch {
		case err != nil && strings.Contains(err.Error(), gateName):
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("probing the binding gate: %w", err)
		case time.Now().After(deadline):
			return fmt.Errorf("the API server still admits the binding of %s a minute after the gate closed", types.NamespacedName{Namespace: g.ns, Name: probe.Name})
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// open lets every binding through again.
func (g *bindingGate) open(ctx context.Context) error {
	return client.IgnoreNotFound(g.k.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: gateName}}))
}

// workerName is the pod name of the job's worker of rank in the gang's first attempt: the gate
// holds back a new job's first bindings.
func workerName(job string, rank int) string {
	return jobs.PodName(&convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: job}},
		jobs.Replica{Role: jobs.RoleWorker, Rank: int32(rank)}, 0)
}
