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
// etcd), the unmodified Kueue manager on each with deploy/kueue's configuration (the manager's with
// a short multiKueue.workerLostTimeout), and the operator with the queue integration on each
// (test/util/queuetest). The manager gets deploy/multikueue, the workers deploy/queue and
// deploy/multikueue/worker, as docs/operations.md says, and convoy-scheduler, whose placement check
// (deploy/queue's convoy-placement) admits a gang only where it fits whole. The workers' GPU nodes
// are kwok's. The subtests share the three control planes.
package multikueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/util/admissioncheck"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/queue"
	"github.com/convoy-dev/convoy/test/e2e/stack"
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
	// lost is set once the test killed the cluster's API server: its other processes may exit.
	lost bool
}

// start runs Kueue and the operator on c.
func start(t *testing.T, name string, c *framework.Cluster, opts queuetest.Options) *member {
	t.Helper()
	ctx := t.Context()
	opts.SkipNameValidation = true
	env, err := queuetest.Start(ctx, c, opts)
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

// startWorker starts a worker cluster with nodes, Kueue, the operator, convoy-scheduler, deploy/queue
// and deploy/multikueue/worker, and returns it with the kubeconfig the manager's Kueue reaches it by.
func startWorker(t *testing.T, name string, nodes ...framework.NodeSpec) (*member, []byte) {
	t.Helper()
	ctx := t.Context()
	c, err := framework.Start(ctx, framework.Options{AddToScheme: addToScheme})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	w := &member{name: name, c: c}
	t.Cleanup(func() {
		if t.Failed() {
			c.KeepStateDir()
			t.Logf("%s: control plane state and logs kept in %s", name, c.StateDir)
		}
		if err := c.Stop(); err != nil && !w.lost {
			t.Errorf("%s: stopping: %v", name, err)
		}
	})
	if err := c.CreateNodes(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	w.env = start(t, name, c, queuetest.Options{}).env
	if _, err := stack.StartSchedulerAlone(ctx, c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	w.kubectl(t, "apply", "--server-side", "-k", filepath.Join(w.env.Root, "deploy/queue"))
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

// submit creates job (from newJob) on the manager and checks that Convoy's webhook gave it
// spec.managedBy: the ClusterQueue has MultiKueue's check.
func submit(t *testing.T, manager *member, job *convoy.TrainingJob) *convoy.TrainingJob {
	t.Helper()
	job.UID = ""
	if err := manager.c.Client.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(job.Spec.ManagedBy, ""); got != kueue.MultiKueueControllerName || !job.IsSuspended() {
		t.Errorf("created job: spec.managedBy %q, suspended %v; want %q and suspended", got, job.IsSuspended(), kueue.MultiKueueControllerName)
	}
	return job
}

// newJob is a one-worker job of 8 GPUs in team-a's LocalQueue that checkpoints to object storage
// every worker reaches.
func newJob(name string) *utiltesting.TrainingJobWrapper {
	return utiltesting.MakeTrainingJob(name, team).Workers(1).GPUs(8).
		Scheduling(convoy.SchedulingSpec{Queue: localQueue, PriorityClassName: "normal"}).
		Checkpoint(convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "checkpoints"}})
}

// runsOn waits for MultiKueue's copy of job on w, without spec.managedBy and owners, until w's
// convoy-scheduler has bound the pods w's operator creates for it and it runs; it returns the pods.
func runsOn(t *testing.T, w *member, job *convoy.TrainingJob) []corev1.Pod {
	t.Helper()
	ctx, key := t.Context(), client.ObjectKeyFromObject(job)
	remote := &convoy.TrainingJob{}
	eventually(t, "the job on "+w.name, func() (bool, string) {
		err := w.c.Client.Get(ctx, key, remote)
		return err == nil, fmt.Sprint(err)
	})
	if remote.Spec.ManagedBy != nil || len(remote.OwnerReferences) > 0 || remote.Labels[constants.PrebuiltWorkloadLabel] == "" || remote.Labels[kueue.MultiKueueOriginLabel] == "" {
		t.Errorf("%s's copy: spec.managedBy %v, owners %v, labels %v; want no managedBy, no owner and MultiKueue's labels", w.name, remote.Spec.ManagedBy, remote.OwnerReferences, remote.Labels)
	}
	var pods []corev1.Pod
	eventually(t, w.name+"'s operator creates the gang and convoy-scheduler binds it", func() (bool, string) {
		var err error
		if pods, err = gangPods(ctx, w, job); err != nil {
			return false, err.Error()
		}
		bound := 0
		for _, pod := range pods {
			if pod.Spec.NodeName != "" {
				bound++
			}
		}
		return len(pods) == int(job.Spec.NumWorkers) && bound == len(pods), fmt.Sprintf("%d pods, %d bound", len(pods), bound)
	})
	util.WaitState(t, w.c.Client, 200*time.Millisecond, timeout, key, convoy.StateRunning)
	return pods
}

// gangPods lists the pods of job on w.
func gangPods(ctx context.Context, w *member, job *convoy.TrainingJob) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	err := w.c.Client.List(ctx, list, client.InNamespace(team), client.MatchingLabels{convoy.LabelJobName: job.Name})
	return list.Items, err
}

// TestMultiKueue starts a manager and two workers and runs the subtests on them, in order.
func TestMultiKueue(t *testing.T) {
	f := startFleet(t)
	t.Run("the worker with room runs it", f.workerWithRoom)
	t.Run("a sweep's trials run on a worker", f.sweep)
	t.Run("a worker with quota but no place for the whole gang is passed over", f.wholeGang)
	// Last: worker-1 stays lost.
	t.Run("a lost worker's job runs again on the other, from its checkpoint", f.lostWorker)
}

// fleet is the manager and its two workers, each with two nodes of 8 GPUs: worker-1's in two
// racks, worker-2's in one.
type fleet struct {
	manager, worker1, worker2 *member
}

// startFleet starts the workers, gives the manager their kubeconfigs and deploy/multikueue, and
// waits until both are connected. worker-2's ClusterQueue team-a is held: it admits nothing.
func startFleet(t *testing.T) *fleet {
	ctx := t.Context()
	f := &fleet{}
	f.manager = start(t, "manager", framework.Shared(t), queuetest.Options{KueueConfig: managerKueueConfig(t)})
	node := func(name, rack string) framework.NodeSpec {
		return framework.NodeSpec{Name: name, GPUs: 8, GPUProduct: h100, Rack: rack}
	}
	var kubeconfig1, kubeconfig2 []byte
	f.worker1, kubeconfig1 = startWorker(t, "worker-1", node("h100-0", "rack-a"), node("h100-1", "rack-b"))
	f.worker2, kubeconfig2 = startWorker(t, "worker-2", node("h100-0", "rack-a"), node("h100-1", "rack-a"))
	f.worker2.hold(t, true)

	for name, kubeconfig := range map[string][]byte{"worker-1": kubeconfig1, "worker-2": kubeconfig2} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kueue-system", Name: name},
			Data: map[string][]byte{kueue.MultiKueueConfigSecretKey: kubeconfig}}
		if err := f.manager.c.Client.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	f.manager.kubectl(t, "apply", "--server-side", "-k", filepath.Join(f.manager.env.Root, "deploy/multikueue"))
	f.clusterActive(t, "worker-1", metav1.ConditionTrue)
	f.clusterActive(t, "worker-2", metav1.ConditionTrue)
	eventually(t, "ClusterQueue team-a active on the manager", func() (bool, string) {
		cq := &kueue.ClusterQueue{}
		if err := f.manager.c.Client.Get(ctx, client.ObjectKey{Name: "team-a"}, cq); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive), fmt.Sprintf("conditions %+v", cq.Status.Conditions)
	})
	return f
}

