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

// Command realnode measures Convoy's overhead on real nodes: the time from `kubectl apply` of a
// 2-worker PyTorch TrainingJob to the first training epoch logged, against the same pods (same
// image, same nodes, same environment) created by hand with `kubectl apply` as plain pods and a
// headless Service. Both are read from the kubelet's log timestamps. It needs root.
//
//	go run ./test/bench/realnode -rounds 3
//
// With -checkpoint-mb it measures instead the SDK's checkpoint throughput to a local S3 server
// against a local directory.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
)

const namespace = "bench"

func main() {
	rounds := flag.Int("rounds", 3, "Measured rounds of each contender, after one warm-up round that pulls the image on both nodes.")
	checkpointMB := flag.Int("checkpoint-mb", 0, "Instead, save and load a checkpoint of this many MiB through the SDK to a local S3 server and to a local directory, -rounds times (no root needed).")
	flag.Parse()
	run := run
	if *checkpointMB > 0 {
		run = func(rounds int) error { return checkpointThroughput(*checkpointMB, rounds) }
	}
	if err := run(*rounds); err != nil {
		fmt.Fprintln(os.Stderr, "bench realnode:", err)
		os.Exit(1)
	}
}

func run(rounds int) (err error) {
	ctx := context.Background()
	kwokArgs, err := stack.KwokArgs(ctx)
	if err != nil {
		return err
	}
	c, err := framework.Start(ctx, framework.Options{RealNodes: true, KwokArgs: kwokArgs,
		AddToScheme: realstack.AddToScheme})
	if err != nil {
		return err
	}
	defer func() {
		if serr := c.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	e, err := realstack.Start(ctx, c, nil)
	if err != nil {
		return err
	}
	if err := e.StoryQueue(ctx, namespace); err != nil {
		return err
	}
	if err := realstack.CheckpointVolume(ctx, c, namespace, "checkpoints"); err != nil {
		return err
	}
	fmt.Printf("Real nodes: %d; image %s\n", len(e.Nodes), e.Image("convoy-trainer"))
	var convoyTimes, plainTimes []time.Duration
	for r := 0; r <= rounds; r++ {
		name := fmt.Sprintf("cvbench-%d", r)
		ct, pods, svc, cms, err := convoyRound(ctx, e, name)
		if err != nil {
			return err
		}
		pt, err := plainRound(ctx, e, name, fmt.Sprintf("plain-%d", r), pods, svc, cms)
		if err != nil {
			return err
		}
		label := fmt.Sprintf("round %d", r)
		if r == 0 {
			label = "warm-up (image pull)"
		} else {
			convoyTimes, plainTimes = append(convoyTimes, ct), append(plainTimes, pt)
		}
		fmt.Printf("%-22s Convoy %6.2fs   plain pods %6.2fs\n", label, ct.Seconds(), pt.Seconds())
	}
	mc, mp := median(convoyTimes), median(plainTimes)
	fmt.Printf("\n| apply → first epoch logged (median of %d) | Convoy TrainingJob | plain pods + Service | ratio |\n|---|---|---|---|\n", rounds)
	fmt.Printf("| 2 workers, gloo, 2 real nodes | %.2f s | %.2f s | %.2f× |\n", mc.Seconds(), mp.Seconds(), mc.Seconds()/mp.Seconds())
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// convoyRound applies a TrainingJob of the digits example for one epoch and returns the time to
// rank 0's first epoch, with the pods, Service and ConfigMaps Convoy made for it.
func convoyRound(ctx context.Context, e *realstack.Env, name string) (time.Duration, []corev1.Pod, *corev1.Service, []corev1.ConfigMap, error) {
	if err := e.Apply(ctx, e.TrainingJob(namespace, name, 1, "0")); err != nil {
		return 0, nil, nil, nil, err
	}
	tj := &convoy.TrainingJob{}
	if err := c(e).Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, tj); err != nil {
		return 0, nil, nil, nil, err
	}
	d, err := firstEpoch(ctx, e, name+"-worker-0", tj.CreationTimestamp.Time)
	if err != nil {
		return 0, nil, nil, nil, err
	}
	pods := &corev1.PodList{}
	if err := c(e).List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{convoy.LabelJobName: name}); err != nil {
		return 0, nil, nil, nil, err
	}
	svc := &corev1.Service{}
	if err := c(e).Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, svc); err != nil {
		return 0, nil, nil, nil, err
	}
	cms := &corev1.ConfigMapList{}
	if err := c(e).List(ctx, cms, client.InNamespace(namespace)); err != nil {
		return 0, nil, nil, nil, err
	}
	var own []corev1.ConfigMap
	for _, cm := range cms.Items {
		if strings.HasPrefix(cm.Name, name+"-") {
			own = append(own, cm)
		}
	}
	if err := c(e).Delete(ctx, tj); err != nil {
		return 0, nil, nil, nil, err
	}
	return d, pods.Items, svc, own, waitGone(ctx, e, name)
}

