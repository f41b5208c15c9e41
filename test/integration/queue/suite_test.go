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

// Package queue tests Convoy's Kueue integration with real parts: kube-apiserver, etcd,
// kube-controller-manager and kwok from test/framework, the Kueue manager built unmodified from the
// pinned module and installed from its release manifests with deploy/kueue's configuration, and
// the operator with the queue integration, built by operator.New as the binary builds it and run
// as the convoy-operator ServiceAccount with the generated RBAC, its webhook registered from
// deploy/kueue/webhook.yaml and pointed at the test process (test/util/queuetest). deploy/queue is
// applied as an administrator would.
//
// No scheduler runs, and deploy/queue's ClusterQueues run without its placement admission check: a
// test binds a gang's pods to kwok nodes that match their node selector and
// tolerations, as the convoy-scheduler would, and kwok reports them Running.
package queue

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/controller"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
	"github.com/convoy-dev/convoy/test/util/queuetest"
)

func TestMain(m *testing.M) {
	// The parallel tests (the elastic ones) mostly wait out cooldowns: they all run at once, however
	// few the cores (the default -parallel is GOMAXPROCS), unless -parallel says otherwise.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8") // a known flag and a number: it cannot fail
	}
	framework.Main(m, framework.Options{AddToScheme: []func(*runtime.Scheme) error{
		convoy.AddToScheme, kueue.AddToScheme, schedv1alpha1.AddToScheme}})
}

const (
	// timeout bounds every wait; Kueue admits in well under a second here.
	timeout = 45 * time.Second

	h100 = "NVIDIA-H100-80GB-HBM3"
	a100 = "NVIDIA-A100-SXM4-80GB"
	// capacityType is the node label deploy/queue's spot flavors select.
	capacityType = "karpenter.sh/capacity-type"
)

