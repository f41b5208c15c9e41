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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

// TestResourcesPlacement: the placement counts the nodes of the gang's live bound pods, then the
// domains the scheduler recorded on them at each of its levels, outer to inner.
func TestResourcesPlacement(t *testing.T) {
	pod := func(node, domains string, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if domains != "" {
			p.Annotations = map[string]string{convoy.AnnotationTopologyDomains: domains}
		}
		return p
	}
	deleted := pod("n9", "block=b9,subblock=s9", corev1.PodRunning)
	deleted.DeletionTimestamp = &metav1.Time{}
	cases := map[string]struct {
		pods []*corev1.Pod
		want string
	}{
		"none bound": {pods: []*corev1.Pod{pod("", "", corev1.PodPending)}},
		"no domains recorded": {pods: []*corev1.Pod{pod("n1", "", corev1.PodRunning), pod("n2", "", corev1.PodRunning)},
			want: "2 nodes"},
		"gke levels": {pods: []*corev1.Pod{
			pod("n1", "zone=us-a,block=b1,subblock=s2", corev1.PodRunning),
			pod("n2", "zone=us-a,block=b1,subblock=s1", corev1.PodRunning),
			pod("n2", "zone=us-a,block=b1,subblock=s1", corev1.PodPending),
			pod("n3", "zone=us-a,block=b9,subblock=s9", corev1.PodSucceeded),
			deleted,
		}, want: "2 nodes; zone: us-a; block: b1; subblock: s1, s2"},
		"more than three domains": {pods: []*corev1.Pod{
			pod("n1", "leaf=l1", corev1.PodRunning), pod("n2", "leaf=l2", corev1.PodRunning),
			pod("n3", "leaf=l3", corev1.PodRunning), pod("n4", "leaf=l4", corev1.PodRunning),
		}, want: "4 nodes; leaf: 4 (l1, l2, l3, ...)"},
		"malformed entries skipped": {pods: []*corev1.Pod{pod("n1", "rack,=x,rack=r1,", corev1.PodRunning)},
			want: "1 node; rack: r1"},
	}
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(2).Obj()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := resources(job, tc.pods).Placement; got != tc.want {
				t.Errorf("placement = %q, want %q", got, tc.want)
			}
		})
	}
	long := strings.Repeat("x", 62)
	var many []*corev1.Pod
	for i := range 8 {
		var domains []string
		for l := range 5 {
			domains = append(domains, fmt.Sprintf("level%d-%s=%s%d", l, long[:50], long, i))
		}
		many = append(many, pod(fmt.Sprint("n", i), strings.Join(domains, ","), corev1.PodRunning))
	}
	if got := resources(job, many).Placement; len(got) > 1024 || !strings.HasSuffix(got, "...") {
		t.Errorf("a placement past status.resources.placement's 1024 bytes: %d bytes, %q", len(got), got)
	}
}
