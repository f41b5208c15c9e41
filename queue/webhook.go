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
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/util/admissioncheck"
	"sigs.k8s.io/kueue/pkg/workloadslicing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Paths of the admission webhooks, as deploy/kueue/webhook.yaml names them.
const (
	MutatePath   = "/mutate-convoy-dev-v1alpha1-trainingjob"
	ValidatePath = "/validate-convoy-dev-v1alpha1-trainingjob"
)

var (
	queuePath = field.NewPath("spec", "scheduling", "queue")
	labelPath = field.NewPath("metadata", "labels").Key(constants.QueueLabel)
	gpuPath   = field.NewPath("spec", "gpu")
)

// Webhook defaults and validates the TrainingJobs that name a queue, as Kueue's BaseWebhook does
// for its own integrations:
//
//   - spec.scheduling.queue wins over the kueue.x-k8s.io/queue-name label, which Kueue reads: the
//     label is set from it. A job that sets only the label gets spec.scheduling.queue from it.
//     A job created with the two naming different queues is refused, and so is an update that
//     changes only the label to disagree; an update of spec.scheduling.queue moves the label along.
//   - A new job that names no queue names LocalQueue "default" when its namespace has one
//     (Kueue's default LocalQueue).
//   - A new job whose LocalQueue's ClusterQueue has a MultiKueue admission check gets
//     spec.managedBy kueue.x-k8s.io/multikueue unless it names another controller.
//   - MultiKueue's copy of a job in a worker loses its owner references, which name objects of the
//     manager cluster (a trial's TrainingSweep).
//   - A new job that is Kueue's (it names a queue, or Management makes it Kueue's) is suspended
//     until Kueue admits it.
//   - Kueue's own rules apply: the queue may change only while the job is suspended, and so on.
type Webhook struct {
	// Client reads LocalQueues (Kueue's default LocalQueue rule), their ClusterQueues and
	// AdmissionChecks (spec.managedBy's default), namespaces and the job's owners.
	Client client.Client
	// Management is which jobs are Kueue's: a new one is suspended until Kueue admits it.
	Management Management
}

var (
	_ admission.Defaulter[*convoy.TrainingJob] = &Webhook{}
	_ admission.Validator[*convoy.TrainingJob] = &Webhook{}
)

// Default reconciles the queue label with spec.scheduling.queue, gives a new job without a queue
// the namespace's default LocalQueue, and suspends a new job that is Kueue's.
func (w *Webhook) Default(ctx context.Context, job *convoy.TrainingJob) error {
	var old *convoy.TrainingJob
	if req, err := admission.RequestFromContext(ctx); err == nil && len(req.OldObject.Raw) > 0 {
		old = &convoy.TrainingJob{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return fmt.Errorf("decoding the TrainingJob before the update: %w", err)
		}
	}
	if old == nil && job.QueueName() == "" {
		jobframework.ApplyDefaultLocalQueue(job, func(namespace string) bool { return w.defaultLocalQueueExists(ctx, namespace) })
	}
	if errs := SyncQueueName(job, old); len(errs) > 0 {
		return apierrors.NewInvalid(GVK.GroupKind(), job.Name, errs)
	}
	if old == nil {
		dropManagerOwners(job)
		if err := w.defaultManagedBy(ctx, job); err != nil {
			return err
		}
	}
	syncElasticJob(job)
	if old != nil {
		return nil
	}
	return jobframework.ApplyDefaultForSuspend(ctx, fromObject(job), w.Client, w.Management.WithoutQueueName, w.Management.selector())
}

// syncElasticJob opts an elastic job (spec.elastic) that Kueue queues into Kueue's workload
// slices (annotation kueue.x-k8s.io/elastic-job), through which it resizes while it runs; a job
// without spec.elastic, or run by MultiKueue, is opted out.
func syncElasticJob(job *convoy.TrainingJob) {
	if job.IsElastic() && job.QueueName() != "" && !job.ManagedElsewhere() && features.Enabled(features.ElasticJobsViaWorkloadSlices) {
		metav1.SetMetaDataAnnotation(&job.ObjectMeta, workloadslicing.EnabledAnnotationKey, workloadslicing.EnabledAnnotationValue)
	} else {
		delete(job.Annotations, workloadslicing.EnabledAnnotationKey)
	}
}

