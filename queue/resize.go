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
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workloadslicing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/elastic"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
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
// first. When the Workload that waits first there is left waiting by Kueue (the ClusterQueue does
// not preempt for it; one it would preempt for is PreemptionGate's, gateDecides), the elastic jobs
// of lower priority shrink toward spec.minWorkers, and those of its priority give back the workers
// they grew beyond the size Kueue started them at (convoy.AnnotationElasticAdmitted), the lowest
// priority and the one that loses least first, as far as it needs, among the jobs admitted to a
// GPU flavor the waiting Workload can use (shrinksFor): the scale-down lowers the running slice's
// count, and Kueue admits the waiting Workload into the quota it frees. A ClusterQueue that
// preempts does so only where no shrink frees the GPUs a Workload lacks (PreemptionGate), and
// evicts the elastic job whole, as any other.
// A grow Kueue has not admitted within elastic.GrowAdmitTimeout, or admitted with fewer workers, is
// withdrawn to the workers admitted, and each grow withdrawn in a row doubles the job's cooldown
// before the next (status.elastic.withdrawnGrows, elastic.Job.GrowBackoff).
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
	if !resizable(job) {
		return ctrl.Result{}, nil
	}
	wls := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, wls); err != nil {
		return ctrl.Result{}, err
	}
	slices := runningSlices(wls.Items)
	own, ok := slices[client.ObjectKeyFromObject(job)]
	if !ok {
		// Not admitted yet: the job is looked at when it changes.
		return ctrl.Result{}, nil
	}
	now := r.now()
	if own.grow != nil {
		return r.withdrawStaleGrow(ctx, job, own, now)
	}
	if n := admittedWorkers(own.wl); own.wl.Spec.PodSets[0].Count == job.WorkerCount() && n < job.WorkerCount() {
		// Kueue admitted the grow's slice partially: the job has the workers Kueue admitted.
		return ctrl.Result{}, r.setWorkers(ctx, job, n, "Kueue admitted the grow's slice with fewer workers")
	}
	cq := &kueue.ClusterQueue{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: string(own.wl.Status.Admission.ClusterQueue)}, cq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	free := freeGPUs(cq, gpuFlavors(own.wl))
	var decided []elastic.Resize
	if cq.Status.PendingWorkloads == 0 {
		peers, _, err := r.peers(ctx, slices, cq.Name, growable)
		if err != nil {
			return ctrl.Result{}, err
		}
		decided = elastic.Grow(peers, free, now)
	} else if head, err := r.waitingHead(ctx, wls.Items, cq.Name); err != nil {
		return ctrl.Result{}, err
	} else if asks, err := r.gpusOf(ctx, head); err != nil {
		return ctrl.Result{}, err
	} else if head != nil && !gateDecides(head) {
		peers, shrinking, err := r.peers(ctx, slices, cq.Name, resizable)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !settling(peers, now) {
			if decided, _, err = r.shrinksFor(ctx, cq, head, asks, shrinking, peers, slices); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	for _, rs := range decided {
		if rs.Key == req.String() {
			return ctrl.Result{}, r.resize(ctx, job, rs)
		}
	}
	after := resizeRecheck
	if j := policyJob(job, own.wl); j.CoolingDown(now) && job.WorkerCount() < job.Spec.NumWorkers {
		after = max(after, j.LastResize.Add(j.GrowBackoff()).Sub(now))
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

func (r *Resizer) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// resize sets the job's size to rs.To, counting a grow (a new Workload slice), or asks the
// operator to shrink it there once the gang has checkpointed (convoy.AnnotationElasticShrinkTo);
// the Resized event and status.elastic follow from the operator's reconcile, which adds or
// deletes the workers.
func (r *Resizer) resize(ctx context.Context, job *convoy.TrainingJob, rs elastic.Resize) error {
	ctrl.LoggerFrom(ctx).Info("Resizing elastic TrainingJob", "trainingJob", klog.KObj(job), "from", rs.From, "to", rs.To, "why", rs.Reason)
	patch := client.MergeFromWithOptions(job.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if rs.To < rs.From {
		metav1.SetMetaDataAnnotation(&job.ObjectMeta, convoy.AnnotationElasticShrinkTo, strconv.Itoa(int(rs.To)))
	} else {
		metav1.SetMetaDataAnnotation(&job.ObjectMeta, convoy.AnnotationElasticWorkers, strconv.Itoa(int(rs.To)))
		grows, _ := strconv.Atoi(job.Annotations[convoy.AnnotationElasticGrows])
		metav1.SetMetaDataAnnotation(&job.ObjectMeta, convoy.AnnotationElasticGrows, strconv.Itoa(grows+1))
	}
	return r.Client.Patch(ctx, job, patch)
}

// withdrawStaleGrow sets a job whose grow Kueue has not admitted within elastic.GrowAdmitTimeout
// (for want of quota, or held by an admission check such as convoy-scheduler's placement check)
// back to the size of its admitted slice: Kueue's jobframework then fits the waiting slice to it
// (a slice that reserved quota gives back what the added workers held), and the operator deletes
// the added workers, which never left Kueue's gate.
func (r *Resizer) withdrawStaleGrow(ctx context.Context, job *convoy.TrainingJob, own runningSlice, now time.Time) (ctrl.Result, error) {
	if left := elastic.GrowAdmitTimeout - now.Sub(own.grow.CreationTimestamp.Time); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	admitted := admittedWorkers(own.wl)
	if job.WorkerCount() <= admitted {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.setWorkers(ctx, job, admitted, "Kueue did not admit the grow's slice within "+elastic.GrowAdmitTimeout.String())
}

// setWorkers withdraws (part of) a grow: the job's size for Kueue goes back to n.
func (r *Resizer) setWorkers(ctx context.Context, job *convoy.TrainingJob, n int32, why string) error {
	ctrl.LoggerFrom(ctx).Info("Withdrawing a grow", "trainingJob", klog.KObj(job), "from", job.WorkerCount(), "to", n, "why", why)
	patch := client.MergeFromWithOptions(job.DeepCopy(), client.MergeFromWithOptimisticLock{})
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, convoy.AnnotationElasticWorkers, strconv.Itoa(int(n)))
	return r.Client.Patch(ctx, job, patch)
}

// admittedWorkers is the workers Kueue admitted a Workload with and still counts: its first
// PodSet's (the workers') assigned count, which partial admission sets below the PodSet's count,
// or the PodSet's count when a shrink or a withdrawn grow lowered it since (Kueue then scales the
// Workload's usage down to it).
func admittedWorkers(wl *kueue.Workload) int32 {
	n := wl.Spec.PodSets[0].Count
	if psa := wl.Status.Admission.PodSetAssignments; len(psa) > 0 && psa[0].Count != nil {
		n = min(n, *psa[0].Count)
	}
	return n
}

// waitingHead is the Workload that waits first (highest priority, then oldest) in ClusterQueue
// cq, a grow's new slice left out; nil when none does.
func (r *Resizer) waitingHead(ctx context.Context, wls []kueue.Workload, cq string) (*kueue.Workload, error) {
	var head *kueue.Workload
	queues := map[client.ObjectKey]string{}
	for i := range wls {
		wl := &wls[i]
		if workload.HasQuotaReservation(wl) || workload.IsFinished(wl) || !workload.IsActive(wl) || workloadslicing.ScaledUp(wl) {
			continue
		}
		key := client.ObjectKey{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}
		if _, ok := queues[key]; !ok {
			name, err := r.clusterQueueOf(ctx, wl)
			if err != nil {
				return nil, err
			}
			queues[key] = name
		}
		if queues[key] != cq {
			continue
		}
		if head == nil || cmp.Or(cmp.Compare(priority.Priority(wl), priority.Priority(head)), head.CreationTimestamp.Compare(wl.CreationTimestamp.Time)) > 0 {
			head = wl
		}
	}
	return head, nil
}

// gpusOf is the GPUs a Workload asks for, 0 for nil. A TrainingJob's DRA GPUs (spec.gpu) are
// claimed through its ResourceClaimTemplate, which Kueue counts as nvidia.com/gpu through its
// deviceClassMappings at admission but workload.Info's requests leave out: they are read from the
// job's spec, gpusPerWorker for each worker of the pod set.
func (r *Resizer) gpusOf(ctx context.Context, wl *kueue.Workload) (int32, error) {
	if wl == nil {
		return 0, nil
	}
	var n int64
	for _, ps := range workload.NewInfo(wl).TotalRequests {
		n += ps.Requests[convoy.ResourceGPU]
	}
	owner := jobOwner(wl)
	if n > 0 || owner == nil {
		return int32(n), nil
	}
	job := &convoy.TrainingJob{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: owner.Name}, job); err != nil || job.UID != owner.UID || job.Spec.GPU == nil {
		return 0, client.IgnoreNotFound(err)
	}
	for _, ps := range wl.Spec.PodSets {
		if ps.Name == kueue.PodSetReference(mlframework.RoleWorker) {
			n += int64(ps.Count) * int64(job.GPUsPerWorker())
		}
	}
	return int32(n), nil
}

// peers are the elastic jobs running in ClusterQueue cq that ok accepts, as the policy sees them,
// and the GPUs that those asked to shrink free once they have checkpointed.
func (r *Resizer) peers(ctx context.Context, slices map[client.ObjectKey]runningSlice, cq string, ok func(*convoy.TrainingJob) bool) ([]elastic.Job, int32, error) {
	var out []elastic.Job
	var shrinking int32
	for key, s := range slices {
		if s.grow != nil || string(s.wl.Status.Admission.ClusterQueue) != cq {
			continue
		}
		job := &convoy.TrainingJob{}
		if err := r.Client.Get(ctx, key, job); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return nil, 0, err
		}
		if ok(job) {
			j := policyJob(job, s.wl)
			if to, asked := job.ElasticShrinkTo(); asked {
				shrinking += (j.Current - to) * j.GPUsPerWorker
				j.Current = to
			}
			out = append(out, j)
		}
	}
	return out, shrinking, nil
}

// settling reports whether one of the jobs started or resized within resizeRecheck: the
// ClusterQueue's usage may not show it yet, and shrinking on it would free the same GPUs twice.
func settling(jobs []elastic.Job, now time.Time) bool {
	for _, j := range jobs {
		if now.Sub(j.LastResize) < resizeRecheck {
			return true
		}
	}
	return false
}

// resizable reports whether the job is an elastic job running under Kueue's Workload slices.
func resizable(job *convoy.TrainingJob) bool {
	return job.IsElastic() && jobframework.WorkloadSliceEnabled((*Job)(job)) && job.DeletionTimestamp.IsZero() &&
		meta.IsStatusConditionTrue(job.Status.Conditions, convoy.ConditionRunning)
}

// growable reports whether the job is resizable, below spec.numWorkers, not asked to shrink, and
// its status shows its size: its cooldown then counts from its last change of size.
func growable(job *convoy.TrainingJob) bool {
	_, shrinking := job.ElasticShrinkTo()
	e := job.Status.Elastic
	return resizable(job) && job.WorkerCount() < job.Spec.NumWorkers && !shrinking && e != nil && e.TargetWorkers == job.WorkerCount()
}

// runningSlice is the admitted Workload slice of an elastic TrainingJob, and the larger one that
// waits to replace it (nil when none).
type runningSlice struct {
	wl, grow *kueue.Workload
}

// runningSlices are the admitted, unfinished Workloads of TrainingJobs by job, each with the slice
// that waits to replace it. Kueue finishes the running slice as replaced as soon as the grow's
// slice reserves quota, before that slice's admission checks pass: the replaced slice then stands
// for the workers that run.
func runningSlices(wls []kueue.Workload) map[client.ObjectKey]runningSlice {
	out := map[client.ObjectKey]runningSlice{}
	pending := map[client.ObjectKey]*kueue.Workload{}
	replaced := map[workload.Reference]*kueue.Workload{}
	for i := range wls {
		wl := &wls[i]
		owner := jobOwner(wl)
		if owner == nil {
			continue
		}
		key := client.ObjectKey{Namespace: wl.Namespace, Name: owner.Name}
		switch {
		case workloadslicing.IsReplaced(wl.Status):
			if wl.Status.Admission != nil {
				replaced[workload.Key(wl)] = wl
			}
		case workload.IsFinished(wl):
		case workload.IsAdmitted(wl) && wl.Status.Admission != nil:
			out[key] = runningSlice{wl: wl}
		default:
			pending[key] = wl
		}
	}
	for key, wl := range pending {
		s, ok := out[key]
		if !ok {
			if ref := workloadslicing.ReplacementForKey(wl); ref != nil && replaced[*ref] != nil {
				s, ok = runningSlice{wl: replaced[*ref]}, true
			}
		}
		if ok {
			s.grow = wl
			out[key] = s
		}
	}
	return out
}

// policyJob is the job as the resize policy sees it.
func policyJob(job *convoy.TrainingJob, wl *kueue.Workload) elastic.Job {
	j := elastic.Job{Key: client.ObjectKeyFromObject(job).String(), Min: job.ElasticMinWorkers(), Max: job.Spec.NumWorkers,
		Current: job.WorkerCount(), Admitted: job.ElasticAdmittedWorkers(), GPUsPerWorker: job.GPUsPerWorker(),
		Cooldown: job.ResizeCooldown(), MinEfficiency: job.MinScalingEfficiency()}
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
		j.Withdrawn = e.WithdrawnGrows
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
