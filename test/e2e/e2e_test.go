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

// Package e2e tests Convoy as a platform team meets it: the whole stack from test/e2e/stack (the
// real kube-apiserver, Kueue manager, convoy-operator, convoy-scheduler and mock node agents,
// each of Convoy's components as its ServiceAccount with deploy/'s RBAC) on 16 kwok H100 nodes in
// 4 racks (and 2 whose GPUs are DRA devices, dra_test.go), with simtrainer reporting progress for the running gangs. Every test has its own
// namespace and ClusterQueue, and asserts what a user sees with kubectl.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

func TestMain(m *testing.M) { stack.Main(m) }

const (
	// timeout bounds every wait; the operator's restarted leader waits out a 10 s Lease (deploy/operator).
	timeout = 90 * time.Second
	product = "NVIDIA-H100-80GB-HBM3"
	// flavor is deploy/queue's ResourceFlavor of on-demand H100 nodes.
	flavor = "h100-on-demand"
)

// agentProfile is the mock NVML profile of the fleet's node agent, fleetAgent its process.
const agentProfile = "h100-8"

var fleetAgent = stack.AgentProcess(agentProfile)

// fleet is 1 zone × 2 blocks × 2 racks × 4 nodes of 8 GPUs: 128 GPUs, 32 per rack.
var fleet = framework.Fleet{Zones: 1, BlocksPerZone: 2, RacksPerBlock: 2, NodesPerRack: 4, GPUsPerNode: 8,
	Product: product, Labels: map[string]string{stack.LabelCapacityType: "on-demand"}}

var (
	setupOnce sync.Once
	shared    *stack.Stack
	setupErr  error
)

// env is one test's view: the stack, and the test's namespace with its LocalQueue "training".
type env struct {
	*stack.Stack
	t  *testing.T
	k  client.Client
	ns string
	// podSecurity is the Pod Security level the test's namespace enforces.
	podSecurity string
}

func setup(t *testing.T) *env {
	t.Helper()
	c := framework.Shared(t)
	setupOnce.Do(func() {
		ctx := context.Background()
		if setupErr = c.CreateNodes(ctx, append(fleet.Nodes(), draNodes...)...); setupErr != nil {
			return
		}
		shared, setupErr = stack.Start(ctx, c, stack.Options{
			Agents:     []stack.AgentPool{{Profile: agentProfile, Selector: framework.LabelGPUProduct + "=" + product}},
			SimTrainer: time.Second,
			// TestUnusedBookingIsReleased waits it out.
			BookingTimeout: bookingTimeout,
			// TestBookingOutlivesASchedulerFailover starts it to take over from the leader.
			SpareScheduler: true,
		})
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return &env{Stack: shared, t: t, k: util.WebhookRetrying(c.Client), ns: framework.TestNamespace(t), podSecurity: "restricted"}
}

// queue creates the test's namespace, whose Pod Security admission enforces e.podSecurity
// (restricted: the jobs' pods must meet it), a ClusterQueue of gpus H100 GPUs (no cohort) as an
// administrator would, and the LocalQueue "training". Cleanup deletes the jobs and waits until
// their pods are gone, so the next test finds the fleet empty.
func (e *env) queue(gpus int) {
	e.t.Helper()
	e.clusterQueue(gpus, flavor, nil)
}

// namespace creates the test's namespace, enforcing its Pod Security level.
func (e *env) namespace() {
	e.t.Helper()
	must(e.t, e.k.Create(e.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": e.podSecurity}}}))
}

// clusterQueue is queue with the ClusterQueue's quota in flavor fl and its admission checks.
func (e *env) clusterQueue(gpus int, fl kueue.ResourceFlavorReference, checks *kueue.AdmissionChecksStrategy) {
	e.t.Helper()
	ctx := e.t.Context()
	e.namespace()
	cq := utiltestingapi.MakeClusterQueue(e.ns).
		NamespaceSelector(&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: e.ns}}).
		Preemption(kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}).
		ResourceGroup(*utiltestingapi.MakeFlavorQuotas(string(fl)).
			Resource(framework.ResourceGPU, strconv.Itoa(gpus)).
			Resource(corev1.ResourceCPU, "10k").
			Resource(corev1.ResourceMemory, "100Ti").Obj()).
		Obj()
	cq.Spec.AdmissionChecksStrategy = checks
	must(e.t, e.k.Create(ctx, cq))
	must(e.t, e.k.Create(ctx, utiltestingapi.MakeLocalQueue("training", e.ns).ClusterQueue(e.ns).Obj()))
	e.t.Cleanup(func() {
		ctx := context.Background()
		_ = e.k.DeleteAllOf(ctx, &convoy.TrainingJob{}, client.InNamespace(e.ns))
		_ = e.k.DeleteAllOf(ctx, &kueue.Workload{}, client.InNamespace(e.ns))
		// The jobs are gone: their pods need no grace period, which kwok would otherwise wait out.
		_ = e.k.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(e.ns), client.GracePeriodSeconds(0))
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			pods := &corev1.PodList{}
			if err := e.k.List(ctx, pods, client.InNamespace(e.ns)); err != nil {
				return false, nil
			}
			return len(pods.Items) == 0, nil
		})
		_ = e.k.Delete(ctx, cq)
	})
}

