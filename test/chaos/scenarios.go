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

package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
)

// leases are the leader-election Leases of the operator and the scheduler, in stack.Namespace.
var leases = map[string]string{stack.Operator: "convoy-operator.convoy.dev", stack.Scheduler: "convoy-scheduler"}

const allZero = "0 lost, duplicate, partial, stuck"

// Time targets. restartedLeader: a SIGKILLed leader started again at once leads again once its
// own Lease (10 s) has expired, and its controllers start. failover: a standby takes over within
// the Lease. wholeAgain: a gang is whole again after its scheduler's SIGKILL or its node's loss.
// apiServerBack: a SIGKILLed kube-apiserver answers /readyz again.
const (
	restartedLeader = 30 * time.Second
	failover        = 15 * time.Second
	wholeAgain      = 60 * time.Second
	apiServerBack   = 60 * time.Second
)

// R1 SIGKILLs the operator cfg.Kills times at random moments while cfg.Jobs TrainingJobs are
// created, queued, admitted, placed, run and completed; a killed operator is started again at
// once, as a Deployment's kubelet would, and waits out its predecessor's Lease.
func (r *Runner) R1(ctx context.Context) ([]Result, error) {
	const ns = "chaos-r1"
	if err := r.queue(ctx, ns); err != nil {
		return nil, err
	}
	began := time.Now()
	names, err := r.createJobs(ctx, ns, "r1", r.cfg.Jobs)
	if err != nil {
		return nil, err
	}
	r.log("R1: %d jobs created in %s", len(names), seconds(time.Since(began)))
	var failovers []time.Duration
	for len(failovers) < r.cfg.Kills {
		if err := sleep(ctx, r.gap()); err != nil {
			return nil, err
		}
		if r.finished(ctx, ns, names) {
			break
		}
		d, err := r.killLeader(ctx, stack.Operator)
		if err != nil {
			return nil, err
		}
		failovers = append(failovers, d)
		r.log("R1: operator SIGKILL %d: leading again after %s", len(failovers), seconds(d))
	}
	out, err := r.waitJobs(ctx, ns, names, began, r.cfg.Deadline)
	if err != nil {
		return nil, err
	}
	faults := fmt.Sprintf("%d SIGKILLs of the operator", len(failovers))
	if len(failovers) < r.cfg.Kills {
		faults += fmt.Sprintf(" (of %d: the jobs finished first)", r.cfg.Kills)
	}
	t := r.w.tally(ns)
	worst := slices.Max(append(failovers, 0))
	res := r.row(Result{
		Scenario: "R1 operator SIGKILLed", Faults: faults, Jobs: len(names),
		Times: fmt.Sprintf("all done in %s; leader again %s after a kill (mean %s); longest partial gang %s",
			seconds(out.done), seconds(worst), seconds(mean(failovers)), seconds(t.longestPartial)),
		Target: fmt.Sprintf("leader again < %s after each kill; %s", seconds(restartedLeader), allZero),
	}, ns, out)
	res.within("leader again", worst, restartedLeader)
	if len(failovers) == 0 {
		res.Missed, res.Met = "no kill: the jobs finished first", false
	}
	return []Result{res}, nil
}

// R2 SIGKILLs the scheduler while a gang binds and while a planned gang's pods wait at Permit, and
// lets two gangs' Permit timeout expire.
func (r *Runner) R2(ctx context.Context) ([]Result, error) {
	var results []Result
	for _, k := range []struct {
		ns, what string
		kills    int
		gated    bool
		landed   func(bound, total int) bool
		trigger  func(ctx context.Context, gang types.NamespacedName, kill func()) error
	}{
		{"chaos-r2-binding", "while a gang binds", r.cfg.BindingKills, true,
			func(bound, total int) bool { return bound > 0 && bound < total }, r.onFirstBinding},
		{"chaos-r2-permit", "while a gang waits at Permit", r.cfg.PermitKills, false,
			func(bound, total int) bool { return bound == 0 }, r.onPlan},
	} {
		res, err := r.killScheduler(ctx, k.ns, k.what, k.kills, k.gated, k.landed, k.trigger)
		results = append(results, res)
		if err != nil {
			return results, err
		}
	}
	res, err := r.permitTimeout(ctx)
	return append(results, res), err
}

