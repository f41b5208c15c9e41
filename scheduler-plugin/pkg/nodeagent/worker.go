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

package nodeagent

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/podgpus"
)

// worker serves one node: it polls the node's GPUs and writes its GPUNode and labels. Everything
// but the fields under mu belongs to the worker's goroutine.
type worker struct {
	a      *Agent
	name   string
	log    klog.Logger
	wakeCh chan struct{}
	cancel context.CancelFunc
	ctx    context.Context

	mu             sync.Mutex
	xids           map[int]string // critical XIDs seen, by GPU index: sticky until restart
	gpuNodeDeleted bool

	lib        nvml.Interface
	reader     *gpuinfo.Reader
	initErr    error
	nextOpen   time.Time
	sim        *podgpus.Simulator
	kubelet    *podgpus.Kubelet
	holders    podgpus.Holders
	kubeletErr string
	gauges     []*gpuGauges
	jobGauges  []*jobGauges // by GPU index
	heartbeat  time.Duration

	seeded     bool
	conditions []metav1.Condition
	health     map[int32]convoy.GPUHealth
	evictions  []Eviction // pods holding GPUs that turned unhealthy, still to evict

	// written is the GPUNode our last write returned, used instead of the cache while the cache
	// still shows one of the older versions: the one before our writes, or one our own earlier
	// writes made.
	written        *convoy.GPUNode
	older          []string
	labelsRVBefore string
	labelMemo      labelMemo
}

func newWorker(a *Agent, name string) *worker {
	ctx, cancel := context.WithCancel(a.ctx)
	return &worker{
		a:      a,
		name:   name,
		log:    a.log.WithValues("node", name),
		wakeCh: make(chan struct{}, 1),
		ctx:    ctx,
		cancel: cancel,
		xids:   map[int]string{},
		// Spread the heartbeats of many nodes served together over ±10%.
		heartbeat: time.Duration(float64(a.opts.Heartbeat) * (0.9 + 0.2*rand.Float64())),
	}
}

// poke asks for a poll soon; gpuNodeDeleted says the GPUNode was deleted and must be recreated.
func (w *worker) poke(gpuNodeDeleted bool) {
	if gpuNodeDeleted {
		w.mu.Lock()
		w.gpuNodeDeleted = true
		w.mu.Unlock()
	}
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

func (w *worker) stop() { w.cancel() }

func (w *worker) run() {
	ctx := w.ctx
	defer w.close()
	if !w.a.cache.WaitForCacheSync(ctx) {
		return
	}
	w.poll(ctx)
	// The first tick comes at a random point of the interval so that nodes served together do
	// not poll in step.
	timer := time.NewTimer(time.Duration(rand.Int64N(int64(w.a.opts.PollInterval)) + 1))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			w.poll(ctx)
			timer.Reset(w.a.opts.PollInterval)
		case <-w.wakeCh:
			w.poll(ctx)
		}
	}
}

func (w *worker) close() {
	if w.reader != nil {
		w.reader.Close()
	}
	if w.kubelet != nil {
		_ = w.kubelet.Close()
	}
	if m := w.a.opts.Metrics; m != nil {
		m.forget(w.name)
	}
}

func (w *worker) poll(ctx context.Context) {
	began := time.Now()
	node := &corev1.Node{}
	if err := w.a.cache.Get(ctx, client.ObjectKey{Name: w.name}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			w.log.Error(err, "Reading the node from the cache")
		}
		return
	}
	w.open(ctx, node)
	obs := Observation{InitErr: w.initErr}
	if w.reader != nil {
		obs.Static, obs.Samples = w.reader.Static(), w.reader.Sample()
		w.mu.Lock()
		obs.XIDs = make(map[int]string, len(w.xids))
		for i, r := range w.xids {
			obs.XIDs[i] = r
		}
		w.mu.Unlock()
		obs.Holders = w.assign(ctx, obs)
	}
	current := w.current(ctx)
	if !w.seeded {
		w.seeded = true
		w.health = map[int32]convoy.GPUHealth{}
		if current != nil {
			w.conditions = append(w.conditions, current.Status.Conditions...)
			w.health = healthOf(&current.Status)
		}
	}
	desired := BuildStatus(obs, &w.conditions, time.Now())
	w.report(node, &desired, obs.Samples)
	if m := w.a.opts.Metrics; m != nil {
		m.PollDuration.Observe(time.Since(began).Seconds())
	}
	w.publish(ctx, node, current, desired)
	w.publishLabels(ctx, node, &desired)
	// After the status write: the scheduler must see the GPU unhealthy before the gang comes back.
	if len(w.evictions) > 0 {
		w.evict(ctx, node, &desired)
	}
}

