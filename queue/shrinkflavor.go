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

package queue

import (
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/util/priority"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/elastic"
)

// shrinksFor decides which elastic peers shrink so that waiting, which asks for asks GPUs, fits in
// one GPU flavor of ClusterQueue cq that its pods can use (usableGPUFlavors): none when its GPUs
// fit in such a flavor's free nominal quota less inFlight (GPUs that shrinks asked before free
// later), and otherwise the shrinks of the peers admitted to the first flavor, in the
// ClusterQueue's order (Kueue's), whose shrinks free what it lacks there. lack is the GPUs waiting
// lacks in the flavor decided; ≤ 0 when its GPUs fit; asks when it can use no flavor.
func (r *Resizer) shrinksFor(ctx context.Context, cq *kueue.ClusterQueue, waiting *kueue.Workload, asks, inFlight int32,
	peers []elastic.Job, running map[client.ObjectKey]runningSlice) (decided []elastic.Resize, lack int32, err error) {
	flavors, err := r.usableGPUFlavors(ctx, cq, waiting)
	if err != nil || len(flavors) == 0 {
		return nil, asks, err
	}
	lacks := make([]int32, len(flavors))
	for i, f := range flavors {
		if lacks[i] = asks - inFlight - freeGPUs(cq, map[kueue.ResourceFlavorReference]bool{f: true}); lacks[i] <= 0 {
			return nil, lacks[i], nil
		}
	}
	for i, f := range flavors {
		if d := elastic.Shrink(admittedTo(peers, running, f), lacks[i], priority.Priority(waiting)); len(d) > 0 {
			return d, lacks[i], nil
		}
	}
	return nil, lacks[0], nil
}

// admittedTo keeps the peers whose running Workload slice holds GPUs of flavor f.
func admittedTo(peers []elastic.Job, running map[client.ObjectKey]runningSlice, f kueue.ResourceFlavorReference) []elastic.Job {
	var out []elastic.Job
	for _, j := range peers {
		ns, name, _ := strings.Cut(j.Key, "/")
		if s, ok := running[client.ObjectKey{Namespace: ns, Name: name}]; ok && gpuFlavors(s.wl)[f] {
			out = append(out, j)
		}
	}
	return out
}

// usableGPUFlavors are the flavors of ClusterQueue cq's resource group of nvidia.com/gpu, in its
// order, on which the Workload's pods can run as Kueue assigns flavors: every pod set tolerates the
// flavor's taints (with the flavor's own tolerations), and its nodeSelector asks no other value of
// a label that a flavor of the group sets. Required node affinity is not looked at: a flavor it
// excludes counts as usable.
func (r *Resizer) usableGPUFlavors(ctx context.Context, cq *kueue.ClusterQueue, wl *kueue.Workload) ([]kueue.ResourceFlavorReference, error) {
	for _, rg := range cq.Spec.ResourceGroups {
		if !slices.Contains(rg.CoveredResources, convoy.ResourceGPU) {
			continue
		}
		flavors := map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor{}
		keys := sets.New[string]()
		for _, fq := range rg.Flavors {
			rf := &kueue.ResourceFlavor{}
			if err := r.Client.Get(ctx, client.ObjectKey{Name: string(fq.Name)}, rf); err != nil {
				if client.IgnoreNotFound(err) != nil {
					return nil, err
				}
				continue // Kueue admits nothing to a flavor that does not exist
			}
			flavors[fq.Name] = rf
			keys.Insert(slices.Collect(maps.Keys(rf.Spec.NodeLabels))...)
		}
		var out []kueue.ResourceFlavorReference
		for _, fq := range rg.Flavors {
			if rf := flavors[fq.Name]; rf != nil && podsCanUse(wl, rf, keys) {
				out = append(out, fq.Name)
			}
		}
		return out, nil
	}
	return nil, nil
}

// podsCanUse reports whether every pod set of the Workload can run on flavor rf (usableGPUFlavors);
// keys are the node labels the flavors of its resource group set.
func podsCanUse(wl *kueue.Workload, rf *kueue.ResourceFlavor, keys sets.Set[string]) bool {
	scheduling := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	for i := range wl.Spec.PodSets {
		spec := &wl.Spec.PodSets[i].Template.Spec
		for k, v := range spec.NodeSelector {
			if keys.Has(k) && rf.Spec.NodeLabels[k] != v {
				return false
			}
		}
		tolerations := append(slices.Clone(spec.Tolerations), rf.Spec.Tolerations...)
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), rf.Spec.NodeTaints, tolerations, scheduling, true); untolerated {
			return false
		}
	}
	return true
}