// gangWorkers is the size of R2's gangs: many one-GPU pods, for a long binding.
const gangWorkers = 16

// extraKills is how many more gangs R2 kills the scheduler under when kills come too late to land.
const extraKills = 3

// killScheduler creates gangs one at a time in ns and SIGKILLs the scheduler when trigger says, then
// starts it again; a kill lands when landed holds for the gang's bound pods once the scheduler is dead.
// A kill that comes too late to land (the scheduler outran the trigger) is followed by another gang,
// up to extraKills more than kills, until kills have landed; every kill is counted in the row.
// When gated, the API server refuses to bind the upper half of each gang's ranks until the kill, so
// the scheduler dies with the gang partly bound however fast it binds.
func (r *Runner) killScheduler(ctx context.Context, ns, what string, kills int, gated bool, landed func(bound, total int) bool,
	trigger func(context.Context, types.NamespacedName, func()) error) (Result, error) {
	res := Result{Scenario: "R2 scheduler SIGKILLed " + what, Target: "every gang whole < " + seconds(wholeAgain) + " after the kill; 0 partial after the grace; " + allZero}
	if err := r.queue(ctx, ns); err != nil {
		return res, err
	}
	var gate *bindingGate
	if gated {
		var err error
		if gate, err = newBindingGate(ctx, r.k, ns); err != nil {
			return res, err
		}
	}
	began := time.Now()
	var names, atKill []string
	var whole []time.Duration
	hits := 0
	for i := 0; hits < kills && i < kills+extraKills; i++ {
		name := fmt.Sprintf("gang-%d", i)
		gang := types.NamespacedName{Namespace: ns, Name: name}
		var killed time.Time
		var once sync.Once
		kill := func() {
			once.Do(func() {
				killed = time.Now()
				_ = r.kill(stack.Scheduler)
			})
		}
		if gate != nil {
			if err := gate.hold(ctx, name, gangWorkers/2, gangWorkers); err != nil {
				return res, err
			}
		}
		done := make(chan error, 1)
		go func() { done <- trigger(ctx, gang, kill) }()
		if err := r.createJob(ctx, ns, name, gangWorkers, 1, 3); err != nil {
			return res, err
		}
		names = append(names, name)
		if err := <-done; err != nil {
			return res, err
		}
		bound, err := r.boundNow(ctx, gang)
		if err != nil {
			return res, err
		}
		atKill = append(atKill, fmt.Sprintf("%d/%d", bound, gangWorkers))
		if landed(bound, gangWorkers) {
			hits++
		}
		if gate != nil {
			if err := gate.open(ctx); err != nil {
				return res, err
			}
		}
		if err := r.s.StartReplica(ctx, stack.Scheduler); err != nil {
			return res, err
		}
		d, err := r.waitWhole(ctx, gang, killed)
		if err != nil {
			return res, err
		}
		whole = append(whole, d)
		r.log("R2: scheduler SIGKILLed %s (%s bound at the kill); gang whole %s after", what, atKill[i], seconds(d))
	}
	out, err := r.waitJobs(ctx, ns, names, began, r.cfg.Deadline)
	if err != nil {
		return res, err
	}
	res.Faults = fmt.Sprintf("%d SIGKILLs, %d landed (pods bound at the kill: %s)", len(atKill), hits, strings.Join(atKill, ", "))
	res.Jobs = len(names)
	worst := slices.Max(append(whole, 0))
	res.Times = fmt.Sprintf("gang whole %s after the kill (max)", seconds(worst))
	res = r.row(res, ns, out)
	res.within("gang whole", worst, wholeAgain)
	if hits == 0 {
		res.Missed, res.Met = "no kill landed "+what, false
	}
	return res, nil
}

