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
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// DispatchControllerName names the controller that follows MultiKueue's dispatch of jobs on a
// manager cluster, and is the source of its events.
const DispatchControllerName = "trainingjob-multikueue"

// EventDispatched is the reason of the event that names the worker cluster a job now runs on.
const EventDispatched = "Dispatched"

// dispatchReconciler keeps, on a MultiKueue manager cluster, the annotations of each job that
// MultiKueue runs on a worker: which worker (from the Workload's status.clusterName), and the
// latest checkpoint the worker reported, which MultiKueue copies with the job when it dispatches it
// again after that worker was lost. The job's status is MultiKueue's copy of the worker's, so what
// the manager adds goes in its metadata.
type dispatchReconciler struct {
	integration *Integration
	recorder    events.EventRecorder
}

// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch

func (r *dispatchReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := r.integration.client
	job := &convoy.TrainingJob{}
	if err := c.Get(ctx, req.NamespacedName, job); err != nil || !dispatchedByMultiKueue(job) || !job.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	wl, err := r.integration.workloadOf(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := dispatchAnnotations(job, wl)
	if maps.Equal(job.Annotations, want) {
		return ctrl.Result{}, nil
	}
	before := job.DeepCopy()
	job.Annotations = want
	if err := c.Patch(ctx, job, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, err
	}
	if note, ok := dispatchNote(before.Annotations, want); ok {
		ctrl.LoggerFrom(ctx).V(2).Info("MultiKueue dispatched the job", "workerCluster", want[convoy.AnnotationWorkerCluster])
		r.recorder.Eventf(job, nil, corev1.EventTypeNormal, EventDispatched, "Dispatch", "%s", note)
	}
	return ctrl.Result{}, nil
}

// dispatchedByMultiKueue reports whether job is a manager's job that MultiKueue runs on a worker.
func dispatchedByMultiKueue(job *convoy.TrainingJob) bool {
	return ptr.Deref(job.Spec.ManagedBy, "") == kueue.MultiKueueControllerName
}

// dispatchAnnotations is job's annotations with the worker cluster of its Workload wl (nil while
// Kueue has none) and its latest checkpoint. A worker that has not reported a checkpoint yet (the
// status of a job just dispatched again) leaves the one before in place.
func dispatchAnnotations(job *convoy.TrainingJob, wl *kueue.Workload) map[string]string {
	out := maps.Clone(job.Annotations)
	set := func(key, value string) {
		if value == "" {
			return
		}
		if out == nil {
			out = map[string]string{}
		}
		out[key] = value
	}
	if wl != nil {
		set(convoy.AnnotationWorkerCluster, ptr.Deref(wl.Status.ClusterName, ""))
	}
	if cp := job.Status.Checkpoint; cp != nil {
		set(convoy.AnnotationResumeFrom, cp.Latest)
	}
	return out
}

// dispatchNote is the Dispatched event's note when the worker cluster changed from before to after.
func dispatchNote(before, after map[string]string) (string, bool) {
	from, to := before[convoy.AnnotationWorkerCluster], after[convoy.AnnotationWorkerCluster]
	if to == "" || to == from {
		return "", false
	}
	if from == "" {
		return fmt.Sprintf("MultiKueue runs the job on worker cluster %s", to), true
	}
	note := fmt.Sprintf("MultiKueue runs the job again, on worker cluster %s (it ran on %s before)", to, from)
	if cp := after[convoy.AnnotationResumeFrom]; cp != "" {
		note += "; it resumes from checkpoint " + cp
	}
	return note, true
}

// setupDispatch registers the dispatch controller: it wakes for the manager's jobs and for changes
// of any job's Workload.
func (i *Integration) setupDispatch(mgr ctrl.Manager) error {
	r := &dispatchReconciler{integration: i, recorder: mgr.GetEventRecorder(DispatchControllerName)}
	return ctrl.NewControllerManagedBy(mgr).
		Named(DispatchControllerName).
		For(&convoy.TrainingJob{}, ctrlbuilder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			job, ok := o.(*convoy.TrainingJob)
			return ok && dispatchedByMultiKueue(job)
		}))).
		Watches(&kueue.Workload{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &convoy.TrainingJob{}, handler.OnlyControllerOwner())).
		Complete(r)
}
