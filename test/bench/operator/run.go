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

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	fixtures "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
)

const (
	namespace       = "bench"
	warmupNamespace = "warmup"
	// schedulerName is served by no scheduler, so nothing but the operator acts on the pods.
	schedulerName = "bench-unscheduled"
	image         = "trainer:1"

	trainingOperatorModule = "github.com/kubeflow/training-operator@v1.9.2"
	trainingOperatorBinary = "training-operator"
	// trainingOperatorNamespace holds its (unused) webhook certificate Secret; its main reads the
	// namespace from MY_POD_NAMESPACE.
	trainingOperatorNamespace = "kubeflow"
	// trainingOperatorCertSecret is fixed in its main.
	trainingOperatorCertSecret = "training-operator-webhook-cert"
)

// trainingOperatorCertDir is where training-operator's certificate rotator waits for its
// certificate before it starts its controllers, fixed in its pkg/cert whatever $TMPDIR is; its
// webhook server reads controller-runtime's directory under $TMPDIR, which it is run with
// TMPDIR=/tmp so that both are this one.
const trainingOperatorCertDir = "/tmp/k8s-webhook-server/serving-certs"

// run measures one contender on a fresh control plane.
func run(ctx context.Context, o options, sys System) (*Result, error) {
	stateDir := ""
	if o.stateDir != "" {
		stateDir = filepath.Join(o.stateDir, string(sys))
	}
	c, err := framework.Start(ctx, framework.Options{
		BinDir:       o.binDir,
		StateDir:     stateDir,
		AddToScheme:  []func(*runtime.Scheme) error{convoy.AddToScheme, schedv1alpha1.AddToScheme},
		StartTimeout: 3 * time.Minute,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Stop() }()
	if err := setup(ctx, c, sys); err != nil {
		return nil, err
	}
	var pid int
	switch sys {
	case Convoy:
		pid, err = startConvoy(ctx, c, o, 0)
	case Convoy32:
		pid, err = startConvoy(ctx, c, o, 32)
	case TrainingOperator:
		pid, err = startTrainingOperator(ctx, c, o, 0)
	case TrainingOperator32:
		pid, err = startTrainingOperator(ctx, c, o, o.trainingOpThreads)
	}
	if err != nil {
		return nil, err
	}

	// The benchmark's own client (the job creator, the plain pod creator, the watch) is never what
	// holds a contender back.
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.QPS, cfg.Burst = 1000, 2000
	k, err := client.New(cfg, client.Options{Scheme: c.Scheme})
	if err != nil {
		return nil, err
	}
	if sys != APICeiling {
		// One job through the operator first, so that the batch meets an operator with its caches
		// synced and its controllers started (training-operator starts them only after its
		// webhook certificates are ready).
		if err := warmUp(ctx, k, sys, o.podsPerJob); err != nil {
			return nil, fmt.Errorf("warming up: %w (logs in %s)", err, filepath.Join(c.StateDir, "logs"))
		}
	}

	w, err := watchPods(ctx, cfg, o.jobs*o.podsPerJob)
	if err != nil {
		return nil, err
	}
	defer w.stop()

	// The control plane's processes, whose CPU during the batch is measured beside the operator's.
	plane := map[string]int{}
	for _, p := range c.Processes() {
		if p.Name == framework.APIServer || p.Name == framework.ControllerManager || p.Name == framework.Etcd {
			plane[p.Name] = p.Pid
		}
	}
	r := &Result{System: string(sys), Jobs: o.jobs, Pods: o.jobs * o.podsPerJob, HasOperator: sys != APICeiling, LoadAverage: framework.LoadAverage()}
	writes0, _ := writeCounts(ctx, c)
	events0, times0, _ := jobEvents(ctx, c)
	cpu0, _ := cpuSeconds(pid)
	planeCPU0 := map[string]float64{}
	for name, pid := range plane {
		planeCPU0[name], _ = cpuSeconds(pid)
	}
	began := time.Now()
	created, err := submit(ctx, k, sys, o)
	if err != nil {
		return nil, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	select {
	case <-w.done:
	case <-waitCtx.Done():
		fmt.Fprintf(os.Stderr, "%s: stopped waiting after %s with %d of %d pods\n", sys, o.timeout, w.count(), r.Pods)
	}
	last, perJob := w.results()
	r.PodsSeen = w.count()
	r.Total = last.Sub(began)
	var durations []time.Duration
	for job, at := range created {
		if lastPod, ok := perJob[job]; ok {
			durations = append(durations, lastPod.Sub(at))
		}
	}
	r.P50, r.P99 = percentile(durations, 50), percentile(durations, 99)
	r.PlaneCPUSeconds = map[string]float64{}
	for name, pid := range plane {
		cpu1, _ := cpuSeconds(pid)
		r.PlaneCPUSeconds[name] = cpu1 - planeCPU0[name]
	}
	if writes1, err := settledWrites(ctx, c); err == nil {
		r.Writes = writesLine(writes0, writes1)
		r.EventWrites = eventWrites(writes1) - eventWrites(writes0)
	}
	if events1, times1, err := jobEvents(ctx, c); err == nil {
		r.JobEvents, r.JobEventCount = events1-events0, times1-times0
	}
	if pid != 0 {
		cpu1, err := cpuSeconds(pid)
		if err != nil {
			return nil, fmt.Errorf("the operator is gone: %w (logs in %s)", err, filepath.Join(c.StateDir, "logs"))
		}
		r.CPUSeconds = cpu1 - cpu0
		if r.PeakRSSMiB, err = (framework.Process{Pid: pid}).PeakRSSMiB(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// setup creates the namespaces and installs the CRDs the contender needs.
func setup(ctx context.Context, c *framework.Cluster, sys System) error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	for _, ns := range []string{namespace, warmupNamespace, "convoy-system", trainingOperatorNamespace} {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	// Pods are refused until a namespace's default ServiceAccount exists.
	for _, ns := range []string{namespace, warmupNamespace} {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for the default ServiceAccount of %s: %w", ns, err)
		}
	}
	switch sys {
	case Convoy, Convoy32:
		out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/scheduler-plugins").Output()
		if err != nil {
			return fmt.Errorf("locating the scheduler-plugins module for its PodGroup CRD: %w", err)
		}
		return c.InstallCRDs(ctx, filepath.Join(root, "deploy/crd/bases"), filepath.Join(strings.TrimSpace(string(out)), "config/crd/bases"))
	case TrainingOperator, TrainingOperator32:
		dir, err := framework.ModuleDir(ctx, root, trainingOperatorModule)
		if err != nil {
			return err
		}
		if err := c.InstallCRDs(ctx, filepath.Join(dir, "manifests/base/crds")); err != nil {
			return err
		}
		// Its certificate rotator fills this Secret; with no ValidatingWebhookConfiguration
		// registered it reports the CA injected and the controllers start.
		return c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: trainingOperatorNamespace, Name: trainingOperatorCertSecret}})
	}
	return nil
}

// startConvoy runs bin/convoy-operator; reconciles 0 keeps its default concurrency.
func startConvoy(ctx context.Context, c *framework.Cluster, o options, reconciles int) (int, error) {
	ports, err := framework.FreePorts(3)
	if err != nil {
		return 0, err
	}
	probe := fmt.Sprintf("127.0.0.1:%d", ports[1])
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--leader-elect=false",
		"--kueue=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]),
		"--health-probe-bind-address=" + probe,
		fmt.Sprintf("--progress-bind-address=127.0.0.1:%d", ports[2]),
		fmt.Sprintf("--progress-url=https://127.0.0.1:%d", ports[2]),
	}
	// The client rate deploy/operator sets; -qps and -burst, after it, win.
	shipped, err := framework.ShippedFlags("deploy/operator/manager.yaml", "convoy-operator", "--kube-api-qps", "--kube-api-burst")
	if err != nil {
		return 0, err
	}
	args = append(args, shipped...)
	if o.qps > 0 {
		args = append(args, fmt.Sprintf("--kube-api-qps=%g", o.qps))
	}
	if o.burst > 0 {
		args = append(args, fmt.Sprintf("--kube-api-burst=%d", o.burst))
	}
	if reconciles > 0 {
		args = append(args, fmt.Sprintf("--max-concurrent-reconciles=%d", reconciles))
	}
	args = append(args, o.convoyExtraArgs...)
	// The environment deploy/operator's Deployment sets (GOMEMLIMIT, LOG_LEVEL).
	env, err := framework.ShippedEnv("deploy/operator/manager.yaml", "convoy-operator")
	if err != nil {
		return 0, err
	}
	if err := c.StartProcess("convoy-operator", filepath.Join(o.binDir, "convoy-operator"), args, env); err != nil {
		return 0, err
	}
	if err := c.WaitHealthy(ctx, "convoy-operator", "http://"+probe+"/readyz"); err != nil {
		return 0, err
	}
	return pidOf(c, "convoy-operator")
}

