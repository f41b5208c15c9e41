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

// Command simtrainer plays the training code of TrainingJobs whose pods run on fake (kwok) nodes:
// for each running gang it reports one epoch every --epoch-interval to the operator's real HTTPS
// progress endpoint, as rank 0 of a real job would, then a checkpoint. It authenticates as the
// pod: a token for the audience convoy.dev/progress bound to rank 0's pod, minted through the
// TokenRequest API like the projected token the kubelet would mount, and it trusts the CA the
// operator put in the job's ConfigMap.
//
// A gang resumes where its CONVOY_RESUME_FROM checkpoint left off ("<uri>/epoch-<N>"). Accuracy
// climbs linearly to spec.successPolicy.targetAccuracy at the last epoch
// (spec.hyperparameters.epochs, default 10), so a job with a target completes
// (TargetAccuracyReached); it checkpoints every spec.checkpoint.frequency epochs, and at once when
// the operator's reply asks for a checkpoint before a stop. The workers of a job without one exit 0 after its last epoch (the pod
// annotation convoy.dev/sim-exit-code, which kwok's convoy-sim-exit stage of test/e2e/stack turns
// into a Succeeded pod), so it completes with AllWorkersSucceeded.
//
// A job whose hyperparameters.additionalParams set sim-checkpoint to "never" never checkpoints,
// even when asked: a trainer that ignores the operator's request.
//
// A job whose hyperparameters.additionalParams name a sim-objective (test/sweepsim) reports as
// its loss that objective of its additionalParams x and y, epoch by epoch along
// sweepsim.Curve; sim-objective "fail" makes its workers exit 1 at the first epoch.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/sweepsim"
)

const (
	// audience is the operator's progress token audience (operator/pkg/progress).
	audience = "convoy.dev/progress"
	// caKey is the key of the progress endpoint's CA in the job's ConfigMap (operator/pkg/builder).
	caKey = "progress-ca.crt"
	// annotationSimExitCode makes kwok end a fake pod's containers with that exit code
	// (test/e2e/stack.AnnotationSimExitCode).
	annotationSimExitCode = "convoy.dev/sim-exit-code"
	// paramCheckpoint, set to "never" in hyperparameters.additionalParams, makes the gang never
	// checkpoint.
	paramCheckpoint = "sim-checkpoint"
	// defaultEpochs is the operator's default of spec.hyperparameters.epochs.
	defaultEpochs = 10
)

// gang is what simtrainer remembers of one running gang (rank 0's pod).
type gang struct {
	epoch int32
	token string
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig of a user allowed to read TrainingJobs, pods and ConfigMaps and to create ServiceAccount tokens.")
	interval := flag.Duration("epoch-interval", 3*time.Second, "Simulated time per epoch.")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fail(err)
	}
	if err := convoy.AddToScheme(scheme); err != nil {
		fail(err)
	}
	k, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fail(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	t := &trainer{k: k, cs: cs, gangs: map[types.UID]*gang{}}
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		if err := t.step(ctx); err != nil && ctx.Err() == nil {
			fmt.Printf("simtrainer: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

type trainer struct {
	k     client.Client
	cs    kubernetes.Interface
	gangs map[types.UID]*gang
}

// step reports one epoch for every running TrainingJob.
func (t *trainer) step(ctx context.Context) error {
	jobs := &convoy.TrainingJobList{}
	if err := t.k.List(ctx, jobs); err != nil {
		return err
	}
	seen := map[types.UID]bool{}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if job.Status.State != convoy.StateRunning {
			continue
		}
		pod, err := t.rankZero(ctx, job)
		if err != nil || pod == nil {
			continue
		}
		seen[pod.UID] = true
		if err := t.report(ctx, job, pod); err != nil {
			fmt.Printf("simtrainer: %s/%s: %v\n", job.Namespace, job.Name, err)
		}
	}
	for uid := range t.gangs {
		if !seen[uid] {
			delete(t.gangs, uid)
		}
	}
	return nil
}

// rankZero returns the job's running worker of rank 0, of the current restart attempt.
func (t *trainer) rankZero(ctx context.Context, job *convoy.TrainingJob) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := t.k.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{
		convoy.LabelJobName: job.Name, convoy.LabelReplicaRank: "0", convoy.LabelRestartAttempt: strconv.Itoa(int(job.Status.RestartCount)),
	}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Labels[convoy.LabelReplicaRole] != "ps" {
			return p, nil
		}
	}
	return nil, nil
}

