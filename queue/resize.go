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
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/workload"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/elastic"
)

// ResizerName is the controller that grows elastic TrainingJobs.
const ResizerName = "trainingjob-elastic"

// resizeRecheck is how often a running elastic job below spec.numWorkers looks for free quota
// again once its cooldown has passed.
const resizeRecheck = 10 * time.Second

// Resizer grows running elastic TrainingJobs (spec.elastic, opted into Kueue's Workload slices by
// the webhook) into the free quota of the ClusterQueue that admitted them, as far as
// operator/pkg/elastic's policy says it pays (cooldown, measured scaling efficiency, and among the
// ClusterQueue's elastic jobs the one that gains most first). A grow only asks: it raises the
// job's convoy.dev/elastic-workers, Kueue's jobframework turns that into a new Workload slice, and
// the added workers start once Kueue admits the slice (Kueue then finishes the one it replaces).
// It grows nothing while a Workload waits in the ClusterQueue: free quota goes to waiting jobs
// first.
type Resizer struct {
	Client client.Client
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// SetupWithManager watches elastic TrainingJobs.
func (r *Resizer) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(ResizerName).
		For(&convoy.TrainingJob{}, ctrlbuilder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			job, ok := o.(*convoy.TrainingJob)
			return ok && job.IsElastic()
		}))).
		Complete(r)
}

// Kueue's jobframework, in this process, starts the pods of an admitted Workload slice by removing
// their scheduling gate.
// +kubebuilder:rbac:groups="",resources=pods,verbs=patch

// Reconcile grows the job when the policy gives it free GPUs, and otherwise looks again when its
// cooldown has passed.
func (r *Resizer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	job := &convoy.TrainingJob{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !growable(job) {
		return ctrl.Result{}, nil
	}
	wls := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, wls); err != nil {
		return ctrl.Result{}, err
	}
	slices := runningSlices(wls.Items)
	own, ok := slices[client.ObjectKeyFromObject(job)]
	if !ok || own.growing {
		// Not admitted yet, or a grow waits for Kueue: the job is looked at when it changes.
		return ctrl.Result{}, nil
	}
	now := r.now()
	cq := &kueue.ClusterQueue{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: string(own.wl.Status.Admission.ClusterQueue)}, cq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cq.Status.PendingWorkloads == 0 {
		peers, err := r.peers(ctx, slices, cq.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		for _, rs := range elastic.Grow(peers, freeGPUs(cq, gpuFlavors(own.wl)), now) {
			if rs.Key == req.String() {
				return ctrl.Result{}, r.grow(ctx, job, rs)
			}
		}
	}
	after := resizeRecheck
	if j := policyJob(job, own.wl); j.CoolingDown(now) {
		after = max(after, j.LastResize.Add(j.Cooldown).Sub(now))
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

func (r *Resizer) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// grow raises the job's size to rs.To; the Resized event and status.elastic follow from the
// operator's reconcile.
func (r *Resizer) grow(ctx context.Context, job *convoy.TrainingJob, rs elastic.Resize) error {
	ctrl.LoggerFrom(ctx).Info("Growing elastic TrainingJob", "trainingJob", klog.KObj(job), "from", rs.From, "to", rs.To, "why", rs.Reason)
	patch := client.MergeFromWithOptions(job.DeepCopy(), client.MergeFromWithOptimisticLock{})
	grows, _ := strconv.Atoi(job.Annotations[convoy.AnnotationElasticGrows])
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, convoy.AnnotationElasticWorkers, strconv.Itoa(int(rs.To)))
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, convoy.AnnotationElasticGrows, strconv.Itoa(grows+1))
	return r.Client.Patch(ctx, job, patch)
}

// peers are the growable elastic jobs running in ClusterQueue cq, as the policy sees them.
func (r *Resizer) peers(ctx context.Context, slices map[client.ObjectKey]runningSlice, cq string) ([]elastic.Job, error) {
	var out []elastic.Job
	for key, s := range slices {
		if s.growing || string(s.wl.Status.Admission.ClusterQueue) != cq {
			continue
		}
		job := &convoy.TrainingJob{}
		if err := r.Client.Get(ctx, key, job); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return nil, err
		}
		if growable(job) {
			out = append(out, policyJob(job, s.wl))
		}
	}
	return out, nil
}

