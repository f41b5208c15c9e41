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

// Package controller is the TrainingJob reconciler: it reads a job and its pods from the cache,
// decides the job's state (decide in state.go, through its phases), writes the status once when
// it changed, and then creates and deletes children to match.
package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/builder"
	"github.com/convoy-dev/convoy/operator/pkg/cost"
	"github.com/convoy-dev/convoy/operator/pkg/metrics"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// Name is the controller's name in logs and metrics, and the events' source.
const Name = "trainingjob"

// Field indexes on the pod cache.
const (
	podOwnerKey = ".metadata.controller.trainingjob"
	podNodeKey  = "spec.nodeName"
)

// writeConcurrency bounds the pod creations and deletions of one reconcile in flight together.
const writeConcurrency = 16

// Reconciler drives TrainingJobs through their lifecycle.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads past the cache; it confirms that a node is gone before pods on it are lost.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Metrics   *metrics.Recorder
	Options   builder.Options
	// Queue reports on jobs that name a queue; nil until the queue integration is wired in.
	Queue   Queue
	Backoff Backoff
	// Notice says which node taints and conditions announce a node's removal; DefaultReclaimNotice
	// when zero. The manager's cache must be CacheOptions(Notice, Options.WorkloadAPI).
	Notice ReclaimNotice
	Clock  clock.PassiveClock
	// Prices reads the administrator's price list; nil prices nothing (status.cost has GPU-hours only).
	Prices *cost.Book
	// NewSSHKeyPair makes the key pair of an SSH Secret; builder.NewSSHKeyPair when nil.
	NewSSHKeyPair func() (privateKeyPEM, authorizedKey []byte, err error)

	expect expectations
	// superseded maps a job to the resourceVersion its last status write replaced, until the
	// cache has moved past it: a reconcile must not act on a view older than its own write.
	superseded sync.Map
	// uncounted holds the jobs whose last reconcile did not create pods its status counted
	// (plan.counted): their next status counts only the pods there are, so that a job whose
	// creations keep failing is not written twice a retry.
	uncounted sync.Map
}

// CacheOptions limit the manager's cache to what the operator needs: of pods, Services,
// ConfigMaps and PodGroups only those carrying the job-name label, so that a cluster's other
// objects cost the operator no memory, and of every object its managedFields dropped (the
// operator never reads them; a cached pod's are a good part of it). Of nodes it keeps the
// metadata, the taints and the conditions of notice (a zero notice: DefaultReclaimNotice). With
// workloadAPI (builder.Options.WorkloadAPI) it holds the jobs' scheduling.k8s.io Workloads and
// PodGroups too.
func CacheOptions(notice ReclaimNotice, workloadAPI bool) cache.Options {
	notice = notice.orDefault()
	req, err := labels.NewRequirement(convoy.LabelJobName, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	owned := cache.ByObject{Label: labels.NewSelector().Add(*req)}
	opts := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:             owned,
		&corev1.Service{}:         owned,
		&corev1.ConfigMap{}:       owned,
		&schedv1alpha1.PodGroup{}: owned,
		// Checkpoint claims, labelled for their job whether it owns them or not.
		&corev1.PersistentVolumeClaim{}: owned,
		&networkingv1.NetworkPolicy{}:   owned,
		&policyv1.PodDisruptionBudget{}: owned,
		// GPU claim templates and the workers' GPU claims, of jobs with spec.gpu.
		&resourcev1.ResourceClaimTemplate{}: owned,
		&resourcev1.ResourceClaim{}:         owned,
		&corev1.Node{}:                      {Transform: notice.stripNode},
	}}
	if workloadAPI {
		for _, obj := range workloadAPIKinds() {
			opts.ByObject[obj] = owned
		}
	}
	return opts
}

// workloadAPIKinds are empty objects of builder.WorkloadGVK and builder.PodGroupGVK.
func workloadAPIKinds() []client.Object {
	var objs []client.Object
	for _, gvk := range []schema.GroupVersionKind{builder.WorkloadGVK, builder.PodGroupGVK} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		objs = append(objs, u)
	}
	return objs
}

