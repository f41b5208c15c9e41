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

// Package progress measures whether one tenant's flood of the progress endpoint starves another
// team's reports (see README.md):
//
//	go test ./test/bench/progress -run '^$' -bench BenchmarkTenantFlood -benchtime 1x -timeout 20m
//
// The cluster is test/framework's with the real Kueue manager and the operator (test/util/queuetest),
// which reviews tokens with real TokenReviews through its one client (QPS 100, burst 200, the
// binary's defaults). A hostile namespace runs a job of -hostile-pods pods; each pod, a goroutine
// sending from its own loopback address (127.0.1.x), posts -hostile-rate requests a second to its
// job's endpoint with random tokens, or with forged tokens naming its own pod (a JWT with the
// pod's real name and UID and a signature no one made: the smart attacker, whose tokens pass every
// check that does not need the API server). Meanwhile another team's -team-pods single-pod jobs
// (from 127.0.2.x, with real pod-bound tokens minted by TokenRequest and first used under the
// attack) report an epoch every -epoch, retrying 429 and 503 after Retry-After as the SDK does;
// halfway through, each job is suspended, so the operator asks it for a checkpoint in its next
// reply, and the pod reports one a second later. It prints the team's report latency (first try to
// recorded, retries included), whether each checkpoint was acknowledged within the job's
// preemptionGraceSeconds, and what the flood cost in TokenReviews, side by side with no attack.
// It asserts nothing about time.
package progress

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	progressapi "github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
	"github.com/convoy-dev/convoy/test/util/queuetest"
)

var (
	hostilePods = flag.Int("hostile-pods", 50, "Pods of the hostile namespace, each its own client address.")
	hostileRate = flag.Int("hostile-rate", 10, "Requests a second from each hostile pod.")
	teamPods    = flag.Int("team-pods", 10, "Pods (single-pod jobs) of the team that reports.")
	epoch       = flag.Duration("epoch", time.Second, "Time between a team pod's progress reports.")
	duration    = flag.Duration("duration", 30*time.Second, "How long the team reports in each scenario; its jobs are suspended halfway.")
	grace       = flag.Int("grace", 20, "spec.checkpoint.preemptionGraceSeconds of the team's jobs.")
)

const (
	hostileNS = "hostile"
	timeout   = 2 * time.Minute
)

func TestMain(m *testing.M) {
	framework.BenchMain(m, framework.Options{AddToScheme: []func(*runtime.Scheme) error{
		convoy.AddToScheme, kueue.AddToScheme, schedv1alpha1.AddToScheme}})
}

// attack is what the hostile pods send.
type attack string

const (
	noAttack     attack = "no attack"
	randomTokens attack = "random tokens"
	forgedTokens attack = "forged tokens naming their own pods"
)

// bench is the cluster, the operator and the hostile namespace's pods.
type bench struct {
	b       *testing.B
	ctx     context.Context
	c       *framework.Cluster
	env     *queuetest.Env
	hostile []corev1.Pod
	nodes   []framework.NodeSpec
}

// result is one scenario's measurement.
type result struct {
	attack    attack
	latencies []time.Duration
	failed    int
	// retried counts the team's answers that it retried, by code.
	retried map[int]int
	// acked counts the checkpoints acknowledged (CheckpointSaved) within the grace; worstAck is
	// the longest time from a request to its acknowledgement, to the second.
	acked, asked int
	worstAck     time.Duration
	hostileSent  int
	hostileCodes map[int]int
	reviews      float64
	elapsed      time.Duration
}

func BenchmarkTenantFlood(b *testing.B) {
	env := queuetest.StartShared(b, queuetest.Options{})
	c, ctx := env.Cluster, b.Context()
	r := &bench{b: b, ctx: ctx, c: c, env: env,
		nodes: framework.Fleet{Zones: 1, BlocksPerZone: 1, RacksPerBlock: 1, NodesPerRack: 16, GPUsPerNode: 8, Product: "NVIDIA-H100-80GB-HBM3"}.Nodes()}
	r.must(c.CreateNodes(ctx, r.nodes...))
	r.setupHostile()
	var results []result
	for range b.N {
		for i, a := range []attack{noAttack, randomTokens, forgedTokens} {
			results = append(results, r.scenario(fmt.Sprintf("team-%d", i), a))
		}
	}
	fmt.Printf("\n%d hostile pods x %d requests/s against %d pods of another team reporting every %s for %s, checkpoint asked halfway (grace %ds)\n\n",
		*hostilePods, *hostileRate, *teamPods, *epoch, *duration, *grace)
	fmt.Println("| hostile pods send | hostile answers | TokenReviews | team reports recorded | p50 | p99 | max | team answers retried | checkpoints acknowledged within grace | worst request to acknowledgement |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, res := range results {
		slices.Sort(res.latencies)
		fmt.Printf("| %s | %s | %.0f | %d of %d | %s | %s | %s | %s | %d of %d | %s |\n", res.attack, res.hostile(), res.reviews,
			len(res.latencies), len(res.latencies)+res.failed, quantile(res.latencies, 0.5), quantile(res.latencies, 0.99),
			quantile(res.latencies, 1), codes(res.retried), res.acked, res.asked, res.worstAck.Round(10*time.Millisecond))
	}
	met := true
	for _, res := range results {
		met = met && res.failed == 0 && quantile(res.latencies, 0.99) < time.Second && res.acked == res.asked
	}
	fmt.Printf("\ntarget (every scenario: the team's report p99 under 1 s, every report recorded, every checkpoint acknowledged within grace) met: %v\n", met)
}

