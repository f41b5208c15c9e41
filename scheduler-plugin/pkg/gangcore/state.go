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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// Options configure a State; they come from GangPlacementArgs.
type Options struct {
	ZoneLabel, BlockLabel, RackLabel string
	GPUResource                      corev1.ResourceName
	PlanTimeout                      time.Duration
	// PartlyUsedFirst has a gang that needs several nodes of a rack take the rack's partly used
	// nodes before free ones (planner.Cluster.PartlyUsedFirst).
	PartlyUsedFirst bool
}

// State is shared by the GangPlacement and GangPreemption plugins of one scheduler.
type State struct {
	opts   Options
	handle fwk.Handle
	pods   corelisters.PodLister
	// byGang indexes pods by "namespace/podgroup".
	byGang toolscache.Indexer
	// open holds the gangs with a plan that holds: PreEnqueue lets all their pods through. Its own
	// map, without s.mu: the scheduling queue calls PreEnqueue under its lock.
	open sync.Map
	// kicked holds, by gang, the leader last activated by a sibling (see Gate).
	kicked sync.Map
	// boundTo holds, by UID, the node of each pod this scheduler bound, until the pod is deleted:
	// the pod informer shows a binding moments later, and a gang's pods collected in between
	// (its leader, a new plan) must not count a bound pod as pending. Without s.mu, as open.
	boundTo sync.Map
	// tellLimiter paces the status updates that tell waiting pods why their gang does not fit;
	// lastReserve (Unix nanoseconds) is when a pod was last reserved: tells wait for a quiet
	// moment (see tell).
	tellLimiter flowcontrol.RateLimiter
	lastReserve atomic.Int64
	// podGroups holds each PodGroup's minMember and creation time, by "namespace/name";
	// unseenGroups the PodGroups that pods were held for before this State saw them.
	minMu        sync.RWMutex
	podGroups    map[string]podGroupInfo
	unseenGroups map[string]bool
	// toldIncomplete holds, by gang, why its pods are, or are about to be, told it is incomplete
	// (see tellIncomplete).
	toldIncomplete map[string]string
	// reader reads PodGroups and, where their CRD is installed, TrainingJobs; nil without a cluster.
	reader       client.Reader
	trainingJobs bool
	now          func() time.Time

	// interPod filters nodes by the gang's inter-pod affinity, topology spread and host ports
	// (interpod.go).
	interPod *interPodPlugins

	gpuMu    sync.RWMutex
	gpuNodes map[string]*gpuNode
	// gpuChanged names the nodes whose GPUNode was set or deleted since the last view: their
	// cached bases are dropped there (see view).
	gpuChanged map[string]bool

	// waiting holds the pods whose gang found no room, by UID; wake asks wakeLoop to activate
	// them (see wake.go).
	waitMu  sync.Mutex
	waiting map[types.UID]*corev1.Pod
	wake    chan struct{}
	// retryBackoff holds, by gang, the delay of its next retry since it was last bound; retryArmed
	// the gangs with a retry to come (see retryGang).
	retryBackoff *flowcontrol.Backoff
	retryArmed   map[string]bool

	mu sync.Mutex
	// bases caches each node's GPU view; see nodeBase. byPosition holds the same bases in the
	// order of the last view's nodes, which the snapshot keeps from one cycle to the next, so that
	// a view finds a node's base without looking its name up.
	bases      map[string]*nodeBase
	byPosition []*nodeBase
	// lastCluster lends its topology index to the next view with the same nodes; spareNodes is
	// the view before it's node list, for the next view to fill (see view).
	lastCluster *planner.Cluster
	spareNodes  []planner.Node
	plans       map[string]*plan
	// bookings hold, by gang, the placements the admission check holds for admitted gangs until
	// their pods are planned (see admission.go); their slots are in onNode too.
	bookings map[string]*plan
	// bookedFor names, by gang, the Workload each booking is for.
	bookedFor map[string]string
	// onNode holds the slots of plans, by node, for a later pod's check of its own slot (see
	// claimsOn); kept with plans by setPlanLocked and deletePlanLocked.
	onNode   map[string][]planSlot
	reserved map[types.UID]reservation
	verdicts map[string]verdict
	// preemptVerdicts remember that preemption cannot make room for a gang.
	preemptVerdicts map[string]verdict
	preemptions     map[string]*preemption
	// avoid holds, by gang, the planned nodes another plugin's Filter rejected (see avoid.go).
	avoid map[string]map[string]avoidance
	// generation changes whenever GPUs may have been freed: a pod deleted or unreserved, a node
	// or GPUNode added or changed, a plan dropped. A gang found unplaceable stays so until it
	// changes.
	generation atomic.Int64
}

