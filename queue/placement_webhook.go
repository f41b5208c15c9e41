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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// PlacementPath is the path of the webhook that turns away a TrainingJob whose gang Convoy's
// scheduler would refuse to place, as deploy/kueue/webhook.yaml names it. It is served beside the
// queue webhooks, by the same server.
const PlacementPath = "/validate-convoy-dev-v1alpha1-trainingjob-placement"

// PlacementWebhook refuses, when a TrainingJob is created or its spec.scheduling.affinity changes,
// what Convoy's scheduler would refuse for its gang (see builder.ValidatePlacement): a job that
// would otherwise wait Initializing, Unschedulable, is told at apply time which field to change.
// The webhook configuration calls it only for jobs with required pod anti-affinity.
type PlacementWebhook struct{}

var _ admission.Validator[*convoy.TrainingJob] = PlacementWebhook{}

// ValidateCreate checks a new job.
func (PlacementWebhook) ValidateCreate(_ context.Context, job *convoy.TrainingJob) (admission.Warnings, error) {
	return nil, validatePlacement(job)
}

// ValidateUpdate checks a job whose spec.scheduling.affinity changed; a job created before the
// webhook keeps what it has.
func (PlacementWebhook) ValidateUpdate(_ context.Context, old, job *convoy.TrainingJob) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(affinity(old), affinity(job)) {
		return nil, nil
	}
	return nil, validatePlacement(job)
}

// ValidateDelete allows every deletion.
func (PlacementWebhook) ValidateDelete(context.Context, *convoy.TrainingJob) (admission.Warnings, error) {
	return nil, nil
}

func affinity(job *convoy.TrainingJob) *corev1.Affinity {
	if job.Spec.Scheduling == nil {
		return nil
	}
	return job.Spec.Scheduling.Affinity
}

func validatePlacement(job *convoy.TrainingJob) error {
	p, err := mlframework.For(job.Spec.Framework)
	if err != nil {
		return nil //nolint:nilerr // the CRD's enum names the frameworks: nothing to check against one it does not know
	}
	return toInvalid(job, builder.ValidatePlacement(job, p))
}
