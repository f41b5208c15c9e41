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

package gangcore

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Options configure a State; they come from GangPlacementArgs.
type Options struct {
	// Levels are the cluster's topology levels, outer to inner.
	Levels      []TopologyLevel
	GPUResource corev1.ResourceName
	PlanTimeout time.Duration
	// PartlyUsedFirst has a gang that needs several nodes of a rack take the rack's partly used
	// nodes before free ones (planner.Cluster.PartlyUsedFirst).
	PartlyUsedFirst bool
}

// State is shared by the GangPlacement and GangPreemption plugins of one scheduler. It composes
// parts of one job each; doc.go says which lock guards what, and in which order they are taken.
type State struct {
	opts   Options
	handle fwk.Handle
	pods   corelisters.PodLister
	// reader reads PodGroups and, where their CRD is installed, TrainingJobs; nil without a cluster.
	reader       client.Reader
	trainingJobs bool
	now          func() time.Time
	// stop ends the State's goroutines and removes its event handlers; done is closed then.
	stop func()
	done <-chan struct{}

	// gangs knows the pods and PodGroup of each gang (gangs.go).
	gangs *gangRegistry
	// inventory holds the GPUNodes (gpunodes.go).
	inventory *gpuInventory
	// dra counts the GPUs pods claim and nodes publish through DRA (dra.go).
	dra *draGPUs
	// extendedGPUs resolves the DeviceClass that backs the GPU extended resource, as
	// DynamicResources does (extendedClass); nil without the DRAExtendedResource feature.
	extendedGPUs *extendedresourcecache.ExtendedResourceCache
	// claimWrites holds, by pod, the claims AllocateClaims allocated and PreBind writes
	// (draalloc.go), under claimMu; celCache the allocator's compiled selectors.
	claimMu     sync.Mutex
	claimWrites map[types.UID][]claimWrite
	celCache    *cel.Cache
	// waiters brings back the pods whose gang found no room, and retries dropped gangs (wake.go);
	// claimWaiters the pods DynamicResources may have turned away (claimwait.go).
	waiters      *waiters
	claimWaiters *claimWaiters
	// priorities counts the pods by priority (priorities.go).
	priorities *priorities
	// interPod filters nodes by the gang's inter-pod affinity, topology spread and host ports
	// (interpod.go).
	interPod *interPodPlugins

	// open holds the gangs with a plan that holds: PreEnqueue lets all their pods through. Its own
	// map, without mu: the scheduling queue calls PreEnqueue under its lock.
	open sync.Map
	// kicked holds, by gang, the leader last activated by a sibling (see Gate); leaders, by
	// gang, the leader last found (see leader).
	kicked  sync.Map
	leaders sync.Map
	// moving holds, by gang, the restart attempt (int32) its booking moves whole (BookMove): that
	// attempt's pods wait at Gate while it stands. Written with the booking, under mu.
	moving sync.Map
	// tellLimiter paces the status updates that tell waiting pods why their gang does not fit;
	// lastReserve (Unix nanoseconds) is when a pod was last reserved: tells wait for a quiet
	// moment (see tell).
	tellLimiter flowcontrol.RateLimiter
	lastReserve atomic.Int64
	// telling counts the tells of unplaceable gangs under way; toTell holds the UIDs of the pods
	// they have yet to tell, whom a later verdict leaves to them.
	telling sync.WaitGroup
	toTell  sync.Map
	// generation changes whenever GPUs may have been freed: a pod deleted or unreserved, a node
	// or GPUNode added or changed, a plan dropped. A gang found unplaceable stays so until it
	// changes.
	generation atomic.Int64

	// mu guards everything below: a gang is planned, checked and preempted for against one
	// consistent picture of them.
	mu sync.Mutex
	// book holds the plans, bookings and reservations (planbook.go).
	book *planBook
	// verdicts remember the gangs found not to fit (verdict.go).
	verdicts *verdicts
	// preemptions holds the preemptions in progress and the gangs preemption cannot help
	// (preempt.go).
	preemptions *preemptions
	// avoid holds, by gang, the planned nodes another plugin's Filter rejected (avoid.go).
	avoid avoidList
	// nodes caches each node's base for the views (nodecache.go); fleet holds the views new
	// plans share (fleet.go); last is what the last one-off view leaves the next (view.go).
	nodes *nodeCache
	fleet keptViews
	last  lastView
}