// reservation is a pod's GPUs from Reserve until the pod is deleted.
type reservation struct {
	node string
	gpus planner.GPUSet
}

// verdict remembers that a gang did not fit, so its other pods fail fast.
type verdict struct {
	generation int64
	at         time.Time
	message    string
}

// verdictTTL bounds how long a verdict is trusted without a change in generation: a safety net
// for a change the generation misses.
const verdictTTL = 5 * time.Minute

var (
	registryMu sync.Mutex
	registry   = map[kubernetes.Interface]*State{}
)

// Shared returns the State of the scheduler that h belongs to, creating it with opts on first
// use. Every profile of a scheduler shares one State: GPUs and plans are cluster-wide.
func Shared(ctx context.Context, h fwk.Handle, opts Options) (*State, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if s := registry[h.ClientSet()]; s != nil {
		if s.opts != opts {
			return nil, fmt.Errorf("GangPlacement has different args in two profiles (%+v and %+v): give every profile the same GangPlacementArgs", s.opts, opts)
		}
		return s, nil
	}
	s, err := New(ctx, h, opts)
	if err != nil {
		return nil, err
	}
	registry[h.ClientSet()] = s
	return s, nil
}

// Lookup returns the State GangPlacement created for h's scheduler, or nil when GangPlacement is
// not enabled.
func Lookup(h fwk.Handle) *State {
	registryMu.Lock()
	defer registryMu.Unlock()
	return registry[h.ClientSet()]
}

// New makes a State and registers its event handlers. With a kubeconfig it also watches GPUNodes,
// PodGroups and TrainingJobs.
func New(ctx context.Context, h fwk.Handle, opts Options) (*State, error) {
	registerMetrics()
	s := &State{
		opts:            opts,
		handle:          h,
		now:             time.Now,
		gpuNodes:        map[string]*gpuNode{},
		gpuChanged:      map[string]bool{},
		podGroups:       map[string]podGroupInfo{},
		unseenGroups:    map[string]bool{},
		toldIncomplete:  map[string]string{},
		bases:           map[string]*nodeBase{},
		plans:           map[string]*plan{},
		bookings:        map[string]*plan{},
		bookedFor:       map[string]string{},
		onNode:          map[string][]planSlot{},
		reserved:        map[types.UID]reservation{},
		verdicts:        map[string]verdict{},
		preemptVerdicts: map[string]verdict{},
		preemptions:     map[string]*preemption{},
		avoid:           map[string]map[string]avoidance{},
		tellLimiter:     flowcontrol.NewTokenBucketRateLimiter(tellQPS, tellQPS),
		waiting:         map[types.UID]*corev1.Pod{},
		retryBackoff:    flowcontrol.NewBackOff(retryDelay, maxRetryDelay),
		retryArmed:      map[string]bool{},
		wake:            make(chan struct{}, 1),
	}
	ip, err := newInterPodPlugins(ctx, h)
	if err != nil {
		return nil, err
	}
	s.interPod = ip
	go s.wakeLoop(ctx)
	pods := h.SharedInformerFactory().Core().V1().Pods()
	s.pods = pods.Lister()
	if err := pods.Informer().AddIndexers(toolscache.Indexers{podGroupIndex: indexByGang}); err != nil {
		return nil, err
	}
	s.byGang = pods.Informer().GetIndexer()
	if _, err := pods.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: s.onPodDelete}); err != nil {
		return nil, err
	}
	if _, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.bump() },
		UpdateFunc: func(o, n any) {
			if nodeChanged(o, n) {
				s.bump()
			}
		},
		DeleteFunc: s.onNodeDelete,
	}); err != nil {
		return nil, err
	}
	if cfg := h.KubeConfig(); cfg != nil {
		if err := s.watch(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return s, nil
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
	c, err := crcache.New(cfg, crcache.Options{Scheme: scheme})
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
		if b := s.bases[n.Name]; b != nil {
			b.stale = true
			delete(s.bases, n.Name)
		}
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
	s.boundTo.Delete(pod.UID)
	s.mu.Lock()
	delete(s.reserved, pod.UID)
	// The gang changed: a node a filter rejected for it may fit what is left.
	delete(s.avoid, key)
	// A plan is for the pods it was made for. Without this, the plan of a gang deleted before
	// its pods bound (a job cancelled while its victims terminate) would keep its GPUs from
	// every gang of no higher priority: only the gang's own next pod drops a stale plan.
	if p := s.plans[key]; p != nil {
		if sl := p.slots[pod.UID]; sl != nil && sl.phase != slotBound {
			s.dropPlanLocked(key, dropPodDeleted, "a pod of the gang was deleted")
		}
	}
	if pg := PodGroupName(pod); pg == "" || s.memberCount(pod.Namespace, pg) == 0 {
		s.forgetGangLocked(key)
	}
	s.mu.Unlock()
	s.roomFound(pod.UID)
	s.bump()
}

// forgetGangLocked forgets what the State holds of a gang whose last pod is gone: its plan, that
// it found no room, that preemption could not help, its preemption, its retry backoff.
func (s *State) forgetGangLocked(key string) {
	if s.plans[key] != nil {
		s.dropPlanLocked(key, dropPodDeleted, "the gang's pods were deleted")
	}
	s.clearVerdictLocked(key)
	delete(s.preemptVerdicts, key)
	delete(s.preemptions, key)
	s.open.Delete(key)
	s.kicked.Delete(key)
	s.retryBackoff.Reset(key)
}

// podGroupIndex indexes pods by "namespace/podgroup".
const podGroupIndex = "convoy.dev/pod-group"

func indexByGang(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		if pg := PodGroupName(p); pg != "" {
			return []string{p.Namespace + "/" + pg}, nil
		}
	}
	return nil, nil
}