// dropManagerOwners drops the owner references of MultiKueue's copy of a job in a worker: they name
// objects in the manager cluster, and the worker's garbage collector, finding no such owner, would
// delete the copy.
func dropManagerOwners(job *convoy.TrainingJob) {
	if _, copied := job.Labels[kueue.MultiKueueOriginLabel]; copied {
		job.OwnerReferences = nil
	}
}

// defaultManagedBy gives a new job whose LocalQueue feeds a ClusterQueue with a MultiKueue
// admission check spec.managedBy kueue.x-k8s.io/multikueue, so that MultiKueue runs it on a worker
// cluster, as Kueue's webhooks do for its own kinds (jobframework.ApplyDefaultForManagedBy, which
// needs Kueue's in-process cache: here the LocalQueue, ClusterQueue and AdmissionChecks are read
// through the operator's). A queue or ClusterQueue that does not exist yet leaves the job as it is.
func (w *Webhook) defaultManagedBy(ctx context.Context, job *convoy.TrainingJob) error {
	name := job.Labels[constants.QueueLabel]
	if name == "" || !fromObject(job).CanDefaultManagedBy() {
		return nil
	}
	multi, err := dispatchingQueue(ctx, w.Client, job.Namespace, name)
	if multi {
		fromObject(job).SetManagedBy(ptr.To(kueue.MultiKueueControllerName))
	}
	return err
}

// dispatchingQueue reports whether LocalQueue namespace/name feeds a ClusterQueue with a
// MultiKueue admission check. A queue, ClusterQueue or check that does not exist yet counts as not.
func dispatchingQueue(ctx context.Context, c client.Reader, namespace, name string) (bool, error) {
	lq := &kueue.LocalQueue{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, lq); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	cq := &kueue.ClusterQueue{}
	if err := c.Get(ctx, client.ObjectKey{Name: string(lq.Spec.ClusterQueue)}, cq); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	for check := range admissioncheck.NewAdmissionChecks(cq) {
		ac := &kueue.AdmissionCheck{}
		if err := c.Get(ctx, client.ObjectKey{Name: string(check)}, ac); client.IgnoreNotFound(err) != nil {
			return false, err
		} else if err == nil && ac.Spec.ControllerName == kueue.MultiKueueControllerName {
			return true, nil
		}
	}
	return false, nil
}

// defaultLocalQueueExists reports whether namespace has Kueue's default LocalQueue ("default").
func (w *Webhook) defaultLocalQueueExists(ctx context.Context, namespace string) bool {
	lq := &kueue.LocalQueue{}
	return w.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: string(constants.DefaultLocalQueueName)}, lq) == nil
}

// SyncQueueName makes the kueue.x-k8s.io/queue-name label and spec.scheduling.queue name the same
// LocalQueue, spec.scheduling.queue winning; old is the job before an update, nil on create.
func SyncQueueName(job, old *convoy.TrainingJob) field.ErrorList {
	spec, label := "", job.Labels[constants.QueueLabel]
	if job.Spec.Scheduling != nil {
		spec = job.Spec.Scheduling.Queue
	}
	oldSpec := ""
	if old != nil && old.Spec.Scheduling != nil {
		oldSpec = old.Spec.Scheduling.Queue
	}
	switch {
	case spec == label:
	case spec == "" && old != nil && oldSpec != "":
		// spec.scheduling.queue was removed: the label goes with it.
		delete(job.Labels, constants.QueueLabel)
	case spec == "":
		(*Job)(job).scheduling().Queue = label
	case label == "" || (old != nil && spec != oldSpec):
		if job.Labels == nil {
			job.Labels = map[string]string{}
		}
		job.Labels[constants.QueueLabel] = spec
	case old == nil:
		return field.ErrorList{field.Invalid(labelPath, label, fmt.Sprintf(
			"names LocalQueue %q but spec.scheduling.queue names %q: set only spec.scheduling.queue, or set both to the same queue", label, spec))}
	default:
		return field.ErrorList{field.Invalid(labelPath, label, fmt.Sprintf(
			"must name the same LocalQueue as spec.scheduling.queue (%q): change spec.scheduling.queue instead, the label follows it", spec))}
	}
	return nil
}