func (r *bench) must(err error) {
	r.b.Helper()
	if err != nil {
		r.b.Fatal(err)
	}
}

func (r *bench) poll(what string, cond func() (bool, string)) {
	r.b.Helper()
	util.Eventually(r.b, 100*time.Millisecond, timeout, what, cond)
}

func (r *bench) namespace(ns string) {
	r.must(r.c.Client.Create(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	r.must(util.WaitDefaultServiceAccount(r.ctx, r.c.Client, ns))
}

// runJob creates a job of n pods, binds its pods to the nodes and returns them once it runs.
func (r *bench) runJob(job *convoy.TrainingJob, n int) []corev1.Pod {
	r.b.Helper()
	job.UID = ""
	r.must(r.c.Client.Create(r.ctx, job))
	var pods []corev1.Pod
	r.poll(fmt.Sprintf("%d pods of %s", n, job.Name), func() (bool, string) {
		list := &corev1.PodList{}
		err := r.c.Client.List(r.ctx, list, client.InNamespace(job.Namespace), client.MatchingLabels{convoy.LabelJobName: job.Name})
		pods = list.Items
		return err == nil && len(pods) == n, fmt.Sprint(len(pods), " pods ", err)
	})
	for i := range pods {
		r.must(r.c.Clientset.CoreV1().Pods(job.Namespace).Bind(r.ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pods[i].Name, Namespace: job.Namespace, UID: pods[i].UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: r.nodes[i%len(r.nodes)].Name},
		}, metav1.CreateOptions{}))
	}
	r.poll(job.Name+" running", func() (bool, string) {
		got := &convoy.TrainingJob{}
		err := r.c.Client.Get(r.ctx, client.ObjectKeyFromObject(job), got)
		return err == nil && got.Status.State == convoy.StateRunning, fmt.Sprint(got.Status.State, " ", err)
	})
	return pods
}

func (r *bench) setupHostile() {
	r.namespace(hostileNS)
	r.hostile = r.runJob(utiltesting.MakeTrainingJob("flood", hostileNS).Workers(int32(*hostilePods)).Obj(), *hostilePods)
}

// roots is the progress endpoint's CA, from a job's ConfigMap.
func (r *bench) roots(namespace, job string) *x509.CertPool {
	cm := &corev1.ConfigMap{}
	r.must(r.c.Client.Get(r.ctx, client.ObjectKey{Namespace: namespace, Name: job + "-config"}, cm))
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data["progress-ca.crt"])) {
		r.b.Fatalf("ConfigMap %s/%s holds no progress CA", namespace, cm.Name)
	}
	return roots
}