// SetupWithManager registers the pod indexes and the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, concurrency int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Backoff == (Backoff{}) {
		r.Backoff = DefaultBackoff
	}
	r.Notice = r.Notice.orDefault()
	if r.NewSSHKeyPair == nil {
		r.NewSSHKeyPair = builder.NewSSHKeyPair
	}
	if r.Metrics == nil {
		r.Metrics = metrics.NewRecorder()
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &corev1.Pod{}, podOwnerKey, func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == "TrainingJob" && ref.APIVersion == convoy.GroupVersion.String() {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &corev1.Pod{}, podNodeKey, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&convoy.TrainingJob{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&schedv1alpha1.PodGroup{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&resourcev1.ResourceClaimTemplate{}).
		// A worker's GPU claim deleted by hand is made again (syncGPUClaims); its allocation and
		// reservations, the scheduler's and kubelet's writes, are no concern of the job.
		Owns(&resourcev1.ResourceClaim{}, ctrlbuilder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		// The disruption controller rewrites a budget's status as pods come and go: only its spec
		// and its deletion matter here.
		Owns(&policyv1.PodDisruptionBudget{}, ctrlbuilder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.jobsOnNode), ctrlbuilder.WithPredicates(r.Notice.nodeEvents())).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.jobsInNamespace), ctrlbuilder.WithPredicates(podSecurityChanged))
	if q, ok := r.Queue.(ManagedQueue); ok {
		if err := q.SetupWithManager(ctx, mgr); err != nil {
			return fmt.Errorf("setting up the queue integration: %w", err)
		}
		b = b.Owns(q.Owned())
	}
	if r.Options.WorkloadAPI {
		for _, obj := range workloadAPIKinds() {
			b = b.Owns(obj)
		}
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).Complete(r)
}

