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

// Package nodeagent is Convoy's GPU node agent: it reads each node's GPUs through NVML and
// publishes them as a GPUNode (status through server-side apply, only when something changed and
// at a slow heartbeat), GPU Feature Discovery-compatible node labels where no one else sets them,
// Events on the Node when a GPU turns unhealthy or recovers, and Prometheus metrics.
//
// One Agent serves one node (the DaemonSet, over the real NVML library) or many (a simulator,
// with a mock NVML per fake node).
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// FieldManager is the agent's server-side apply field manager.
const FieldManager = "convoy-node-agent"

// Event reasons on the Node.
const (
	ReasonGPUUnhealthy    = "GPUUnhealthy"
	ReasonGPURecovered    = "GPURecovered"
	ReasonNVMLUnavailable = "NVMLUnavailable"
	// ReasonPodEvicted is a Warning on the Node, related to the pod, when the agent deletes the
	// TrainingJob pod holding a GPU that turned unhealthy.
	ReasonPodEvicted = "PodEvicted"
)

// Defaults of Options.
const (
	DefaultPollInterval  = 5 * time.Second
	DefaultHeartbeat     = 5 * time.Minute
	DefaultRetryInterval = time.Minute

	DefaultMaxConcurrentWrites = 8
)

// podNodeNameField indexes the pod cache by node.
const podNodeNameField = "spec.nodeName"

// Options configure an Agent.
type Options struct {
	// NVML returns the NVML library for a node: the real library on a GPU node, a mock per fake
	// node. It is called once per node the agent starts serving.
	NVML func(node *corev1.Node) (nvml.Interface, error)
	// SysfsRoot is where a GPU's NUMA node is read when NVML cannot say ("/sys" on a real node);
	// leave it empty with mocks.
	SysfsRoot string
	// PodResourcesSocket is the kubelet's PodResources socket, dialled when NVML opens for a
	// node. Where it does not exist then (fake nodes) the agent assigns GPUs to the pods bound to
	// the node as the device plugin would. One kubelet serves one node: leave it empty when the
	// agent serves several.
	PodResourcesSocket string

	// NodeName, when set, is the one node the agent serves (the DaemonSet). Otherwise it serves
	// Nodes when set, else the nodes NodeSelector selects (every node when nil).
	NodeName     string
	Nodes        []string
	NodeSelector labels.Selector

	// PollInterval is how often each node's GPUs are read; NVML events and pod changes also
	// trigger a poll. Heartbeat is how old the published observedTime may grow before the agent
	// writes an unchanged status again. RetryInterval is how often NVML is retried when it failed.
	PollInterval  time.Duration
	Heartbeat     time.Duration
	RetryInterval time.Duration

	// EvictOnUnhealthy makes the agent delete the TrainingJob pod holding a GPU when the GPU turns
	// unhealthy: once per transition, retried while the API server fails the delete.
	EvictOnUnhealthy bool

	// FieldManager names the agent's writes; FieldManager when empty.
	FieldManager string
	// MaxConcurrentWrites bounds the API writes in flight across the nodes served, so that a
	// simulator starting a thousand nodes queues its first writes instead of flooding the API
	// server; DefaultMaxConcurrentWrites when zero.
	MaxConcurrentWrites int
	// Metrics receive the agent's metrics; none when nil.
	Metrics *Metrics
}

// Agent publishes the GPUNodes of the nodes it serves.
type Agent struct {
	opts     Options
	client   client.Client
	cache    cache.Cache
	recorder events.EventRecorder
	events   events.EventBroadcaster
	log      klog.Logger
	nodes    map[string]bool // Options.Nodes as a set
	writes   chan struct{}   // a semaphore of MaxConcurrentWrites

	mu      sync.Mutex
	ctx     context.Context
	workers map[string]*worker
	wg      sync.WaitGroup
}

// New returns an agent that talks to the API server through cfg.
func New(cfg *rest.Config, opts Options) (*Agent, error) {
	if opts.NVML == nil {
		return nil, errors.New("nodeagent: Options.NVML is required")
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = DefaultRetryInterval
	}
	if opts.FieldManager == "" {
		opts.FieldManager = FieldManager
	}
	if opts.MaxConcurrentWrites <= 0 {
		opts.MaxConcurrentWrites = DefaultMaxConcurrentWrites
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := convoy.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	// The agent only reads cached objects: no deep copy on every poll of every node.
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme, ByObject: byObject(opts), DefaultUnsafeDisableDeepCopy: ptr.To(true)})
	if err != nil {
		return nil, err
	}
	if err := ca.IndexField(context.Background(), &corev1.Pod{}, podNodeNameField, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	a := &Agent{
		opts:     opts,
		client:   c,
		cache:    ca,
		events:   broadcaster,
		recorder: broadcaster.NewRecorder(scheme, "convoy.dev/node-agent"),
		log:      klog.Background().WithName("node-agent"),
		workers:  map[string]*worker{},
		writes:   make(chan struct{}, opts.MaxConcurrentWrites),
	}
	if len(opts.Nodes) > 0 {
		a.nodes = map[string]bool{}
		for _, n := range opts.Nodes {
			a.nodes[n] = true
		}
	}
	return a, nil
}

