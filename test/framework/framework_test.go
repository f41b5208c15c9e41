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

package framework_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/convoy-dev/convoy/test/framework"
)

const h100 = "NVIDIA-H100-80GB-HBM3"

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime, which complains when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	framework.Main(m, framework.Options{})
}

func TestControlPlaneServesKubectl(t *testing.T) {
	c := framework.Shared(t)
	out, err := exec.Command(filepath.Join(c.BinDir, "kubectl"), "--kubeconfig", c.KubeconfigPath, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	if want := "Server Version: " + framework.KubernetesVersion; !strings.Contains(string(out), want) {
		t.Errorf("kubectl version printed\n%s\nwant a line %q", out, want)
	}
}

func TestGPUNodeBecomesReady(t *testing.T) {
	c := framework.Shared(t)
	ctx := t.Context()
	spec := framework.NodeSpec{Name: framework.Unique(t, "ready-gpu"), GPUs: 8, GPUProduct: h100, Zone: "zone-a", Block: "block-a", Rack: "rack-a"}
	if err := c.CreateNodes(ctx, spec); err != nil {
		t.Fatal(err)
	}

	node := &corev1.Node{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: spec.Name}, node); err != nil {
		t.Fatal(err)
	}
	if got := node.Status.Allocatable[framework.ResourceGPU]; got.Cmp(resource.MustParse("8")) != 0 {
		t.Errorf("allocatable %s = %s, want 8", framework.ResourceGPU, got.String())
	}
	wantLabels := map[string]string{
		framework.LabelZone:       "zone-a",
		framework.LabelBlock:      "block-a",
		framework.LabelRack:       "rack-a",
		framework.LabelHostname:   spec.Name,
		framework.LabelGPUProduct: h100,
		framework.LabelNodeType:   framework.NodeTypeKwok,
	}
	gotLabels := map[string]string{}
	for key := range wantLabels {
		if value, ok := node.Labels[key]; ok {
			gotLabels[key] = value
		}
	}
	if diff := cmp.Diff(wantLabels, gotLabels); diff != "" {
		t.Errorf("node labels (-want,+got):\n%s", diff)
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("a Ready kwok node should carry no taints, got %v", node.Spec.Taints)
	}
}

func TestPodBoundToKwokNodeRuns(t *testing.T) {
	c := framework.Shared(t)
	ctx := t.Context()
	node := framework.Unique(t, "pod-gpu")
	if err := c.CreateNodes(ctx, framework.NodeSpec{Name: node, GPUs: 8, GPUProduct: h100}); err != nil {
		t.Fatal(err)
	}
	// No scheduler runs in the cluster: the pod names its node, as Convoy's scheduler would bind it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: framework.Unique(t, "trainer"), Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name:  "trainer",
				Image: "example.com/trainer:latest",
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")},
				},
			}},
		},
	}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)
		return err == nil && pod.Status.Phase == corev1.PodRunning, err
	})
	if err != nil {
		t.Fatalf("pod phase %q, want Running: %v", pod.Status.Phase, err)
	}
	if pod.Status.PodIP == "" {
		t.Errorf("kwok gave the running pod no IP")
	}
}

func TestServiceAccountKubeconfigIsSubjectToRBAC(t *testing.T) {
	c := framework.Shared(t)
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.Unique(t, "rbac-test")}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns.Name}}
	for _, obj := range []client.Object{ns, sa} {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	path, err := c.ServiceAccountKubeconfig(ctx, sa.Namespace, sa.Name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing nodes without a binding: got %v, want Forbidden", err)
	}

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns.Name + "-node-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns.Name + "-node-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// The RBAC authorizer reads bindings from an informer: allow it a moment to see the new one.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Errorf("listing nodes with a ClusterRoleBinding is still refused: %v", err)
	}
}

func TestInstallCRDs(t *testing.T) {
	c := framework.Shared(t)
	ctx := t.Context()
	// Twice: a second install updates the CRDs in place.
	for range 2 {
		if err := c.InstallCRDs(ctx, "testdata/crds"); err != nil {
			t.Fatal(err)
		}
	}
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion("test.convoy.dev/v1")
	widget.SetKind("Widget")
	widget.SetNamespace(metav1.NamespaceDefault)
	widget.SetName(framework.Unique(t, "w"))
	if err := unstructured.SetNestedField(widget.Object, int64(3), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, widget); err != nil {
		t.Fatalf("creating a custom resource of an installed CRD: %v", err)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "not-a-crd", Namespace: metav1.NamespaceDefault}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("InstallCRDs must apply only CRDs; getting the ConfigMap in the same file: %v", err)
	}
}