// startTrainingOperator runs training-operator's manager for PyTorchJobs only; threads 0 keeps
// its default worker count.
func startTrainingOperator(ctx context.Context, c *framework.Cluster, o options, threads int) (int, error) {
	ports, err := framework.FreePorts(3)
	if err != nil {
		return 0, err
	}
	probe := fmt.Sprintf("127.0.0.1:%d", ports[1])
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--enable-scheme=pytorchjob",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]),
		"--health-probe-bind-address=" + probe,
		fmt.Sprintf("--webhook-server-port=%d", ports[2]),
		fmt.Sprintf("--kube-api-qps=%d", int(o.peerQPS)),
		fmt.Sprintf("--kube-api-burst=%d", o.peerBurst),
		"--zap-log-level=error",
	}
	if threads > 0 {
		args = append(args, fmt.Sprintf("--controller-threads=%d", threads))
	}
	if err := c.StartProcess(trainingOperatorBinary, o.trainingOperator, args, []string{"MY_POD_NAMESPACE=" + trainingOperatorNamespace, "TMPDIR=/tmp"}); err != nil {
		return 0, err
	}
	if err := mountWebhookCert(ctx, c); err != nil {
		return 0, err
	}
	if err := c.WaitHealthy(ctx, trainingOperatorBinary, "http://"+probe+"/readyz"); err != nil {
		return 0, err
	}
	return pidOf(c, trainingOperatorBinary)
}

