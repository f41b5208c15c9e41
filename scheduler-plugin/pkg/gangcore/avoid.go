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

package gangcore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// A plan is made from GPUs, topology, resources and the pods' node and inter-pod terms; other
// Filter plugins (volume topology and limits, dynamic resources, any out-of-tree plugin) may still
// reject a planned node. The pod's PostFilter then reports the node here: the plan is dropped and
// the gang's next plans leave the node out for avoidTTL (draAvoidTTL for DynamicResources), so that
// the gang moves on instead of being planned onto the same node again and again.

// avoidTTL is how long a node a filter rejected stays out of a gang's plans.
const avoidTTL = 5 * time.Minute

// draAvoidTTL is avoidTTL for DynamicResources' rejections: the claims of a gang's deleted pods
// stay allocated until kube-controller-manager releases them, a moment after the pods are gone
// (Convoy's count of a node's GPUs has them free at once), so the node is planned again soon, and
// the gang is tried again then.
const draAvoidTTL = 15 * time.Second

// IsDynamicResources reports whether the plugin is kube-scheduler's DRA plugin: upstream's, or
// bindquiet's (the shipped profile's).
func IsDynamicResources(plugin string) bool {
	return plugin == "DynamicResources" || plugin == "BindQuietDynamicResources"
}

// avoidance is why a node is out of a gang's plans.
type avoidance struct {
	plugin, message string
	at              time.Time
	ttl             time.Duration
}

// Rejected reports that a Filter plugin other than GangPlacement rejected the node planned for pod.
func (s *State) Rejected(ctx context.Context, pod *corev1.Pod, node, plugin, message string) {
	key := GangKey(pod)
	// The pod waits in the queue for an event that interests the plugins that rejected it: try
	// the gang again after its backoff, with a plan that leaves the node out.
	retry := func() {
		s.waiters.retry(key, func() map[string]*corev1.Pod { return map[string]*corev1.Pod{key: pod} })
	}
	if pg := PodGroupName(pod); pg != "" {
		retry = func() { s.retryGang(pod.Namespace, pg) }
	}
	defer retry()
	ttl := avoidTTL
	if IsDynamicResources(plugin) {
		ttl = draAvoidTTL
		// The node is back in the plans then: a verdict made without it no longer holds.
		time.AfterFunc(ttl, func() { s.bump(); retry() })
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.avoid.add(key, node, avoidance{plugin: plugin, message: message, at: s.now(), ttl: ttl})
	klog.FromContext(ctx).V(2).Info("A filter rejected the gang's planned node; planning without it",
		"gang", key, "pod", klog.KObj(pod), "node", node, "plugin", plugin, "message", message)
	if s.book.plans[key] != nil {
		s.dropPlanLocked(key, dropNodeRejected, fmt.Sprintf("%s rejected node %s", plugin, node))
	}
}

// avoidList holds, by gang, the planned nodes another plugin's Filter rejected, each out of the
// gang's plans for avoidTTL. It has no lock: State.mu guards it.
type avoidList map[string]map[string]avoidance

// add leaves node out of the gang's plans from a.at.
func (l avoidList) add(key, node string, a avoidance) {
	m := l[key]
	if m == nil {
		m = map[string]avoidance{}
		l[key] = m
	}
	m[node] = a
}

// avoided returns the nodes out of the gang's plans at now, forgetting those out for avoidTTL.
func (l avoidList) avoided(key string, now time.Time) map[string]avoidance {
	m := l[key]
	for node, a := range m {
		if now.Sub(a.at) >= a.ttl {
			delete(m, node)
		}
	}
	if len(m) == 0 {
		delete(l, key)
		return nil
	}
	return m
}

// forget puts every node back in the gang's plans: the gang changed, or it is bound.
func (l avoidList) forget(key string) { delete(l, key) }

// avoidedMessage says which nodes a gang that does not fit left out, and why, for its message.
func avoidedMessage(m map[string]avoidance) string {
	if len(m) == 0 {
		return ""
	}
	nodes := make([]string, 0, len(m))
	for n := range m {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	var b strings.Builder
	fmt.Fprintf(&b, "; left out after a filter rejected the plan there: ")
	for i, n := range nodes {
		if i == 3 {
			fmt.Fprintf(&b, ", and %d more", len(nodes)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s: %s)", n, m[n].plugin, m[n].message)
	}
	return b.String()
}