func TestStopLeavesNoProcess(t *testing.T) {
	c, err := framework.Start(t.Context(), framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	// A component run by later tests: it must share the cluster's lifecycle, and a test may
	// restart it.
	if err := c.StartProcess("sleeper", "sleep", []string{"600"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.StartProcess("sleeper", "sleep", []string{"600"}, nil); err == nil {
		t.Error("a second process named sleeper was started")
	}
	first := c.Processes()[4]
	if err := c.StopProcess("sleeper"); err != nil {
		t.Fatal(err)
	}
	if first.Running() {
		t.Errorf("StopProcess left %s (%d) running", first.Name, first.Pid)
	}
	if err := c.StartProcess("sleeper", "sleep", []string{"600"}, nil); err != nil {
		t.Fatal(err)
	}
	procs := c.Processes()
	var names []string
	for _, p := range procs {
		names = append(names, p.Name)
	}
	want := []string{framework.Etcd, framework.APIServer, framework.ControllerManager, framework.Kwok, "sleeper"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("processes (-want,+got):\n%s", diff)
	}
	if data, err := os.ReadFile(filepath.Join(c.StateDir, framework.PidsFile)); err != nil || strings.Count(string(data), "\n") != len(procs) {
		t.Errorf("%s lists\n%s\nwant one line per process (%v)", framework.PidsFile, data, err)
	}

	began := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Stop took %.1fs", time.Since(began).Seconds())
	for _, p := range procs {
		if err := syscall.Kill(-p.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group of %s (%d) outlived Stop: kill -0 says %v", p.Name, p.Pid, err)
		}
	}
	if _, err := os.Stat(c.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop left the temporary state directory %s: %v", c.StateDir, err)
	}
}

func TestEnvtestStartsWithTheseBinaries(t *testing.T) {
	c := framework.Shared(t)
	env := &envtest.Environment{BinaryAssetsDirectory: c.BinDir, CRDDirectoryPaths: []string{"testdata/crds"}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	version, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if version.GitVersion != framework.KubernetesVersion {
		t.Errorf("envtest's kube-apiserver is %s, want %s", version.GitVersion, framework.KubernetesVersion)
	}
}

// TestCPUTime reads a process's CPU time: this test's own, which the kernel also reports through
// getrusage, before and after it keeps a core busy.
func TestCPUTime(t *testing.T) {
	self := framework.Process{Name: "test", Pid: os.Getpid()}
	rusage := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, err := self.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	start := rusage()
	for n := 0; rusage()-start < 300*time.Millisecond; n++ {
		_ = n * n
	}
	after, err := self.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	// The same kernel accounting, in 10 ms ticks.
	want := rusage() - start
	if got := after - before; got < want-50*time.Millisecond || got > want+50*time.Millisecond {
		t.Errorf("CPU time grew by %s while getrusage says %s", got, want)
	}
	if _, err := (framework.Process{Pid: 1 << 30}).CPUTime(); err == nil {
		t.Error("CPUTime of a process that does not exist: no error")
	}
}

func TestWithoutKwok(t *testing.T) {
	c, err := framework.Start(t.Context(), framework.Options{WithoutKwok: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	var names []string
	for _, p := range c.Processes() {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{framework.Etcd, framework.APIServer, framework.ControllerManager}, names); diff != "" {
		t.Errorf("processes (-want,+got):\n%s", diff)
	}
	// Start still waits for the default ServiceAccount, so a pod is admitted at once.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "no-kwok", Namespace: metav1.NamespaceDefault},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	if err := c.Client.Create(t.Context(), pod); err != nil {
		t.Errorf("creating a pod right after Start: %v", err)
	}
}

func TestControlPlaneBinDirSuppliesAPIServerAndControllerManager(t *testing.T) {
	binDir, err := framework.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	_, err = framework.Start(t.Context(), framework.Options{BinDir: binDir, ControlPlaneBinDir: empty})
	if want := "missing kube-apiserver, kube-controller-manager in " + empty; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Start with an empty ControlPlaneBinDir: %v, want an error containing %q", err, want)
	}

	dir := t.TempDir()
	for _, name := range []string{framework.APIServer, framework.ControllerManager} {
		if err := linkOrCopy(filepath.Join(binDir, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(framework.EnvControlPlaneBin, dir)
	c, err := framework.Start(t.Context(), framework.Options{BinDir: binDir, WithoutKwok: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	got := map[string]string{}
	for _, p := range c.Processes() {
		got[p.Name] = filepath.Dir(p.Binary)
	}
	want := map[string]string{framework.Etcd: binDir, framework.APIServer: dir, framework.ControllerManager: dir}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("each process's directory (-want,+got):\n%s", diff)
	}
}

// linkOrCopy makes dst the executable src: a hard link, or a copy across file systems.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}

// TestRestartIfExitedRestartsOnlyWhatExitedOnItsOwn: a component that exits on its own is started
// again, as a kubelet restarts a container; one a test stops is not, however often a supervisor
// asks while it goes.
func TestRestartIfExitedRestartsOnlyWhatExitedOnItsOwn(t *testing.T) {
	c := framework.Shared(t)
	running := func(name string) bool {
		return slices.ContainsFunc(c.Processes(), func(p framework.Process) bool { return p.Name == name && p.Running() })
	}

	if err := c.StartProcess("crasher", "sh", []string{"-c", "test -e restarted && sleep 600; touch restarted; exit 1"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StopProcess("crasher") })
	deadline := time.Now().Add(10 * time.Second)
	for restarted := false; !restarted; {
		if time.Now().After(deadline) {
			t.Fatal("crasher, which exited on its own, was not started again")
		}
		var err error
		if restarted, err = c.RestartIfExited("crasher"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if !running("crasher") {
		t.Error("crasher does not run after its restart")
	}

	if err := c.StartProcess("stopped", "sleep", []string{"600"}, nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	supervised := make(chan error)
	go func() {
		for {
			select {
			case <-stop:
				close(supervised)
				return
			default:
			}
			if restarted, err := c.RestartIfExited("stopped"); err != nil || restarted {
				supervised <- fmt.Errorf("RestartIfExited(stopped) = %v, %v while StopProcess ended it", restarted, err)
			}
		}
	}()
	err := c.StopProcess("stopped")
	close(stop)
	for e := range supervised {
		t.Error(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	if running("stopped") {
		_ = c.StopProcess("stopped")
		t.Error("a process StopProcess ended runs again")
	}
}