// job is a TrainingJob of workers × gpus in the test's queue, packed in a rack, with more epochs
// than any test waits for: it runs until the test changes that.
func (e *env) job(name string, workers, gpus int32, priorityClass string) *convoy.TrainingJob {
	return &convoy.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: convoy.TrainingJobSpec{
			Model: "llama-3-8b", Dataset: "s3://corpus/en", Framework: convoy.FrameworkPyTorch,
			NumWorkers: workers, GPUsPerWorker: ptr.To(gpus), Image: "trainer:1",
			Hyperparameters: &convoy.Hyperparameters{Epochs: ptr.To[int32](10000)},
			Scheduling: &convoy.SchedulingSpec{Queue: "training", PriorityClassName: priorityClass,
				Topology: &convoy.TopologySpec{Level: convoy.TopologyRack}},
		},
	}
}

func (e *env) create(job *convoy.TrainingJob) {
	e.t.Helper()
	must(e.t, e.k.Create(e.t.Context(), job))
}

// get returns the job as it is now.
func (e *env) get(name string) *convoy.TrainingJob {
	e.t.Helper()
	job := &convoy.TrainingJob{}
	must(e.t, e.k.Get(e.t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, job))
	return job
}

// waitJob waits until cond holds for the job and returns it.
func (e *env) waitJob(name, what string, cond func(*convoy.TrainingJob) bool) *convoy.TrainingJob {
	e.t.Helper()
	return util.WaitJob(e.t, e.k, 200*time.Millisecond, timeout, client.ObjectKey{Namespace: e.ns, Name: name}, "to be "+what, cond)
}

func (e *env) waitState(name string, state convoy.TrainingJobState) *convoy.TrainingJob {
	e.t.Helper()
	return e.waitJob(name, string(state), func(j *convoy.TrainingJob) bool { return j.Status.State == state })
}

// pods returns the job's pods, by name.
func (e *env) pods(name string) []corev1.Pod {
	e.t.Helper()
	pods := &corev1.PodList{}
	must(e.t, e.k.List(e.t.Context(), pods, client.InNamespace(e.ns), client.MatchingLabels{convoy.LabelJobName: name}))
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items
}

// racks returns the racks the job's pods are bound to; "" stands for an unbound pod.
func (e *env) racks(pods []corev1.Pod) []string {
	e.t.Helper()
	var racks []string
	for _, p := range pods {
		rack := ""
		if p.Spec.NodeName != "" {
			node := &corev1.Node{}
			must(e.t, e.k.Get(e.t.Context(), client.ObjectKey{Name: p.Spec.NodeName}, node))
			rack = node.Labels[framework.LabelRack]
		}
		if !slices.Contains(racks, rack) {
			racks = append(racks, rack)
		}
	}
	return racks
}

