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
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workloadslicing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/elastic"
)

// PreemptionGateName is the preemption gate every Workload is created with while Kueue's
// MultiKueueOrchestratedPreemption and ElasticJobsViaWorkloadSlices gates are on (a TrainingJob's
// by gatingClient, any other kind's by GateWebhook), unless MultiKueue dispatches it: Kueue admits
// the Workload into free quota as usual, but does not preempt for it until the gate opens
// (PreemptionGate).
const PreemptionGateName = "convoy.dev/shrink-first"

// ShrinkFirstSlack is how long, beyond the longest spec.checkpoint.preemptionGraceSeconds of the
// jobs it shrinks, a Workload waits for the GPUs elastic jobs free before its gate opens.
const ShrinkFirstSlack = time.Minute

// ReasonShrinkFirst is the event of a job whose Workload waits for elastic jobs to shrink instead
// of Kueue preempting for it.
const ReasonShrinkFirst = "ShrinkFirst"

// PreemptionGate opens PreemptionGateName on a Workload (a TrainingJob's, a batch/Job's, a
// Kubeflow job's...) that Kueue would preempt for, unless elastic TrainingJobs of its ClusterQueue
// can free the GPUs it lacks by shrinking (elastic.Shrink: lower-priority ones toward
// spec.minWorkers, same-priority ones to the size they started at), in a GPU flavor its pods can
// use (shrinksFor: only jobs admitted to that flavor shrink). Then it asks them to shrink, as the
// Resizer does for a job a ClusterQueue that does not preempt leaves waiting, and keeps the gate
// closed until the longest checkpoint grace of
// the jobs it shrank and ShrinkFirstSlack have passed: Kueue admits the Workload into the quota
// the shrinks free, and no job is stopped. A Workload that waits for GPU quota lent in its cohort,
// for other resources, or for more than shrinking frees, has its gate opened at once, and Kueue
// preempts as it would without the gate. A grow's Workload slice of a TrainingJob never has its
// gate opened: a grow asks for free quota only, and the Resizer withdraws it. The gate waits on
// the operator: while none runs, gated Workloads are admitted into free quota but not preempted for.
type PreemptionGate struct {
	Resizer  *Resizer
	Recorder events.EventRecorder
}

// GatesPreemption reports whether Workloads are created with PreemptionGateName.
func GatesPreemption() bool {
	return features.Enabled(features.MultiKueueOrchestratedPreemption) && features.Enabled(features.ElasticJobsViaWorkloadSlices)
}

// gatingClient creates Workloads with PreemptionGateName, for Kueue's job reconciler of TrainingJobs.
// A job MultiKueue dispatches (spec.managedBy) gets none: MultiKueue copies the Workload's spec to
// the worker clusters and takes a gate of the manager's for a spec out of sync, deleting the
// copies again and again.
type gatingClient struct{ client.Client }

func (c gatingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if wl, ok := obj.(*kueue.Workload); ok && !slices.ContainsFunc(wl.Spec.PreemptionGates, isShrinkFirst) && !c.dispatched(ctx, wl) {
		wl.Spec.PreemptionGates = append(wl.Spec.PreemptionGates, kueue.PreemptionGate{Name: PreemptionGateName})
	}
	return c.Client.Create(ctx, obj, opts...)
}

// dispatched reports whether the Workload's TrainingJob is managed by another controller
// (MultiKueue); a job that cannot be read counts as not.
func (c gatingClient) dispatched(ctx context.Context, wl *kueue.Workload) bool {
	owner := jobOwner(wl)
	if owner == nil {
		return false
	}
	job := &convoy.TrainingJob{}
	return c.Client.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: owner.Name}, job) == nil && job.UID == owner.UID && job.ManagedElsewhere()
}

func isShrinkFirst(g kueue.PreemptionGate) bool { return g.Name == PreemptionGateName }

// GatePath is the path of GateWebhook, as deploy/kueue/webhook.yaml names it.
const GatePath = "/mutate-kueue-x-k8s-io-v1beta2-workload-shrink-first"