// PodGroupPods returns the pods labelled for PodGroup namespace/name, from the index, in no set
// order: what a list of the namespace by the PodGroup label returns.
func (s *State) PodGroupPods(namespace, name string) []*corev1.Pod { return s.members(namespace, name) }

// members returns the pods labelled for PodGroup namespace/name, as Coscheduling counts them.
func (s *State) members(namespace, name string) []*corev1.Pod {
	objs, err := s.byGang.ByIndex(podGroupIndex, namespace+"/"+name)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// pendingMembers are the PodGroup's pods that are neither bound nor going, by "namespace/name" as
// Activate takes them.
func (s *State) pendingMembers(namespace, name string) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, p := range s.members(namespace, name) {
		if s.nodeOf(p) == "" && p.DeletionTimestamp == nil {
			out[p.Namespace+"/"+p.Name] = p
		}
	}
	return out
}

// nodeOf is the node the pod is bound to, by the informer or, before it shows the binding, by
// this scheduler; "" while it is not bound.
func (s *State) nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if n, ok := s.boundTo.Load(p.UID); ok {
		return n.(string)
	}
	return ""
}

// memberCount is how many pods are labelled for PodGroup namespace/name.
func (s *State) memberCount(namespace, name string) int {
	keys, err := s.byGang.IndexKeys(podGroupIndex, namespace+"/"+name)
	if err != nil {
		return 0
	}
	return len(keys)
}

func (s *State) onPodGroup(obj any) {
	if pg, ok := obj.(*schedv1alpha1.PodGroup); ok {
		s.SetPodGroup(pg)
	}
}

func (s *State) onPodGroupDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pg, ok := obj.(*schedv1alpha1.PodGroup); ok {
		s.minMu.Lock()
		delete(s.podGroups, pg.Namespace+"/"+pg.Name)
		delete(s.toldIncomplete, pg.Namespace+"/"+pg.Name)
		s.minMu.Unlock()
		s.retryBackoff.Reset(pg.Namespace + "/" + pg.Name)
	}
}