// plainRound creates Convoy's pods of job as plain pods named after plain, pinned to the same
// nodes, with copies of its Service and ConfigMaps, and returns the time to rank 0's first epoch.
func plainRound(ctx context.Context, e *realstack.Env, job, plain string, pods []corev1.Pod, svc *corev1.Service, cms []corev1.ConfigMap) (time.Duration, error) {
	var objs []client.Object
	for i := range cms {
		cm := &corev1.ConfigMap{}
		if err := rename(&cms[i], cm, job, plain); err != nil {
			return 0, err
		}
		objs = append(objs, cm)
	}
	s := &corev1.Service{}
	if err := rename(svc, s, job, plain); err != nil {
		return 0, err
	}
	s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, nil
	objs = append(objs, s)
	for i := range pods {
		p := &corev1.Pod{}
		if err := rename(&pods[i], p, job, plain); err != nil {
			return 0, err
		}
		p.Spec.SchedulingGates = nil
		p.Status = corev1.PodStatus{}
		// Reporting to the operator is Convoy's; the pods do without it.
		ct := &p.Spec.Containers[0]
		ct.Env = slices.DeleteFunc(ct.Env, func(v corev1.EnvVar) bool { return v.Name == "CONVOY_PROGRESS_URL" })
		objs = append(objs, p)
	}
	began := time.Now()
	for _, o := range objs {
		if err := c(e).Create(ctx, o); err != nil {
			return 0, err
		}
	}
	d, err := firstEpoch(ctx, e, plain+"-worker-0", began)
	if err != nil {
		return 0, err
	}
	for _, o := range objs {
		if err := c(e).Delete(ctx, o, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return 0, err
		}
	}
	return d, waitGone(ctx, e, plain)
}

// rename copies in to out with every occurrence of from replaced by to, without the server's
// metadata and owner references.
func rename(in, out client.Object, from, to string) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), from, to)), out); err != nil {
		return err
	}
	out.SetResourceVersion("")
	out.SetUID("")
	out.SetCreationTimestamp(metav1.Time{})
	out.SetManagedFields(nil)
	out.SetOwnerReferences(nil)
	out.SetFinalizers(nil)
	return nil
}

// firstEpoch waits for "epoch=1/" in pod's log and returns the kubelet's timestamp of that line
// minus since.
func firstEpoch(ctx context.Context, e *realstack.Env, pod string, since time.Time) (time.Duration, error) {
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		out, err := e.Kubectl(ctx, "logs", "-n", namespace, pod, "--timestamps")
		if err != nil {
			return false, nil
		}
		for _, line := range strings.Split(out, "\n") {
			ts, text, ok := strings.Cut(line, " ")
			if ok && strings.Contains(text, "epoch=1/") {
				at, err = time.Parse(time.RFC3339Nano, ts)
				return err == nil, err
			}
		}
		return false, nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for the first epoch of %s: %w", pod, err)
	}
	return at.Sub(since), nil
}

// waitGone waits until no pod named <prefix>-... is left.
func waitGone(ctx context.Context, e *realstack.Env, prefix string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := c(e).List(ctx, pods, client.InNamespace(namespace)); err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, prefix+"-") {
				return false, nil
			}
		}
		return true, nil
	})
}

func c(e *realstack.Env) client.Client { return e.Cluster.Client }
