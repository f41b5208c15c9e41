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
	"cmp"
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/controller"
	"github.com/convoy-dev/convoy/operator/pkg/dryrun"
)

// ChildrenPath is the path of the webhook that refuses a TrainingJob whose pods, Services,
// ConfigMap or PodGroup the API server would refuse, as deploy/kueue/webhook.yaml names it.
const ChildrenPath = "/validate-convoy-dev-v1alpha1-trainingjob-children"

// ChildrenWebhook refuses, when a TrainingJob is created or a user changes its spec, a spec whose
// children could never be created: it creates them with a server-side dry run (see
// operator/pkg/dryrun) and names the TrainingJob field each refusal comes from, with the fix.
// Refusals that depend on the namespace's state (a ResourceQuota, Pod Security admission) are
// returned as warnings: the job is accepted and its status explains them when it runs. The API
// server does not call it for the operator's own updates (deploy/kueue/webhook.yaml), Kueue's start
// and stop of a job among them, which must not wait on its dry runs.
type ChildrenWebhook struct {
	// Client creates the dry runs, as the operator: with the operator's permissions.
	Client client.Client
	// DryRunBudget bounds the dry runs of one call (DefaultDryRunBudget when zero): a child not
	// checked within it, as behind a slow admission webhook of the cluster's, is a warning, and
	// the answer comes within the webhook's timeoutSeconds.
	DryRunBudget time.Duration
}

// DefaultDryRunBudget leaves, of deploy/kueue/webhook.yaml's timeoutSeconds of 10, time for the
// call itself.
const DefaultDryRunBudget = 7 * time.Second

func (w ChildrenWebhook) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cmp.Or(w.DryRunBudget, DefaultDryRunBudget))
}

var _ admission.Validator[*convoy.TrainingJob] = ChildrenWebhook{}

// options are the builder's options for the job's namespace; without the namespace's Pod Security
// level where it cannot be read, when the dry run of a pod the namespace refuses is a warning.
func (w ChildrenWebhook) options(ctx context.Context, job *convoy.TrainingJob) builder.Options {
	opts, _ := controller.OptionsInNamespace(ctx, w.Client, job.Namespace, builder.Options{})
	return opts
}

// ValidateCreate checks a new job.
func (w ChildrenWebhook) ValidateCreate(ctx context.Context, job *convoy.TrainingJob) (admission.Warnings, error) {
	ctx, cancel := w.budget(ctx)
	defer cancel()
	res := dryrun.Check(ctx, w.Client, job, w.options(ctx, job))
	return res.Warnings, toInvalid(job, res.Errors)
}

// ValidateUpdate checks a job whose spec changed in more than spec.suspend. What the job had
// before the change is not refused again (a job created before this webhook keeps running, and
// Kueue can still suspend it).
func (w ChildrenWebhook) ValidateUpdate(ctx context.Context, old, job *convoy.TrainingJob) (admission.Warnings, error) {
	a, b := old.Spec.DeepCopy(), job.Spec.DeepCopy()
	a.Suspend, b.Suspend = nil, nil
	if equality.Semantic.DeepEqual(a, b) {
		return nil, nil
	}
	// The old spec's dry runs beside the new one's, within one budget.
	ctx, cancel := w.budget(ctx)
	defer cancel()
	opts := w.options(ctx, job)
	var was dryrun.Result
	done := make(chan struct{})
	go func() {
		defer close(done)
		was = dryrun.Check(ctx, w.Client, old, opts)
	}()
	res := dryrun.Check(ctx, w.Client, job, opts)
	<-done
	if len(res.Errors) == 0 {
		return res.Warnings, nil
	}
	before := map[string]bool{}
	for _, e := range was.Errors {
		before[e.Error()] = true
	}
	var errs field.ErrorList
	for _, e := range res.Errors {
		if !before[e.Error()] {
			errs = append(errs, e)
		}
	}
	return res.Warnings, toInvalid(job, errs)
}

// ValidateDelete allows every deletion.
func (ChildrenWebhook) ValidateDelete(context.Context, *convoy.TrainingJob) (admission.Warnings, error) {
	return nil, nil
}