// onFirstBinding kills as soon as the gang's first pod is seen bound.
func (r *Runner) onFirstBinding(ctx context.Context, gang types.NamespacedName, kill func()) error {
	fired := make(chan struct{})
	var once sync.Once
	r.w.setOnBind(func(g types.NamespacedName, bound int) {
		if g == gang {
			kill()
			once.Do(func() { close(fired) })
		}
	})
	defer r.w.setOnBind(nil)
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("no pod of %s was bound within 2 minutes", gang)
	}
}

// onPlan kills as soon as the scheduler logs its plan of the gang: its pods are then being reserved
// and wait at Permit for each other.
func (r *Runner) onPlan(ctx context.Context, gang types.NamespacedName, kill func()) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := tailFor(ctx, r.logFile(stack.Scheduler), `"Planned the gang"`, fmt.Sprintf(`gang=%q`, gang.String())); err != nil {
		return fmt.Errorf("waiting for the scheduler to log its plan of %s: %w", gang, err)
	}
	kill()
	return nil
}

// boundNow counts the gang's pods bound, from the API server.
func (r *Runner) boundNow(ctx context.Context, gang types.NamespacedName) (int, error) {
	// A Binding already sent may still land: let it.
	if err := sleep(ctx, time.Second); err != nil {
		return 0, err
	}
	pods := &corev1.PodList{}
	if err := r.k.List(ctx, pods, client.InNamespace(gang.Namespace), client.MatchingLabels{convoy.LabelJobName: gang.Name}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}

// waitWhole waits until every pod of the gang is bound and returns the time since since.
func (r *Runner) waitWhole(ctx context.Context, gang types.NamespacedName, since time.Time) (time.Duration, error) {
	deadline := time.Now().Add(r.cfg.Deadline)
	for time.Now().Before(deadline) {
		n := 0
		for _, p := range r.w.livePods(gang) {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				n++
			}
		}
		if n == gangWorkers {
			return time.Since(since), nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("%s was not whole %s after the kill", gang, r.cfg.Deadline)
}

// permitTimeout creates two gangs of PodGroups with scheduleTimeoutSeconds 5 that can never be
// whole: three 8-GPU pods each, beside a fourth that never reaches the scheduler (a scheduling
// gate) or fits no node (more CPU than any has). The first three are planned and wait at Permit
// until the timeout, or are sent back when the fourth fails; either way none may be bound, then or
// after, and no GPU may stay allocated to them.
func (r *Runner) permitTimeout(ctx context.Context) (Result, error) {
	const ns, timeout = "chaos-r2-timeout", 5
	res := Result{Scenario: "R2 Permit timeout expires", Faults: "2 gangs that cannot be whole, scheduleTimeoutSeconds " + strconv.Itoa(timeout),
		Jobs: 2, Target: "0 gangs holding GPUs partially after their timeout"}
	if err := r.k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return res, err
	}
	for _, gang := range []string{"gated", "no-room"} {
		r.w.expect(ns, gang, 4)
		if err := r.k.Create(ctx, &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gang},
			Spec: schedv1alpha1.PodGroupSpec{MinMember: 4, ScheduleTimeoutSeconds: ptr.To[int32](timeout)}}); err != nil {
			return res, err
		}
		for rank := range 4 {
			pod := gangPod(ns, gang, rank)
			if rank == 3 {
				pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10k")}}
				if gang == "gated" {
					pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "chaos.convoy.dev/never"}}
				}
			}
			if err := r.k.Create(ctx, pod); err != nil {
				return res, err
			}
		}
	}
	// Several timeouts and retries.
	watched := 6 * timeout * time.Second
	if err := sleep(ctx, watched); err != nil {
		return res, err
	}
	held := 0
	for _, gang := range []string{"gated", "no-room"} {
		if r.w.boundPods(types.NamespacedName{Namespace: ns, Name: gang}) > 0 {
			res.Partial++
		}
	}
	nodes := &convoy.GPUNodeList{}
	if err := r.k.List(ctx, nodes); err != nil {
		return res, err
	}
	for _, n := range nodes.Items {
		for _, g := range n.Status.GPUs {
			if strings.HasPrefix(g.AllocatedTo, ns+"/") {
				held++
			}
		}
	}
	res.Times = fmt.Sprintf("watched %s: pods ever bound %d, GPUs allocated at the end %d",
		seconds(watched), r.w.boundPods(types.NamespacedName{Namespace: ns, Name: "gated"})+r.w.boundPods(types.NamespacedName{Namespace: ns, Name: "no-room"}), held)
	res.Met = res.Partial == 0 && held == 0
	if err := r.k.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
		return res, err
	}
	return res, r.k.DeleteAllOf(ctx, &schedv1alpha1.PodGroup{}, client.InNamespace(ns))
}