// requireWholeGang fails unless the job has exactly workers pods, one per rank, every one Running
// and not being deleted, all in one rack.
func (e *env) requireWholeGang(name string, workers int) []corev1.Pod {
	e.t.Helper()
	pods := e.pods(name)
	var ranks []string
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			e.t.Errorf("pod %s is %s (deleting: %v), want Running", p.Name, p.Status.Phase, p.DeletionTimestamp != nil)
		}
		ranks = append(ranks, p.Labels[convoy.LabelReplicaRank])
	}
	slices.Sort(ranks)
	if len(pods) != workers || len(slices.Compact(ranks)) != workers {
		e.t.Fatalf("%s has %d pods with ranks %v, want %d, one per rank", name, len(pods), ranks, workers)
	}
	if racks := e.racks(pods); len(racks) != 1 || racks[0] == "" {
		e.t.Errorf("%s's pods are in racks %q, want one rack", name, racks)
	}
	return pods
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDeployManifestsApplyServerSide(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	// deploy/kueue's kustomization pulls Kueue's release from GitHub: its own files are applied one
	// by one (the real-node tier installs it whole, test/e2e/realstack).
	for _, args := range [][]string{
		{"-k", "deploy/crd"},
		{"-k", "deploy/operator"},
		{"-k", "deploy/scheduler"},
		{"-k", "deploy/node-agent"},
		{"-k", "deploy/node-agent/simulator"},
		{"-k", "deploy/default"},
		{"-k", "deploy/queue"},
		{"-k", "deploy/queue-spot-first"},
		{"-f", "deploy/kueue/kueue_trainingjob_role.yaml"},
		{"-f", "deploy/kueue/rbac"},
		{"-f", "deploy/kueue/webhook_secret.yaml"},
		{"-f", "deploy/samples", "--recursive"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			args := slices.Clone(args)
			args[1] = filepath.Join(e.Root, args[1])
			// A dry run: the stack already installed most of these, as other field managers
			// (the framework points the webhooks at local URLs), so conflicts are forced.
			out, err := e.Kubectl(ctx, append([]string{"apply", "--server-side", "--dry-run=server", "--force-conflicts"}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "serverside-applied") {
				t.Errorf("kubectl apply printed no applied object:\n%s", out)
			}
		})
	}
	// The stack points the live webhook configurations at a local URL, which would merge with the
	// manifest's Service reference into an invalid object: check the manifest under other names.
	t.Run("-f deploy/kueue/webhook.yaml", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(e.Root, "deploy/kueue/webhook.yaml"))
		must(t, err)
		renamed := filepath.Join(t.TempDir(), "webhook.yaml")
		must(t, os.WriteFile(renamed, bytes.ReplaceAll(data, []byte("name: convoy-trainingjob-queue\n"), []byte("name: e2e-convoy-trainingjob-queue\n")), 0o644))
		out, err := e.Kubectl(ctx, "apply", "--server-side", "--dry-run=server", "--force-conflicts", "-f", renamed)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out, "webhookconfiguration.admissionregistration.k8s.io/e2e-convoy-trainingjob-queue serverside-applied"); n != 2 {
			t.Errorf("want both webhook configurations applied, got:\n%s", out)
		}
	})
}

func TestTrainingJobRunsAndCompletes(t *testing.T) {
	e := setup(t)
	e.queue(64)
	job := e.job("llm", 4, 8, "normal")
	// simtrainer's accuracy reaches the target at the last epoch.
	job.Spec.Hyperparameters.Epochs = ptr.To[int32](5)
	job.Spec.SuccessPolicy = &convoy.SuccessPolicy{TargetAccuracy: ptr.To(0.9)}
	e.create(job)

	e.waitJob("llm", "admitted by Kueue", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	wls := &kueue.WorkloadList{}
	must(t, e.k.List(t.Context(), wls, client.InNamespace(e.ns)))
	if len(wls.Items) != 1 || !meta.IsStatusConditionTrue(wls.Items[0].Status.Conditions, kueue.WorkloadAdmitted) {
		t.Fatalf("want one admitted Workload, got %d: %+v", len(wls.Items), wls.Items)
	}

	running := e.waitState("llm", convoy.StateRunning)
	// The operator writes the admission to the status before it creates the children: the
	// PodGroup exists by the time the pods run, not necessarily as soon as admission shows.
	pg := &schedv1alpha1.PodGroup{}
	must(t, e.k.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "llm"}, pg))
	if pg.Spec.MinMember != 4 {
		t.Errorf("PodGroup minMember = %d, want 4", pg.Spec.MinMember)
	}
	rack := e.racks(e.requireWholeGang("llm", 4))[0]
	if got := running.Status.Resources; got == nil || !slices.Contains(strings.Split(got.Placement, "; "), "rack: "+rack) {
		t.Errorf("status.resources = %+v, want a placement in rack %s alone", got, rack)
	}

	done := e.waitState("llm", convoy.StateCompleted)
	if c := meta.FindStatusCondition(done.Status.Conditions, string(convoy.ConditionCompleted)); c == nil || c.Reason != convoy.ReasonTargetAccuracy {
		t.Errorf("Completed condition = %+v, want reason %s", c, convoy.ReasonTargetAccuracy)
	}
	if done.Status.CurrentEpoch == 0 || done.Status.Metrics == nil || done.Status.Metrics.Accuracy == nil {
		t.Errorf("status has no progress from the trainer: %+v", done.Status)
	}
}

