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

// Package admissioncheck is Convoy's placement admission check: a Kueue AdmissionCheck controller,
// run inside convoy-scheduler, that lets Kueue admit a Workload only when the scheduler has a place
// for its whole gang, and holds that place for the gang until its pods come. See README.md.
package admissioncheck

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/util/admissioncheck"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
)

// ControllerName is the spec.controllerName of the AdmissionChecks this controller serves.
const ControllerName = "convoy.dev/placement"

// fieldOwner is the controller's field manager on Workload status.
const fieldOwner = client.FieldOwner("convoy-placement-check")

// Options configure the controller; they come from GangPlacementArgs.
type Options struct {
	// BookingTimeout is how long a booking waits for the gang's pods once the Workload is
	// admitted; then it is released and the check set to Retry, so Kueue releases the quota too.
	BookingTimeout time.Duration
	// Lease is the scheduler's leader-election Lease: only the replica that holds it decides (its
	// State is the one that schedules). Empty without leader election. A replica knows it holds
	// the Lease from client-go's leader_election_master_status gauge, which kube-scheduler's leader
	// election sets in its own process.
	Lease types.NamespacedName
	// Recheck is how often a Workload whose gang does not fit, or whose booking waits, is looked
	// at again.
	Recheck time.Duration
}

// DefaultRecheck is how often a Workload whose gang does not fit is planned again.
const DefaultRecheck = 3 * time.Second

// Reconciler sets the state of Convoy's placement check on Workloads.
type Reconciler struct {
	client client.Client
	state  *gangcore.State
	opts   Options
	clock  clock.Clock

	leadMu  sync.Mutex
	leadAt  time.Time
	leading bool
}

var started sync.Map

// Start runs the controller for st, once per State, when the API server serves Kueue's Workloads;
// without them it logs why and does nothing.
func Start(ctx context.Context, cfg *rest.Config, st *gangcore.State, opts Options) error {
	if _, loaded := started.LoadOrStore(st, true); loaded {
		return nil
	}
	logger := klog.FromContext(ctx).WithName("admissioncheck")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kueue.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	// The scheduler's client speaks protobuf, which Kueue's types do not.
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(kueue.GroupVersion.WithKind("Workload").GroupKind(), kueue.GroupVersion.Version); err != nil {
		logger.Info("Kueue's Workloads are not served: the placement admission check does not run", "err", err)
		return nil
	}
	r := &Reconciler{client: mgr.GetClient(), state: st, opts: opts, clock: clock.RealClock{}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("placement-check").For(&kueue.Workload{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).Complete(r); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("placement-check-active").For(&kueue.AdmissionCheck{}).
		Complete(reconcile.Func(r.reconcileCheck)); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			logger.Error(err, "The placement admission check stopped")
		}
	}()
	logger.Info("Started the placement admission check", "controllerName", ControllerName, "bookingTimeout", opts.BookingTimeout, "lease", opts.Lease)
	return nil
}