// gangPod is pod rank of a PodGroup's gang made by hand, as a framework other than Convoy's
// operator would: 8 GPUs, Convoy's scheduler.
func gangPod(ns, gang string, rank int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", gang, rank), Labels: map[string]string{
			labelPodGroup: gang, convoy.LabelReplicaRank: strconv.Itoa(rank)}},
		Spec: corev1.PodSpec{
			SchedulerName: "convoy-scheduler",
			NodeSelector:  map[string]string{framework.LabelGPUProduct: product},
			Containers: []corev1.Container{{Name: "trainer", Image: "trainer:1", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")}}}},
		},
	}
}

// ControlPlane restarts the API server (SIGKILL) during a run, then takes Kueue down for
// cfg.KueueDown during another; jobs are created before and while Kueue is down.
func (r *Runner) ControlPlane(ctx context.Context) ([]Result, error) {
	var results []Result
	{
		const ns = "chaos-apiserver"
		if err := r.queue(ctx, ns); err != nil {
			return nil, err
		}
		began := time.Now()
		names, err := r.createJobs(ctx, ns, "api", r.cfg.ControlPlaneJobs)
		if err != nil {
			return nil, err
		}
		if err := sleep(ctx, r.gap()); err != nil {
			return nil, err
		}
		running, err := r.runningAtKill(ctx, ns)
		if err != nil {
			return nil, err
		}
		killed := time.Now()
		if err := r.c.KillProcess(framework.APIServer); err != nil {
			return nil, err
		}
		if err := r.c.RestartProcess(framework.APIServer); err != nil {
			return nil, err
		}
		if err := r.waitAPIServer(ctx); err != nil {
			return nil, err
		}
		back := time.Since(killed)
		r.log("API server SIGKILLed and ready again after %s", seconds(back))
		out, err := r.waitJobs(ctx, ns, names, began, r.cfg.Deadline)
		if err != nil {
			return nil, err
		}
		res := r.row(Result{Scenario: "API server restarted", Faults: fmt.Sprintf("1 SIGKILL of kube-apiserver, restarted at once; %d jobs running at the kill", running),
			Jobs: len(names), Times: fmt.Sprintf("ready again after %s; all done in %s", seconds(back), seconds(out.done)),
			Target: "ready again < " + seconds(apiServerBack) + "; " + allZero}, ns, out)
		res.within("ready again", back, apiServerBack)
		if running == 0 {
			res.Missed = "no job was running at the kill"
		}
		results = append(results, res)
	}
	const ns = "chaos-kueue"
	if err := r.queue(ctx, ns); err != nil {
		return results, err
	}
	began := time.Now()
	before := r.cfg.ControlPlaneJobs / 2
	names, err := r.createJobs(ctx, ns, "before", before)
	if err != nil {
		return results, err
	}
	if err := sleep(ctx, r.gap()); err != nil {
		return results, err
	}
	running, err := r.runningAtKill(ctx, ns)
	if err != nil {
		return results, err
	}
	if err := r.c.KillProcess(framework.KueueManager); err != nil {
		return results, err
	}
	down := time.Now()
	during, err := r.createJobs(ctx, ns, "during", r.cfg.ControlPlaneJobs-before)
	if err != nil {
		return results, err
	}
	names = append(names, during...)
	if err := sleep(ctx, r.cfg.KueueDown-time.Since(down)); err != nil {
		return results, err
	}
	if err := r.c.RestartProcess(framework.KueueManager); err != nil {
		return results, err
	}
	up := time.Now()
	r.log("Kueue was down for %s", seconds(up.Sub(down)))
	out, err := r.waitJobs(ctx, ns, names, began, r.cfg.Deadline)
	if err != nil {
		return results, err
	}
	res := r.row(Result{Scenario: "Kueue down", Faults: fmt.Sprintf("Kueue SIGKILLed with %d jobs running, down %s; %d jobs created while down", running, seconds(up.Sub(down)), len(during)),
		Jobs: len(names), Times: fmt.Sprintf("all done %s after Kueue came back", seconds(began.Add(out.done).Sub(up))), Target: allZero}, ns, out)
	if running == 0 {
		res.Missed = "no job was running at the kill"
	}
	return append(results, res), nil
}

