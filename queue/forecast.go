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
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/forecast"
)

const (
	// ForecastControllerName names the controller that writes queued jobs' estimated starts.
	ForecastControllerName = "trainingjob-forecast"
	// ForecastPeriod is how often a ClusterQueue with waiting jobs is planned again, as time passes.
	ForecastPeriod = time.Minute
	// ForecastSlack is how far an estimated start moves before it is written again (its reason
	// changing is always written).
	ForecastSlack = 30 * time.Second
)

// Forecaster writes status.forecast.estimatedStartTime and reason of the TrainingJobs waiting in
// a ClusterQueue: it plans the queue (operator/pkg/forecast) from the ClusterQueue's nominal
// quota and withinClusterQueue preemption policy, its admitted Workloads with their priority and
// their jobs' estimated completion, and its pending Workloads in Kueue's order. A running job of unknown completion (no epoch rate measured yet) counts as
// ending at its start plus the mean run of the queue's finished jobs, a pending one as running
// that long; without finished jobs both are unknown.
type Forecaster struct {
	Client client.Client
	Clock  clock.PassiveClock
}

// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=clusterqueues;localqueues;workloads,verbs=get;list;watch

// Reconcile plans the ClusterQueue req.Name and writes its waiting jobs' estimates.
func (f *Forecaster) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cq := &kueue.ClusterQueue{}
	if err := f.Client.Get(ctx, req.NamespacedName, cq); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	now := f.Clock.Now()
	q, jobs, err := f.queue(ctx, cq, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, est := range forecast.Plan(q) {
		job := jobs[est.Name]
		if job == nil {
			continue
		}
		// A job that fits now is about to be admitted: it gets no estimate to clear a moment later.
		// One that preempts waits for its victims to stop: it is told whom it preempts.
		if f := job.Status.Forecast; est.Start.Equal(now) && len(est.Preempts) == 0 && (f == nil || f.EstimatedStartTime == nil && f.Reason == "") {
			continue
		}
		var start *metav1.Time
		if !est.Start.IsZero() {
			start = &metav1.Time{Time: est.Start.Truncate(time.Second)}
		}
		if err := f.write(ctx, job, start, est.Reason); err != nil {
			return reconcile.Result{}, err
		}
	}
	for _, a := range q.Admitted {
		if job := jobs[a.Name]; job != nil && job.Status.Forecast != nil && (job.Status.Forecast.EstimatedStartTime != nil || job.Status.Forecast.Reason != "") {
			if err := f.write(ctx, job, nil, ""); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	if len(q.Pending) == 0 {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: ForecastPeriod}, nil
}

// write patches the job's estimated start and reason unless the start moved less than
// ForecastSlack and the reason is the same.
func (f *Forecaster) write(ctx context.Context, job *convoy.TrainingJob, start *metav1.Time, reason string) error {
	old := job.Status.Forecast
	if old == nil {
		old = &convoy.ForecastStatus{}
	}
	if old.Reason == reason && (old.EstimatedStartTime == nil) == (start == nil) &&
		(start == nil || absDuration(start.Sub(old.EstimatedStartTime.Time)) < ForecastSlack) {
		return nil
	}
	patch := client.MergeFrom(job.DeepCopy())
	next := old.DeepCopy()
	next.EstimatedStartTime, next.Reason = start, reason
	job.Status.Forecast = next
	return client.IgnoreNotFound(f.Client.Status().Patch(ctx, job, patch))
}

func absDuration(d time.Duration) time.Duration { return max(d, -d) }

// queue gathers what Plan needs of cq, and the TrainingJobs of its Workloads by namespace/name.
func (f *Forecaster) queue(ctx context.Context, cq *kueue.ClusterQueue, now time.Time) (forecast.Queue, map[string]*convoy.TrainingJob, error) {
	q := forecast.Queue{Name: cq.Name, Now: now, Quota: map[corev1.ResourceName]int64{},
		StrictFIFO: cq.Spec.QueueingStrategy == kueue.StrictFIFO}
	if p := cq.Spec.Preemption; p != nil {
		q.WithinClusterQueue = forecast.Preemption(p.WithinClusterQueue)
	}
	ordering := workload.Ordering{}
	for _, rg := range cq.Spec.ResourceGroups {
		for _, fl := range rg.Flavors {
			for _, r := range fl.Resources {
				q.Quota[r.Name] += r.NominalQuota.MilliValue()
			}
		}
	}
	lqs := &kueue.LocalQueueList{}
	if err := f.Client.List(ctx, lqs); err != nil {
		return q, nil, err
	}
	feeds := map[types.NamespacedName]bool{}
	for _, lq := range lqs.Items {
		if string(lq.Spec.ClusterQueue) == cq.Name {
			feeds[types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name}] = true
		}
	}
	wls := &kueue.WorkloadList{}
	if err := f.Client.List(ctx, wls); err != nil {
		return q, nil, err
	}
	all := &convoy.TrainingJobList{}
	if err := f.Client.List(ctx, all); err != nil {
		return q, nil, err
	}
	typical := typicalRun(all.Items, cq.Name)
	byName := make(map[string]*convoy.TrainingJob, len(all.Items))
	for i := range all.Items {
		byName[all.Items[i].Namespace+"/"+all.Items[i].Name] = &all.Items[i]
	}
	jobs := map[string]*convoy.TrainingJob{}
	var pending []*kueue.Workload
	for i := range wls.Items {
		wl := &wls.Items[i]
		admitted := workload.HasQuotaReservation(wl) && wl.Status.Admission != nil && string(wl.Status.Admission.ClusterQueue) == cq.Name
		queued := !workload.HasQuotaReservation(wl) && workload.IsActive(wl) && feeds[types.NamespacedName{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}]
		if workload.IsFinished(wl) || !admitted && !queued {
			continue
		}
		job := jobOf(byName, wl)
		name := wl.Namespace + "/" + wl.Name
		if job != nil {
			name = job.Namespace + "/" + job.Name
			jobs[name] = job
		}
		if admitted {
			a := forecast.Job{Name: name, Requests: milli(workload.NewInfo(wl).SumTotalRequests()), Priority: priority.Priority(wl),
				QueuedAt: ordering.GetQueueOrderTimestamp(wl).Time}
			if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
				a.AdmittedAt = c.LastTransitionTime.Time
			}
			if job != nil {
				a.End = forecast.End(&job.Status, typical, now)
			}
			q.Admitted = append(q.Admitted, a)
			continue
		}
		pending = append(pending, wl)
	}
	slices.SortStableFunc(pending, func(a, b *kueue.Workload) int {
		return cmp.Or(cmp.Compare(priority.Priority(b), priority.Priority(a)),
			ordering.GetQueueOrderTimestamp(a).Compare(ordering.GetQueueOrderTimestamp(b).Time),
			cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name))
	})
	for _, wl := range pending {
		j := forecast.Job{Name: wl.Namespace + "/" + wl.Name, Requests: milli(workload.NewInfo(wl).SumTotalRequests()),
			Priority: priority.Priority(wl), QueuedAt: ordering.GetQueueOrderTimestamp(wl).Time}
		if owner := metav1.GetControllerOf(wl); owner != nil && jobs[wl.Namespace+"/"+owner.Name] != nil {
			j.Name = wl.Namespace + "/" + owner.Name
			j.Runtime = forecast.Runtime(&jobs[j.Name].Status, typical)
		}
		q.Pending = append(q.Pending, j)
	}
	return q, jobs, nil
}