// TestParameterServersRunInTheWorkersRack: a TensorFlow job that requires one rack runs its
// parameter servers, which ask no GPU, in its GPU workers' rack, where kube-scheduler's scoring
// alone would spread them over the emptier nodes of the fleet. They ask the workers' 60 CPUs, and
// the rack the workers would fit best, half taken by a job of 90-CPU workers, has no CPU left for
// them beside the workers (96 a node): the job runs in another rack, at the first plan, with no pod
// of it ever turned away: a scheduler that planned the GPU workers alone would get there only after
// a parameter server took a planned worker's CPU, the worker was turned away ("Insufficient cpu")
// and its node avoided.
func TestParameterServersRunInTheWorkersRack(t *testing.T) {
	e := setup(t)
	e.queue(64)
	cpus := func(q string) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
	}
	filler := e.job("filler", 2, 8, "normal")
	filler.Spec.Resources = cpus("90")
	e.create(filler)
	e.waitState("filler", convoy.StateRunning)
	taken := e.racks(e.pods("filler"))

	job := e.job("tf", 2, 8, "normal")
	job.Spec.Framework = convoy.FrameworkTensorFlow
	job.Spec.NumParameterServers = 2
	job.Spec.Resources = cpus("60")
	e.create(job)

	e.waitState("tf", convoy.StateRunning)
	pods := e.pods("tf")
	var roles []string
	for _, p := range pods {
		roles = append(roles, p.Labels[convoy.LabelReplicaRole])
	}
	if want := []string{"ps", "ps", "worker", "worker"}; !slices.Equal(roles, want) {
		t.Fatalf("the job's pods have roles %v, want %v", roles, want)
	}
	if racks := e.racks(pods); len(racks) != 1 || racks[0] == "" || slices.Contains(taken, racks[0]) {
		t.Errorf("the job's workers and parameter servers are in racks %q, want one rack other than the filler's %q", racks, taken)
	}
	events := &corev1.EventList{}
	must(t, e.k.List(t.Context(), events, client.InNamespace(e.ns)))
	for _, ev := range events.Items {
		if ev.Reason == "FailedScheduling" && strings.HasPrefix(ev.InvolvedObject.Name, "tf-") {
			t.Errorf("pod %s was turned away: %s", ev.InvolvedObject.Name, ev.Message)
		}
	}
}

func TestTrainingJobCompletesWhenItsWorkersExit(t *testing.T) {
	e := setup(t)
	e.queue(64)
	job := e.job("llm", 2, 8, "normal")
	job.Spec.Hyperparameters.Epochs = ptr.To[int32](3)
	e.create(job)

	// After its last epoch simtrainer makes every worker exit 0 (convoy.dev/sim-exit-code).
	done := e.waitState("llm", convoy.StateCompleted)
	if c := meta.FindStatusCondition(done.Status.Conditions, string(convoy.ConditionCompleted)); c == nil || c.Reason != convoy.ReasonAllWorkersSucceeded {
		t.Errorf("Completed condition = %+v, want reason %s", c, convoy.ReasonAllWorkersSucceeded)
	}
	for _, p := range e.pods("llm") {
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s is %s, want Succeeded", p.Name, p.Status.Phase)
		}
	}
}

func TestFailedWorkerRestartsWholeGang(t *testing.T) {
	e := setup(t)
	e.queue(64)
	job := e.job("llm", 2, 8, "normal")
	job.Spec.FailurePolicy = &convoy.FailurePolicy{RestartPolicy: convoy.RestartOnFailure, BackoffLimit: ptr.To[int32](3)}
	e.create(job)
	e.waitState("llm", convoy.StateRunning)
	worker := e.requireWholeGang("llm", 2)[1]

	// The worker's process is OOM-killed.
	if _, err := e.Kubectl(t.Context(), "annotate", "pod", "-n", e.ns, worker.Name, stack.AnnotationSimExitCode+"=137"); err != nil {
		t.Fatal(err)
	}
	e.waitJob("llm", "restarted and running", func(j *convoy.TrainingJob) bool {
		return j.Status.RestartCount >= 1 && j.Status.State == convoy.StateRunning
	})
	for _, p := range e.requireWholeGang("llm", 2) {
		if p.UID == worker.UID {
			t.Errorf("the failed pod %s is still the gang's", p.Name)
		}
	}
}