// Reconcile sets the check on one Workload: Ready, with the gang booked, when its quota is
// reserved and its gang fits; Pending with the planner's reason while it does not; Retry when the
// booking of an admitted gang broke or went unused for BookingTimeout.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	leads := r.leads(ctx)
	wl := &kueue.Workload{}
	if err := r.client.Get(ctx, req.NamespacedName, wl); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.releaseFor(req.String())
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	checks, err := admissioncheck.FilterForController(ctx, r.client, wl.Status.AdmissionChecks, ControllerName)
	if err != nil || len(checks) == 0 {
		r.releaseFor(req.String())
		return reconcile.Result{}, err
	}
	key := gangKey(wl)
	if !isTrue(wl, kueue.WorkloadQuotaReserved) || isTrue(wl, kueue.WorkloadFinished) || isTrue(wl, kueue.WorkloadEvicted) || !ptr.Deref(wl.Spec.Active, true) {
		r.releaseFor(req.String())
		return reconcile.Result{}, nil
	}
	check := admissioncheck.FindAdmissionCheck(wl.Status.AdmissionChecks, checks[0])
	if !leads {
		return reconcile.Result{RequeueAfter: r.opts.Recheck}, r.mirror(ctx, wl, check, key)
	}
	if isTrue(wl, kueue.WorkloadAdmitted) {
		return r.keepBooking(ctx, wl, check, key)
	}
	if check.State != kueue.CheckStatePending && check.State != kueue.CheckStateReady {
		// Retry or Rejected: Kueue releases the quota, and the check is Pending again when it
		// reserves it anew.
		r.releaseFor(req.String())
		return reconcile.Result{}, nil
	}
	pods, err := gangPods(ctx, r.client, wl, false)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(pods) == 0 {
		// An elastic job's grow withdrawn to the size it runs at: every pod has its place.
		return reconcile.Result{}, r.setChecks(ctx, wl, checks, kueue.CheckStateReady, RunningMessage)
	}
	moveTried := false
	if _, move := convoy.ElasticMoveAttempt(check.Message); move && check.State == kueue.CheckStateReady {
		// A move once offered stays offered while it fits: booking the grow in place first would
		// drop the move's booking at every recheck.
		if res, done, err := r.offerMove(ctx, wl, checks, key, convoy.ElasticMoveReason(check.Message)); done {
			return res, err
		}
		moveTried = true
	}
	where, err := r.state.Book(ctx, req.String(), key, pods)
	if err != nil {
		log := ctrl.LoggerFrom(ctx)
		log.V(2).Info("The gang does not fit", "workload", klog.KObj(wl), "reason", err.Error())
		if !moveTried { // the move tried above fits no better now
			if res, done, merr := r.offerMove(ctx, wl, checks, key, err.Error()); done {
				return res, merr
			}
		}
		return reconcile.Result{RequeueAfter: r.opts.Recheck}, r.setChecks(ctx, wl, checks, kueue.CheckStatePending, NoPlaceMessage+err.Error())
	}
	return reconcile.Result{RequeueAfter: r.opts.Recheck}, r.setChecks(ctx, wl, checks, kueue.CheckStateReady, where)
}

// offerMove books the gang of wl, the Workload slice of an elastic job that grows, whose added
// workers have no room beside its running ones (why), to move whole (gangcore.State.BookMove), and
// sets the checks Ready with a message that tells the operator to restart the gang there
// (convoy.ElasticMoveMessage). done is false, and nothing is set, when wl replaces no slice or the
// whole gang fits nowhere either.
func (r *Reconciler) offerMove(ctx context.Context, wl *kueue.Workload, checks []kueue.AdmissionCheckReference, key, why string) (res reconcile.Result, done bool, err error) {
	if wl.Annotations[replacementFor] == "" {
		return reconcile.Result{}, false, nil
	}
	pods, err := gangPods(ctx, r.client, wl, true)
	if err != nil {
		return reconcile.Result{}, true, err
	}
	where, attempt, err := r.state.BookMove(ctx, client.ObjectKeyFromObject(wl).String(), key, pods)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("The grown gang does not fit elsewhere either", "workload", klog.KObj(wl), "reason", err.Error())
		return reconcile.Result{}, false, nil
	}
	return reconcile.Result{RequeueAfter: r.opts.Recheck}, true, r.setChecks(ctx, wl, checks, kueue.CheckStateReady, where+convoy.ElasticMoveMessage(attempt, why))
}

// mirror holds, in a replica that does not lead, the booking the leader's check says it holds for
// the Workload, dated from when the check went Ready, and drops it when the check no longer says
// so or the gang's pods have come: once this replica leads, its first scheduling cycle keeps off
// the places the leader booked.
func (r *Reconciler) mirror(ctx context.Context, wl *kueue.Workload, check *kueue.AdmissionCheckState, key string) error {
	workload := client.ObjectKeyFromObject(wl).String()
	if check.State != kueue.CheckStateReady || !strings.HasPrefix(check.Message, gangcore.BookingMessagePrefix) || r.podsCame(key) {
		r.releaseFor(workload)
		return nil
	}
	pods, err := gangPods(ctx, r.client, wl, false)
	if err != nil {
		return err
	}
	if _, err := r.state.Book(ctx, workload, key, pods); err == nil {
		r.state.DateBooking(key, check.LastTransitionTime.Time)
	}
	return nil
}

