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

// Package multikueue tests TrainingJobs dispatched by Kueue's MultiKueue with real parts: three
// control planes from test/framework (a manager and two workers, each its own kube-apiserver and
// etcd), the unmodified Kueue manager on each with deploy/kueue's configuration, and the operator
// with the queue integration on each (test/util/queuetest). The manager gets deploy/multikueue,
// the workers deploy/queue and deploy/multikueue/worker, as docs/operations.md says. The workers'
// GPU nodes are kwok's; no scheduler runs: the test binds a gang's pods as convoy-scheduler would.
package multikueue

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
	"github.com/convoy-dev/convoy/test/util/queuetest"
)

var addToScheme = []func(*runtime.Scheme) error{convoy.AddToScheme, kueue.AddToScheme, schedv1alpha1.AddToScheme}

// The shared cluster is the manager: it runs no pods, so it has no kwok.
func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{WithoutKwok: true, AddToScheme: addToScheme})
}

const (
	// timeout bounds every wait: three control planes share the machine.
	timeout = 2 * time.Minute
	h100    = "NVIDIA-H100-80GB-HBM3"
	// team is deploy/queue's team namespace and LocalQueue on every cluster.
	team, localQueue = "team-a", "training"
)

// member is one cluster of the fleet with Kueue and the operator running.
type member struct {
	name string
	c    *framework.Cluster
	env  *queuetest.Env
}

// start runs Kueue and the operator on c and applies deploy/queue, without the placement check
// (no convoy-scheduler runs here).
func start(t *testing.T, name string, c *framework.Cluster) *member {
	t.Helper()
	ctx := t.Context()
	env, err := queuetest.Start(ctx, c, queuetest.Options{SkipNameValidation: true})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(env.Stop)
	return &member{name: name, c: c, env: env}
}

func (m *member) kubectl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := m.env.Kubectl(t.Context(), args...); err != nil {
		t.Fatalf("%s: kubectl %v: %v\n%s", m.name, args, err, out)
	}
}

// startWorker starts a worker cluster with nodes, Kueue, the operator, deploy/queue and
// deploy/multikueue/worker, and returns it with the kubeconfig the manager's Kueue reaches it by.
func startWorker(t *testing.T, name string, nodes ...framework.NodeSpec) (*member, []byte) {
	t.Helper()
	ctx := t.Context()
	c, err := framework.Start(ctx, framework.Options{AddToScheme: addToScheme})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.KeepStateDir()
			t.Logf("%s: control plane state and logs kept in %s", name, c.StateDir)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("%s: stopping: %v", name, err)
		}
	})
	if err := c.CreateNodes(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	w := start(t, name, c)
	w.kubectl(t, "apply", "--server-side", "-k", filepath.Join(w.env.Root, "deploy/queue"))
	for _, cq := range []string{"team-a", "team-b"} {
		w.kubectl(t, "patch", "clusterqueue", cq, "--type=json", `-p=[{"op":"remove","path":"/spec/admissionChecksStrategy"}]`)
	}
	w.kubectl(t, "apply", "--server-side", "-k", filepath.Join(w.env.Root, "deploy/multikueue/worker"))
	path, err := c.ServiceAccountKubeconfig(ctx, "kueue-system", "multikueue")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return w, kubeconfig
}

func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	util.Eventually(t, 200*time.Millisecond, timeout, what, cond)
}

// submit creates a one-worker job of 8 GPUs in team-a's LocalQueue on the manager and checks that
// Convoy's webhook gave it spec.managedBy: the ClusterQueue has MultiKueue's check.
func submit(t *testing.T, manager *member, name string) *convoy.TrainingJob {
	t.Helper()
	job := utiltesting.MakeTrainingJob(name, team).Workers(1).GPUs(8).
		Scheduling(convoy.SchedulingSpec{Queue: localQueue, PriorityClassName: "normal"}).Obj()
	job.UID = ""
	if err := manager.c.Client.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(job.Spec.ManagedBy, ""); got != kueue.MultiKueueControllerName || !job.IsSuspended() {
		t.Errorf("created job: spec.managedBy %q, suspended %v; want %q and suspended", got, job.IsSuspended(), kueue.MultiKueueControllerName)
	}
	return job
}

// runsOn waits for MultiKueue's copy of job on w, without spec.managedBy, binds the pods w's
// operator creates for it to node, as convoy-scheduler would, and waits until it runs there.
func runsOn(t *testing.T, w *member, job *convoy.TrainingJob, node string) []corev1.Pod {
	t.Helper()
	ctx, key := t.Context(), client.ObjectKeyFromObject(job)
	remote := &convoy.TrainingJob{}
	eventually(t, "the job on "+w.name, func() (bool, string) {
		err := w.c.Client.Get(ctx, key, remote)
		return err == nil, fmt.Sprint(err)
	})
	if remote.Spec.ManagedBy != nil || remote.Labels[constants.PrebuiltWorkloadLabel] == "" || remote.Labels[kueue.MultiKueueOriginLabel] == "" {
		t.Errorf("%s's copy: spec.managedBy %v, labels %v; want no managedBy and MultiKueue's labels", w.name, remote.Spec.ManagedBy, remote.Labels)
	}
	var pods []corev1.Pod
	eventually(t, w.name+"'s operator creates the gang", func() (bool, string) {
		list := &corev1.PodList{}
		if err := w.c.Client.List(ctx, list, client.InNamespace(team), client.MatchingLabels{convoy.LabelJobName: job.Name}); err != nil {
			return false, err.Error()
		}
		pods = list.Items
		return len(pods) == 1, fmt.Sprintf("%d pods", len(pods))
	})
	for _, pod := range pods {
		if err := w.c.Clientset.CoreV1().Pods(team).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: team, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("binding %s: %v", pod.Name, err)
		}
	}
	util.WaitState(t, w.c.Client, 200*time.Millisecond, timeout, key, convoy.StateRunning)
	return pods
}