func (t *trainer) report(ctx context.Context, job *convoy.TrainingJob, pod *corev1.Pod) error {
	env := map[string]string{}
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
	}
	url := env["CONVOY_PROGRESS_URL"]
	if url == "" {
		return fmt.Errorf("pod %s has no CONVOY_PROGRESS_URL", pod.Name)
	}
	g := t.gangs[pod.UID]
	if g == nil {
		g = &gang{epoch: resumeEpoch(env["CONVOY_RESUME_FROM"])}
		tr, err := t.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, serviceAccount(pod), &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
			Audiences:         []string{audience},
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token for pod %s: %w", pod.Name, err)
		}
		g.token = tr.Status.Token
		t.gangs[pod.UID] = g
		if g.epoch > 0 {
			fmt.Printf("simtrainer: %s/%s resumes from %s (epoch %d)\n", job.Namespace, job.Name, env["CONVOY_RESUME_FROM"], g.epoch)
		}
	}
	total := int32(defaultEpochs)
	if hp := job.Spec.Hyperparameters; hp != nil && hp.Epochs != nil {
		total = *hp.Epochs
	}
	if g.epoch >= total {
		return t.finish(ctx, job, pod)
	}
	httpClient, err := t.httpClient(ctx, pod)
	if err != nil {
		return err
	}
	g.epoch++
	target := 0.9
	if sp := job.Spec.SuccessPolicy; sp != nil && sp.TargetAccuracy != nil {
		target = *sp.TargetAccuracy
	}
	accuracy := math.Round((0.3+(target-0.3)*float64(g.epoch)/float64(total))*1000) / 1000
	loss := math.Round(2.5*math.Pow(0.8, float64(g.epoch))*1000) / 1000
	if params := additionalParams(job); params[sweepsim.ParamObjective] == sweepsim.Fail {
		return t.exit(ctx, job, pod, "1")
	} else if params[sweepsim.ParamObjective] != "" {
		f, err := sweepsim.FromParams(params)
		if err != nil {
			return err
		}
		loss = sweepsim.Curve(f, g.epoch, total)
	}
	reply, err := post(ctx, httpClient, url+"/progress", g.token, map[string]any{
		"epoch": g.epoch, "totalEpochs": total, "step": int(g.epoch) * 100,
		"metrics": map[string]float64{"loss": loss, "accuracy": accuracy},
	})
	if err != nil {
		g.epoch--
		return err
	}
	fmt.Printf("simtrainer: %s/%s epoch %d/%d loss %.3f accuracy %.3f\n", job.Namespace, job.Name, g.epoch, total, loss, accuracy)
	// A checkpoint every CONVOY_CHECKPOINT_FREQUENCY epochs, and at once when the operator asks
	// for one before it stops the gang.
	freq, _ := strconv.Atoi(env["CONVOY_CHECKPOINT_FREQUENCY"])
	asked := reply.CheckpointRequested
	if uri := env["CONVOY_CHECKPOINT_URI"]; uri != "" && job.Spec.Checkpoint != nil && job.Spec.Checkpoint.Enabled &&
		additionalParams(job)[paramCheckpoint] != "never" && (asked || int(g.epoch)%max(freq, 1) == 0) {
		path := fmt.Sprintf("%s/epoch-%d", strings.TrimSuffix(uri, "/"), g.epoch)
		if _, err := post(ctx, httpClient, url+"/checkpoint", g.token, map[string]any{"path": path, "epoch": g.epoch}); err != nil {
			return err
		}
		if asked {
			fmt.Printf("simtrainer: %s/%s checkpointed epoch %d as the operator asked\n", job.Namespace, job.Name, g.epoch)
		}
	}
	return nil
}