// GateWebhook creates the Workloads Kueue makes for kinds other than TrainingJob (batch/Job,
// JobSet, Kubeflow's jobs...) with PreemptionGateName, so that elastic TrainingJobs shrink for
// them as for a TrainingJob. It leaves a TrainingJob's Workload to gatingClient, and a Workload
// whose LocalQueue feeds a ClusterQueue with a MultiKueue admission check without a gate, for the
// reason gatingClient gives. deploy/kueue/webhook.yaml calls it for new Workloads only, with
// failurePolicy Ignore: while the operator is down, Workloads are created without the gate, and
// Kueue preempts for them as it would without Convoy.
type GateWebhook struct {
	// Client reads LocalQueues, ClusterQueues and AdmissionChecks.
	Client client.Reader
}

var _ admission.Defaulter[*kueue.Workload] = GateWebhook{}

// Default closes the gate of a new Workload.
func (w GateWebhook) Default(ctx context.Context, wl *kueue.Workload) error {
	if !GatesPreemption() || jobOwner(wl) != nil || slices.ContainsFunc(wl.Spec.PreemptionGates, isShrinkFirst) {
		return nil
	}
	if wl.Spec.QueueName != "" {
		if multi, err := dispatchingQueue(ctx, w.Client, wl.Namespace, string(wl.Spec.QueueName)); err != nil || multi {
			return err
		}
	}
	wl.Spec.PreemptionGates = append(wl.Spec.PreemptionGates, kueue.PreemptionGate{Name: PreemptionGateName})
	return nil
}

// SetupWithManager watches the Workloads whose gate is closed.
func (g *PreemptionGate) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("trainingjob-preemption-gate").
		For(&kueue.Workload{}, ctrlbuilder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			wl, ok := o.(*kueue.Workload)
			return ok && gateClosed(wl)
		}))).
		Complete(g)
}

// gateClosed reports whether the Workload has PreemptionGateName and Kueue has not seen it opened.
func gateClosed(wl *kueue.Workload) bool {
	if !slices.ContainsFunc(wl.Spec.PreemptionGates, isShrinkFirst) {
		return false
	}
	for _, s := range wl.Status.PreemptionGates {
		if s.Name == PreemptionGateName {
			return s.Position != kueue.PreemptionGatePositionOpen
		}
	}
	return true
}

// gateDecides reports whether the shrinks for a waiting Workload are PreemptionGate's to decide,
// not the Resizer's: its gate is closed and Kueue found it blocked on it (Kueue would preempt for
// it), or has not tried to admit it yet (it may find so). Only one of the two asks elastic jobs to
// shrink for a Workload, and PreemptionGate's ShrinkFirst event then tells its job why it waits.
func gateDecides(wl *kueue.Workload) bool {
	if !gateClosed(wl) {
		return false
	}
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadBlockedOnPreemptionGates) ||
		meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved) == nil
}