// TestJobsRunOnAWorkerWithRoom: a TrainingJob created on the manager in a LocalQueue whose
// ClusterQueue has MultiKueue's check gets spec.managedBy from Convoy's webhook and runs on the
// worker whose ClusterQueue admits it (worker-2's is held), created there by MultiKueue and run by
// that worker's operator; the manager's operator creates nothing for it, and the manager's job
// shows the worker's status. Deleted on the manager, it is deleted on the worker.
func TestJobsRunOnAWorkerWithRoom(t *testing.T) {
	ctx := t.Context()
	manager := start(t, "manager", framework.Shared(t))
	node := framework.NodeSpec{Name: "h100-0", GPUs: 8, GPUProduct: h100}
	worker1, kubeconfig1 := startWorker(t, "worker-1", node)
	worker2, kubeconfig2 := startWorker(t, "worker-2", node)
	// worker-2 has no room for team-a: its ClusterQueue admits nothing. It has a node all the same.
	worker2.kubectl(t, "patch", "clusterqueue", "team-a", "--type=merge", `-p={"spec":{"stopPolicy":"Hold"}}`)

	for name, kubeconfig := range map[string][]byte{"worker-1": kubeconfig1, "worker-2": kubeconfig2} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kueue-system", Name: name},
			Data: map[string][]byte{kueue.MultiKueueConfigSecretKey: kubeconfig}}
		if err := manager.c.Client.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	manager.kubectl(t, "apply", "--server-side", "-k", filepath.Join(manager.env.Root, "deploy/multikueue"))
	clusterActive := func(t *testing.T, name string, want metav1.ConditionStatus) {
		t.Helper()
		eventually(t, fmt.Sprintf("MultiKueueCluster %s active %s", name, want), func() (bool, string) {
			mkc := &kueue.MultiKueueCluster{}
			if err := manager.c.Client.Get(ctx, client.ObjectKey{Name: name}, mkc); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(mkc.Status.Conditions, kueue.MultiKueueClusterActive)
			return c != nil && c.Status == want, fmt.Sprintf("conditions %+v", mkc.Status.Conditions)
		})
	}
	clusterActive(t, "worker-1", metav1.ConditionTrue)
	clusterActive(t, "worker-2", metav1.ConditionTrue)
	eventually(t, "ClusterQueue team-a active on the manager", func() (bool, string) {
		cq := &kueue.ClusterQueue{}
		if err := manager.c.Client.Get(ctx, client.ObjectKey{Name: "team-a"}, cq); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive), fmt.Sprintf("conditions %+v", cq.Status.Conditions)
	})

	t.Run("the worker with room runs it", func(t *testing.T) {
		job := submit(t, manager, "llama")
		key := client.ObjectKeyFromObject(job)
		pods := runsOn(t, worker1, job, node.Name)
		if _, err := worker1.env.Report(ctx, &pods[0], "progress", progress.Report{Epoch: ptr.To[int32](3), TotalEpochs: ptr.To[int32](10)}); err != nil {
			t.Fatal(err)
		}
		// The manager's job shows worker-1's status.
		mirrored := util.WaitJob(t, manager.c.Client, 200*time.Millisecond, timeout, key, "Running at epoch 3 on the manager", func(j *convoy.TrainingJob) bool {
			return j.Status.State == convoy.StateRunning && j.Status.CurrentEpoch == 3
		})
		if a := mirrored.Status.Admission; a == nil || a.ClusterQueue != "team-a" {
			t.Errorf("manager's status.admission = %+v, want worker-1's team-a", a)
		}
		// The manager's operator created nothing for it; worker-2 never got the job.
		for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &schedv1alpha1.PodGroupList{}} {
			if err := manager.c.Client.List(ctx, list, client.InNamespace(team), client.MatchingLabels{convoy.LabelJobName: job.Name}); err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(list); n > 0 {
				t.Errorf("the manager has %d %T of the job, want none", n, list)
			}
		}
		if err := worker2.c.Client.Get(ctx, key, &convoy.TrainingJob{}); !apierrors.IsNotFound(err) {
			t.Errorf("worker-2: Get the job = %v, want NotFound", err)
		}
		// Deleted on the manager, the job goes from worker-1 too.
		if err := manager.c.Client.Delete(ctx, job); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the job deleted on worker-1", func() (bool, string) {
			err := worker1.c.Client.Get(ctx, key, &convoy.TrainingJob{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})
}