// open initialises NVML for the node, retrying every RetryInterval while it fails.
func (w *worker) open(ctx context.Context, node *corev1.Node) {
	if w.reader != nil || time.Now().Before(w.nextOpen) {
		return
	}
	opts := w.a.opts
	var err error
	if w.lib == nil {
		w.lib, err = opts.NVML(node)
	}
	var r *gpuinfo.Reader
	if err == nil {
		r, err = gpuinfo.Open(w.lib, gpuinfo.Options{NodeName: w.name, SysfsRoot: opts.SysfsRoot})
	}
	if err != nil {
		if w.initErr == nil || w.initErr.Error() != err.Error() {
			w.log.Info("NVML unavailable: publishing NVMLAvailable=False and retrying", "err", err, "retryInterval", opts.RetryInterval)
			w.a.recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonNVMLUnavailable, "ReadGPUs", "%v", err)
		}
		w.initErr, w.nextOpen = err, time.Now().Add(opts.RetryInterval)
		if m := opts.Metrics; m != nil {
			m.NVMLUp.WithLabelValues(w.name).Set(0)
		}
		return
	}
	w.reader, w.initErr = r, nil
	st := r.Static()
	w.log.Info("Reading GPUs through NVML", "gpus", len(st.GPUs), "driver", st.DriverVersion, "cuda", st.CUDAVersion)
	if k, err := podgpus.DialKubelet(opts.PodResourcesSocket); err == nil {
		w.kubelet = k
		w.log.Info("Reading which pod holds each GPU from the kubelet's PodResources API", "socket", opts.PodResourcesSocket)
	} else if w.sim, err = podgpus.NewSimulator(w.lib, r.IndexOfUUID); err != nil {
		w.log.Error(err, "Cannot simulate GPU assignment: no GPU will show a holder")
	}
	if m := opts.Metrics; m != nil {
		m.NVMLUp.WithLabelValues(w.name).Set(1)
		for _, g := range st.GPUs {
			w.gauges = append(w.gauges, m.gpu(w.name, g.Index, g.UUID, g.Product))
			w.gauges[len(w.gauges)-1].memoryTotal.Set(float64(g.MemoryMiB << 20))
		}
	}
	if watcher, err := r.Watch(); err != nil {
		w.log.Info("No NVML events: health comes from polling only", "err", err)
	} else {
		go func() {
			if err := watcher.Run(ctx, w.onEvent); err != nil {
				w.log.Error(err, "Watching NVML events stopped: health comes from polling only")
			}
		}()
	}
}

func (w *worker) onEvent(e gpuinfo.Event) {
	if e.Critical {
		w.mu.Lock()
		for i := range w.reader.Static().GPUs {
			if (e.Index == -1 || e.Index == i) && w.xids[i] == "" {
				w.xids[i] = e.Reason
			}
		}
		w.mu.Unlock()
	}
	if m := w.a.opts.Metrics; m != nil && e.XID != 0 && e.Index >= 0 && e.Index < len(w.gauges) {
		l := w.gauges[e.Index].labels
		m.XIDErrors.WithLabelValues(l[labelNode], l[labelGPU], l[labelUUID], l[labelModel], strconv.FormatUint(e.XID, 10)).Inc()
	}
	w.log.V(2).Info("NVML event", "gpu", e.Index, "reason", e.Reason, "critical", e.Critical)
	w.poke(false)
}

// assign finds which pod holds each GPU: the kubelet's answer on a real node, a simulated
// assignment on a fake one. On a kubelet error the last answer stands.
func (w *worker) assign(ctx context.Context, obs Observation) podgpus.Holders {
	if w.kubelet != nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		h, err := w.kubelet.Holders(ctx, w.reader.IndexOfUUID)
		if err != nil {
			// Once per distinct error, not on every poll while the kubelet is away.
			if msg := err.Error(); msg != w.kubeletErr {
				w.log.Error(err, "Reading GPU assignments from the kubelet: keeping the last ones")
				w.kubeletErr = msg
			}
			return w.holders
		}
		w.holders, w.kubeletErr = h, ""
		return h
	}
	if w.sim == nil {
		return nil
	}
	list := &corev1.PodList{}
	if err := w.a.cache.List(ctx, list, client.MatchingFields{podNodeNameField: w.name}); err != nil {
		w.log.Error(err, "Listing the node's pods from the cache")
		return w.holders
	}
	var pods []podgpus.Pod
	for i := range list.Items {
		if p, ok := podgpus.FromPod(&list.Items[i]); ok {
			pods = append(pods, p)
		}
	}
	usable := func(i int) bool {
		return i < len(obs.Samples) && obs.Samples[i].Health == convoy.GPUHealthy && obs.XIDs[i] == ""
	}
	res := w.sim.Assign(pods, usable)
	for pod, why := range res.Ignored {
		w.log.V(2).Info("Ignoring the pod's GPU indices", "pod", pod, "reason", why)
	}
	if len(res.Unplaced) > 0 {
		w.log.V(2).Info("Pods ask for more GPUs than are free and healthy; they hold none", "pods", res.Unplaced)
	}
	w.holders = res.Holders
	return res.Holders
}

