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

// Package dryrun checks, when a TrainingJob is applied, that the API server would accept every
// object the operator builds for it. It builds the job's children with the pure builders of
// operator/pkg/builder, creates each with a server-side dry run (dryRun=All: validated and admitted
// as a real create, never stored), and maps each field the API server refuses back to the
// TrainingJob field that produced it, with the fix. The API server's own validation is the judge:
// nothing here restates it.
package dryrun

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// Children are the objects the operator creates for job, as the API server will judge them: the
// first and the last pod of each role (pods of a role differ only in their rank), the PodGroup,
// the Services, the ConfigMap, the checkpoint claim the operator makes for the job, the GPU claim
// template and those pods' GPU claims and, for frameworks that ssh, the Secret (with placeholder
// keys).
func Children(job *convoy.TrainingJob, opts builder.Options) ([]client.Object, error) {
	p, err := mlframework.For(job.Spec.Framework)
	if err != nil {
		return nil, err
	}
	job = job.DeepCopy()
	if job.UID == "" {
		// The owner reference needs a UID; the API server gives the job one before it asks.
		job.UID = types.UID("00000000-0000-0000-0000-000000000000")
	}
	if p.NeedsSSHKeys() && job.Status.SSHSecretName == "" {
		// The pods mount the Secret by the name the API server will generate for it.
		job.Status.SSHSecretName = names.SimpleNameGenerator.GenerateName(mlframework.SSHSecretPrefix(job))
	}
	pods := builder.Pods(job, p, opts)
	var out []client.Object
	for i, pod := range pods {
		first := i == 0 || pods[i-1].Labels[convoy.LabelReplicaRole] != pod.Labels[convoy.LabelReplicaRole]
		last := i == len(pods)-1 || pods[i+1].Labels[convoy.LabelReplicaRole] != pod.Labels[convoy.LabelReplicaRole]
		if first || last {
			out = append(out, pod)
		}
	}
	pg := builder.PodGroup(job, pods, opts)
	for _, o := range slices.Clone(out) {
		if claim := builder.GPUClaim(job, o.(*corev1.Pod)); claim != nil {
			out = append(out, claim)
		}
	}
	out = append(out, pg, builder.HeadlessService(job))
	if svc := builder.MetricsService(job); svc != nil {
		out = append(out, svc)
	}
	out = append(out, builder.ConfigMap(job, p, opts))
	if claim := builder.CheckpointClaim(job); claim != nil {
		out = append(out, claim)
	}
	if tmpl := builder.GPUClaimTemplate(job); tmpl != nil {
		out = append(out, tmpl)
	}
	if p.NeedsSSHKeys() {
		out = append(out, builder.SSHSecret(job, []byte("private key"), []byte("public key")))
	}
	return out, nil
}

// Result is what Check found.
type Result struct {
	// Errors are the TrainingJob fields that make a child invalid: the job can never run as written.
	Errors field.ErrorList
	// Warnings are refusals that depend on the namespace's state rather than the spec (a
	// ResourceQuota, Pod Security admission, a missing ServiceAccount), and checks that could not
	// run: the job is accepted, and its status tells what happens.
	Warnings []string
}

// Check creates job's children with dryRun=All through c, all at once, and maps what the API
// server refuses. A dry run still unanswered when ctx ends (a slow admission webhook of the
// cluster's on pods) is a warning, not an error: the caller bounds ctx within its own timeout.
func Check(ctx context.Context, c client.Client, job *convoy.TrainingJob, opts builder.Options) Result {
	res := Result{Errors: builder.ValidateHyperparameters(job)}
	children, err := Children(job, opts)
	if err != nil {
		// The CRD's enum names the frameworks; nothing to check against one it does not know.
		return res
	}
	errs := make([]error, len(children))
	var wg sync.WaitGroup
	for i, child := range children {
		wg.Go(func() { errs[i] = c.Create(ctx, child, client.DryRunAll) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, child := range children {
		err := errs[i]
		var status apierrors.APIStatus
		switch {
		case err == nil, apierrors.IsAlreadyExists(err), meta.IsNoMatchError(err), apierrors.IsNotFound(err):
			// Valid (an existing child of the same name means it passed validation first); a
			// kind the cluster does not serve is the operator's to report when it runs.
		case apierrors.IsInvalid(err) && errors.As(err, &status) && status.Status().Details != nil:
			for _, c := range status.Status().Details.Causes {
				// Pods of a role share their faults: the first pod's stand for the rest.
				e := explain(job, child, c)
				if key := string(c.Type) + " " + e.Field + " " + c.Message; !seen[key] {
					seen[key] = true
					res.Errors = append(res.Errors, e)
				}
			}
		case apierrors.IsForbidden(err):
			w := fmt.Sprintf("%s %s would be refused in namespace %s now: %v", kindOf(child), child.GetName(), job.Namespace, err)
			if strings.Contains(err.Error(), "violates PodSecurity") {
				w += "; " + podSecurityHint(job, opts)
			}
			res.Warnings = append(res.Warnings, w)
		default:
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s %s could not be checked with a dry run: %v", kindOf(child), child.GetName(), err))
		}
	}
	return res
}

// podSecurityHint says which field makes the job's pods meet a laxer Pod Security level than the
// namespace enforces, and what to do.
func podSecurityHint(job *convoy.TrainingJob, opts builder.Options) string {
	p, err := mlframework.For(job.Spec.Framework)
	if err != nil {
		return err.Error()
	}
	meets := builder.MeetsPodSecurity(job, p, opts)
	switch {
	case job.Spec.SecurityContext != nil && job.Spec.SecurityContext.PodSecurity == convoy.PodSecurityBaseline:
		return fmt.Sprintf("the job's pods meet Pod Security level %s because spec.securityContext.podSecurity is baseline: remove it for pods that meet restricted", meets)
	case p.PodSecurity() != convoy.PodSecurityRestricted:
		return fmt.Sprintf("spec.framework %s needs Pod Security level %s (its workers run sshd as root with the SETUID, SETGID and SYS_CHROOT capabilities): run the job in a namespace whose label pod-security.kubernetes.io/enforce is %s or privileged",
			job.Spec.Framework, p.PodSecurity(), p.PodSecurity())
	}
	return fmt.Sprintf("the job's pods meet Pod Security level %s (status.podSecurity): run the job in a namespace that enforces no stricter level", meets)
}

// Explain maps the API server's field errors of one child back to the TrainingJob fields they come
// from. A field no spec field explains is reported on spec, naming the child's field.
func Explain(job *convoy.TrainingJob, child client.Object, causes []metav1.StatusCause) field.ErrorList {
	var out field.ErrorList
	for _, c := range causes {
		out = append(out, explain(job, child, c))
	}
	return out
}

// kindOf is the child's kind, Pod or PodGroup, from its Go type.
func kindOf(obj client.Object) string {
	return reflect.TypeOf(obj).Elem().Name()
}