func TestOverQuotaJobWaitsUntilQuotaIsRaised(t *testing.T) {
	e := setup(t)
	e.queue(16)
	e.create(e.job("big", 4, 8, "normal"))

	queued := e.waitJob("big", "queued with a reason", func(j *convoy.TrainingJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, string(convoy.ConditionQueued))
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "nvidia.com/gpu")
	})
	msg := meta.FindStatusCondition(queued.Status.Conditions, string(convoy.ConditionQueued)).Message
	if !strings.Contains(msg, flavor) {
		t.Errorf("Queued message %q does not name the flavor %s", msg, flavor)
	}
	if pods := e.pods("big"); len(pods) != 0 {
		t.Fatalf("a queued job has %d pods", len(pods))
	}

	// The administrator raises the quota.
	if _, err := e.Kubectl(t.Context(), "patch", "clusterqueue", e.ns, "--type=json", "-p",
		`[{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": 32}]`); err != nil {
		t.Fatal(err)
	}
	e.waitState("big", convoy.StateRunning)
	e.requireWholeGang("big", 4)
}

func TestQueuePreemptsWholeGang(t *testing.T) {
	e := setup(t)
	e.queue(16)
	e.create(e.job("low", 2, 8, "low"))
	e.waitState("low", convoy.StateRunning)

	e.create(e.job("high", 2, 8, "high"))
	e.waitState("high", convoy.StateRunning)
	e.requireWholeGang("high", 2)
	low := e.waitState("low", convoy.StateQueued)
	if pods := e.pods("low"); len(pods) != 0 {
		t.Errorf("the preempted job still has pods: %v", podNames(pods))
	}
	if low.Status.Admission != nil {
		t.Errorf("the preempted job keeps its admission: %+v", low.Status.Admission)
	}
}

func TestSchedulerPreemptsWholeGangWhenNodesAreFull(t *testing.T) {
	e := setup(t)
	e.queue(1000)
	// Every worker asks most of its node's CPU and memory (96 CPUs, 1Ti), as 8-GPU training pods
	// do: the room preemption makes is CPU and memory as much as GPUs.
	job := func(name, priorityClass string) *convoy.TrainingJob {
		j := e.job(name, 4, 8, priorityClass)
		j.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("90"), corev1.ResourceMemory: resource.MustParse("900Gi")}}
		return j
	}
	for _, name := range e.preemptOneOfFour(job) {
		for _, p := range e.pods(name) {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				t.Errorf("pod %s of the preempted gang %s is bound to %s", p.Name, name, p.Spec.NodeName)
			}
		}
	}
}

// preemptOneOfFour fills the fleet with four low-priority gangs of a rack each, made by job, then
// runs a high-priority one of the same shape, which makes the scheduler preempt one of them. It
// returns the preempted gangs, failing the test unless there is exactly one, and checks that the
// others run whole.
func (e *env) preemptOneOfFour(job func(name, priorityClass string) *convoy.TrainingJob) []string {
	e.t.Helper()
	lows := []string{"low-0", "low-1", "low-2", "low-3"}
	for _, name := range lows {
		e.create(job(name, "low"))
	}
	for _, name := range lows {
		e.waitState(name, convoy.StateRunning)
	}
	e.create(job("high", "high"))
	e.waitState("high", convoy.StateRunning)
	e.requireWholeGang("high", 4)
	var preempted []string
	for _, name := range lows {
		if e.get(name).Status.RestartCount == 0 {
			e.requireWholeGang(name, 4)
			continue
		}
		preempted = append(preempted, name)
	}
	if len(preempted) != 1 {
		e.t.Errorf("preempted gangs: %v, want exactly one", preempted)
	}
	return preempted
}

