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

// Package operator tests the TrainingJob operator against a real kube-apiserver, etcd,
// kube-controller-manager and kwok from test/framework.
//
// No scheduler runs here: a test places the gang itself through the pods/binding subresource, as
// the convoy-scheduler would, onto kwok GPU nodes, which then report the pods Running. Pods finish
// when a test writes their status (phase and container exit code) as a kubelet would. The operator
// runs in-process, built by operator.New exactly as the binary builds it, and talks to the API
// server as the convoy-operator ServiceAccount bound to the RBAC in deploy/operator/rbac,
// so a missing permission fails these tests.
package operator

import (
	"bytes"
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/controller"
	"github.com/convoy-dev/convoy/operator/pkg/operator"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

func TestMain(m *testing.M) {
	// A pod with a finalizer stays Terminating until it is removed, as with a kubelet: a test holds
	// a pod of an earlier attempt that way.
	kwokArgs, err := framework.KwokArgs(context.Background(), framework.PodDeleteKeepingFinalizers)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	framework.Main(m, framework.Options{KwokArgs: kwokArgs, AddToScheme: []func(*runtime.Scheme) error{convoy.AddToScheme, schedv1alpha1.AddToScheme}})
}

const (
	operatorNamespace = "convoy-system"
	operatorSA        = "convoy-operator"
	// timeout bounds every wait; the steps it waits for take well under a second.
	timeout = 30 * time.Second
)

// nodes are the kwok GPU nodes the tests bind pods to.
var nodes = framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 2, NodesPerRack: 2, GPUsPerNode: 8,
	Product: "NVIDIA-H100-80GB-HBM3"}.Nodes()

var (
	setupMu   sync.Mutex
	setupDone bool
)

// env is one test's view: the cluster and the test's own namespace.
type env struct {
	t  *testing.T
	c  *framework.Cluster
	k  client.Client
	ns string
}

// startGCS starts fake-gcs-server for the test and stops it when the test ends: the package's
// tests share one cluster, whose processes have unique names.
func (e *env) startGCS() string {
	endpoint, err := e.c.StartGCS(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.c.StopProcess(framework.FakeGCS) })
	return endpoint
}

// startAzurite starts Azurite for the test and stops it when the test ends, as startGCS.
func (e *env) startAzurite() framework.AzureAccount {
	account, err := e.c.StartAzurite(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.c.StopProcess(framework.Azurite) })
	return account
}

// newEnv installs the CRDs, RBAC and nodes once, and gives the test a fresh namespace.
func newEnv(t *testing.T) *env {
	t.Helper()
	c := framework.Shared(t)
	setupMu.Lock()
	if !setupDone {
		if err := setupCluster(t.Context(), c); err != nil {
			setupMu.Unlock()
			t.Fatal(err)
		}
		setupDone = true
	}
	setupMu.Unlock()
	return (&env{t: t, c: c, k: c.Client}).inNamespace(framework.TestNamespace(t))
}

// inNamespace creates namespace ns and gives the test a view of it, as of another team.
func (e *env) inNamespace(ns string) *env {
	e.t.Helper()
	o := &env{t: e.t, c: e.c, k: e.k, ns: ns}
	if err := e.k.Create(e.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		e.t.Fatal(err)
	}
	// Pods are refused until the namespace's default ServiceAccount exists.
	o.eventually("the default ServiceAccount", func() (bool, string) {
		err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, fmt.Sprint(err)
	})
	return o
}

// setupCluster installs what every test needs: the CRDs, the kwok GPU nodes, and the operator's
// ServiceAccount with the generated RBAC.
func setupCluster(ctx context.Context, c *framework.Cluster) error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/scheduler-plugins").Output()
	if err != nil {
		return fmt.Errorf("locating the scheduler-plugins module for its PodGroup CRD: %w", err)
	}
	if err := c.InstallCRDs(ctx, filepath.Join(root, "deploy/crd/bases"), filepath.Join(strings.TrimSpace(string(out)), "config/crd/bases")); err != nil {
		return err
	}
	if err := c.CreateNodes(ctx, nodes...); err != nil {
		return err
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		return err
	}
	if err := c.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: operatorSA}}); err != nil {
		return err
	}
	for _, file := range []string{"role.yaml", "named_role.yaml"} {
		if err := framework.BindRoles(ctx, c.Client, filepath.Join(root, "deploy/operator/rbac", file), operatorNamespace, operatorSA); err != nil {
			return err
		}
	}
	return nil
}

// runningOperator is an operator started by a test.
type runningOperator struct {
	// URL is its progress endpoint.
	URL  string
	stop func()
}