// New makes a State and registers its event handlers. With a kubeconfig it also watches GPUNodes,
// PodGroups and TrainingJobs. It runs until ctx ends or the State is stopped (see Shared).
func New(ctx context.Context, h fwk.Handle, opts Options) (*State, error) {
	registerMetrics()
	ctx, cancel := context.WithCancel(ctx)
	s := &State{
		opts:        opts,
		handle:      h,
		now:         time.Now,
		done:        ctx.Done(),
		inventory:   newGPUInventory(),
		waiters:     newWaiters(h.Activate, wakeDelay, retryDelay, maxRetryDelay),
		tellLimiter: flowcontrol.NewTokenBucketRateLimiter(tellQPS, tellQPS),
		book:        newPlanBook(),
		verdicts:    newVerdicts(gangsWaitingForRoom),
		preemptions: newPreemptions(),
		avoid:       avoidList{},
		claimWrites: map[types.UID][]claimWrite{},
		celCache:    cel.NewCache(10, cel.Features{}),
	}
	s.nodes = newNodeCache(&s.opts)
	s.priorities = newPriorities()
	s.claimWaiters = newClaimWaiters(h.Activate, s.cachedClaimVersion)
	res := h.SharedInformerFactory().Resource().V1()
	s.dra = newDRAGPUs()
	s.dra.templates = res.ResourceClaimTemplates().Lister()
	s.dra.claims = res.ResourceClaims().Lister()
	s.dra.classes = res.DeviceClasses().Lister()
	s.nodes.dra = s.dra
	var handlers []func()
	s.stop = func() {
		cancel()
		for _, remove := range handlers {
			remove()
		}
	}
	fail := func(err error) (*State, error) {
		s.stop()
		return nil, err
	}
	ip, err := newInterPodPlugins(ctx, h)
	if err != nil {
		return fail(err)
	}
	s.interPod = ip
	go s.waiters.loop(ctx)
	go s.claimWaiters.loop(ctx)
	pods := h.SharedInformerFactory().Core().V1().Pods()
	s.pods = pods.Lister()
	// A State made again on the same informers (a scheduler's profiles made anew) finds the index
	// there.
	if _, ok := pods.Informer().GetIndexer().GetIndexers()[podGroupIndex]; !ok {
		if err := pods.Informer().AddIndexers(toolscache.Indexers{podGroupIndex: indexByGang}); err != nil {
			return fail(err)
		}
	}
	s.gangs = newGangRegistry(pods.Informer().GetIndexer())
	add := func(inf toolscache.SharedIndexInformer, h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return nil, err
		}
		handlers = append(handlers, func() { _ = inf.RemoveEventHandler(reg) })
		return reg, nil
	}
	if _, err := add(pods.Informer(), toolscache.ResourceEventHandlerFuncs{DeleteFunc: s.onPodDelete}); err != nil {
		return fail(err)
	}
	reg, err := add(pods.Informer(), s.priorities.handler())
	if err != nil {
		return fail(err)
	}
	s.priorities.synced = reg.HasSynced
	if _, err := add(h.SharedInformerFactory().Core().V1().Nodes().Informer(), toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.bump() },
		UpdateFunc: func(o, n any) {
			if nodeChanged(o, n) {
				s.bump()
			}
		},
		DeleteFunc: s.onNodeDelete,
	}); err != nil {
		return fail(err)
	}
	if _, err := add(res.ResourceSlices().Informer(), toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.onSlice,
		UpdateFunc: func(_, n any) { s.onSlice(n) },
		DeleteFunc: s.onSliceDelete,
	}); err != nil {
		return fail(err)
	}
	if _, err := add(res.ResourceClaims().Informer(), toolscache.ResourceEventHandlerFuncs{
		AddFunc: s.onClaim,
		UpdateFunc: func(o, n any) {
			s.onClaim(n)
			s.claimWaiters.updated(o, n)
		},
		DeleteFunc: s.onClaimDelete,
	}); err != nil {
		return fail(err)
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.DRAExtendedResource) {
		// onDeviceClass runs after the cache took the event in.
		s.extendedGPUs = extendedresourcecache.NewExtendedResourceCache(klog.FromContext(ctx), toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { s.onDeviceClass(obj) },
			UpdateFunc: func(o, n any) {
				if !s.onDeviceClass(n) {
					s.onDeviceClass(o)
				}
			},
			DeleteFunc: func(obj any) { s.onDeviceClass(obj) },
		})
		if _, err := add(res.DeviceClasses().Informer(), s.extendedGPUs); err != nil {
			return fail(err)
		}
	}
	if cfg := h.KubeConfig(); cfg != nil {
		if err := s.watch(ctx, cfg); err != nil {
			return fail(err)
		}
	}
	return s, nil
}