// podGroupInfo is what the plugins need of a PodGroup.
type podGroupInfo struct {
	minMember int32
	created   time.Time
}

// SetPodGroup records a PodGroup's minMember and creation time. The PodGroup informer calls it;
// tests may too. Pods held because their PodGroup was not seen yet are activated: the scheduling
// queue hears of the PodGroup from its own informer, which may run ahead of this one.
func (s *State) SetPodGroup(pg *schedv1alpha1.PodGroup) {
	key := pg.Namespace + "/" + pg.Name
	s.minMu.Lock()
	s.podGroups[key] = podGroupInfo{minMember: pg.Spec.MinMember, created: pg.CreationTimestamp.Time}
	held := s.unseenGroups[key]
	delete(s.unseenGroups, key)
	s.minMu.Unlock()
	if held {
		s.handle.Activate(klog.Background(), s.pendingMembers(pg.Namespace, pg.Name))
	}
}

func (s *State) podGroup(namespace, name string) (podGroupInfo, bool) {
	s.minMu.RLock()
	defer s.minMu.RUnlock()
	pg, ok := s.podGroups[namespace+"/"+name]
	return pg, ok
}

// Incomplete says why the pod's gang cannot be scheduled yet, where Coscheduling would turn it
// away: its PodGroup is not seen yet (Coscheduling's Permit would reject the pod with "PodGroup
// not found"), or fewer pods are labelled for it than its minMember. It is "" for a pod of no
// PodGroup, or of a complete one. A PodGroup found missing is remembered, so that its pods are
// activated when it appears (see SetPodGroup), and the gang's pods are told why they wait if they
// still do after tellDelay.
func (s *State) Incomplete(pod *corev1.Pod) string { return s.incomplete(pod, true) }

// incomplete is Incomplete; only with record does it remember a missing PodGroup and arm a tell.
func (s *State) incomplete(pod *corev1.Pod, record bool) string {
	pg := PodGroupName(pod)
	if pg == "" {
		return ""
	}
	key := pod.Namespace + "/" + pg
	var why string
	s.minMu.Lock()
	defer s.minMu.Unlock()
	if info, ok := s.podGroups[key]; !ok {
		why = fmt.Sprintf("waiting for PodGroup %s: create it, or remove the pod's %s label", key, schedv1alpha1.PodGroupLabel)
		if record {
			s.unseenGroups[key] = true
		}
	} else if n := int(info.minMember) - s.memberCount(pod.Namespace, pg); n > 0 {
		why = fmt.Sprintf("waiting for %d more pod(s) of gang %s (minMember %d)", n, key, info.minMember)
	}
	if !record {
		return why
	}
	switch told, ok := s.toldIncomplete[key]; {
	case why != "" && why != told:
		s.toldIncomplete[key] = why
		go s.tellIncomplete(klog.Background(), pod.Namespace, pg)
	case why == "" && ok:
		delete(s.toldIncomplete, key)
	}
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
		s.gpuMu.Lock()
		delete(s.gpuNodes, g.Name)
		s.gpuChanged[g.Name] = true
		s.gpuMu.Unlock()
		s.bump()
	}
}

// SetGPUNode records a GPUNode's inventory. The GPUNode informer calls it; tests may too. Only a
// change of health, holders or links counts as a change of the cluster, not the agent's heartbeat;
// a new GPUNode, or one with more healthy or free GPUs, wakes the pods whose gang found no room.
func (s *State) SetGPUNode(g *convoy.GPUNode) {
	n := newGPUNode(g)
	s.gpuMu.Lock()
	old := s.gpuNodes[g.Name]
	s.gpuNodes[g.Name] = n
	s.gpuChanged[g.Name] = true
	s.gpuMu.Unlock()
	if old == nil || !old.equal(n) {
		s.bump()
	}
	if old == nil || n.healthy.Len() > old.healthy.Len() || n.free() > old.free() {
		s.moreRoom()
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

func (s *State) gpuNode(name string) *gpuNode {
	s.gpuMu.RLock()
	defer s.gpuMu.RUnlock()
	return s.gpuNodes[name]
}

// GPUResource is the GPU extended resource.
func (s *State) GPUResource() corev1.ResourceName { return s.opts.GPUResource }