// NoPlaceMessage starts the message of a check that waits for room.
const NoPlaceMessage = "convoy-scheduler has no place for the gang yet: "

// keepBooking looks after the booking of an admitted Workload until the gang's pods are planned
// (the booking is then gone, and the check's message says the pods took the place): released, and
// the check set to Retry, when it went unused for BookingTimeout or the nodes changed under it and
// the gang no longer fits. A booking this replica does not hold while the check still says it is
// held was made by the replica that led before it: it is booked again here, its timeout counted
// from when the check went Ready.
func (r *Reconciler) keepBooking(ctx context.Context, wl *kueue.Workload, check *kueue.AdmissionCheckState, key string) (reconcile.Result, error) {
	if check.State != kueue.CheckStateReady {
		return reconcile.Result{}, nil
	}
	checks := []kueue.AdmissionCheckReference{check.Name}
	at, ok := r.state.BookedAt(key)
	if !ok {
		if !strings.HasPrefix(check.Message, gangcore.BookingMessagePrefix) {
			return reconcile.Result{}, nil
		}
		if r.podsCame(key) {
			return reconcile.Result{}, r.setChecks(ctx, wl, checks, kueue.CheckStateReady, PlacedMessage)
		}
		at = check.LastTransitionTime.Time
	}
	if waited := r.clock.Since(at); waited >= r.opts.BookingTimeout {
		r.state.ReleaseBooking(key)
		return reconcile.Result{}, r.setChecks(ctx, wl, checks, kueue.CheckStateRetry,
			fmt.Sprintf("the gang's pods did not reach convoy-scheduler within %s of its admission: the place held for it is released, and Kueue queues it again", r.opts.BookingTimeout))
	}
	_, move := convoy.ElasticMoveAttempt(check.Message)
	pods, err := gangPods(ctx, r.client, wl, move)
	if err != nil {
		return reconcile.Result{}, err
	}
	workload := client.ObjectKeyFromObject(wl).String()
	if move {
		_, _, err = r.state.BookMove(ctx, workload, key, pods)
	} else {
		_, err = r.state.Book(ctx, workload, key, pods)
	}
	if err != nil {
		return reconcile.Result{}, r.setChecks(ctx, wl, checks, kueue.CheckStateRetry,
			"the nodes held for the gang changed and it no longer fits: "+err.Error()+"; Kueue queues it again")
	}
	switch {
	case move && r.podsCame(key):
		// The gang that moves runs on, checkpoints and stops before its pods come again: the
		// booking's timeout counts from when none is left.
		r.state.DateBooking(key, r.clock.Now())
	case !ok:
		r.state.DateBooking(key, at)
	}
	return reconcile.Result{RequeueAfter: min(r.opts.Recheck, r.opts.BookingTimeout-r.clock.Since(at))}, nil
}

// podsCame reports whether the scheduler sees pods of the gang key ("namespace/podgroup"): they
// take, or have taken, the place booked for them.
func (r *Reconciler) podsCame(key string) bool {
	ns, name, _ := strings.Cut(key, "/")
	return len(r.state.PodGroupPods(ns, name)) > 0
}

// RunningMessage is the message of a Ready check on a Workload slice that adds no pods to those of
// the slice it replaces, which run.
const RunningMessage = "the Workload slice adds no pods to the running gang's"

// PlacedMessage is the message of a Ready check whose gang's pods have taken the place booked for
// them.
const PlacedMessage = "the gang's pods reached convoy-scheduler and took the place held for them"

// setChecks sets the state and message of the Workload's checks, when they differ.
func (r *Reconciler) setChecks(ctx context.Context, wl *kueue.Workload, checks []kueue.AdmissionCheckReference, state kueue.CheckState, message string) error {
	message = truncate(message)
	changed := false
	for _, name := range checks {
		c := admissioncheck.FindAdmissionCheck(wl.Status.AdmissionChecks, name)
		changed = changed || c == nil || c.State != state || c.Message != message
	}
	if !changed {
		return nil
	}
	now := metav1.NewTime(r.clock.Now())
	for _, name := range checks {
		c := admissioncheck.FindAdmissionCheck(wl.Status.AdmissionChecks, name)
		if c == nil {
			continue
		}
		if c.State != state {
			c.State, c.LastTransitionTime = state, now
		}
		c.Message = message
		if state == kueue.CheckStateRetry {
			// Kueue waits this long before it reserves the quota again.
			c.RetryCount = ptr.To(ptr.Deref(c.RetryCount, 0) + 1)
			c.RequeueAfterSeconds = ptr.To(int32(r.opts.Recheck.Seconds()) + 1)
		}
	}
	return client.IgnoreNotFound(r.client.Status().Update(ctx, wl, fieldOwner))
}