// close stops the State: its goroutines end, its event handlers are removed, and its plans and
// verdicts leave the gauges, which count those of the States still running.
func (s *State) close() {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.book.plans {
		s.book.remove(key)
	}
	for key := range s.verdicts.m {
		s.verdicts.clear(key)
	}
}

// watch starts a cache of GPUNodes, PodGroups and TrainingJobs. Without the GPUNode CRD every node
// is known by count only; without the TrainingJob CRD checkpoints come from PodGroups only.
func (s *State) watch(ctx context.Context, cfg *rest.Config) error {
	logger := klog.FromContext(ctx)
	scheme := runtime.NewScheme()
	if err := convoy.AddToScheme(scheme); err != nil {
		return err
	}
	if err := schedv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	// The cache keeps GPUNodes as cachedGPUNode leaves them: the largest objects it holds, and
	// most of each is what the State never reads.
	c, err := crcache.New(cfg, crcache.Options{Scheme: scheme,
		ByObject: map[client.Object]crcache.ByObject{&convoy.GPUNode{}: {Transform: cachedGPUNode}}})
	if err != nil {
		return err
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			logger.Error(err, "GPUNode cache stopped")
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	inf, err := c.GetInformer(syncCtx, &convoy.GPUNode{})
	if err != nil {
		logger.Error(err, "Cannot watch GPUNodes: every node is known by its nvidia.com/gpu count only")
	} else if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.onGPUNode,
		UpdateFunc: func(_, n any) { s.onGPUNode(n) },
		DeleteFunc: s.onGPUNodeDelete,
	}); err != nil {
		return err
	}
	pgs, err := c.GetInformer(syncCtx, &schedv1alpha1.PodGroup{})
	if err != nil {
		return fmt.Errorf("watching PodGroups (is the scheduling.x-k8s.io CRD installed?): %w", err)
	}
	if _, err := pgs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.onPodGroup,
		UpdateFunc: func(_, n any) { s.onPodGroup(n) },
		DeleteFunc: s.onPodGroupDelete,
	}); err != nil {
		return err
	}
	if err := s.watchUpstreamPodGroups(syncCtx, c); err != nil {
		return err
	}
	if _, err := c.GetInformer(syncCtx, &convoy.TrainingJob{}); err != nil {
		logger.Info("Cannot watch TrainingJobs: checkpoint times come from PodGroup annotations only", "err", err)
	} else {
		s.trainingJobs = true
	}
	s.reader = c
	return nil
}

func (s *State) bump() { s.generation.Add(1) }

func (s *State) onNodeDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		s.mu.Lock()
		s.nodes.forget(n.Name)
		s.mu.Unlock()
	}
}

func (s *State) onPodDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := GangKey(pod)
	s.gangs.podDeleted(pod.UID)
	// Its claims go with it; what AllocateClaims kept for its PreBind is forgotten.
	s.claimMu.Lock()
	delete(s.claimWrites, pod.UID)
	s.claimMu.Unlock()
	s.mu.Lock()
	delete(s.book.reserved, pod.UID)
	// The gang changed: a node a filter rejected for it may fit what is left.
	s.avoid.forget(key)
	// A plan is for the pods it was made for. Without this, the plan of a gang deleted before
	// its pods bound (a job cancelled while its victims terminate) would keep its GPUs from
	// every gang of no higher priority: only the gang's own next pod drops a stale plan.
	if p := s.book.plans[key]; p != nil {
		if sl := p.slots[pod.UID]; sl != nil && sl.phase != slotBound {
			s.dropPlanLocked(key, dropPodDeleted, "a pod of the gang was deleted")
		}
	}
	if pg := PodGroupName(pod); pg == "" || s.gangs.memberCount(pod.Namespace, pg) == 0 {
		s.forgetGangLocked(key)
	}
	s.mu.Unlock()
	s.waiters.found(pod.UID)
	s.claimWaiters.forget(pod.UID)
	s.bump()
	// The scheduling queue requeues the gangs this pod's GPUs may fit (GangPlacement's
	// EventsToRegister) from its own handler of the same informer, in no set order with this one:
	// a gang tried before this handler ran finds its verdict still holding and waits again. Waking
	// the waiters after the bump tries them once more, against the new generation.
	if pod.Spec.NodeName != "" && (GPURequest(pod, s.opts.GPUResource) > 0 || len(pod.Spec.ResourceClaims) > 0) {
		s.waiters.moreRoom()
	}
}