// jobsOnNode maps a deleted node, or one given a reclaim notice or a not-Ready taint, to the jobs
// with pods on it.
func (r *Reconciler) jobsOnNode(ctx context.Context, node client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.MatchingFields{podNodeKey: node.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the pods of a node", "node", node.GetName())
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for i := range pods.Items {
		name := pods.Items[i].Labels[convoy.LabelJobName]
		key := types.NamespacedName{Namespace: pods.Items[i].Namespace, Name: name}
		if name != "" && !seen[key] {
			seen[key] = true
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs/status,verbs=get;update
// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=workloads;podgroups,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaimtemplates;resourceclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves one TrainingJob a step through its lifecycle.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	began := time.Now()
	defer func() { r.Metrics.ObserveReconcile(req.NamespacedName, time.Since(began), err) }()

	job := &convoy.TrainingJob{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.Forget(req.NamespacedName)
			r.superseded.Delete(req.NamespacedName)
			r.uncounted.Delete(req.NamespacedName)
			r.expect.forgetDeleted(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if job.ManagedElsewhere() {
		// Another controller runs the job (MultiKueue: on a worker cluster) and writes its status.
		return ctrl.Result{}, nil
	}
	if rv, ok := r.superseded.Load(req.NamespacedName); ok {
		if rv == job.ResourceVersion {
			// The event of our own write is on its way and reconciles the job again.
			return ctrl.Result{}, nil
		}
		r.superseded.Delete(req.NamespacedName)
	}
	if !job.DeletionTimestamp.IsZero() {
		r.expect.forget(job.UID)
		return ctrl.Result{}, nil // the garbage collector takes the children
	}
	log := ctrl.LoggerFrom(ctx).WithValues("trainingJob", klog.KObj(job))
	ctx = ctrl.LoggerInto(ctx, log)

	plugin, err := mlframework.For(job.Spec.Framework)
	if err != nil {
		return ctrl.Result{}, r.writeStatus(ctx, job, invalidSpec(job, err, r.Clock.Now()))
	}
	pods, err := r.pods(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	nodes, gone, notices, notReady, err := r.nodes(ctx, pods)
	if err != nil {
		return ctrl.Result{}, err
	}
	var qs QueueStatus
	if r.Queue != nil {
		if qs, err = r.Queue.Status(ctx, job); err != nil {
			return ctrl.Result{}, err
		}
	}
	now := r.Clock.Now()
	unready, err := r.unreadyNodes(ctx, pods, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	prices := cost.Prices{Problem: "the operator runs without a price list"}
	if r.Prices != nil {
		if prices, _, err = r.Prices.Prices(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	pg := &schedv1alpha1.PodGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, pg); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	podOpts, err := r.podOptions(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	p := decide(observation{
		job: job, plugin: plugin, pods: pods, nodes: nodes, goneNodes: gone, notReadyNodes: notReady, reclaimNotices: notices, unreadyNodes: unready, queue: qs,
		podSecurity: builder.MeetsPodSecurity(job, plugin, podOpts), preemptAttempt: preemptAttempt(job, pg), now: now, backoff: r.Backoff,
		prices: prices, spotNodeLabels: r.Options.SpotNodeLabels, uncounted: r.isUncounted(req.NamespacedName),
	})

	if p.shrinkTo > 0 {
		// Kueue accounts for the smaller gang before its workers go.
		if err := r.setElasticWorkers(ctx, job, p.shrinkTo); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		} else if err != nil {
			return ctrl.Result{}, err
		}
	}
	setWandbRun(job, &p.status)
	if err := r.writeStatus(ctx, job, p.status); err != nil {
		if apierrors.IsConflict(err) {
			// The cache is behind the API server; the newer version's event reconciles the job again.
			log.V(2).Info("TrainingJob changed since it was read; reconciling the newer version")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	// job now carries the new status: restart attempt and latest checkpoint for the pods.
	res, uncreated, err := r.act(ctx, job, plugin, p, pods, gone)
	if uncreated > 0 {
		// The retry's status counts only the pods there are (a plain error's within milliseconds).
		r.uncounted.Store(req.NamespacedName, true)
	} else {
		r.uncounted.Delete(req.NamespacedName)
	}
	if err != nil {
		return r.childError(ctx, job, err, uncreated)
	}
	return res, nil
}

// act makes the children and the pods match the plan p, whose status is written. uncreated are
// the pods p.counted in the status that it did not create.
func (r *Reconciler) act(ctx context.Context, job *convoy.TrainingJob, plugin mlframework.Plugin, p plan, pods []*corev1.Pod, gone map[string]bool) (res ctrl.Result, uncreated int32, err error) {
	if err := r.ensureCheckpointClaim(ctx, job, p.ensureChildren); err != nil {
		return ctrl.Result{}, p.counted, err
	}
	if err := r.ensureGPUClaimTemplate(ctx, job); err != nil {
		return ctrl.Result{}, p.counted, err
	}
	if err := r.syncGPUClaims(ctx, job, plugin, pods); err != nil {
		return ctrl.Result{}, p.counted, err
	}
	if p.ensureChildren {
		if err := r.ensureChildren(ctx, job, plugin, len(p.create) > 0); err != nil {
			return ctrl.Result{}, p.counted, err
		}
	}
	if err := r.deletePods(ctx, p.delete); err != nil {
		return ctrl.Result{}, p.counted, err
	}
	if err := r.forceDeletePods(ctx, job, p.forceDelete, gone); err != nil {
		return ctrl.Result{}, p.counted, err
	}
	failed, err := r.createPods(ctx, job, plugin, r.expect.pending(job, p.create, pods, r.Clock.Now()))
	if err != nil {
		return ctrl.Result{}, min(failed, p.counted), err
	}
	if p.ensureChildren || len(p.create) > 0 {
		if err := r.childrenFree(ctx, job); err != nil {
			return ctrl.Result{}, 0, err
		}
	}
	if err := r.publishModel(ctx, job); err != nil {
		return ctrl.Result{}, 0, err
	}
	if p.deleteJob {
		ctrl.LoggerFrom(ctx).V(2).Info("Deleting finished TrainingJob after its TTL")
		err := r.Client.Delete(ctx, job, client.Preconditions{UID: &job.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		return ctrl.Result{}, 0, client.IgnoreNotFound(err)
	}
	return ctrl.Result{RequeueAfter: p.requeueAfter}, 0, nil
}

func (r *Reconciler) isUncounted(key types.NamespacedName) bool {
	_, ok := r.uncounted.Load(key)
	return ok
}

// setElasticWorkers sets the elastic job's size (convoy.AnnotationElasticWorkers) to n and removes
// convoy.AnnotationElasticShrinkTo, on the version read: a conflict is retried by the newer
// version's event, whose reconcile finds the gang's checkpoint again.
func (r *Reconciler) setElasticWorkers(ctx context.Context, job *convoy.TrainingJob, n int32) error {
	patch := client.MergeFromWithOptions(job.DeepCopy(), client.MergeFromWithOptimisticLock{})
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, convoy.AnnotationElasticWorkers, strconv.Itoa(int(n)))
	delete(job.Annotations, convoy.AnnotationElasticShrinkTo)
	return r.Client.Patch(ctx, job, patch)
}

// podRefused is a pod of the gang the API server did not create: a ResourceQuota, Pod Security
// admission or a webhook said no, or a webhook could not be called (its service has no endpoints).
type podRefused struct {
	name string
	err  error
}

func (p *podRefused) Error() string {
	return fmt.Sprintf("the API server did not create pod %s: %v", p.name, p.err)
}

func (p *podRefused) Unwrap() error { return p.err }

// childConflictRetry is how often a job whose child's name is taken looks again: the object in the
// way is not the job's, so no event of it reaches the job.
const childConflictRetry = 10 * time.Second

// childError reports a child's name taken by an object the job does not control in
// ConditionChildConflict (and a Warning event) and looks again later; a pod the API server refused
// in the Initializing condition (reason PodCreationFailed, a Warning event); either status no
// longer counts the uncreated pods. Other errors are returned.
func (r *Reconciler) childError(ctx context.Context, job *convoy.TrainingJob, err error, uncreated int32) (ctrl.Result, error) {
	var conflict *childConflict
	var refused *podRefused
	st := *job.Status.DeepCopy()
	st.Workers.Pending -= uncreated
	if errors.As(err, &refused) {
		// The API server's words go into the status; controller-runtime's backoff spaces the retries.
		setCondition(&st, job, convoy.ConditionInitializing, convoy.ReasonPodCreationFailed, refused.Error(), r.Clock.Now())
		if st.PodsRefusedSince == nil {
			since := metav1.NewTime(r.Clock.Now())
			st.PodsRefusedSince = &since
		}
		if werr := r.writeStatus(ctx, job, st); werr != nil && !apierrors.IsConflict(werr) {
			return ctrl.Result{}, werr
		}
		return ctrl.Result{}, err
	}
	if !errors.As(err, &conflict) {
		return ctrl.Result{}, err
	}
	setCondition(&st, job, convoy.ConditionChildConflict, convoy.ReasonNameTaken, conflict.Error(), r.Clock.Now())
	if err := r.writeStatus(ctx, job, st); err != nil && !apierrors.IsConflict(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: childConflictRetry}, nil
}

// childrenFree turns ConditionChildConflict false once the job's children are its own.
func (r *Reconciler) childrenFree(ctx context.Context, job *convoy.TrainingJob) error {
	if !meta.IsStatusConditionTrue(job.Status.Conditions, convoy.ConditionChildConflict) {
		return nil
	}
	st := *job.Status.DeepCopy()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: convoy.ConditionChildConflict, Status: metav1.ConditionFalse, Reason: convoy.ReasonNameFree,
		Message: "every child of the job is its own", ObservedGeneration: job.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now()),
	})
	if err := r.writeStatus(ctx, job, st); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// writeStatus writes st, with its state derived, when it differs from the job's status, and
// then emits an event for each transition. job is left holding the status written.
func (r *Reconciler) writeStatus(ctx context.Context, job *convoy.TrainingJob, st convoy.TrainingJobStatus) error {
	st.State, st.Reason = convoy.StateAndReason(st.Conditions)
	old := job.Status.DeepCopy()
	if equality.Semantic.DeepEqual(*old, st) {
		r.Metrics.ObserveJob(job, old)
		return nil
	}
	st.Duration = runTime(&st, r.Clock.Now())
	job.Status = st
	readVersion := job.ResourceVersion
	if err := r.Client.Status().Update(ctx, job); err != nil {
		job.Status = *old
		return err
	}
	r.superseded.Store(client.ObjectKeyFromObject(job), readVersion)
	ctrl.LoggerFrom(ctx).V(2).Info("Updated TrainingJob status", "state", st.State, "previousState", old.State)
	r.emitEvents(job, old)
	r.Metrics.ObserveJob(job, old)
	return nil
}

// runTime is status.duration: completion (or now) minus start, to the second.
func runTime(st *convoy.TrainingJobStatus, now time.Time) string {
	if st.StartTime == nil {
		return st.Duration
	}
	end := now
	if st.CompletionTime != nil {
		end = st.CompletionTime.Time
	}
	return end.Sub(st.StartTime.Time).Round(time.Second).String()
}

// invalidSpec fails a job the operator cannot run.
func invalidSpec(job *convoy.TrainingJob, err error, now time.Time) convoy.TrainingJobStatus {
	st := *job.Status.DeepCopy()
	st.FailureReason = convoy.ReasonInvalidSpec
	if st.CompletionTime == nil {
		t := metav1.NewTime(now)
		st.CompletionTime = &t
	}
	setCondition(&st, job, convoy.ConditionFailed, convoy.ReasonInvalidSpec, err.Error(), now)
	return st
}

func (r *Reconciler) pods(ctx context.Context, job *convoy.TrainingJob) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingFields{podOwnerKey: job.Name}); err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		// The publish pod is no part of the gang.
		if metav1.IsControlledBy(&list.Items[i], job) && list.Items[i].Labels[convoy.LabelReplicaRole] != builder.RolePublish {
			pods = append(pods, &list.Items[i])
		}
	}
	return pods, nil
}

// nodes returns the labels of the nodes the pods are bound to, the set of those that are gone, the
// reclaim notices of those that carry one and the not-Ready taints of those the node lifecycle
// controller gave one. A node missing from the cache is looked up on the API server before it is
// called gone: a cache that has not seen a new node yet must not restart a gang.
func (r *Reconciler) nodes(ctx context.Context, pods []*corev1.Pod) (nodes map[string]map[string]string, gone map[string]bool, notices map[string]string, notReady map[string]*corev1.Taint, err error) {
	nodes = map[string]map[string]string{}
	gone = map[string]bool{}
	notices = map[string]string{}
	notReady = map[string]*corev1.Taint{}
	for _, pod := range pods {
		name := pod.Spec.NodeName
		if name == "" || nodes[name] != nil || gone[name] {
			continue
		}
		node := &corev1.Node{}
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node)
		if apierrors.IsNotFound(err) {
			err = r.APIReader.Get(ctx, client.ObjectKey{Name: name}, node)
			if apierrors.IsNotFound(err) {
				gone[name] = true
				continue
			}
		}
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("looking up node %s: %w", name, err)
		}
		if msg := r.Notice.noticeOn(node); msg != "" {
			notices[name] = msg
		}
		if t := notReadyTaint(node); t != nil {
			notReady[name] = t
		}
		nodes[name] = node.Labels
		if nodes[name] == nil {
			nodes[name] = map[string]string{}
		}
	}
	return nodes, gone, notices, notReady, nil
}

// createPods creates the pods of replicas and returns how many it could not create.
func (r *Reconciler) createPods(ctx context.Context, job *convoy.TrainingJob, plugin mlframework.Plugin, replicas []mlframework.Replica) (int32, error) {
	if len(replicas) == 0 {
		return 0, nil
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Creating pods", "count", len(replicas), "restartAttempt", job.Status.RestartCount)
	names := make([]string, len(replicas))
	for i, rep := range replicas {
		names[i] = mlframework.PodName(job, rep, job.Status.RestartCount)
	}
	opts, err := r.podOptions(ctx, job)
	if err != nil {
		return int32(len(replicas)), err
	}
	r.expect.created(job, names, r.Clock.Now())
	var failed atomic.Int32
	err = parallel(len(replicas), func(i int) error {
		pod := builder.Pod(job, replicas[i], plugin, opts)
		err := r.createGPUClaim(ctx, job, builder.GPUClaim(job, pod))
		if err == nil {
			err = r.Client.Create(ctx, pod)
		}
		if apierrors.IsAlreadyExists(err) {
			// Ours, not in the cache yet, or someone else's.
			err = r.ownsTaken(ctx, job, pod)
		}
		if err != nil {
			r.expect.failed(job, pod.Name)
			failed.Add(1)
			var conflict *childConflict
			if errors.As(err, &conflict) {
				return err
			}
			return &podRefused{name: pod.Name, err: err}
		}
		return nil
	})
	return failed.Load(), err
}

func (r *Reconciler) deletePods(ctx context.Context, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Deleting pods", "count", len(pods))
	return parallel(len(pods), func(i int) error {
		err := r.Client.Delete(ctx, pods[i], client.Preconditions{UID: &pods[i].UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting pod %s: %w", pods[i].Name, err)
		}
		return nil
	})
}

// unreadyNodes returns the nodes of pods still terminating after their grace period (at now) that
// are not Ready. Only those nodes are read, past the cache, which holds nodes' metadata; a pod on a
// healthy node is usually gone by then and costs no read.
func (r *Reconciler) unreadyNodes(ctx context.Context, pods []*corev1.Pod, now time.Time) (map[string]bool, error) {
	var unready map[string]bool
	seen := map[string]bool{}
	for _, pod := range pods {
		name := pod.Spec.NodeName
		if name == "" || pod.DeletionTimestamp == nil || pod.DeletionTimestamp.After(now) || seen[name] {
			continue
		}
		seen[name] = true
		node := &corev1.Node{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			if apierrors.IsNotFound(err) {
				continue // the pod garbage collector deletes the pods of a deleted node
			}
			return nil, fmt.Errorf("looking up node %s: %w", name, err)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				if unready == nil {
					unready = map[string]bool{}
				}
				unready[name] = true
			}
		}
	}
	return unready, nil
}

// forceDeletePods deletes, without a grace period, pods whose grace period has passed on a node
// whose kubelet is not Ready, and terminating pods of a node that is gone, with a Warning event
// each: kubectl delete --force, which a person would otherwise have to run (or, for a gone node,
// wait for the pod garbage collector) before the gang can restart.
func (r *Reconciler) forceDeletePods(ctx context.Context, job *convoy.TrainingJob, pods []*corev1.Pod, gone map[string]bool) error {
	for _, pod := range pods {
		err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}, client.GracePeriodSeconds(0))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("force-deleting pod %s: %w", pod.Name, err)
		}
		if err != nil {
			continue
		}
		why := "was still terminating after its grace period on node %s, which is not Ready"
		if gone[pod.Spec.NodeName] {
			why = "was terminating on node %s, which no longer exists"
		}
		r.Recorder.Eventf(job, pod, corev1.EventTypeWarning, ReasonPodForceDeleted, "ForceDeletePod",
			"pod %s "+why+": deleted without waiting for its kubelet", pod.Name, pod.Spec.NodeName)
	}
	return nil
}

// ReasonPodForceDeleted is the Event reason of a pod deleted without waiting for its unreachable kubelet.
const ReasonPodForceDeleted = "PodForceDeleted"

func parallel(n int, f func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(writeConcurrency)
	for i := range n {
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}