// isTrue reports whether the Workload's condition is true.
func isTrue(wl *kueue.Workload, condition string) bool {
	return apimeta.IsStatusConditionTrue(wl.Status.Conditions, condition)
}

// truncate keeps a message within the API's 32 KiB limit of an admission check's message.
func truncate(s string) string {
	const limit = 2048
	if len(s) <= limit {
		return s
	}
	return s[:limit-3] + "..."
}

// releaseFor drops the booking held for the Workload namespace/name, if any.
func (r *Reconciler) releaseFor(workload string) {
	for key, wl := range r.state.Bookings() {
		if wl == workload {
			r.state.ReleaseBooking(key)
		}
	}
}

// reconcileCheck marks Convoy's AdmissionChecks active: Kueue only reserves quota for Workloads
// whose checks are.
func (r *Reconciler) reconcileCheck(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ac := &kueue.AdmissionCheck{}
	if err := r.client.Get(ctx, req.NamespacedName, ac); err != nil || ac.Spec.ControllerName != ControllerName {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !r.leads(ctx) {
		return reconcile.Result{RequeueAfter: r.opts.Recheck}, nil
	}
	cond := metav1.Condition{Type: kueue.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active",
		Message: "convoy-scheduler checks that each gang has a place before Kueue admits it", ObservedGeneration: ac.Generation}
	if c := apimeta.FindStatusCondition(ac.Status.Conditions, cond.Type); c != nil && c.Status == cond.Status && c.ObservedGeneration == cond.ObservedGeneration {
		return reconcile.Result{}, nil
	}
	apimeta.SetStatusCondition(&ac.Status.Conditions, cond)
	return reconcile.Result{}, client.IgnoreNotFound(r.client.Status().Update(ctx, ac))
}

// leads reports whether this scheduler holds its leader-election Lease. It reads client-go's
// leader_election_master_status gauge, which the scheduler's leader election sets to 1 in the
// process that holds the Lease (cmd/convoy-scheduler registers it, as upstream's main does); a
// Lease holder's identity, "<hostname>_<uuid>", does not tell two replicas on one host apart. It
// is read at most once a second.
func (r *Reconciler) leads(ctx context.Context) bool {
	if r.opts.Lease.Name == "" {
		return true
	}
	r.leadMu.Lock()
	defer r.leadMu.Unlock()
	if r.clock.Since(r.leadAt) < time.Second {
		return r.leading
	}
	r.leading = leaderGauge(ctx)
	r.leadAt = r.clock.Now()
	return r.leading
}

// leaderGauge reports whether a leader election of this process holds its lock, by the
// leader_election_master_status gauge.
func leaderGauge(ctx context.Context) bool {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the leader-election gauge")
	}
	for _, f := range families {
		if f.GetName() != "leader_election_master_status" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() == 1 {
				return true
			}
		}
	}
	return false
}

// gangKey names the Workload's gang as the scheduler does its pods': namespace/podgroup, from the
// pod-group label of its pod templates (a TrainingJob's carry it), else namespace/workload.
func gangKey(wl *kueue.Workload) string {
	for _, ps := range wl.Spec.PodSets {
		if pg := ps.Template.Labels[schedv1alpha1.PodGroupLabel]; pg != "" {
			return wl.Namespace + "/" + pg
		}
	}
	return wl.Namespace + "/" + wl.Name
}

