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
	"context"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/stack"
)

// nodeFault takes a node from under a running gang and gives it back.
type nodeFault struct {
	ns, scenario, faults string
	fail, heal           func(ctx context.Context, node string) error
}

// nodeGang is the size of the gang a node is taken from: whole nodes, so that it moves to others.
const nodeGang, nodeGPUs = 4, 8

// Nodes takes a node from under a running gang in two ways at once, each with a gang of its own:
// its kubelet reports NotReady (it still renews the node's Lease and runs its pods), and it is
// partitioned from the API server (kwok renews nothing of it and moves none of its pods, as a
// kubelet that cannot reach the API server). The node lifecycle controller of kube-controller-manager
// marks the node and taints it; the gang must be whole again on other nodes, from its checkpoint,
// within wholeAgain of the node's NotReady, with no pod of its old attempt alive beside the new one.
func (r *Runner) Nodes(ctx context.Context) ([]Result, error) {
	faults := []nodeFault{
		{ns: "chaos-node-notready", scenario: "node NotReady under a running gang", faults: "its kubelet reports NotReady (Lease renewed, pods run on)",
			fail: r.reportNotReady, heal: r.reportReady},
		{ns: "chaos-node-partition", scenario: "node partitioned under a running gang", faults: "cut from the API server (no Lease renewal, no node or pod status)",
			fail: r.partition, heal: r.reconnect},
	}
	results := make([]Result, len(faults))
	var g errgroup.Group
	for i, f := range faults {
		g.Go(func() error {
			var err error
			results[i], err = r.loseNode(ctx, f)
			return err
		})
	}
	return results, g.Wait()
}

// loseNode runs one nodeFault under a gang of its own.
func (r *Runner) loseNode(ctx context.Context, f nodeFault) (Result, error) {
	const name = "gang"
	res := Result{Scenario: f.scenario, Jobs: 1,
		Target: "gang whole again on other nodes < " + seconds(wholeAgain) + " after the node's NotReady, from its checkpoint; " + allZero}
	if err := r.queue(ctx, f.ns); err != nil {
		return res, err
	}
	began := time.Now()
	// Epochs enough to run through the fault; the runner ends the job once it has moved.
	checkpoints := func(j *convoy.TrainingJob) {
		j.Spec.Checkpoint = &convoy.CheckpointSpec{Enabled: true, Storage: &convoy.CheckpointStorage{Type: convoy.StorageS3, S3Bucket: "ckpt"}}
	}
	if err := r.createJob(ctx, f.ns, name, nodeGang, nodeGPUs, 100000, checkpoints); err != nil {
		return res, err
	}
	gang := types.NamespacedName{Namespace: f.ns, Name: name}
	running, err := r.runningAtKill(ctx, f.ns)
	if err != nil {
		return res, err
	}
	// The gang has saved a checkpoint to resume from.
	var checkpoint string
	if err := retry(ctx, 2*time.Minute, func() error {
		job := &convoy.TrainingJob{}
		if err := r.k.Get(ctx, gang, job); err != nil {
			return err
		}
		if cp := job.Status.Checkpoint; cp != nil && cp.Latest != "" {
			checkpoint = cp.Latest
			return nil
		}
		return fmt.Errorf("%s has reported no checkpoint", gang)
	}); err != nil {
		return res, err
	}
	var node, attempt string
	for _, p := range r.w.livePods(gang) {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			node, attempt = p.Spec.NodeName, p.Labels[convoy.LabelRestartAttempt]
			break
		}
	}
	if running == 0 || node == "" {
		res.Missed = "the gang was not running when its node was to be taken"
		return res, nil
	}
	failed := time.Now()
	if err := f.fail(ctx, node); err != nil {
		return res, err
	}
	notReady, err := waitNotReady(ctx, r.k, node)
	if err != nil {
		return res, err
	}
	r.log("%s: node %s NotReady %s after the fault", f.ns, node, seconds(notReady.Sub(failed)))
	resumed, err := r.waitMoved(ctx, gang, attempt, node)
	if err != nil {
		return res, err
	}
	whole := time.Since(notReady)
	r.log("%s: gang whole again on other nodes %s after the NotReady, resuming from %q", f.ns, seconds(whole), resumed)
	if err := f.heal(ctx, node); err != nil {
		return res, err
	}
	if err := r.finishGang(ctx, gang); err != nil {
		return res, err
	}
	out, err := r.waitJobs(ctx, f.ns, []string{name}, began, r.cfg.Deadline)
	if err != nil {
		return res, err
	}
	res.Faults = fmt.Sprintf("node %s of a running gang of %d × %d GPUs: %s", node, nodeGang, nodeGPUs, f.faults)
	res.Times = fmt.Sprintf("NotReady %s after the fault; gang whole again on other nodes %s after the NotReady", seconds(notReady.Sub(failed)), seconds(whole))
	res = r.row(res, f.ns, out)
	res.Met = res.Met && resumed != ""
	res.within("gang whole again", whole, wholeAgain)
	if resumed == "" {
		r.log("%s: the new attempt resumes from no checkpoint; %q was saved before the fault", f.ns, checkpoint)
	}
	return res, nil
}