// nodes are the kwok GPU nodes: H100 and A100 on-demand nodes and tainted H100 spot nodes, labelled
// as deploy/queue's ResourceFlavors expect: the on-demand nodes by their GPU product alone.
var nodes = func() []framework.NodeSpec {
	var specs []framework.NodeSpec
	add := func(prefix, product, capacity string, n int, taints []corev1.Taint) {
		for i := range n {
			s := framework.NodeSpec{Name: fmt.Sprintf("%s-%d", prefix, i), GPUs: 8, GPUProduct: product, Taints: taints}
			if capacity != "" {
				s.Labels = map[string]string{capacityType: capacity}
			}
			specs = append(specs, s)
		}
	}
	add("h100-od", h100, "", 4, nil)
	add("a100-od", a100, "", 2, nil)
	add("h100-spot", h100, "spot", 2, []corev1.Taint{{Key: "convoy.dev/spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}})
	return specs
}()

// suite is what every test shares: the cluster with Kueue, deploy/queue's objects and the operator.
type suite struct {
	*queuetest.Env
	c *framework.Cluster
	// held maps a namespace to a channel that the operator's pod deletions there wait on, as if
	// the pods' kubelet took its time to stop them.
	held sync.Map
}

// holdingClient is the operator's client with pod deletions that wait while their namespace is held.
type holdingClient struct {
	client.Client
	s *suite
}

func (c holdingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		if release, ok := c.s.held.Load(obj.GetNamespace()); ok {
			select {
			case <-release.(chan struct{}):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return c.Client.Delete(ctx, obj, opts...)
}

// holdPodDeletions makes the operator's deletions of the test's pods wait until release is called.
func (e *env) holdPodDeletions() (release func()) {
	ch := make(chan struct{})
	e.held.Store(e.ns, ch)
	var once sync.Once
	release = func() {
		once.Do(func() {
			e.held.Delete(e.ns)
			close(ch)
		})
	}
	e.t.Cleanup(release)
	return release
}

var (
	setupMu sync.Mutex
	shared  *suite
)

// env is one test's view: the suite and the test's own namespace.
type env struct {
	*suite
	t  *testing.T
	k  client.Client
	ns string
}

// newEnv sets the suite up once and gives the test a fresh namespace.
func newEnv(t *testing.T) *env {
	t.Helper()
	c := framework.Shared(t)
	setupMu.Lock()
	if shared == nil {
		s, err := setup(c)
		if err != nil {
			setupMu.Unlock()
			t.Fatal(err)
		}
		shared = s
	}
	setupMu.Unlock()
	e := &env{suite: shared, t: t, k: c.Client, ns: framework.TestNamespace(t)}
	e.createNamespace(e.ns)
	return e
}

// setup creates the nodes, starts Kueue and the operator (queuetest) and applies deploy/queue as a
// queue administrator would: server-side, to the real API server and Kueue's webhooks.
func setup(c *framework.Cluster) (*suite, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.CreateNodes(ctx, nodes...); err != nil {
		return nil, err
	}
	s := &suite{c: c}
	var err error
	s.Env, err = queuetest.Start(ctx, c, queuetest.Options{
		LogLevel:   zapcore.Level(-3),
		WrapClient: func(k client.Client) client.Client { return holdingClient{Client: k, s: s} },
		ReclaimNotice: controller.ReclaimNotice{Taints: convoy.DefaultReclaimNoticeTaints,
			Conditions: []string{noticeCondition}},
	})
	if err != nil {
		return nil, err
	}
	if out, err := s.Kubectl(ctx, "apply", "--server-side", "-k", filepath.Join(s.Root, "deploy/queue")); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	// No convoy-scheduler runs here to serve deploy/queue's placement admission check (test/e2e
	// covers it): the ClusterQueues admit by quota alone, as they do without the check.
	for _, cq := range []string{"team-a", "team-b"} {
		if out, err := s.Kubectl(ctx, "patch", "clusterqueue", cq, "--type=json", `-p=[{"op":"remove","path":"/spec/admissionChecksStrategy"}]`); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, out)
		}
	}
	return s, nil
}

// kubectl runs kubectl as the cluster's admin and fails the test when it fails.
func (e *env) kubectl(args ...string) string {
	e.t.Helper()
	return util.MustKubectl(e.t, e.Cluster, args...)
}

func (e *env) createNamespace(name string) {
	e.t.Helper()
	if err := e.k.Create(e.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		e.t.Fatal(err)
	}
	if err := util.WaitDefaultServiceAccount(e.t.Context(), e.k, name); err != nil {
		e.t.Fatal(err)
	}
}

// eventually polls cond until it holds, failing the test with cond's last word after timeout.
func (e *env) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	util.Eventually(e.t, 100*time.Millisecond, timeout, what, cond)
}

func (e *env) create(obj client.Object) {
	e.t.Helper()
	if err := e.k.Create(e.t.Context(), obj); err != nil {
		e.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// clusterQueue is a ClusterQueue of H100 on-demand GPUs (with ample cpu and memory) that admits
// jobs from every namespace.
func clusterQueue(name, cohort string, gpus int64, borrowing, lending *int64, preemption kueue.ClusterQueuePreemption) *kueue.ClusterQueue {
	limit := func(n *int64) string {
		if n == nil {
			return ""
		}
		return strconv.FormatInt(*n, 10)
	}
	return utiltestingapi.MakeClusterQueue(name).Cohort(kueue.CohortReference(cohort)).Preemption(preemption).
		ResourceGroup(*utiltestingapi.MakeFlavorQuotas("h100-on-demand").
			Resource(convoy.ResourceGPU, strconv.FormatInt(gpus, 10), limit(borrowing), limit(lending)).
			Resource(corev1.ResourceCPU, "1000").
			Resource(corev1.ResourceMemory, "10Ti").Obj()).
		Obj()
}

// localQueue creates the LocalQueue "q" of the test's namespace, pointing at clusterQueue.
func (e *env) localQueue(clusterQueue string) {
	e.t.Helper()
	e.create(utiltestingapi.MakeLocalQueue("q", e.ns).ClusterQueue(clusterQueue).Obj())
}

func (e *env) job(namespace, name string) *convoy.TrainingJob {
	e.t.Helper()
	job := &convoy.TrainingJob{}
	if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, job); err != nil {
		e.t.Fatal(err)
	}
	return job
}

// waitJob waits until cond holds for the job and returns it.
func (e *env) waitJob(namespace, name, what string, cond func(*convoy.TrainingJob) bool) *convoy.TrainingJob {
	e.t.Helper()
	return util.WaitJob(e.t, e.k, 100*time.Millisecond, timeout, client.ObjectKey{Namespace: namespace, Name: name}, what, cond)
}

func (e *env) waitState(namespace, name string, want convoy.TrainingJobState) *convoy.TrainingJob {
	e.t.Helper()
	return util.WaitState(e.t, e.k, 100*time.Millisecond, timeout, client.ObjectKey{Namespace: namespace, Name: name}, want)
}

func condition(job *convoy.TrainingJob, condType string) *metav1.Condition {
	c := meta.FindStatusCondition(job.Status.Conditions, condType)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

// workloads returns the Workloads the job controls.
func (e *env) workloads(job *convoy.TrainingJob) []kueue.Workload {
	e.t.Helper()
	list := &kueue.WorkloadList{}
	if err := e.k.List(e.t.Context(), list, client.InNamespace(job.Namespace)); err != nil {
		e.t.Fatal(err)
	}
	var out []kueue.Workload
	for _, wl := range list.Items {
		if metav1.IsControlledBy(&wl, job) {
			out = append(out, wl)
		}
	}
	return out
}

// pods returns the job's pods, those being deleted included.
func (e *env) pods(namespace, job string) []corev1.Pod {
	e.t.Helper()
	list := &corev1.PodList{}
	if err := e.k.List(e.t.Context(), list, client.InNamespace(namespace), client.MatchingLabels{convoy.LabelJobName: job}); err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// startGang waits for the job's n pods, binds each to a node it fits (node selector and
// tolerations) as the scheduler would, and waits until the job is Running.
func (e *env) startGang(namespace, job string, n int) []corev1.Pod {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%d pods of %s", n, job), func() (bool, string) {
		live := 0
		for _, p := range e.pods(namespace, job) {
			if p.DeletionTimestamp == nil {
				live++
			}
		}
		return live == n, fmt.Sprintf("%d live pods", live)
	})
	for _, pod := range e.pods(namespace, job) {
		if pod.Spec.NodeName == "" {
			e.bind(&pod, e.nodeFor(&pod))
		}
	}
	e.waitState(namespace, job, convoy.StateRunning)
	return e.pods(namespace, job)
}

// nodeFor returns a node whose labels match the pod's node selector and whose taints it tolerates.
func (e *env) nodeFor(pod *corev1.Pod) string {
	e.t.Helper()
	for _, n := range nodes {
		node, err := n.Node()
		if err != nil {
			e.t.Fatal(err)
		}
		fits := true
		for k, v := range pod.Spec.NodeSelector {
			fits = fits && node.Labels[k] == v
		}
		for _, taint := range node.Spec.Taints {
			tolerated := false
			for _, tol := range pod.Spec.Tolerations {
				tolerated = tolerated || tol.ToleratesTaint(klog.TODO(), &taint, false)
			}
			fits = fits && tolerated
		}
		if fits {
			return node.Name
		}
	}
	e.t.Fatalf("no node fits pod %s (nodeSelector %v, tolerations %v)", pod.Name, pod.Spec.NodeSelector, pod.Spec.Tolerations)
	return ""
}

func (e *env) bind(pod *corev1.Pod, node string) {
	e.t.Helper()
	err := e.c.Clientset.CoreV1().Pods(pod.Namespace).Bind(e.t.Context(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("binding %s to %s: %v", pod.Name, node, err)
	}
}

// reportCheckpoint posts a checkpoint to the operator's progress endpoint as the pod's training
// code would: with the pod's projected token, trusting the CA in the job's ConfigMap.
func (e *env) reportCheckpoint(pod *corev1.Pod, cp progress.Checkpoint) {
	e.t.Helper()
	e.post(pod, "checkpoint", cp)
}

// reportProgress posts a progress report and returns the operator's reply: a checkpoint request,
// or none (204).
func (e *env) reportProgress(pod *corev1.Pod, r progress.Report) progress.Reply {
	e.t.Helper()
	return e.post(pod, "progress", r)
}

// post posts body to the pod's CONVOY_PROGRESS_URL/kind as the pod's training code would: with
// the pod's projected token, trusting the CA in the job's ConfigMap. It fails the test unless the
// report is recorded.
func (e *env) post(pod *corev1.Pod, kind string, body any) progress.Reply {
	e.t.Helper()
	reply, err := e.Report(e.t.Context(), pod, kind, body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply
}