// mountWebhookCert does what the kubelet's Secret volume does for training-operator's Deployment:
// its certificate rotator fills the Secret, then waits for tls.crt and tls.key to appear in its
// fixed certificate directory before it starts its controllers.
func mountWebhookCert(ctx context.Context, c *framework.Cluster) error {
	secret := &corev1.Secret{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: trainingOperatorNamespace, Name: trainingOperatorCertSecret}, secret); err != nil {
			return false, err
		}
		return len(secret.Data["tls.crt"]) > 0 && len(secret.Data["tls.key"]) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for training-operator to fill its certificate Secret: %w", err)
	}
	if err := os.MkdirAll(trainingOperatorCertDir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(trainingOperatorCertDir, name), secret.Data[name], 0o600); err != nil {
			return err
		}
	}
	return nil
}

func pidOf(c *framework.Cluster, name string) (int, error) {
	for _, p := range c.Processes() {
		if p.Name == name {
			return p.Pid, nil
		}
	}
	return 0, fmt.Errorf("no process %s", name)
}

// job returns the contender's job i in namespace ns.
func job(sys System, ns string, i, pods int) client.Object {
	name := fmt.Sprintf("job-%04d", i)
	if sys == Convoy || sys == Convoy32 {
		tj := fixtures.MakeTrainingJob(name, ns).Workers(int32(pods)).GPUs(1).Image(image).
			Scheduling(convoy.SchedulingSpec{SchedulerName: schedulerName}).Obj()
		tj.UID = ""
		return tj
	}
	replica := func(n int) map[string]any {
		return map[string]any{
			"replicas":      int64(n),
			"restartPolicy": "OnFailure",
			"template": map[string]any{"spec": map[string]any{
				"schedulerName": schedulerName,
				"containers": []any{map[string]any{
					"name":      "pytorch",
					"image":     image,
					"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": int64(1)}},
				}},
			}},
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1",
		"kind":       "PyTorchJob",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
			"Master": replica(1),
			"Worker": replica(pods - 1),
		}},
	}}
	return u
}

