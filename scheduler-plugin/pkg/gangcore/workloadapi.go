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
	"math"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// UpstreamPodGroupGVK is Kubernetes' own PodGroup (1.37, where the cluster serves
// scheduling.k8s.io/v1beta1): pods name theirs in spec.schedulingGroup.podGroupName, and its
// spec.schedulingPolicy.gang.minCount is the gang's minMember. The module's k8s.io/api (1.36) has
// only v1alpha2, so it is read unstructured.
var UpstreamPodGroupGVK = schema.GroupVersionKind{Group: "scheduling.k8s.io", Version: "v1beta1", Kind: "PodGroup"}

// servesUpstreamPodGroups reports whether the API server serves UpstreamPodGroupGVK.
func servesUpstreamPodGroups(dc discovery.DiscoveryInterface) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersion(UpstreamPodGroupGVK.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", UpstreamPodGroupGVK.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Kind == UpstreamPodGroupGVK.Kind {
			return true, nil
		}
	}
	return false, nil
}

// watchUpstreamPodGroups records the cluster's scheduling.k8s.io PodGroups, where it serves them.
func (s *State) watchUpstreamPodGroups(ctx context.Context, c crcache.Cache) error {
	served, err := servesUpstreamPodGroups(s.handle.ClientSet().Discovery())
	if err != nil || !served {
		klog.FromContext(ctx).V(2).Info("Not watching scheduling.k8s.io PodGroups", "served", served, "err", err)
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(UpstreamPodGroupGVK)
	inf, err := c.GetInformer(ctx, u)
	if err != nil {
		return fmt.Errorf("watching scheduling.k8s.io PodGroups: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.onPodGroup,
		UpdateFunc: func(_, n any) { s.onPodGroup(n) },
		DeleteFunc: s.onPodGroupDelete,
	})
	return err
}

// SetUpstreamPodGroup records a scheduling.k8s.io PodGroup as SetPodGroup does a
// scheduler-plugins one, which is read first where both name a gang. A PodGroup of the basic
// policy, whose pods need not start together, is a gang of minMember 1.
func (s *State) SetUpstreamPodGroup(u *unstructured.Unstructured) {
	if s.gangs.setUpstreamPodGroup(u.GetNamespace()+"/"+u.GetName(), upstreamPodGroupInfo(u)) {
		s.handle.Activate(klog.Background(), s.gangs.pendingMembers(u.GetNamespace(), u.GetName()))
	}
}

func upstreamPodGroupInfo(u *unstructured.Unstructured) podGroupInfo {
	minCount, found, err := unstructured.NestedInt64(u.Object, "spec", "schedulingPolicy", "gang", "minCount")
	if !found || err != nil || minCount < 1 {
		minCount = 1
	}
	return podGroupInfo{minMember: int32(min(minCount, math.MaxInt32)), created: u.GetCreationTimestamp().Time}
}