// gangPods are the pods the Workload will run, as admitted: each PodSet's template, as many times
// as the quota was reserved for, with the node labels and tolerations of the flavors it was given
// (what the job's pods get on admission) and the Workload's priority; each with its rank in its
// pod set. A Workload slice that replaces a running one (an elastic job that grows) needs places
// only for the pods it adds: those of the replaced slice run already.
func gangPods(ctx context.Context, c client.Client, wl *kueue.Workload, whole bool) ([]*corev1.Pod, error) {
	var running map[kueue.PodSetReference]int32
	if !whole {
		var err error
		if running, err = replacedCounts(ctx, c, wl); err != nil {
			return nil, err
		}
	}
	var pods []*corev1.Pod
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		count := ps.Count
		var selector map[string]string
		var tolerations []corev1.Toleration
		if wl.Status.Admission != nil {
			for j := range wl.Status.Admission.PodSetAssignments {
				a := &wl.Status.Admission.PodSetAssignments[j]
				if a.Name != ps.Name {
					continue
				}
				count = assigned(a, count)
				var err error
				if selector, tolerations, err = flavorsOf(ctx, c, a); err != nil {
					return nil, fmt.Errorf("reading the flavors of pod set %s: %w", ps.Name, err)
				}
			}
		}
		for rank := running[ps.Name]; rank < count; rank++ {
			name := fmt.Sprintf("%s-%s-%d", wl.Name, ps.Name, rank)
			pod := &corev1.Pod{ObjectMeta: *ps.Template.ObjectMeta.DeepCopy(), Spec: *ps.Template.Spec.DeepCopy()}
			pod.Namespace, pod.Name, pod.UID = wl.Namespace, name, types.UID(string(wl.UID)+"/"+name)
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels[convoy.LabelReplicaRank] = strconv.Itoa(int(rank))
			pod.Spec.Priority = wl.Spec.Priority
			if len(selector) > 0 && pod.Spec.NodeSelector == nil {
				pod.Spec.NodeSelector = map[string]string{}
			}
			maps.Copy(pod.Spec.NodeSelector, selector)
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, tolerations...)
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// replacementFor is Kueue's annotation on a Workload slice that replaces another
// (workloadslicing.WorkloadSliceReplacementFor, whose package would bring Kueue's scheduler into
// convoy-scheduler): namespace/name of the replaced slice.
const replacementFor = "kueue.x-k8s.io/workload-slice-replacement-for"

// replacedCounts are the pods by pod set of the slice wl replaces, as admitted; nil when wl
// replaces none or the replaced slice is gone.
func replacedCounts(ctx context.Context, c client.Client, wl *kueue.Workload) (map[kueue.PodSetReference]int32, error) {
	ref := wl.Annotations[replacementFor]
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok {
		return nil, nil
	}
	old := &kueue.Workload{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, old); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	counts := map[kueue.PodSetReference]int32{}
	for _, ps := range old.Spec.PodSets {
		counts[ps.Name] = ps.Count
	}
	if old.Status.Admission != nil {
		for i := range old.Status.Admission.PodSetAssignments {
			a := &old.Status.Admission.PodSetAssignments[i]
			counts[a.Name] = assigned(a, counts[a.Name])
		}
	}
	return counts, nil
}

// assigned is the pods of a pod set of count pods that its assignment admitted: the assignment's
// count (partial admission sets it lower), or count when an elastic job's shrink, or a grow it
// withdrew, lowered the pod set's count since (Kueue then counts that much of the usage too).
func assigned(a *kueue.PodSetAssignment, count int32) int32 {
	return min(ptr.Deref(a.Count, count), count)
}

// flavorsOf returns the node labels and tolerations of the flavors of a pod set's assignment.
func flavorsOf(ctx context.Context, c client.Client, a *kueue.PodSetAssignment) (map[string]string, []corev1.Toleration, error) {
	selector := map[string]string{}
	var tolerations []corev1.Toleration
	seen := map[kueue.ResourceFlavorReference]bool{}
	for _, ref := range a.Flavors {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		rf := &kueue.ResourceFlavor{}
		if err := c.Get(ctx, client.ObjectKey{Name: string(ref)}, rf); err != nil {
			return nil, nil, err
		}
		maps.Copy(selector, rf.Spec.NodeLabels)
		tolerations = append(tolerations, rf.Spec.Tolerations...)
	}
	return selector, tolerations, nil
}