// TestJobPodAntiAffinity: a job whose workers keep apart by hostname runs with one worker per
// node; one whose workers keep apart by zone, which a gang's plan cannot honour, is refused when
// applied; one whose workers keep together by a key the scheduler has no level for says so in its
// status, naming the field.
func TestJobPodAntiAffinity(t *testing.T) {
	e := setup(t)
	e.queue(64)
	apart := func(name, topologyKey string) *convoy.TrainingJob {
		job := e.job(name, 4, 2, "normal")
		job.Spec.Scheduling.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{convoy.LabelJobName: name}},
				TopologyKey:   topologyKey,
			}},
		}}
		return job
	}
	e.create(apart("by-node", corev1.LabelHostname))
	e.waitState("by-node", convoy.StateRunning)
	nodes := map[string]bool{}
	for _, p := range e.requireWholeGang("by-node", 4) {
		nodes[p.Spec.NodeName] = true
	}
	if len(nodes) != 4 {
		t.Errorf("the 4 workers share nodes: %v", nodes)
	}

	// Apart by zone is refused when the job is applied (queue.PlacementWebhook), with the field.
	err := e.k.Create(t.Context(), apart("by-zone", corev1.LabelTopologyZone))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(),
		`spec.scheduling.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: "topology.kubernetes.io/zone"`) {
		t.Errorf("creating a job whose workers keep a zone apart: %v, want it refused", err)
	}

	// Affinity by a key the scheduler has no level for passes the webhook (the rack, block and
	// zone keys are the scheduler's args) and is explained by the scheduler, on the job.
	const key = "example.com/pod-domain"
	together := e.job("together", 4, 2, "normal")
	together.Spec.Scheduling.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{convoy.LabelJobName: "together"}},
			TopologyKey:   key,
		}},
	}}
	e.create(together)
	// The message is the first unplaced pod's: the planner's words, which kube-scheduler may
	// prefix with "0/16 nodes are available: ".
	want := []string{`0 of 4 pods are running; scheduler "convoy-scheduler" cannot place the gang: `,
		e.ns + `/together needs pod affinity among its own pods by "` + key + `" (spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0])`}
	e.waitJob("together", "saying why the scheduler cannot place it", func(j *convoy.TrainingJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionInitializing)
		return j.Status.State == convoy.StateInitializing && c != nil && c.Reason == convoy.ReasonUnschedulable &&
			strings.HasPrefix(c.Message, want[0]) && strings.Contains(c.Message, want[1])
	})
	for _, p := range e.pods("together") {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s is bound to %s", p.Name, p.Spec.NodeName)
		}
	}
}

func TestOperatorRestartLeavesNoDuplicateOrPartialGang(t *testing.T) {
	e := setup(t)
	e.queue(64)
	e.create(e.job("llm", 4, 8, "normal"))
	// Kill the operator while it creates the gang.
	e.waitJob("llm", "creating pods", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	must(t, e.StopOperator())
	must(t, e.StartOperator(t.Context()))

	e.waitState("llm", convoy.StateRunning)
	e.requireWholeGang("llm", 4)
}

func TestSchedulerRestartLeavesNoPartialGang(t *testing.T) {
	e := setup(t)
	e.queue(64)
	must(t, e.StopScheduler())
	e.create(e.job("llm", 4, 8, "normal"))
	e.waitJob("llm", "with its pods created", func(*convoy.TrainingJob) bool { return len(e.pods("llm")) == 4 })
	for _, p := range e.pods("llm") {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s is bound to %s with no scheduler running", p.Name, p.Spec.NodeName)
		}
	}
	must(t, e.StartScheduler(t.Context()))

	e.waitState("llm", convoy.StateRunning)
	e.requireWholeGang("llm", 4)
}

// TestDeletedNodeRestartsGangElsewhere: a gang whose node is deleted restarts whole on other
// nodes, and writes its checkpoints where the pods of the attempt before, which may still run on
// the lost node, do not.
func TestDeletedNodeRestartsGangElsewhere(t *testing.T) {
	e := setup(t)
	e.queue(64)
	job := e.job("llm", 2, 8, "normal")
	job.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
	e.create(job)
	e.waitState("llm", convoy.StateRunning)
	before := e.requireWholeGang("llm", 2)
	lost := before[0].Spec.NodeName

	node := &corev1.Node{}
	must(t, e.k.Get(t.Context(), client.ObjectKey{Name: lost}, node))
	must(t, e.k.Delete(t.Context(), node))
	t.Cleanup(func() {
		for _, spec := range fleet.Nodes() {
			if spec.Name == lost {
				_ = e.Cluster.CreateNodes(context.Background(), spec)
			}
		}
	})

	e.waitJob("llm", "restarted", func(j *convoy.TrainingJob) bool {
		return j.Status.RestartCount >= 1 && j.Status.State == convoy.StateRunning
	})
	for _, p := range e.requireWholeGang("llm", 2) {
		if p.Spec.NodeName == lost {
			t.Errorf("pod %s runs on the deleted node %s", p.Name, lost)
		}
		old, now := util.EnvOf(&before[0], "CONVOY_CHECKPOINT_URI"), util.EnvOf(&p, "CONVOY_CHECKPOINT_URI")
		if now == old || util.EnvOf(&p, "CONVOY_CHECKPOINT_ROOT") != util.EnvOf(&before[0], "CONVOY_CHECKPOINT_ROOT") || !strings.HasPrefix(now, util.EnvOf(&p, "CONVOY_CHECKPOINT_ROOT")+"/") {
			t.Errorf("pod %s writes checkpoints to %s, the attempt before to %s: want a location of its own under the job's %s",
				p.Name, now, old, util.EnvOf(&p, "CONVOY_CHECKPOINT_ROOT"))
		}
	}
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, fmt.Sprintf("%s@%s", p.Name, p.Spec.NodeName))
	}
	return names
}