// report emits Events for health transitions and updates the GPU metrics.
func (w *worker) report(node *corev1.Node, s *convoy.GPUNodeStatus, samples []gpuinfo.Sample) {
	unhealthy, recovered := healthChanges(w.health, s.GPUs)
	for _, g := range unhealthy {
		w.log.Info("GPU unhealthy", "gpu", g.Index, "uuid", g.UUID, "reason", g.HealthReason)
		w.a.recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonGPUUnhealthy, "CheckHealth",
			"GPU %d (%s) is unhealthy: %s", g.Index, g.UUID, g.HealthReason)
	}
	if w.a.opts.EvictOnUnhealthy {
		w.queueEvictions(Evictions(unhealthy))
	}
	for _, g := range recovered {
		w.log.Info("GPU recovered", "gpu", g.Index, "uuid", g.UUID)
		w.a.recorder.Eventf(node, nil, corev1.EventTypeNormal, ReasonGPURecovered, "CheckHealth",
			"GPU %d (%s) is healthy again", g.Index, g.UUID)
	}
	w.health = healthOf(s)
	jobs := map[string]string{} // a holder's TrainingJob, looked up once a poll
	for i, g := range s.GPUs {
		if i >= len(w.gauges) {
			break
		}
		m, jg := w.gauges[i], w.jobGaugesOf(i, g, jobs)
		if g.Utilization != nil {
			m.utilization.Set(float64(*g.Utilization))
			if jg != nil {
				jg.utilization.Set(float64(*g.Utilization))
			}
		}
		if i < len(samples) && samples[i].MemoryUsedMiB != nil {
			m.memoryUsed.Set(float64(*samples[i].MemoryUsedMiB << 20))
			if jg != nil {
				jg.memoryUsed.Set(float64(*samples[i].MemoryUsedMiB << 20))
			}
		}
		m.healthy.Set(boolFloat(g.Health == convoy.GPUHealthy))
		m.held.Set(boolFloat(g.AllocatedTo != ""))
	}
}