// jobOf returns the TrainingJob of jobs (by namespace/name) that controls wl, nil for another
// kind's Workload or a job gone.
func jobOf(jobs map[string]*convoy.TrainingJob, wl *kueue.Workload) *convoy.TrainingJob {
	owner := jobOwner(wl)
	if owner == nil {
		return nil
	}
	return jobs[wl.Namespace+"/"+owner.Name]
}

// typicalRun is the mean run, start to completion, of the finished jobs the ClusterQueue
// admitted; zero when there is none.
func typicalRun(jobs []convoy.TrainingJob, cq string) time.Duration {
	var sum time.Duration
	n := 0
	for _, j := range jobs {
		st := j.Status
		if st.IsFinished() && st.Admission != nil && st.Admission.ClusterQueue == cq && st.StartTime != nil && st.CompletionTime != nil {
			sum += st.CompletionTime.Sub(st.StartTime.Time)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

func milli(l corev1.ResourceList) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(l))
	for r, v := range l {
		out[r] = v.MilliValue()
	}
	return out
}

// SetupWithManager plans a ClusterQueue again when it changes, when a Workload in it or queued for
// it changes, when one of its jobs' estimated completion or state changes, and every
// ForecastPeriod while jobs wait.
func (f *Forecaster) SetupWithManager(mgr ctrl.Manager) error {
	if f.Clock == nil {
		f.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).Named(ForecastControllerName).
		For(&kueue.ClusterQueue{}).
		Watches(&kueue.Workload{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			wl := o.(*kueue.Workload)
			if a := wl.Status.Admission; a != nil {
				return request(string(a.ClusterQueue))
			}
			return f.clusterQueueOf(ctx, wl.Namespace, string(wl.Spec.QueueName))
		})).
		Watches(&convoy.TrainingJob{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			job := o.(*convoy.TrainingJob)
			if a := job.Status.Admission; a != nil && a.ClusterQueue != "" {
				return request(a.ClusterQueue)
			}
			return f.clusterQueueOf(ctx, job.Namespace, job.Labels[constants.QueueLabel])
		}), ctrlbuilder.WithPredicates(planMoved)).
		Complete(f)
}

// planMoved lets through the job changes that move a plan: its estimated completion and its
// state; not the estimated starts the Forecaster writes itself.
var planMoved = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldJob, ok := e.ObjectOld.(*convoy.TrainingJob)
	newJob, _ := e.ObjectNew.(*convoy.TrainingJob)
	if !ok || newJob == nil {
		return true
	}
	completion := func(j *convoy.TrainingJob) *metav1.Time {
		if j.Status.Forecast == nil {
			return nil
		}
		return j.Status.Forecast.EstimatedCompletionTime
	}
	return oldJob.Status.State != newJob.Status.State || !completion(oldJob).Equal(completion(newJob))
}}

func (f *Forecaster) clusterQueueOf(ctx context.Context, namespace, localQueue string) []reconcile.Request {
	if localQueue == "" {
		return nil
	}
	lq := &kueue.LocalQueue{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: localQueue}, lq); err != nil {
		return nil
	}
	return request(string(lq.Spec.ClusterQueue))
}

func request(cq string) []reconcile.Request {
	if cq == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: cq}}}
}