func TestUnhealthyGPUMovesGangOffIt(t *testing.T) {
	e := setup(t)
	e.queue(64)
	e.create(e.job("llm", 2, 4, "normal"))
	e.waitState("llm", convoy.StateRunning)
	victim := e.requireWholeGang("llm", 2)[0]
	node := victim.Spec.NodeName

	// The GPU the node agent says the worker holds develops uncorrectable ECC errors.
	var bad int32 = -1
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		g := &convoy.GPUNode{}
		if err := e.k.Get(ctx, client.ObjectKey{Name: node}, g); err != nil {
			return false, nil
		}
		for _, d := range g.Status.GPUs {
			if d.AllocatedTo == e.ns+"/"+victim.Name {
				bad = d.Index
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("GPUNode %s never showed a GPU held by %s: %v", node, victim.Name, err)
	}
	before := map[types.UID]bool{}
	for _, p := range e.pods("llm") {
		before[p.UID] = true
	}
	fault := fmt.Sprintf("%s/faults?node=%s&gpu=%d", e.AgentURLs[0], node, bad)
	e.agentFault(http.MethodPost, fault+"&fault=ecc")
	t.Cleanup(func() {
		// The next test finds the node's GPUs healthy again.
		e.agentFault(http.MethodDelete, fault)
		_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			g := &convoy.GPUNode{}
			return e.k.Get(ctx, client.ObjectKey{Name: node}, g) == nil && g.Status.Healthy == g.Status.Capacity, nil
		})
	})

	// The deletion restarts the whole gang (a new pod for every rank), off the unhealthy GPU.
	var gang []corev1.Pod
	moved := e.waitJob("llm", "running again as a whole new gang", func(j *convoy.TrainingJob) bool {
		gang = e.pods("llm")
		if j.Status.State != convoy.StateRunning || j.Status.RestartCount < 1 || len(gang) != 2 {
			return false
		}
		for _, p := range gang {
			if before[p.UID] || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				return false
			}
		}
		return true
	})
	t.Logf("GPU %d of %s failed under %s; restartCount %d, the gang now: %v", bad, node, victim.Name, moved.Status.RestartCount, podNames(gang))
	if moved.Status.FailureRestarts != 0 {
		t.Errorf("failureRestarts = %d: a GPU fault spent the job's backoffLimit", moved.Status.FailureRestarts)
	}
	for _, p := range gang {
		if p.Spec.NodeName != node {
			continue
		}
		indices := p.Annotations[convoy.AnnotationGPUIndices]
		if indices == "" || slices.Contains(strings.Split(indices, ","), strconv.Itoa(int(bad))) {
			t.Errorf("pod %s is on %s with GPUs %q; want GPUs that avoid the unhealthy GPU %d", p.Name, node, indices, bad)
		}
	}
	events := &eventsv1.EventList{}
	must(t, e.k.List(t.Context(), events, client.InNamespace(metav1.NamespaceDefault)))
	evicted := false
	for _, ev := range events.Items {
		evicted = evicted || ev.Reason == "PodEvicted" && ev.Regarding.Name == node && ev.Related != nil && ev.Related.Name == victim.Name
	}
	if !evicted {
		t.Errorf("no PodEvicted Event on node %s about %s", node, victim.Name)
	}
}

// agentFault sends a fault request to a node agent's /faults endpoint.
func (e *env) agentFault(method, url string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	must(e.t, err)
	resp, err := http.DefaultClient.Do(req)
	must(e.t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("%s %s: %s %s", method, url, resp.Status, body)
	}
}