// startOperator runs the operator in-process as its ServiceAccount until the test ends (or Stop).
func (e *env) startOperator(configure ...func(*operator.Options)) *runningOperator {
	e.t.Helper()
	cfg, err := e.c.ServiceAccountConfig(e.t.Context(), operatorNamespace, operatorSA)
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	opts := operator.Options{
		Namespace:          operatorNamespace,
		MetricsAddr:        "0",
		ProbeAddr:          "0",
		ProgressListener:   l,
		ProgressURL:        "https://" + l.Addr().String(),
		Backoff:            controller.Backoff{Base: time.Second, Max: 2 * time.Second},
		SkipNameValidation: true,
	}
	for _, f := range configure {
		f(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctx = ctrl.LoggerInto(ctx, operatorLogger(e))
	mgr, err := operator.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("operator stopped with: %v%s", err, operatorGoroutines())
			}
		})
	}
	e.t.Cleanup(stop)
	return &runningOperator{URL: opts.ProgressURL, stop: stop}
}

var setLoggerOnce sync.Once

// operatorGoroutines is the stacks of the goroutines in the operator's code, for the error of a
// manager whose runnables outlived its shutdown grace.
func operatorGoroutines() string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		return ""
	}
	var out []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "convoy/operator/") {
			out = append(out, g)
		}
	}
	return "; the operator's goroutines:\n" + strings.Join(out, "\n\n")
}

// operatorLogger writes the operator's logs to the cluster's log directory, kept when a test fails.
func operatorLogger(e *env) logr.Logger {
	setLoggerOnce.Do(func() {
		f, err := os.OpenFile(filepath.Join(e.c.StateDir, "logs", "operator.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			e.t.Fatal(err)
		}
		ctrl.SetLogger(zap.New(zap.WriteTo(f), zap.Level(zapcore.Level(-2))))
	})
	return ctrl.Log.WithName(e.ns)
}

// eventually polls cond until it holds, failing the test with cond's last word after timeout.
func (e *env) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	util.Eventually(e.t, 50*time.Millisecond, timeout, what, cond)
}

func (e *env) create(obj client.Object) {
	e.t.Helper()
	obj.SetNamespace(e.ns)
	if err := e.k.Create(e.t.Context(), obj); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) job(name string) *convoy.TrainingJob {
	e.t.Helper()
	job := &convoy.TrainingJob{}
	if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, job); err != nil {
		e.t.Fatal(err)
	}
	return job
}

// waitState waits until the job's state is want and returns the job.
func (e *env) waitState(name string, want convoy.TrainingJobState) *convoy.TrainingJob {
	e.t.Helper()
	return util.WaitState(e.t, e.k, 50*time.Millisecond, timeout, client.ObjectKey{Namespace: e.ns, Name: name}, want)
}

func (e *env) wantCondition(job *convoy.TrainingJob, condType, reason string) *metav1.Condition {
	e.t.Helper()
	c := meta.FindStatusCondition(job.Status.Conditions, condType)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
		e.t.Fatalf("condition %s = %+v, want True with reason %s", condType, c, reason)
	}
	return c
}

// pods returns the job's pods that are not being deleted, by name.
func (e *env) pods(job string) map[string]*corev1.Pod {
	e.t.Helper()
	list := &corev1.PodList{}
	if err := e.k.List(e.t.Context(), list, client.InNamespace(e.ns), client.MatchingLabels{convoy.LabelJobName: job}); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out
}

// waitPods waits until the job has n live pods of restart attempt attempt, and returns them.
func (e *env) waitPods(job string, n int, attempt int32) map[string]*corev1.Pod {
	e.t.Helper()
	var pods map[string]*corev1.Pod
	e.eventually(fmt.Sprintf("%d pods of %s, attempt %d", n, job, attempt), func() (bool, string) {
		pods = e.pods(job)
		got := 0
		for _, p := range pods {
			if p.Labels[convoy.LabelRestartAttempt] == fmt.Sprint(attempt) {
				got++
			}
		}
		var seen []string
		for name, p := range pods {
			seen = append(seen, name+"@"+p.Labels[convoy.LabelRestartAttempt]+"/"+string(p.Status.Phase))
		}
		tj := &convoy.TrainingJob{}
		_ = e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: job}, tj)
		return got == n && len(pods) == n, fmt.Sprintf("pods %v; job restartCount %d, %s", seen, tj.Status.RestartCount, util.ConditionSummary(tj.Status.Conditions))
	})
	return pods
}