// scenario runs the team in namespace ns while the hostile pods send a.
func (r *bench) scenario(ns string, a attack) result {
	r.namespace(ns)
	var pods []corev1.Pod
	for i := range *teamPods {
		job := utiltesting.MakeTrainingJob(fmt.Sprintf("train-%d", i), ns).
			Hyperparameters(convoy.Hyperparameters{Epochs: ptr.To[int32](100000)}).
			Checkpoint(convoy.CheckpointSpec{Enabled: true, PreemptionGraceSeconds: ptr.To(int32(*grace)),
				Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}).Obj()
		pods = append(pods, r.runJob(job, 1)...)
	}
	tokens := make([]string, len(pods))
	for i := range pods {
		tokens[i] = r.podToken(&pods[i])
	}
	roots := r.roots(ns, "train-0")
	res := result{attack: a, hostileCodes: map[int]int{}, retried: map[int]int{}}
	before, err := framework.APIRequests(r.ctx, r.c.Clientset)
	r.must(err)
	began := time.Now()

	attackCtx, stopAttack := context.WithCancel(r.ctx)
	var attackers sync.WaitGroup
	var mu sync.Mutex
	if a != noAttack {
		for i := range r.hostile {
			attackers.Go(func() { r.flood(attackCtx, &r.hostile[i], a, roots, fmt.Sprintf("127.0.1.%d", i+1), &mu, &res) })
		}
		// The team's tokens are first reviewed under the attack.
		time.Sleep(3 * time.Second)
	}

	teamCtx, stopTeam := context.WithTimeout(r.ctx, *duration+time.Duration(*grace)*time.Second)
	var team sync.WaitGroup
	for i := range pods {
		team.Go(func() {
			t := &trainer{pod: &pods[i], token: tokens[i], url: util.EnvOf(&pods[i], "CONVOY_PROGRESS_URL"),
				checkpoints: util.EnvOf(&pods[i], "CONVOY_CHECKPOINT_URI"),
				retried:     map[int]int{},
				hc:          &http.Client{Timeout: 30 * time.Second, Transport: util.ProgressTransport(roots, fmt.Sprintf("127.0.2.%d", i+1))}}
			latencies, failed := t.train(teamCtx)
			mu.Lock()
			res.latencies = append(res.latencies, latencies...)
			res.failed += failed
			for code, n := range t.retried {
				res.retried[code] += n
			}
			mu.Unlock()
		})
	}
	time.Sleep(*duration / 2)
	for i := range pods {
		r.suspend(ns, pods[i].Labels[convoy.LabelJobName])
	}
	res.asked = len(pods)
	r.poll("every checkpoint request answered or expired", func() (bool, string) {
		for i := range pods {
			job := &convoy.TrainingJob{}
			if err := r.c.Client.Get(r.ctx, client.ObjectKey{Namespace: ns, Name: pods[i].Labels[convoy.LabelJobName]}, job); err != nil {
				return false, err.Error()
			}
			if c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionCheckpointRequested); c == nil || c.Status != metav1.ConditionFalse {
				return false, job.Name + ": " + util.ConditionSummary(job.Status.Conditions)
			}
		}
		return true, ""
	})
	for i := range pods {
		job := &convoy.TrainingJob{}
		r.must(r.c.Client.Get(r.ctx, client.ObjectKey{Namespace: ns, Name: pods[i].Labels[convoy.LabelJobName]}, job))
		c := meta.FindStatusCondition(job.Status.Conditions, convoy.ConditionCheckpointRequested)
		if c.Reason == convoy.ReasonCheckpointSaved {
			res.acked++
			if cp := job.Status.Checkpoint; cp != nil && cp.Time != nil {
				res.worstAck = max(res.worstAck, cp.Time.Sub(r.requested(job)))
			}
		}
	}
	// The team's pods stop reporting once their jobs stop; the attack lasts as long.
	team.Wait()
	stopTeam()
	stopAttack()
	attackers.Wait()
	res.elapsed = time.Since(began)
	after, err := framework.APIRequests(r.ctx, r.c.Clientset)
	r.must(err)
	res.reviews = after["POST tokenreviews"] - before["POST tokenreviews"]
	return res
}

// requested is when the job was asked for a checkpoint: its suspension, recorded in the
// annotation suspend left.
func (r *bench) requested(job *convoy.TrainingJob) time.Time {
	at, _ := time.Parse(time.RFC3339Nano, job.Annotations[suspendedAt])
	return at
}

const suspendedAt = "bench.convoy.dev/suspended-at"