// byObject narrows the informers to what the agent serves and strips what it does not read.
func byObject(opts Options) map[client.Object]cache.ByObject {
	pods := cache.ByObject{Field: fields.OneTermNotEqualSelector(podNodeNameField, ""), Transform: trimPod}
	nodes := cache.ByObject{Label: opts.NodeSelector, Transform: trimNode}
	gpuNodes := cache.ByObject{}
	if opts.NodeName != "" {
		pods.Field = fields.OneTermEqualSelector(podNodeNameField, opts.NodeName)
		nodes = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", opts.NodeName), Transform: trimNode}
		gpuNodes.Field = fields.OneTermEqualSelector("metadata.name", opts.NodeName)
	}
	return map[client.Object]cache.ByObject{&corev1.Pod{}: pods, &corev1.Node{}: nodes, &convoy.GPUNode{}: gpuNodes}
}

// trimPod keeps what GPU assignment, eviction and the per-job metrics read: identity, the
// TrainingJob's label, the GPU request, the scheduler's indices, whether the pod is being deleted.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	keep := &corev1.Pod{}
	keep.Name, keep.Namespace, keep.UID, keep.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	keep.CreationTimestamp, keep.DeletionTimestamp = p.CreationTimestamp, p.DeletionTimestamp
	if v, ok := p.Annotations[convoy.AnnotationGPUIndices]; ok {
		keep.Annotations = map[string]string{convoy.AnnotationGPUIndices: v}
	}
	if v, ok := p.Labels[convoy.LabelJobName]; ok {
		keep.Labels = map[string]string{convoy.LabelJobName: v}
	}
	// A TrainingJob's pod is deleted, not evicted, from a failed GPU (evict.go).
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "TrainingJob" {
		keep.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	keep.Spec.NodeName = p.Spec.NodeName
	trim := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		}
		return out
	}
	keep.Spec.Containers, keep.Spec.InitContainers = trim(p.Spec.Containers), trim(p.Spec.InitContainers)
	keep.Status.Phase = p.Status.Phase
	return keep, nil
}

// trimNode drops the node's status (images, conditions), which the agent never reads; it keeps
// the managed fields, which say who owns each label.
func trimNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		n.Status = corev1.NodeStatus{}
	}
	return obj, nil
}

// serves reports whether the agent serves node.
func (a *Agent) serves(node *corev1.Node) bool {
	switch {
	case a.opts.NodeName != "":
		return node.Name == a.opts.NodeName
	case a.nodes != nil:
		return a.nodes[node.Name]
	}
	return true // the cache already applied NodeSelector
}

// Run serves nodes until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	a.ctx = ctx
	a.mu.Unlock()
	if err := a.events.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	defer a.events.Shutdown()
	if err := a.watch(ctx); err != nil {
		return err
	}
	cacheDone := make(chan error, 1)
	go func() { cacheDone <- a.cache.Start(ctx) }()
	if !a.cache.WaitForCacheSync(ctx) {
		if err := <-cacheDone; err != nil {
			return fmt.Errorf("starting the informers: %w", err)
		}
		return ctx.Err()
	}
	a.log.Info("Serving nodes", "nodeName", a.opts.NodeName, "nodes", len(a.opts.Nodes), "selector", a.opts.NodeSelector,
		"pollInterval", a.opts.PollInterval, "heartbeat", a.opts.Heartbeat)
	// Workers start from the node informer's events; after the sync every existing node has had one.
	<-ctx.Done()
	a.wg.Wait()
	return <-cacheDone
}

// watch wakes the worker of the node each Node, Pod and GPUNode event concerns, and starts and
// stops workers as nodes come and go.
func (a *Agent) watch(ctx context.Context) error {
	nodes, err := a.cache.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return err
	}
	if _, err := nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.nodeChanged(obj) },
		UpdateFunc: func(_, obj any) { a.nodeChanged(obj) },
		DeleteFunc: func(obj any) { a.nodeDeleted(obj) },
	}); err != nil {
		return err
	}
	pods, err := a.cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	wakePod := func(obj any) {
		if p, ok := unwrap(obj).(*corev1.Pod); ok {
			a.wake(p.Spec.NodeName, false)
		}
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    wakePod,
		UpdateFunc: func(_, obj any) { wakePod(obj) },
		DeleteFunc: wakePod,
	}); err != nil {
		return err
	}
	gpuNodes, err := a.cache.GetInformer(ctx, &convoy.GPUNode{})
	if err != nil {
		return err
	}
	_, err = gpuNodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if g, ok := unwrap(obj).(*convoy.GPUNode); ok {
				a.wake(g.Name, false)
			}
		},
		DeleteFunc: func(obj any) {
			if g, ok := unwrap(obj).(*convoy.GPUNode); ok {
				a.wake(g.Name, true)
			}
		},
	})
	return err
}

func unwrap(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (a *Agent) nodeChanged(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok || !a.serves(node) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.workers[node.Name]; ok {
		w.poke(false)
		return
	}
	if a.ctx == nil || a.ctx.Err() != nil {
		return
	}
	w := newWorker(a, node.Name)
	a.workers[node.Name] = w
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		w.run()
	}()
}

func (a *Agent) nodeDeleted(obj any) {
	node, ok := unwrap(obj).(*corev1.Node)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.workers[node.Name]; ok {
		w.stop()
		delete(a.workers, node.Name)
	}
}

func (a *Agent) wake(node string, gpuNodeDeleted bool) {
	a.mu.Lock()
	w := a.workers[node]
	a.mu.Unlock()
	if w != nil {
		w.poke(gpuNodeDeleted)
	}
}
