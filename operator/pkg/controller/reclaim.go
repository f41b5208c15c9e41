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

package controller

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// ReclaimNotice says which node taints and conditions announce a node's removal. A gang with a
// pod on such a node checkpoints (checkpointFirst) and is restarted elsewhere before the node goes,
// without spending backoffLimit or disruptionLimit. A cordoned node (kubectl cordon, the first
// step of kubectl drain, of a cluster autoscaler's scale-down or a node upgrade) is such a notice
// too, unless IgnoreCordon. A pod of the gang evicted from a noticed node (a drain does not wait for
// the checkpoint) moves the gang as the notice does, without spending a budget either.
type ReclaimNotice struct {
	// Taints are taint keys, of any value and effect (convoy.DefaultReclaimNoticeTaints when nil).
	Taints []string
	// Conditions are node condition types that announce the removal while True.
	Conditions []string
	// IgnoreCordon leaves gangs on cordoned nodes: a cordon is not a notice.
	IgnoreCordon bool
}

// DefaultReclaimNotice is the notice of Karpenter, GKE and the AWS node termination handler, and a
// cordon.
var DefaultReclaimNotice = ReclaimNotice{Taints: convoy.DefaultReclaimNoticeTaints}

// orDefault is n, with DefaultReclaimNotice's taints when it names neither taints nor conditions.
func (n ReclaimNotice) orDefault() ReclaimNotice {
	if n.Taints == nil && n.Conditions == nil {
		n.Taints = DefaultReclaimNotice.Taints
	}
	return n
}

// noticeOn returns the reclaim notice the node carries, in words; "" when none.
func (n ReclaimNotice) noticeOn(node *corev1.Node) string {
	if node.Spec.Unschedulable && !n.IgnoreCordon {
		return fmt.Sprintf("node %s is cordoned, to be drained", node.Name)
	}
	for _, t := range node.Spec.Taints {
		if slices.Contains(n.Taints, t.Key) {
			return fmt.Sprintf("node %s carries the reclaim notice taint %s", node.Name, t.ToString())
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Status == corev1.ConditionTrue && slices.Contains(n.Conditions, string(c.Type)) {
			return fmt.Sprintf("node %s has the reclaim notice condition %s (%s)", node.Name, c.Type, c.Reason)
		}
	}
	return ""
}

// stripNode keeps of a cached node what the operator reads: its metadata (no managed fields), its
// taints, its cordon and the conditions of a notice, so that a fleet's nodes cost the cache little.
func (n ReclaimNotice) stripNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{TypeMeta: node.TypeMeta, ObjectMeta: node.ObjectMeta}
	out.ManagedFields = nil
	out.Annotations = nil
	out.Spec.Taints = node.Spec.Taints
	out.Spec.Unschedulable = node.Spec.Unschedulable
	for _, c := range node.Status.Conditions {
		if slices.Contains(n.Conditions, string(c.Type)) {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}
	return out, nil
}

// nodeEvents passes a node's deletion and the arrival of a reclaim notice or of a not-Ready taint on it.
func (n ReclaimNotice) nodeEvents() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			older, newer := asNode(e.ObjectOld), asNode(e.ObjectNew)
			return n.noticeOn(newer) != "" && n.noticeOn(older) == "" || notReadyTaint(newer) != nil && notReadyTaint(older) == nil
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func asNode(o client.Object) *corev1.Node {
	if node, ok := o.(*corev1.Node); ok {
		return node
	}
	return &corev1.Node{}
}

// reclaimedPod returns the notice on the node of a running pod of the gang's current attempt; "" when none.
func reclaimedPod(pods []*corev1.Pod, attempt string, notices map[string]string) string {
	for _, pod := range pods {
		if msg := notices[pod.Spec.NodeName]; msg != "" && pod.DeletionTimestamp == nil && !isFinished(pod) &&
			pod.Labels[convoy.LabelRestartAttempt] == attempt {
			return msg
		}
	}
	return ""
}

// reclaimNotice is the phase of a gang with a running pod on a node that carries a reclaim notice
// (a spot node about to go): after a checkpoint the gang restarts whole on other nodes, spending
// neither backoffLimit nor disruptionLimit.
func (d *decision) reclaimNotice() bool {
	notice := reclaimedPod(d.o.pods, d.t.attempt, d.o.reclaimNotices)
	if notice == "" {
		return false
	}
	if d.waitForCheckpoint(notice) {
		return true
	}
	d.moveOffNotice(notice)
	return true
}

// moveOffNotice restarts the gang whole on other nodes for a reclaim notice (why says which, and
// on what), spending neither backoffLimit nor disruptionLimit.
func (d *decision) moveOffNotice(why string) {
	d.restart(convoy.ReasonNodeReclaimed, why+"; restarting the whole gang on other nodes from the latest checkpoint without spending backoffLimit or disruptionLimit", false)
}