// forgetGangLocked forgets what the State holds of a gang whose last pod is gone: its plan, that
// it found no room, that preemption could not help, its preemption, its retry backoff.
func (s *State) forgetGangLocked(key string) {
	if s.book.plans[key] != nil {
		s.dropPlanLocked(key, dropPodDeleted, "the gang's pods were deleted")
	}
	s.verdicts.clear(key)
	s.preemptions.forget(key)
	s.open.Delete(key)
	s.kicked.Delete(key)
	s.leaders.Delete(key)
	s.waiters.resetBackoff(key)
}

// PodGroupPods returns the pods labelled for PodGroup namespace/name, from the index, in no set
// order: what a list of the namespace by the PodGroup label returns.
func (s *State) PodGroupPods(namespace, name string) []*corev1.Pod {
	return s.gangs.members(namespace, name)
}

// onPodGroup records a scheduler-plugins PodGroup or a scheduling.k8s.io one (unstructured).
func (s *State) onPodGroup(obj any) {
	switch pg := obj.(type) {
	case *schedv1alpha1.PodGroup:
		s.SetPodGroup(pg)
	case *unstructured.Unstructured:
		s.SetUpstreamPodGroup(pg)
	}
}

func (s *State) onPodGroupDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pg, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	_, upstream := obj.(*unstructured.Unstructured)
	key := pg.GetNamespace() + "/" + pg.GetName()
	s.gangs.deletePodGroup(key, upstream)
	s.waiters.resetBackoff(key)
}

// SetPodGroup records a PodGroup's minMember and creation time. The PodGroup informer calls it;
// tests may too. Pods held because their PodGroup was not seen yet are activated: the scheduling
// queue hears of the PodGroup from its own informer, which may run ahead of this one.
func (s *State) SetPodGroup(pg *schedv1alpha1.PodGroup) {
	if s.gangs.setPodGroup(pg) {
		s.handle.Activate(klog.Background(), s.gangs.pendingMembers(pg.Namespace, pg.Name))
	}
}

// Incomplete says why the pod's gang cannot be scheduled yet, where Coscheduling would turn it
// away: its PodGroup is not seen yet (Coscheduling's Permit would reject the pod with "PodGroup
// not found"), or fewer pods are labelled for it than its minMember. It is "" for a pod of no
// PodGroup, or of a complete one. A PodGroup found missing is remembered, so that its pods are
// activated when it appears (see SetPodGroup), and the gang's pods are told why they wait if they
// still do after tellDelay.
func (s *State) Incomplete(pod *corev1.Pod) string {
	pg := PodGroupName(pod)
	if pg == "" {
		return ""
	}
	why, tell := s.gangs.incomplete(pod.Namespace, pg, true)
	if tell {
		go s.tellIncomplete(klog.Background(), pod.Namespace, pg)
	}
	return why
}

// stillIncomplete is Incomplete without its records: why the pod's gang still waits, or "".
func (s *State) stillIncomplete(pod *corev1.Pod) string {
	pg := PodGroupName(pod)
	if pg == "" {
		return ""
	}
	why, _ := s.gangs.incomplete(pod.Namespace, pg, false)
	return why
}

func (s *State) onGPUNode(obj any) {
	g, ok := obj.(*convoy.GPUNode)
	if !ok {
		return
	}
	s.SetGPUNode(g)
}

func (s *State) onGPUNodeDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if g, ok := obj.(*convoy.GPUNode); ok {
		s.inventory.remove(g.Name)
		s.bump()
	}
}

// SetGPUNode records a GPUNode's inventory. The GPUNode informer calls it; tests may too. Only a
// change of health, holders or links counts as a change of the cluster, not the agent's heartbeat;
// a new GPUNode, or one with more healthy or free GPUs, wakes the pods whose gang found no room.
func (s *State) SetGPUNode(g *convoy.GPUNode) {
	n := newGPUNode(g)
	old := s.inventory.set(g.Name, n)
	if old == nil || !old.equal(n) {
		s.bump()
	}
	if old == nil || n.healthy.Len() > old.healthy.Len() || n.free() > old.free() {
		s.waiters.moreRoom()
	}
}

// nodeChanged reports whether a node update may make room: its allocatable resources, labels,
// taints or cordon changed. Status heartbeats do not.
func nodeChanged(o, n any) bool {
	a, ok1 := o.(*corev1.Node)
	b, ok2 := n.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	return !equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable) ||
		!maps.Equal(a.Labels, b.Labels) || a.Spec.Unschedulable != b.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints)
}

// GPUResource is the GPU extended resource.
func (s *State) GPUResource() corev1.ResourceName { return s.opts.GPUResource }