// workerLostTimeout is the manager's multiKueue.workerLostTimeout: how long a job stays admitted
// after the connection to its worker is lost, before MultiKueue dispatches it again.
const workerLostTimeout = 10 * time.Second

// managerKueueConfig is deploy/kueue's configuration with multiKueue.workerLostTimeout set to
// workerLostTimeout instead of Kueue's 15 minutes.
func managerKueueConfig(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy/kueue/controller_manager_config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(data), "\nmultiKueue:\n", "\nmultiKueue:\n  workerLostTimeout: "+workerLostTimeout.String()+"\n", 1)
	if cfg == string(data) {
		t.Fatal("deploy/kueue/controller_manager_config.yaml has no multiKueue section")
	}
	path := filepath.Join(t.TempDir(), "controller_manager_config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterActive waits until the manager's MultiKueueCluster name is Active or not, as want says.
func (f *fleet) clusterActive(t *testing.T, name string, want metav1.ConditionStatus) {
	t.Helper()
	eventually(t, fmt.Sprintf("MultiKueueCluster %s active %s", name, want), func() (bool, string) {
		mkc := &kueue.MultiKueueCluster{}
		if err := f.manager.c.Client.Get(t.Context(), client.ObjectKey{Name: name}, mkc); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(mkc.Status.Conditions, kueue.MultiKueueClusterActive)
		return c != nil && c.Status == want, fmt.Sprintf("conditions %+v", mkc.Status.Conditions)
	})
}

// hold stops (or lets again) w's ClusterQueue team-a admitting jobs.
func (m *member) hold(t *testing.T, on bool) {
	t.Helper()
	policy := "None"
	if on {
		policy = "Hold"
	}
	m.kubectl(t, "patch", "clusterqueue", "team-a", "--type=merge", `-p={"spec":{"stopPolicy":"`+policy+`"}}`)
}

// mirrors waits until the manager's job has the same status as w's copy, which cond accepts, and
// returns it.
func (f *fleet) mirrors(t *testing.T, w *member, key client.ObjectKey, what string, cond func(*convoy.TrainingJob) bool) *convoy.TrainingJob {
	t.Helper()
	remote := &convoy.TrainingJob{}
	return util.WaitJob(t, f.manager.c.Client, 200*time.Millisecond, timeout, key, what+", the same status as on "+w.name, func(j *convoy.TrainingJob) bool {
		if err := w.c.Client.Get(t.Context(), key, remote); err != nil {
			return false
		}
		return cond(j) && equality.Semantic.DeepEqual(j.Status, remote.Status)
	})
}

// dispatchedTo waits until the manager's job names worker w, with the Dispatched event saying so.
func (f *fleet) dispatchedTo(t *testing.T, key client.ObjectKey, w *member) {
	t.Helper()
	util.WaitJob(t, f.manager.c.Client, 200*time.Millisecond, timeout, key, "annotated as running on "+w.name, func(j *convoy.TrainingJob) bool {
		return j.Annotations[convoy.AnnotationWorkerCluster] == w.name
	})
	eventually(t, "a Dispatched event naming "+w.name, func() (bool, string) {
		list, err := f.manager.c.Clientset.EventsV1().Events(key.Namespace).List(t.Context(), metav1.ListOptions{
			FieldSelector: "regarding.name=" + key.Name + ",reason=" + queue.EventDispatched})
		if err != nil {
			return false, err.Error()
		}
		var notes []string
		for _, e := range list.Items {
			if strings.Contains(e.Note, "worker cluster "+w.name) {
				return true, ""
			}
			notes = append(notes, e.Note)
		}
		return false, fmt.Sprintf("events %q", notes)
	})
}

// workerWithRoom: a TrainingJob created on the manager in a LocalQueue whose ClusterQueue has
// MultiKueue's check gets spec.managedBy from Convoy's webhook and runs on the worker whose
// ClusterQueue admits it (worker-2's is held), created there by MultiKueue and run by that worker's
// operator; the manager's operator creates nothing for it, and the manager's job shows the
// worker's status, progress, checkpoint and cost included, and names the worker. Deleted on the
// manager, it is deleted on the worker.
func (f *fleet) workerWithRoom(t *testing.T) {
	ctx := t.Context()
	job := submit(t, f.manager, newJob("llama").Obj())
	key := client.ObjectKeyFromObject(job)
	pods := runsOn(t, f.worker1, job)
	if _, err := f.worker1.env.Report(ctx, &pods[0], "progress", progress.Report{Epoch: ptr.To[int32](3), TotalEpochs: ptr.To[int32](10)}); err != nil {
		t.Fatal(err)
	}
	const checkpoint = "s3://checkpoints/team-a/llama/attempt-0/epoch-3"
	if _, err := f.worker1.env.Report(ctx, &pods[0], "checkpoint", progress.Checkpoint{Path: checkpoint, Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	mirrored := f.mirrors(t, f.worker1, key, "Running at epoch 3 with its checkpoint and cost", func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateRunning && j.Status.CurrentEpoch == 3 &&
			j.Status.Checkpoint != nil && j.Status.Checkpoint.Latest == checkpoint && j.Status.Cost != nil && j.Status.Cost.GPUHours > 0
	})
	if a := mirrored.Status.Admission; a == nil || a.ClusterQueue != "team-a" {
		t.Errorf("manager's status.admission = %+v, want worker-1's team-a", a)
	}
	f.dispatchedTo(t, key, f.worker1)
	// The manager's operator created nothing for it; worker-2 never got the job.
	for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &schedv1alpha1.PodGroupList{}} {
		if err := f.manager.c.Client.List(ctx, list, client.InNamespace(team), client.MatchingLabels{convoy.LabelJobName: job.Name}); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(list); n > 0 {
			t.Errorf("the manager has %d %T of the job, want none", n, list)
		}
	}
	if err := f.worker2.c.Client.Get(ctx, key, &convoy.TrainingJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("worker-2: Get the job = %v, want NotFound", err)
	}
	// Deleted on the manager, the job goes from worker-1 too.
	f.deleteFromWorker(t, job, f.worker1, key)
}

// deleteFromWorker deletes obj on the manager and waits until w's TrainingJob key is gone.
func (f *fleet) deleteFromWorker(t *testing.T, obj client.Object, w *member, key client.ObjectKey) {
	t.Helper()
	if err := f.manager.c.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job deleted on "+w.name, func() (bool, string) {
		err := w.c.Client.Get(t.Context(), key, &convoy.TrainingJob{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// sweep: a TrainingSweep on the manager creates its trial there, which Convoy's webhook gives
// spec.managedBy as any job; MultiKueue runs it on worker-1 (without the owner reference to the
// sweep, which worker-1 has not), and the sweep reads the trial's result from the status mirrored
// back, and succeeds.
func (f *fleet) sweep(t *testing.T) {
	ctx := t.Context()
	template := newJob("").Hyperparameters(convoy.Hyperparameters{Epochs: ptr.To[int32](1),
		AdditionalParams: map[string]string{"lr": "${trialParameters.lr}"}}).Obj().Spec
	sw := &convoy.TrainingSweep{
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "lr"},
		Spec: convoy.TrainingSweepSpec{
			Objective: convoy.ObjectiveSpec{Type: convoy.ObjectiveMinimize, ObjectiveMetricName: "loss"},
			Algorithm: convoy.AlgorithmSpec{AlgorithmName: convoy.AlgorithmGrid},
			Parameters: []convoy.ParameterSpec{{Name: "lr", ParameterType: convoy.ParameterCategorical,
				FeasibleSpace: convoy.FeasibleSpace{List: []string{"0.1"}}}},
			MaxTrialCount: ptr.To[int32](1), ParallelTrialCount: ptr.To[int32](1),
			TrialTemplate: convoy.TrialTemplate{Spec: template},
		},
	}
	if err := f.manager.c.Client.Create(ctx, sw); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: team, Name: "lr-0"}
	trial := util.WaitJob(t, f.manager.c.Client, 200*time.Millisecond, timeout, key, "the sweep's trial on the manager", func(j *convoy.TrainingJob) bool { return true })
	if got := ptr.Deref(trial.Spec.ManagedBy, ""); got != kueue.MultiKueueControllerName {
		t.Errorf("the trial's spec.managedBy = %q, want %q", got, kueue.MultiKueueControllerName)
	}
	pods := runsOn(t, f.worker1, trial)
	if _, err := f.worker1.env.Report(ctx, &pods[0], "progress", progress.Report{Epoch: ptr.To[int32](1), Metrics: map[string]float64{"loss": 0.25}}); err != nil {
		t.Fatal(err)
	}
	if err := util.EndPod(ctx, f.worker1.c.Client, client.ObjectKeyFromObject(&pods[0]), 0); err != nil {
		t.Fatal(err)
	}
	util.Eventually(t, 200*time.Millisecond, timeout, "the sweep succeeded with the trial's loss", func() (bool, string) {
		got := &convoy.TrainingSweep{}
		if err := f.manager.c.Client.Get(ctx, client.ObjectKeyFromObject(sw), got); err != nil {
			return false, err.Error()
		}
		st := got.Status
		return st.State == convoy.SweepSucceeded && st.SucceededTrials == 1 && st.BestTrial != nil && st.BestTrial.Value == 0.25,
			fmt.Sprintf("state %s, trials %+v, best %+v", st.State, st.TrialStatuses, st.BestTrial)
	})
	f.deleteFromWorker(t, sw, f.worker1, key)
}

// lostWorker: worker-1's API server dies while it runs a job that has reported a checkpoint to
// storage both workers reach. The manager marks worker-1 inactive; after workerLostTimeout
// MultiKueue dispatches the job again, to worker-2, whose pods get the checkpoint as
// CONVOY_RESUME_FROM; the manager's job names worker-2 and mirrors worker-2's status.
func (f *fleet) lostWorker(t *testing.T) {
	ctx := t.Context()
	job := submit(t, f.manager, newJob("gpt").Obj())
	key := client.ObjectKeyFromObject(job)
	pods := runsOn(t, f.worker1, job)
	lostURI := util.EnvOf(&pods[0], "CONVOY_CHECKPOINT_URI")
	const checkpoint = "s3://checkpoints/team-a/gpt/attempt-0/epoch-4"
	if _, err := f.worker1.env.Report(ctx, &pods[0], "progress", progress.Report{Epoch: ptr.To[int32](4), TotalEpochs: ptr.To[int32](10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.worker1.env.Report(ctx, &pods[0], "checkpoint", progress.Checkpoint{Path: checkpoint, Epoch: 4}); err != nil {
		t.Fatal(err)
	}
	util.WaitJob(t, f.manager.c.Client, 200*time.Millisecond, timeout, key, "the checkpoint kept on the manager", func(j *convoy.TrainingJob) bool {
		return j.Annotations[convoy.AnnotationResumeFrom] == checkpoint
	})
	f.worker2.hold(t, false)

	if err := f.worker1.c.KillProcess(framework.APIServer); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	f.worker1.lost = true
	f.clusterActive(t, "worker-1", metav1.ConditionFalse)
	t.Logf("worker-1 inactive on the manager %v after its API server was killed", time.Since(killed).Round(time.Second))

	pods = runsOn(t, f.worker2, job)
	t.Logf("the job running on worker-2 %v after (workerLostTimeout %v)", time.Since(killed).Round(time.Second), workerLostTimeout)
	if got := util.EnvOf(&pods[0], "CONVOY_RESUME_FROM"); got != checkpoint {
		t.Errorf("worker-2's pod %s: CONVOY_RESUME_FROM = %q, want worker-1's checkpoint %q", pods[0].Name, got, checkpoint)
	}
	// worker-1 may still run its copy, cut off: the two must not write in one directory.
	if got := util.EnvOf(&pods[0], "CONVOY_CHECKPOINT_URI"); got == lostURI || !strings.HasPrefix(got, "s3://checkpoints/team-a/gpt/attempt-0-") {
		t.Errorf("worker-2's pod %s: CONVOY_CHECKPOINT_URI = %q, want a directory of its own beside worker-1's %q", pods[0].Name, got, lostURI)
	}
	f.dispatchedTo(t, key, f.worker2)
	if _, err := f.worker2.env.Report(ctx, &pods[0], "progress", progress.Report{Epoch: ptr.To[int32](5), TotalEpochs: ptr.To[int32](10)}); err != nil {
		t.Fatal(err)
	}
	f.mirrors(t, f.worker2, key, "Running at epoch 5", func(j *convoy.TrainingJob) bool {
		return j.Status.State == convoy.StateRunning && j.Status.CurrentEpoch == 5
	})
}

// noPlace starts the message of convoy-scheduler's placement check on a Workload whose gang has no
// place.
const noPlace = "convoy-scheduler has no place for the gang yet"

// wholeGang: a gang of two 8-GPU workers that must share a rack. worker-1 has the quota and 16 free
// GPUs, but in two racks: its convoy-placement check stays Pending with convoy-scheduler's reason,
// so MultiKueue does not dispatch the job there, and worker-1 never gets the job or runs a pod of
// it. Once worker-2, whose rack holds the gang, admits jobs again, the job runs there and the
// manager's job names worker-2 and mirrors its status.
func (f *fleet) wholeGang(t *testing.T) {
	ctx := t.Context()
	job := submit(t, f.manager, newJob("bert").Workers(2).Topology(convoy.TopologyRack, convoy.TopologyRequired).Obj())
	key := client.ObjectKeyFromObject(job)
	eventually(t, "worker-1's Workload with quota reserved and convoy-placement Pending, no place", func() (bool, string) {
		wl, err := f.remoteWorkload(ctx, f.worker1, job)
		if err != nil {
			return false, err.Error()
		}
		check := admissioncheck.FindAdmissionCheck(wl.Status.AdmissionChecks, "convoy-placement")
		return check != nil && meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) &&
				check.State == kueue.CheckStatePending && strings.HasPrefix(check.Message, noPlace),
			fmt.Sprintf("conditions %+v, checks %+v", wl.Status.Conditions, wl.Status.AdmissionChecks)
	})
	f.worker2.hold(t, false)
	defer f.worker2.hold(t, true)
	pods := runsOn(t, f.worker2, job)
	f.dispatchedTo(t, key, f.worker2)
	f.mirrors(t, f.worker2, key, "Running", func(j *convoy.TrainingJob) bool { return j.Status.State == convoy.StateRunning })
	if err := f.worker1.c.Client.Get(ctx, key, &convoy.TrainingJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("worker-1: Get the job = %v, want NotFound", err)
	}
	if pods1, err := gangPods(ctx, f.worker1, job); err != nil || len(pods1) > 0 {
		t.Errorf("worker-1 has %d pods of the job (%v), want none", len(pods1), err)
	}
	var nodes []string
	for _, pod := range pods {
		nodes = append(nodes, pod.Spec.NodeName)
	}
	t.Logf("worker-2 runs the gang on %v", nodes)
	f.deleteFromWorker(t, job, f.worker2, key)
}

// remoteWorkload returns w's copy of the manager's Workload of job, which MultiKueue creates under
// the same name.
func (f *fleet) remoteWorkload(ctx context.Context, w *member, job *convoy.TrainingJob) (*kueue.Workload, error) {
	list := &kueue.WorkloadList{}
	if err := f.manager.c.Client.List(ctx, list, client.InNamespace(team)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], job) {
			remote := &kueue.Workload{}
			return remote, w.c.Client.Get(ctx, client.ObjectKeyFromObject(&list.Items[i]), remote)
		}
	}
	return nil, fmt.Errorf("no Workload of %s on the manager", job.Name)
}