// ValidateCreate applies Kueue's rules for a new job.
func (w *Webhook) ValidateCreate(_ context.Context, job *convoy.TrainingJob) (admission.Warnings, error) {
	errs := append(queueAgreement(job), gpuSelectors(job)...)
	errs = append(errs, withPrebuiltWorkload(jobframework.ValidateJobOnCreate(fromObject(job)))...)
	return nil, toInvalid(job, errs)
}

// prebuiltPath is the label by which MultiKueue's copy of a job in a worker names the Workload it
// created there for it.
var prebuiltPath = field.NewPath("metadata", "labels").Key(constants.PrebuiltWorkloadLabel)

// withPrebuiltWorkload drops Kueue's refusal of the prebuilt-workload label, which Kueue's
// validation keeps to the kinds it lists itself (jobframework's supportedPrebuiltWlJobGVKs): Kueue's
// job reconciler runs a TrainingJob on its prebuilt Workload, so MultiKueue may create the job in a
// worker.
func withPrebuiltWorkload(errs field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if e.Type != field.ErrorTypeForbidden || e.Field != prebuiltPath.String() {
			out = append(out, e)
		}
	}
	return out
}

// ValidateUpdate applies Kueue's rules for a change: among them, the queue and the workload
// priority class change only while the job is suspended.
func (w *Webhook) ValidateUpdate(ctx context.Context, old, job *convoy.TrainingJob) (admission.Warnings, error) {
	errs := append(queueAgreement(job), gpuSelectors(job)...)
	errs = append(errs, jobframework.ValidateJobOnUpdate(fromObject(old), fromObject(job), func(namespace string) bool {
		return w.defaultLocalQueueExists(ctx, namespace)
	})...)
	return nil, toInvalid(job, errs)
}

// ValidateDelete allows every deletion.
func (w *Webhook) ValidateDelete(context.Context, *convoy.TrainingJob) (admission.Warnings, error) {
	return nil, nil
}

// queueAgreement catches a job whose label and spec disagree after defaulting, which happens only
// when the mutating webhook did not run.
func queueAgreement(job *convoy.TrainingJob) field.ErrorList {
	if label, spec := job.Labels[constants.QueueLabel], job.QueueName(); label != "" && label != spec {
		return field.ErrorList{field.Invalid(queuePath, spec, fmt.Sprintf("must name the same LocalQueue as the label %s (%q)", constants.QueueLabel, label))}
	}
	return nil
}

// gpuSelectors refuses spec.gpu's product and minMemory on a job with a queue: they become CEL
// selectors of the GPU claim, and Kueue counts no claim with selectors (it holds the Workload
// inadmissible), so the job would wait for ever.
func gpuSelectors(job *convoy.TrainingJob) field.ErrorList {
	g := job.Spec.GPU
	if g == nil || job.QueueName() == "" {
		return nil
	}
	var errs field.ErrorList
	const fix = "Kueue does not count GPU claims with selectors: remove it and name a DeviceClass that selects these devices in spec.gpu.deviceClassName, or run the job without a queue"
	if g.Product != "" {
		errs = append(errs, field.Invalid(gpuPath.Child("product"), g.Product, fix))
	}
	if g.MinMemory != nil {
		errs = append(errs, field.Invalid(gpuPath.Child("minMemory"), g.MinMemory.String(), fix))
	}
	return errs
}

func toInvalid(job *convoy.TrainingJob, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(GVK.GroupKind(), job.Name, errs)
}
