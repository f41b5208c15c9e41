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
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

// victimTable numbers the gangs and lone pods that hold GPUs, for preemption.
type victimTable struct {
	index map[string]int
	meta  []victimMeta
	list  []planner.Victim
	// leaving holds, by node, the pods of lower priority than the preemptor that hold GPUs there
	// and terminate already: preemption counts their GPUs, CPU and memory as free, and the
	// preemptor waits for them instead of evicting others (see leavingFor).
	leaving map[string][]*corev1.Pod
}

// leavingFor reports whether p, a pod holding GPUs, terminates already and has a lower priority
// than g: a preemption for g waits for it to go rather than evict anything in its place, as
// upstream's DefaultPreemption does not preempt while lower-priority pods terminate on the
// nominated node. Without it, a gang whose victims outlasted victimTerminationSeconds (a
// checkpoint on SIGTERM), or whose scheduler restarted while they terminated, or that came while
// Kueue evicted a job, would evict more gangs for room already on its way.
func leavingFor(p *corev1.Pod, g *gang) bool {
	return p.DeletionTimestamp != nil && GangKey(p) != g.key && corev1helpers.PodPriority(p) < g.priority
}

type victimMeta struct {
	namespace, podGroup, pod string
	jobName                  string
	started                  time.Time
}

// add records a GPU pod of a victim candidate and returns its victim index, or -1 when it may not
// be evicted: a pod of the preemptor's gang, a terminating or static pod, or a lone pod when lone
// pods are protected.
func (vt *victimTable) add(p *corev1.Pod, g *gang, gpus int, lonePods bool) int {
	key := GangKey(p)
	pg := PodGroupName(p)
	if key == g.key || p.DeletionTimestamp != nil || (pg == "" && !lonePods) {
		return -1
	}
	if _, static := p.Annotations[corev1.MirrorPodAnnotationKey]; static {
		return -1
	}
	started := p.CreationTimestamp.Time
	if p.Status.StartTime != nil {
		started = p.Status.StartTime.Time
	}
	i, ok := vt.index[key]
	if !ok {
		i = len(vt.list)
		vt.index[key] = i
		vt.list = append(vt.list, planner.Victim{Key: key, Priority: corev1helpers.PodPriority(p)})
		m := victimMeta{namespace: p.Namespace, podGroup: pg, jobName: p.Labels[convoy.LabelJobName], started: started}
		if pg == "" {
			m.pod = p.Name
		}
		vt.meta = append(vt.meta, m)
	}
	v := &vt.list[i]
	v.Priority = max(v.Priority, corev1helpers.PodPriority(p))
	v.GPUs += gpus
	if started.Before(vt.meta[i].started) {
		vt.meta[i].started = started
	}
	return i
}
