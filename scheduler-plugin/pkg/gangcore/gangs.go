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
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// gangRegistry knows who makes up each gang: the pods labelled for each PodGroup (an index of the
// scheduler's pod informer), the node of each pod this scheduler bound before the informer shows
// it, and each PodGroup's minMember and creation time.
type gangRegistry struct {
	// byGang indexes pods by "namespace/podgroup"; the informer keeps it, without mu.
	byGang toolscache.Indexer
	// boundTo holds, by UID, the node of each pod this scheduler bound, until the pod is deleted:
	// the pod informer shows a binding moments later, and a gang's pods collected in between
	// (its leader, a new plan) must not count a bound pod as pending. Without mu, as byGang:
	// PreEnqueue reads it under the scheduling queue's lock.
	boundTo sync.Map

	// mu guards groups, upstream, unseen and told.
	mu sync.RWMutex
	// groups holds each PodGroup's minMember and creation time, by "namespace/name".
	groups map[string]podGroupInfo
	// upstream holds the same of each scheduling.k8s.io PodGroup, whose gang.minCount is its
	// minMember: read for a gang that has no scheduler-plugins PodGroup of its name.
	upstream map[string]podGroupInfo
	// unseen holds the PodGroups that pods were held for before the registry saw them.
	unseen map[string]bool
	// told holds, by gang, why its pods are, or are about to be, told it is incomplete.
	told map[string]string
}

// podGroupInfo is what the plugins need of a PodGroup.
type podGroupInfo struct {
	minMember int32
	created   time.Time
}

func newGangRegistry(byGang toolscache.Indexer) *gangRegistry {
	return &gangRegistry{byGang: byGang, groups: map[string]podGroupInfo{}, upstream: map[string]podGroupInfo{},
		unseen: map[string]bool{}, told: map[string]string{}}
}

// podGroupIndex indexes pods by "namespace/podgroup".
const podGroupIndex = "convoy.dev/pod-group"

func indexByGang(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		if pg := PodGroupName(p); pg != "" {
			return []string{p.Namespace + "/" + pg}, nil
		}
	}
	return nil, nil
}

// members returns the pods labelled for PodGroup namespace/name, as Coscheduling counts them.
func (r *gangRegistry) members(namespace, name string) []*corev1.Pod {
	objs, err := r.byGang.ByIndex(podGroupIndex, namespace+"/"+name)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// memberCount is how many pods are labelled for PodGroup namespace/name. (Not IndexKeys, which
// sorts the keys: PreEnqueue counts them for every pod.)
func (r *gangRegistry) memberCount(namespace, name string) int {
	objs, err := r.byGang.ByIndex(podGroupIndex, namespace+"/"+name)
	if err != nil {
		return 0
	}
	return len(objs)
}

// pendingMembers are the PodGroup's pods that are neither bound nor going, by "namespace/name" as
// Activate takes them.
func (r *gangRegistry) pendingMembers(namespace, name string) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, p := range r.members(namespace, name) {
		if r.nodeOf(p) == "" && p.DeletionTimestamp == nil {
			out[p.Namespace+"/"+p.Name] = p
		}
	}
	return out
}

// nodeOf is the node the pod is bound to, by the informer or, before it shows the binding, by
// this scheduler; "" while it is not bound.
func (r *gangRegistry) nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if n, ok := r.boundTo.Load(p.UID); ok {
		return n.(string)
	}
	return ""
}

// bound records that this scheduler bound the pod to node.
func (r *gangRegistry) bound(uid types.UID, node string) { r.boundTo.Store(uid, node) }

// podDeleted forgets where a deleted pod was bound.
func (r *gangRegistry) podDeleted(uid types.UID) { r.boundTo.Delete(uid) }

// setPodGroup records a PodGroup and reports whether pods were held for it before it was seen.
func (r *gangRegistry) setPodGroup(pg *schedv1alpha1.PodGroup) (held bool) {
	return r.set(r.groups, pg.Namespace+"/"+pg.Name, podGroupInfo{minMember: pg.Spec.MinMember, created: pg.CreationTimestamp.Time})
}

// setUpstreamPodGroup records a scheduling.k8s.io PodGroup, as setPodGroup does.
func (r *gangRegistry) setUpstreamPodGroup(key string, info podGroupInfo) (held bool) {
	return r.set(r.upstream, key, info)
}

func (r *gangRegistry) set(groups map[string]podGroupInfo, key string, info podGroupInfo) (held bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	groups[key] = info
	held = r.unseen[key]
	delete(r.unseen, key)
	return held
}

// deletePodGroup forgets the PodGroup namespace/name, scheduler-plugins' or (upstream)
// scheduling.k8s.io's.
func (r *gangRegistry) deletePodGroup(key string, upstream bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if upstream {
		delete(r.upstream, key)
	} else {
		delete(r.groups, key)
	}
	delete(r.told, key)
}

func (r *gangRegistry) podGroup(namespace, name string) (podGroupInfo, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lookup(namespace + "/" + name)
}

// lookup is the PodGroup key's: scheduler-plugins', or else scheduling.k8s.io's. mu is held.
func (r *gangRegistry) lookup(key string) (podGroupInfo, bool) {
	if pg, ok := r.groups[key]; ok {
		return pg, true
	}
	pg, ok := r.upstream[key]
	return pg, ok
}

// incomplete says why the gang of pod, a pod of PodGroup pg, cannot be scheduled yet: its
// PodGroup is not seen, or fewer pods are labelled for it than its minMember; "" when it is
// complete. Only with record does it remember a missing PodGroup (for setPodGroup to report) and
// what the gang's pods are told: tell is true when the reason is new, and its pods are to be told.
func (r *gangRegistry) incomplete(namespace, pg string, record bool) (why string, tell bool) {
	key := namespace + "/" + pg
	r.mu.Lock()
	defer r.mu.Unlock()
	if info, ok := r.lookup(key); !ok {
		why = fmt.Sprintf("waiting for PodGroup %s: create it, or remove the pod's %s label", key, schedv1alpha1.PodGroupLabel)
		if record {
			r.unseen[key] = true
		}
	} else if n := int(info.minMember) - r.memberCount(namespace, pg); n > 0 {
		why = fmt.Sprintf("waiting for %d more pod(s) of gang %s (minMember %d)", n, key, info.minMember)
	}
	if !record {
		return why, false
	}
	switch told, ok := r.told[key]; {
	case why != "" && why != told:
		r.told[key] = why
		return why, true
	case why == "" && ok:
		delete(r.told, key)
	}
	return why, false
}