// waitNotReady waits until the node's Ready condition is no longer True and returns when it was
// seen so.
func waitNotReady(ctx context.Context, k client.Client, name string) (time.Time, error) {
	var at time.Time
	err := retry(ctx, 3*time.Minute, func() error {
		ready, err := nodeReady(ctx, k, name)
		if err == nil && ready {
			err = fmt.Errorf("node %s is still Ready", name)
		}
		at = time.Now()
		return err
	})
	return at, err
}

// nodeReady says whether the node's Ready condition is True.
func nodeReady(ctx context.Context, k client.Client, name string) (bool, error) {
	node := &corev1.Node{}
	if err := k.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return false, err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// waitMoved waits until every pod of a later attempt than attempt runs, none on node, and returns
// the checkpoint they resume from.
func (r *Runner) waitMoved(ctx context.Context, gang types.NamespacedName, attempt, node string) (string, error) {
	old, _ := strconv.Atoi(attempt)
	var resume string
	err := retry(ctx, r.cfg.Deadline, func() error {
		n := 0
		for _, p := range r.w.livePods(gang) {
			a, _ := strconv.Atoi(p.Labels[convoy.LabelRestartAttempt])
			if a > old && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != node {
				n++
				for _, e := range p.Spec.Containers[0].Env {
					if e.Name == "CONVOY_RESUME_FROM" {
						resume = e.Value
					}
				}
			}
		}
		if n < nodeGang {
			return fmt.Errorf("%d of %d pods of %s run again off node %s", n, nodeGang, gang, node)
		}
		return nil
	})
	return resume, err
}

// finishGang makes the gang's running workers exit 0, as simtrainer does after the last epoch.
func (r *Runner) finishGang(ctx context.Context, gang types.NamespacedName) error {
	for _, p := range r.w.livePods(gang) {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+stack.AnnotationSimExitCode+`":"0"}}}`))
		if err := client.IgnoreNotFound(r.k.Patch(ctx, p.DeepCopy(), patch)); err != nil {
			return err
		}
	}
	return nil
}

// reportNotReady writes, as the node's kubelet would when its container runtime is down, Ready
// False into the node's status; AnnotationSimNodeNotReady keeps kwok from making it Ready again.
func (r *Runner) reportNotReady(ctx context.Context, name string) error {
	node := &corev1.Node{}
	if err := r.k.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return err
	}
	patch := client.MergeFrom(node.DeepCopy())
	metav1.SetMetaDataAnnotation(&node.ObjectMeta, stack.AnnotationSimNodeNotReady, "true")
	if err := r.k.Patch(ctx, node, patch); err != nil {
		return err
	}
	return retry(ctx, 30*time.Second, func() error {
		if err := r.k.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		now := metav1.Now()
		for i, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				node.Status.Conditions[i] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
					Reason: "KubeletNotReady", Message: "container runtime is down", LastHeartbeatTime: now, LastTransitionTime: now}
			}
		}
		return r.k.Status().Update(ctx, node)
	})
}

// reportReady lets kwok make the node Ready again.
func (r *Runner) reportReady(ctx context.Context, name string) error {
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+stack.AnnotationSimNodeNotReady+`":null}}}`))
	return r.k.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, patch)
}

// partitionHolder holds a partitioned node's Lease: kwok leaves alone a node whose Lease another
// holds, renewing nothing of it and moving none of its pods.
const partitionHolder = "chaos-partition"

// partition cuts the node from the API server: its Lease passes, unrenewed, to partitionHolder for
// an hour, so that kwok stops acting as its kubelet while the node lifecycle controller sees no renewal.
func (r *Runner) partition(ctx context.Context, name string) error {
	return retry(ctx, 30*time.Second, func() error {
		lease := &coordinationv1.Lease{}
		if err := r.k.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, lease); err != nil {
			return err
		}
		lease.Spec.HolderIdentity = ptr.To(partitionHolder)
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		// The cut comes just after a renewal: from 1.37 the node lifecycle controller marks a node
		// NotReady only once its cache holds the Lease the API server serves, and it takes up a
		// Lease only when its renewTime moves on.
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		return r.k.Update(ctx, lease)
	})
}

// reconnect gives the node back to kwok: it creates the Lease again and makes the node Ready.
func (r *Runner) reconnect(ctx context.Context, name string) error {
	return client.IgnoreNotFound(r.k.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name}}))
}