// apiPod is one pod of the plain-client ceiling, as big as the operators' pods are small.
func apiPod(i, pods int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      fmt.Sprintf("job-%04d-worker-%d", i/pods, i%pods),
			Labels:    map[string]string{"bench/job": fmt.Sprintf("job-%04d", i/pods)},
		},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:      "trainer",
				Image:     image,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
			}},
		},
	}
}

func warmUp(ctx context.Context, k client.Client, sys System, pods int) error {
	if err := k.Create(ctx, job(sys, warmupNamespace, 0, pods)); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := k.List(ctx, list, client.InNamespace(warmupNamespace)); err != nil {
			return false, err
		}
		return len(list.Items) >= pods, nil
	})
}

// submit creates every job (or, for the ceiling, every pod) from o.creators goroutines and returns
// when each job's creation returned.
func submit(ctx context.Context, k client.Client, sys System, o options) (map[string]time.Time, error) {
	n := o.jobs
	if sys == APICeiling {
		n = o.jobs * o.podsPerJob
	}
	var (
		next    atomic.Int64
		mu      sync.Mutex
		created = map[string]time.Time{}
		errs    []error
		wg      sync.WaitGroup
	)
	for range o.creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				var obj client.Object
				if sys == APICeiling {
					obj = apiPod(i, o.podsPerJob)
				} else {
					obj = job(sys, namespace, i, o.podsPerJob)
				}
				err := k.Create(ctx, obj)
				now := time.Now()
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("creating %s: %w", obj.GetName(), err))
				} else if sys != APICeiling {
					created[obj.GetName()] = now
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return created, errors.Join(errs...)
}

// podWatch notes when each pod of the bench namespace is first observed.
type podWatch struct {
	want   int
	done   chan struct{}
	cancel context.CancelFunc

	mu     sync.Mutex
	seen   map[string]bool
	last   time.Time
	perJob map[string]time.Time
}

func watchPods(ctx context.Context, cfg *rest.Config, want int) (*podWatch, error) {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatch{want: want, done: make(chan struct{}), cancel: cancel, seen: map[string]bool{}, perJob: map[string]time.Time{}}
	factory := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, namespace, nil)
	inf := factory.ForResource(corev1.SchemeGroupVersion.WithResource("pods")).Informer()
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		now := time.Now()
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.seen[m.Name] {
			return
		}
		w.seen[m.Name] = true
		w.last = now
		if owner := metav1.GetControllerOf(m); owner != nil {
			w.perJob[owner.Name] = now
		}
		if len(w.seen) == w.want {
			close(w.done)
		}
	}})
	if err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, errors.New("pod watch did not sync")
	}
	return w, nil
}

func (w *podWatch) stop() { w.cancel() }

func (w *podWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// results returns when the last pod was observed and, per job, when its last pod was.
func (w *podWatch) results() (time.Time, map[string]time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	perJob := make(map[string]time.Time, len(w.perJob))
	for k, v := range w.perJob {
		perJob[k] = v
	}
	return w.last, perJob
}

// ensureTrainingOperator builds training-operator's manager into binDir unless it is there. It is
// built in its own module directory with its own go.mod: it is not in framework.Binaries (the one
// go build of go.mod's build list) because only this benchmark runs it, and its module would add
// Kubeflow's whole dependency tree to Convoy's go.mod.
func ensureTrainingOperator(ctx context.Context, binDir string) (string, error) {
	path := filepath.Join(binDir, trainingOperatorBinary)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := framework.ModuleDir(ctx, root, trainingOperatorModule)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "Building %s from %s\n", path, trainingOperatorModule)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "./cmd/training-operator.v1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false -mod=readonly")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building training-operator in %s: %w", dir, err)
	}
	return path, nil
}