// waitAPIServer waits until the API server answers /readyz.
func (r *Runner) waitAPIServer(ctx context.Context) error {
	return retry(ctx, 2*time.Minute, func() error {
		_, err := r.c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// R5 starts a second replica of the operator and of the scheduler and kills the leader, of each in
// turn, cfg.Failovers times while jobs run; the killed replica is started again as the standby.
func (r *Runner) R5(ctx context.Context) ([]Result, error) {
	const ns = "chaos-r5"
	res := Result{Scenario: "R5 leader failover", Target: "failover < " + seconds(failover) + "; 0 double actions; " + allZero}
	for _, names := range [][]string{r.s.Replicas(stack.Operator), r.s.Replicas(stack.Scheduler)} {
		if err := r.s.StartReplica(ctx, names[1]); err != nil {
			return []Result{res}, err
		}
	}
	if err := r.queue(ctx, ns); err != nil {
		return []Result{res}, err
	}
	began := time.Now()
	names, err := r.createJobs(ctx, ns, "r5", r.cfg.FailoverJobs, r.cfg.FailoverEpochs)
	if err != nil {
		return []Result{res}, err
	}
	failovers := map[string][]time.Duration{}
	var running []string
	idle := 0
	for i := range r.cfg.Failovers {
		component := []string{stack.Operator, stack.Scheduler}[i%2]
		if err := sleep(ctx, r.gap()); err != nil {
			return []Result{res}, err
		}
		n, err := r.runningAtKill(ctx, ns)
		if err != nil {
			return []Result{res}, err
		}
		running = append(running, strconv.Itoa(n))
		if n == 0 {
			idle++
		}
		d, err := r.killLeader(ctx, component)
		if err != nil {
			return []Result{res}, err
		}
		failovers[component] = append(failovers[component], d)
		r.log("R5: %s leader SIGKILLed; the other replica leads after %s", component, seconds(d))
	}
	out, err := r.waitJobs(ctx, ns, names, began, r.cfg.Deadline)
	if err != nil {
		return []Result{res}, err
	}
	t := r.w.tally(ns)
	double := t.duplicates + t.recreated + out.restarted
	worst := slices.Max(append(append(failovers[stack.Operator], failovers[stack.Scheduler]...), 0))
	res.Faults = fmt.Sprintf("%d leader SIGKILLs of the operator, %d of the scheduler, 2 replicas each; jobs running at each kill: %s",
		len(failovers[stack.Operator]), len(failovers[stack.Scheduler]), strings.Join(running, ", "))
	res.Jobs = len(names)
	res.Times = fmt.Sprintf("failover operator %s, scheduler %s (max); double actions %d; all done in %s",
		seconds(slices.Max(append(failovers[stack.Operator], 0))), seconds(slices.Max(append(failovers[stack.Scheduler], 0))), double, seconds(out.done))
	res = r.row(res, ns, out)
	res.Double = double
	res.Met = res.Met && double == 0
	res.within("failover", worst, failover)
	if idle > 0 {
		res.Missed = fmt.Sprintf("%d of %d kills with no job running", idle, len(running))
	}
	return []Result{res}, nil
}

// killLeader SIGKILLs the replica of component that leads, starts it again at once and returns how
// long after the kill another process held the Lease.
func (r *Runner) killLeader(ctx context.Context, component string) (time.Duration, error) {
	name, err := r.leader(ctx, component)
	if err != nil {
		return 0, err
	}
	holder, err := r.leaseHolder(ctx, component)
	if err != nil {
		return 0, err
	}
	killed := time.Now()
	if err := r.kill(name); err != nil {
		return 0, err
	}
	restarted := make(chan error, 1)
	go func() { restarted <- r.s.StartReplica(ctx, name) }()
	var took time.Duration
	err = retry(ctx, 2*time.Minute, func() error {
		h, err := r.leaseHolder(ctx, component)
		if err != nil {
			return err
		}
		if h == "" || h == holder {
			return errors.New("no new leader yet")
		}
		took = time.Since(killed)
		return nil
	})
	if rerr := <-restarted; rerr != nil {
		return took, rerr
	}
	if err != nil {
		return took, fmt.Errorf("no new %s leader within 2 minutes of the kill: %w", component, err)
	}
	// The next kill targets a leader that has started its controllers.
	_, err = r.leader(ctx, component)
	return took, err
}

func (r *Runner) leaseHolder(ctx context.Context, component string) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := r.k.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: leases[component]}, lease); err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// leader returns the running replica of component whose log, since its latest start, says it
// acquired the Lease; it waits up to 2 minutes for one.
func (r *Runner) leader(ctx context.Context, component string) (string, error) {
	var name string
	err := retry(ctx, 2*time.Minute, func() error {
		running := map[string]bool{}
		for _, p := range r.c.Processes() {
			running[p.Name] = true
		}
		for _, n := range r.s.Replicas(component) {
			if !running[n] {
				continue
			}
			data, err := os.ReadFile(r.logFile(n))
			if err != nil {
				return err
			}
			// Each start appends its command line, "+ <binary> <args>", to the log.
			if i := bytes.LastIndex(data, []byte("\n+ ")); i >= 0 {
				data = data[i:]
			}
			if bytes.Contains(bytes.ToLower(data), []byte("successfully acquired lease")) {
				name = n
				return nil
			}
		}
		return fmt.Errorf("no replica of %s has acquired its Lease", component)
	})
	return name, err
}

func (r *Runner) logFile(process string) string {
	return filepath.Join(r.c.StateDir, "logs", process+".log")
}

// finished says whether every job of names has completed or failed.
func (r *Runner) finished(ctx context.Context, ns string, names []string) bool {
	jobs, err := jobsIn(ctx, r.k, ns)
	if err != nil {
		return false
	}
	n := 0
	for _, j := range jobs {
		if j.Status.State == convoy.StateCompleted || j.Status.State == convoy.StateFailed {
			n++
		}
	}
	return n == len(names)
}

// tailFor waits until the file at path, from its current end, has a line containing every one of
// words.
func tailFor(ctx context.Context, path string, words ...string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		// Complete lines are read, the unfinished one kept.
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			for _, line := range strings.Split(string(buf[:i]), "\n") {
				if containsAll(line, words) {
					return nil
				}
			}
			buf = buf[i+1:]
		}
		if n > 0 && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}