// suspend sets spec.suspend, so the operator asks the gang for a checkpoint before stopping it.
func (r *bench) suspend(ns, name string) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"suspend":true}}`, suspendedAt, time.Now().UTC().Format(time.RFC3339Nano))
	job := &convoy.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.must(r.c.Client.Patch(r.ctx, job, client.RawPatch("application/merge-patch+json", []byte(patch))))
}

// podToken mints the token the kubelet would project into the pod for the progress audience.
func (r *bench) podToken(pod *corev1.Pod) string {
	tr, err := r.c.Clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(r.ctx, "default", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			Audiences:         []string{progressapi.Audience},
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	r.must(err)
	return tr.Status.Token
}

// flood posts hostileRate requests a second from source to pod's job endpoint until ctx ends, at
// most 8 at a time; the answers' codes land in res.
func (r *bench) flood(ctx context.Context, pod *corev1.Pod, a attack, roots *x509.CertPool, source string, mu *sync.Mutex, res *result) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: util.ProgressTransport(roots, source)}
	defer hc.CloseIdleConnections()
	url := util.EnvOf(pod, "CONVOY_PROGRESS_URL") + "/progress"
	tick := time.NewTicker(time.Second / time.Duration(*hostileRate))
	defer tick.Stop()
	slots := make(chan struct{}, 8)
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			continue
		}
		token := util.RandomToken()
		if a == forgedTokens {
			token = util.ForgedProgressToken(pod.Namespace, pod.Name, string(pod.UID))
		}
		inFlight.Go(func() {
			defer func() { <-slots }()
			code, _, _ := post(ctx, hc, url, token, progressapi.Report{Epoch: ptr.To[int32](1)})
			if code == 0 && ctx.Err() != nil {
				return // cut off by the end of the attack
			}
			mu.Lock()
			res.hostileSent++
			res.hostileCodes[code]++
			mu.Unlock()
		})
	}
}

// trainer plays a team pod's training code.
type trainer struct {
	pod         *corev1.Pod
	token       string
	url         string
	checkpoints string
	hc          *http.Client

	mu      sync.Mutex
	retried map[int]int
}

// errStopped is an answer that ends the pod's reporting: its gang was stopped.
var errStopped = errors.New("stopped")

// train reports an epoch every -epoch until ctx ends or the gang is stopped, and a checkpoint a
// second after a reply asks for one. It returns the latencies of the reports recorded and how many
// were not recorded while the gang ran.
func (t *trainer) train(ctx context.Context) ([]time.Duration, int) {
	defer t.hc.CloseIdleConnections()
	var latencies []time.Duration
	failed := 0
	asked := false
	var checkpoint sync.WaitGroup
	defer checkpoint.Wait()
	tick := time.NewTicker(*epoch)
	defer tick.Stop()
	for e := int32(1); ; e++ {
		began := time.Now()
		reply, err := t.report(ctx, "progress", progressapi.Report{Epoch: ptr.To(e)})
		switch {
		case errors.Is(err, errStopped):
			return latencies, failed
		case err != nil && ctx.Err() != nil:
			// Still retrying when the scenario ended: never recorded.
			return latencies, failed + 1
		case err != nil:
			failed++
		default:
			latencies = append(latencies, time.Since(began))
		}
		if reply.CheckpointRequested && !asked {
			asked = true
			checkpoint.Go(func() {
				time.Sleep(time.Second) // writing the checkpoint
				_, _ = t.report(ctx, "checkpoint", progressapi.Checkpoint{Path: fmt.Sprintf("%s/epoch-%d", t.checkpoints, e), Epoch: e})
			})
		}
		select {
		case <-ctx.Done():
			return latencies, failed
		case <-tick.C:
		}
	}
}

// report posts body to kind until it is recorded, retrying 429, 503 and network errors after
// Retry-After (1 s without one) as the SDK does; errStopped when the answer says the gang stopped.
func (t *trainer) report(ctx context.Context, kind string, body any) (progressapi.Reply, error) {
	for {
		code, answer, retryAfter := post(ctx, t.hc, t.url+"/"+kind, t.token, body)
		var reply progressapi.Reply
		switch {
		case code == http.StatusNoContent:
			return reply, nil
		case code == http.StatusOK:
			return reply, json.Unmarshal(answer, &reply)
		case code == http.StatusForbidden || code == http.StatusConflict || code == http.StatusNotFound:
			return reply, errStopped
		case code != 0 && code != http.StatusTooManyRequests && code < 500:
			return reply, fmt.Errorf("POST %s from %s = %d %s", kind, t.pod.Name, code, answer)
		}
		t.mu.Lock()
		t.retried[code]++
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return reply, ctx.Err()
		case <-time.After(retryAfter):
		}
	}
}

// post sends one request; code 0 is a failed request. It returns the answer and its Retry-After.
func post(ctx context.Context, hc *http.Client, url, token string, body any) (int, []byte, time.Duration) {
	payload, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, time.Second
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), time.Second
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	retryAfter := time.Second
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		retryAfter = time.Duration(s) * time.Second
	}
	return resp.StatusCode, answer, retryAfter
}

// hostile is the hostile pods' rate and answers.
func (res result) hostile() string {
	if res.attack == noAttack {
		return "-"
	}
	return fmt.Sprintf("%.0f/s: %s", float64(res.hostileSent)/res.elapsed.Seconds(), codes(res.hostileCodes))
}

// codes lists counts by HTTP status ("3 × 429"; 0 is a failed request), "none" when empty.
func codes(byCode map[int]int) string {
	if len(byCode) == 0 {
		return "none"
	}
	var out []string
	for _, code := range slices.Sorted(maps.Keys(byCode)) {
		out = append(out, fmt.Sprintf("%d × %d", byCode[code], code))
	}
	return strings.Join(out, ", ")
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return sorted[i].Round(time.Millisecond)
}