// bindAll places every unbound pod of the job on the kwok nodes, round robin, as the scheduler would.
func (e *env) bindAll(job string) {
	e.t.Helper()
	i := 0
	for _, pod := range e.pods(job) {
		if pod.Spec.NodeName != "" {
			continue
		}
		e.bind(pod, nodes[i%len(nodes)].Name)
		i++
	}
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

// startGang binds the job's pods and waits until the job is Running.
func (e *env) startGang(job string, n int, attempt int32) map[string]*corev1.Pod {
	e.t.Helper()
	e.waitPods(job, n, attempt)
	e.bindAll(job)
	e.waitState(job, convoy.StateRunning)
	return e.pods(job)
}

// finishPod ends a pod's training container with exitCode, as its kubelet would report it.
func (e *env) finishPod(name string, exitCode int32) {
	e.t.Helper()
	if err := util.EndPod(e.t.Context(), e.k, client.ObjectKey{Namespace: e.ns, Name: name}, exitCode); err != nil {
		e.t.Fatalf("finishing pod %s: %v", name, err)
	}
}

// events returns the reasons of the events recorded for the job, oldest first.
func (e *env) events(job string) []string {
	e.t.Helper()
	list := &corev1.EventList{}
	if err := e.k.List(e.t.Context(), list, client.InNamespace(e.ns)); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "TrainingJob" && ev.InvolvedObject.Name == job {
			out = append(out, ev.Reason)
		}
	}
	return out
}

// waitEvents waits until the job has events with every reason in want.
func (e *env) waitEvents(job string, want ...string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("events %v of %s", want, job), func() (bool, string) {
		got := e.events(job)
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false, fmt.Sprint(got)
			}
		}
		return true, ""
	})
}

// podToken mints the token the kubelet would project into the pod, its ServiceAccount's: for progress.Audience, bound
// to the pod.
func (e *env) podToken(pod *corev1.Pod, audience string) string {
	e.t.Helper()
	tr, err := e.c.Clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(e.t.Context(), cmp.Or(pod.Spec.ServiceAccountName, "default"), &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			Audiences:         []string{audience},
			ExpirationSeconds: ptr.To[int64](600),
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return tr.Status.Token
}

// post sends body to the pod's progress endpoint path (progress or checkpoint) as the pod would:
// to $CONVOY_PROGRESS_URL, trusting the CA from the job's ConfigMap, with token as its bearer
// token (none when empty). It returns the status code and the body of the answer.
func (e *env) post(pod *corev1.Pod, path, token string, body any) (int, string) {
	e.t.Helper()
	code, answer := e.progressClient(pod, "")(path, token, body)
	if code == 0 {
		e.t.Fatal(answer)
	}
	return code, answer
}

// progressClient returns a sender to the pod's progress endpoint with one keep-alive HTTP client,
// safe for concurrent use: it posts body to path with token (none when empty) and returns the
// status code and the answer, or 0 and the error when the request failed. Its connections leave
// from source (a loopback address such as 127.0.0.2; any when empty).
func (e *env) progressClient(pod *corev1.Pod, source string) func(path, token string, body any) (int, string) {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: pod.Labels[convoy.LabelJobName] + "-config"}, cm); err != nil {
		e.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data["progress-ca.crt"])) {
		e.t.Fatalf("the job's ConfigMap holds no progress CA: %v", cm.Data)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: util.ProgressTransport(roots, source)}
	e.t.Cleanup(hc.CloseIdleConnections)
	url := util.EnvOf(pod, "CONVOY_PROGRESS_URL")
	return func(path, token string, body any) (int, string) {
		payload, err := json.Marshal(body)
		if err != nil {
			return 0, err.Error()
		}
		req, err := http.NewRequestWithContext(e.t.Context(), http.MethodPost, url+"/"+path, bytes.NewReader(payload))
		if err != nil {
			return 0, err.Error()
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(answer))
	}
}

// tokenReviews is how many TokenReviews the API server has served.
func (e *env) tokenReviews() float64 {
	e.t.Helper()
	got, err := framework.APIRequests(e.t.Context(), e.c.Clientset)
	if err != nil {
		e.t.Fatal(err)
	}
	return got["POST tokenreviews"]
}

// report posts body with the pod's own token and fails the test unless it is recorded.
func (e *env) report(pod *corev1.Pod, path string, body any) {
	e.t.Helper()
	if code, answer := e.post(pod, path, e.podToken(pod, progress.Audience), body); code != http.StatusNoContent {
		e.t.Fatalf("POST %s from %s = %d %s, want 204", path, pod.Name, code, answer)
	}
}