// finish makes every worker of a gang that has no target accuracy exit 0 after the last epoch,
// through kwok's convoy-sim-exit stage (test/e2e/stack.AnnotationSimExitCode).
func (t *trainer) finish(ctx context.Context, job *convoy.TrainingJob, rank0 *corev1.Pod) error {
	if sp := job.Spec.SuccessPolicy; sp != nil && sp.TargetAccuracy != nil {
		return nil
	}
	return t.exit(ctx, job, rank0, "0")
}

// additionalParams are the job's hyperparameters.additionalParams.
func additionalParams(job *convoy.TrainingJob) map[string]string {
	if hp := job.Spec.Hyperparameters; hp != nil {
		return hp.AdditionalParams
	}
	return nil
}

// exit makes every worker of the gang exit with code.
func (t *trainer) exit(ctx context.Context, job *convoy.TrainingJob, rank0 *corev1.Pod, code string) error {
	pods := &corev1.PodList{}
	if err := t.k.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{
		convoy.LabelJobName: job.Name, convoy.LabelRestartAttempt: rank0.Labels[convoy.LabelRestartAttempt],
	}); err != nil {
		return err
	}
	// Rank 0 exits last: the next tick finds a gang whose exits were cut short (the API server
	// restarting) through its rank 0, still running, and goes on.
	slices.SortStableFunc(pods.Items, func(a, b corev1.Pod) int {
		return cmp.Compare(boolInt(a.UID == rank0.UID), boolInt(b.UID == rank0.UID))
	})
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, done := p.Annotations[annotationSimExitCode]; done || p.DeletionTimestamp != nil {
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[annotationSimExitCode] = code
		if err := t.k.Patch(ctx, p, patch); err != nil {
			return err
		}
		fmt.Printf("simtrainer: %s/%s worker %s exits %s\n", job.Namespace, job.Name, p.Name, code)
	}
	return nil
}

// httpClient trusts the progress CA from the ConfigMap the pod mounts it from.
func (t *trainer) httpClient(ctx context.Context, pod *corev1.Pod) (*http.Client, error) {
	var cmName string
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			for _, item := range v.ConfigMap.Items {
				if item.Key == caKey {
					cmName = v.ConfigMap.Name
				}
			}
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap == nil {
					continue
				}
				for _, item := range src.ConfigMap.Items {
					if item.Key == caKey {
						cmName = src.ConfigMap.Name
					}
				}
			}
		}
	}
	if cmName == "" {
		return nil, fmt.Errorf("pod %s mounts no progress CA", pod.Name)
	}
	cm := &corev1.ConfigMap{}
	if err := t.k.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: cmName}, cm); err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data[caKey])) {
		return nil, fmt.Errorf("ConfigMap %s has no CA in %s", cmName, caKey)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}, nil
}

// reply is the body of the operator's answer (progress.Reply): set while it asks for a checkpoint.
type reply struct {
	CheckpointRequested bool `json:"checkpointRequested"`
}

func post(ctx context.Context, c *http.Client, url, token string, body any) (reply, error) {
	var r reply
	data, err := json.Marshal(body)
	if err != nil {
		return r, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return r, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		return r, nil
	case http.StatusOK:
		return r, json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&r)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return r, fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
}

// resumeEpoch reads N from a checkpoint path ending in "epoch-N"; 0 without one.
func resumeEpoch(path string) int32 {
	i := strings.LastIndex(path, "epoch-")
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(path[i+len("epoch-"):])
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

func serviceAccount(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "simtrainer:", err)
	os.Exit(1)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