// jobGaugesOf points GPU i's per-job series at the TrainingJob whose pod holds it and returns
// them, nil when no job's pod holds it. jobs memoizes each holder's job for one poll.
func (w *worker) jobGaugesOf(i int, g convoy.GPUDevice, jobs map[string]string) *jobGauges {
	for len(w.jobGauges) <= i {
		w.jobGauges = append(w.jobGauges, nil)
	}
	namespace, job, pod := "", "", ""
	if ns, name, ok := strings.Cut(g.AllocatedTo, "/"); ok {
		j, seen := jobs[g.AllocatedTo]
		if !seen {
			p := &corev1.Pod{}
			if err := w.a.cache.Get(w.ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err == nil {
				j = p.Labels[convoy.LabelJobName]
			}
			jobs[g.AllocatedTo] = j
		}
		namespace, job, pod = ns, j, name
	}
	w.a.opts.Metrics.setJob(&w.jobGauges[i], w.name, g.Index, namespace, job, pod)
	return w.jobGauges[i]
}

// queueEvictions adds evictions to the pending ones, merging those of a pod already pending.
func (w *worker) queueEvictions(evictions []Eviction) {
	for _, e := range evictions {
		i := slices.IndexFunc(w.evictions, func(p Eviction) bool { return p.Pod == e.Pod })
		if i < 0 {
			w.evictions = append(w.evictions, e)
			continue
		}
		w.evictions[i].GPUs = append(w.evictions[i].GPUs, e.GPUs...)
		w.evictions[i].Reason += "; " + e.Reason
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// current is the GPUNode as the API server has it: the cache's copy, or our last write while the
// cache has not caught up with it; nil when there is none.
func (w *worker) current(ctx context.Context) *convoy.GPUNode {
	w.mu.Lock()
	if w.gpuNodeDeleted {
		w.gpuNodeDeleted, w.written = false, nil
	}
	w.mu.Unlock()
	cached := &convoy.GPUNode{}
	err := w.a.cache.Get(ctx, client.ObjectKey{Name: w.name}, cached)
	found := err == nil
	if w.written != nil {
		if !found || slices.Contains(w.older, cached.ResourceVersion) {
			return w.written
		}
		w.written, w.older = nil, nil
	}
	if found {
		return cached
	}
	return nil
}

// publish writes the GPUNode's status when it changed or the heartbeat is due, creating the
// GPUNode first when there is none.
func (w *worker) publish(ctx context.Context, node *corev1.Node, current *convoy.GPUNode, desired convoy.GPUNodeStatus) {
	now := time.Now()
	var reason string
	switch {
	case current == nil || !SameStatus(&current.Status, &desired):
		reason = "changed"
	case current.Status.ObservedTime == nil || now.Sub(current.Status.ObservedTime.Time) >= w.heartbeat:
		reason = "heartbeat"
	default:
		return
	}
	var older []string
	switch current {
	case nil:
	case w.written:
		older = append(w.older, current.ResourceVersion)
	default:
		older = []string{current.ResourceVersion}
	}
	if current == nil {
		obj := &convoy.GPUNode{
			TypeMeta: metav1.TypeMeta{APIVersion: convoy.GroupVersion.String(), Kind: "GPUNode"},
			ObjectMeta: metav1.ObjectMeta{Name: w.name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}}},
		}
		if err := w.write("create", reason, func() error {
			return w.a.applyGPUNode(ctx, obj, false)
		}); err != nil {
			w.log.Error(err, "Creating the GPUNode")
			return
		}
		older = append(older, obj.ResourceVersion)
	}
	desired.ObservedTime = ptr.To(metav1.NewTime(now.Truncate(time.Second)))
	obj := &convoy.GPUNode{
		TypeMeta:   metav1.TypeMeta{APIVersion: convoy.GroupVersion.String(), Kind: "GPUNode"},
		ObjectMeta: metav1.ObjectMeta{Name: w.name},
		Status:     desired,
	}
	if err := w.write("status", reason, func() error {
		return w.a.applyGPUNode(ctx, obj, true)
	}); err != nil {
		w.log.Error(err, "Publishing the GPUNode status")
		if apierrors.IsNotFound(err) {
			w.written = nil
		}
		return
	}
	w.written, w.older = obj, older
	w.log.V(2).Info("Published the GPUNode status", "reason", reason, "healthy", desired.Healthy, "free", desired.Free)
}

// applyGPUNode server-side applies obj, or its status, as the agent's field manager, taking over
// fields another manager holds, and reads the API server's answer back into obj.
func (a *Agent) applyGPUNode(ctx context.Context, obj *convoy.GPUNode, status bool) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	ac := &unstructured.Unstructured{Object: u}
	if status {
		err = a.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(ac), client.FieldOwner(a.opts.FieldManager), client.ForceOwnership)
	} else {
		err = a.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(ac), client.FieldOwner(a.opts.FieldManager), client.ForceOwnership)
	}
	if err != nil {
		return err
	}
	*obj = convoy.GPUNode{}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(ac.Object, obj)
}

// publishLabels applies the GPU Feature Discovery labels that no other field manager owns.
func (w *worker) publishLabels(ctx context.Context, node *corev1.Node, s *convoy.GPUNodeStatus) {
	if w.labelsRVBefore != "" && node.ResourceVersion == w.labelsRVBefore {
		return // the cache has not seen our last label write yet
	}
	w.labelsRVBefore = ""
	labels, apply := w.labelMemo.decide(node, GFDLabels(s), w.a.opts.FieldManager)
	if !apply {
		return
	}
	ac := corev1ac.Node(w.name).WithLabels(labels)
	if err := w.write("labels", "changed", func() error {
		// No ForceOwnership: a label another manager took meanwhile stays theirs.
		return w.a.client.Apply(ctx, ac, client.FieldOwner(w.a.opts.FieldManager))
	}); err != nil {
		w.log.Error(err, "Applying the node's GPU labels")
		return
	}
	w.labelsRVBefore = node.ResourceVersion
}

// write runs one API write once fewer than MaxConcurrentWrites are in flight, counting it and
// timing the API call.
func (w *worker) write(kind, reason string, do func() error) error {
	select {
	case w.a.writes <- struct{}{}:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	defer func() { <-w.a.writes }()
	began := time.Now()
	err := do()
	if m := w.a.opts.Metrics; m != nil {
		result := "success"
		if err != nil {
			result = "error"
		}
		m.Publishes.WithLabelValues(kind, reason, result).Inc()
		m.PublishTime.WithLabelValues(kind).Observe(time.Since(began).Seconds())
	}
	return err
}