// growable reports whether the job is an elastic job running under Kueue's Workload slices below
// spec.numWorkers.
func growable(job *convoy.TrainingJob) bool {
	return job.IsElastic() && jobframework.WorkloadSliceEnabled((*Job)(job)) && job.DeletionTimestamp.IsZero() &&
		meta.IsStatusConditionTrue(job.Status.Conditions, convoy.ConditionRunning) &&
		job.WorkerCount() < job.Spec.NumWorkers
}

// runningSlice is the admitted Workload slice of an elastic TrainingJob, and whether a larger one
// waits to replace it.
type runningSlice struct {
	wl      *kueue.Workload
	growing bool
}

// runningSlices are the admitted, unfinished Workloads of TrainingJobs by job.
func runningSlices(wls []kueue.Workload) map[client.ObjectKey]runningSlice {
	out := map[client.ObjectKey]runningSlice{}
	pending := map[client.ObjectKey]bool{}
	for i := range wls {
		wl := &wls[i]
		owner := metav1.GetControllerOf(wl)
		if owner == nil || owner.Kind != GVK.Kind || owner.APIVersion != GVK.GroupVersion().String() || workload.IsFinished(wl) {
			continue
		}
		key := client.ObjectKey{Namespace: wl.Namespace, Name: owner.Name}
		if workload.IsAdmitted(wl) && wl.Status.Admission != nil {
			out[key] = runningSlice{wl: wl, growing: out[key].growing}
		} else {
			pending[key] = true
		}
	}
	for key := range pending {
		if s, ok := out[key]; ok {
			s.growing = true
			out[key] = s
		}
	}
	return out
}

// policyJob is the job as the resize policy sees it.
func policyJob(job *convoy.TrainingJob, wl *kueue.Workload) elastic.Job {
	j := elastic.Job{Key: client.ObjectKeyFromObject(job).String(), Min: job.ElasticMinWorkers(), Max: job.Spec.NumWorkers,
		Current: job.WorkerCount(), GPUsPerWorker: job.GPUsPerWorker(), Cooldown: job.ResizeCooldown(),
		MinEfficiency: job.MinScalingEfficiency()}
	if wl.Spec.Priority != nil {
		j.Priority = *wl.Spec.Priority
	}
	if job.Status.StartTime != nil {
		j.LastResize = job.Status.StartTime.Time
	}
	if e := job.Status.Elastic; e != nil {
		if e.LastResizeTime != nil {
			j.LastResize = e.LastResizeTime.Time
		}
		j.Throughput = map[int32]float64{}
		for _, t := range e.Throughput {
			j.Throughput[t.Workers] = t.SamplesPerSecond
		}
	}
	return j
}

// gpuFlavors are the flavors the Workload's GPUs were admitted to.
func gpuFlavors(wl *kueue.Workload) map[kueue.ResourceFlavorReference]bool {
	out := map[kueue.ResourceFlavorReference]bool{}
	for _, ps := range wl.Status.Admission.PodSetAssignments {
		if f, ok := ps.Flavors[convoy.ResourceGPU]; ok {
			out[f] = true
		}
	}
	return out
}

// freeGPUs is the nominal GPU quota of the ClusterQueue's flavors that no Workload has reserved
// (borrowing is left to Kueue's own admission).
func freeGPUs(cq *kueue.ClusterQueue, flavors map[kueue.ResourceFlavorReference]bool) int32 {
	var free int64
	for _, rg := range cq.Spec.ResourceGroups {
		for _, fq := range rg.Flavors {
			if !flavors[fq.Name] {
				continue
			}
			for _, rq := range fq.Resources {
				if rq.Name == convoy.ResourceGPU {
					free += rq.NominalQuota.Value()
				}
			}
		}
	}
	for _, fu := range cq.Status.FlavorsReservation {
		if !flavors[fu.Name] {
			continue
		}
		for _, ru := range fu.Resources {
			if ru.Name == convoy.ResourceGPU {
				free -= ru.Total.Value()
			}
		}
	}
	return int32(max(free, 0))
}