// Reconcile opens the gate of a Workload Kueue would preempt for, or shrinks elastic jobs for it.
func (g *PreemptionGate) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r := g.Resizer
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, req.NamespacedName, wl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	blocked := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadBlockedOnPreemptionGates)
	if !gateClosed(wl) || blocked == nil || blocked.Status != metav1.ConditionTrue || workload.HasQuotaReservation(wl) ||
		workload.IsFinished(wl) || jobOwner(wl) != nil && workloadslicing.ReplacementForKey(wl) != nil {
		return ctrl.Result{}, nil
	}
	now := r.now()
	wls := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, wls); err != nil {
		return ctrl.Result{}, err
	}
	cqName, err := r.clusterQueueOf(ctx, wl)
	if err != nil || cqName == "" {
		return ctrl.Result{}, err
	}
	cq := &kueue.ClusterQueue{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: cqName}, cq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	asks, err := r.gpusOf(ctx, wl)
	if err != nil {
		return ctrl.Result{}, err
	}
	slices := runningSlices(wls.Items)
	peers, shrinking, err := r.peers(ctx, slices, cqName, resizable)
	if err != nil {
		return ctrl.Result{}, err
	}
	if shrinking > 0 || settling(peers, now) {
		// Shrinks asked before (by this or the Resizer) free GPUs the ClusterQueue does not show
		// yet: wait for them until the deadline.
		return g.waitOrOpen(ctx, wl, blocked.LastTransitionTime.Time.Add(r.shrinkGrace(ctx, peers)+ShrinkFirstSlack), now,
			"the elastic jobs asked to shrink did not free its GPUs in time")
	}
	decided, need, err := r.shrinksFor(ctx, cq, wl, asks, 0, peers, slices)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(decided) == 0 {
		why := "no elastic job of its ClusterQueue can shrink to free the GPUs it lacks"
		if need <= 0 {
			why = "it waits for other than its ClusterQueue's own GPU quota"
		}
		return ctrl.Result{}, g.open(ctx, wl, why)
	}
	var shrunk []string
	for _, rs := range decided {
		job, err := r.policyJobObject(ctx, rs.Key)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.resize(ctx, job, rs); err != nil {
			return ctrl.Result{}, err
		}
		shrunk = append(shrunk, fmt.Sprintf("%s from %d to %d workers", rs.Key, rs.From, rs.To))
	}
	if g.Recorder != nil {
		g.Recorder.Eventf(ownerOf(wl), nil, corev1.EventTypeNormal, ReasonShrinkFirst, "Shrink",
			"Kueue would preempt for the %d GPUs the job lacks; elastic jobs shrink instead (%s), and it is admitted into the quota they free",
			need, strings.Join(shrunk, ", "))
	}
	return ctrl.Result{RequeueAfter: resizeRecheck}, nil
}

// ownerOf is the job that owns the Workload (a TrainingJob, a batch/Job...) as an event names it,
// or the Workload when nothing owns it.
func ownerOf(wl *kueue.Workload) runtime.Object {
	owner := metav1.GetControllerOf(wl)
	if owner == nil {
		return wl
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: owner.APIVersion, Kind: owner.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: owner.Name, UID: owner.UID},
	}
}

// waitOrOpen opens the gate at deadline, and otherwise looks again a recheck later.
func (g *PreemptionGate) waitOrOpen(ctx context.Context, wl *kueue.Workload, deadline, now time.Time, why string) (ctrl.Result, error) {
	if now.Before(deadline) {
		return ctrl.Result{RequeueAfter: min(resizeRecheck, deadline.Sub(now))}, nil
	}
	return ctrl.Result{}, g.open(ctx, wl, why)
}

// open opens the Workload's gate: Kueue preempts for it as it would without one.
func (g *PreemptionGate) open(ctx context.Context, wl *kueue.Workload, why string) error {
	ctrl.LoggerFrom(ctx).V(2).Info("Opening the preemption gate", "workload", klog.KObj(wl), "why", why)
	workload.SetPreemptionGatePosition(wl, PreemptionGateName, kueue.PreemptionGatePositionOpen, metav1.NewTime(g.Resizer.now()))
	return g.Resizer.Client.Status().Update(ctx, wl)
}

// shrinkGrace is the longest checkpoint grace (spec.checkpoint.preemptionGraceSeconds) of the
// elastic jobs: a job asked to shrink waits for a checkpoint that long at most.
func (r *Resizer) shrinkGrace(ctx context.Context, peers []elastic.Job) time.Duration {
	var grace time.Duration
	for _, p := range peers {
		if job, err := r.policyJobObject(ctx, p.Key); err == nil {
			grace = max(grace, job.PreemptionGrace())
		}
	}
	return grace
}

// policyJobObject is the TrainingJob of a policy job's key (namespace/name, as policyJob writes it).
func (r *Resizer) policyJobObject(ctx context.Context, key string) (*convoy.TrainingJob, error) {
	ns, name, _ := strings.Cut(key, "/")
	job := &convoy.TrainingJob{}
	return job, r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)
}

// clusterQueueOf is the ClusterQueue of the Workload's LocalQueue; "" when it has none.
func (r *Resizer) clusterQueueOf(ctx context.Context, wl *kueue.Workload) (string, error) {
	lq := &kueue.LocalQueue{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}, lq); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return string(lq.Spec.ClusterQueue), nil
}
