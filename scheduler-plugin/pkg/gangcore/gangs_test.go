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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"
)

// TestGangRegistryIncomplete: a gang waits for its PodGroup, then for its members; its pods are
// told each new reason once, and a PodGroup that pods waited for is reported when it appears.
func TestGangRegistryIncomplete(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{podGroupIndex: indexByGang})
	r := newGangRegistry(idx)
	for i := range 2 {
		if err := idx.Add(member("ns", "job", i, 1).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step, wantWhy string, wantTell bool) {
		t.Helper()
		if why, tell := r.incomplete("ns", "job", true); why != wantWhy || tell != wantTell {
			t.Errorf("%s: incomplete = %q, tell %v; want %q, tell %v", step, why, tell, wantWhy, wantTell)
		}
	}
	unseen := "waiting for PodGroup ns/job: create it, or remove the pod's " + schedv1alpha1.PodGroupLabel + " label"
	check("no PodGroup", unseen, true)
	check("no PodGroup, asked again", unseen, false)

	// Asked without record, a missing PodGroup is not remembered.
	if why, tell := r.incomplete("ns", "other", false); why == "" || tell {
		t.Errorf("unrecorded incomplete = %q, tell %v; want a reason, no tell", why, tell)
	}
	if r.setPodGroup(podGroup("ns", "other", 1)) {
		t.Error("setPodGroup reported pods held for a PodGroup only asked about without record")
	}

	if !r.setPodGroup(podGroup("ns", "job", 3)) {
		t.Error("setPodGroup did not report the pods held for the PodGroup")
	}
	if r.setPodGroup(podGroup("ns", "job", 3)) {
		t.Error("setPodGroup reported held pods twice")
	}
	short := "waiting for 1 more pod(s) of gang ns/job (minMember 3)"
	check("one pod short", short, true)
	check("one pod short, asked again", short, false)

	if err := idx.Add(member("ns", "job", 2, 1).Obj()); err != nil {
		t.Fatal(err)
	}
	check("complete", "", false)
	// Short again: the reason is new since the gang was complete, and told again.
	if err := idx.Delete(member("ns", "job", 2, 1).Obj()); err != nil {
		t.Fatal(err)
	}
	check("short again", short, true)

	r.deletePodGroup("ns/job", false)
	if _, ok := r.podGroup("ns", "job"); ok {
		t.Error("the deleted PodGroup is still known")
	}
}

// TestGangRegistryPendingMembers: a pod this scheduler bound is not pending before the informer
// shows its binding, nor one that is deleted; a bound pod's deletion forgets its node.
func TestGangRegistryPendingMembers(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{podGroupIndex: indexByGang})
	r := newGangRegistry(idx)
	bound := member("ns", "job", 0, 1).Obj()
	going := member("ns", "job", 1, 1).Obj()
	going.DeletionTimestamp = &metav1.Time{}
	waiting := member("ns", "job", 2, 1).Obj()
	onNode := member("ns", "job", 3, 1).Node("a").Obj()
	for _, p := range []*corev1.Pod{bound, going, waiting, onNode, lone("ns", "lone", 1).Obj()} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	r.bound(bound.UID, "b")
	got := r.pendingMembers("ns", "job")
	if len(got) != 1 || got["ns/job-2"] == nil {
		t.Errorf("pending members = %v, want only ns/job-2", keysOf(got))
	}
	if n := r.memberCount("ns", "job"); n != 4 {
		t.Errorf("member count = %d, want 4", n)
	}
	if node := r.nodeOf(bound); node != "b" {
		t.Errorf("node of the pod bound by this scheduler = %q, want b", node)
	}
	r.podDeleted(bound.UID)
	if node := r.nodeOf(bound); node != "" {
		t.Errorf("node of a deleted pod = %q, want none", node)
	}
}

func podGroup(ns, name string, minMember int32) *schedv1alpha1.PodGroup {
	return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: schedv1alpha1.PodGroupSpec{MinMember: minMember}}
}

func keysOf(m map[string]*corev1.Pod) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestGangRegistryUpstreamPodGroups: a pod that names a scheduling.k8s.io PodGroup in
// spec.schedulingGroup is a member of that gang, whose minMember is the PodGroup's gang.minCount
// (1 for the basic policy); a scheduler-plugins PodGroup of the same name is read first.
func TestGangRegistryUpstreamPodGroups(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{podGroupIndex: indexByGang})
	r := newGangRegistry(idx)
	for i := range 2 {
		p := lone("ns", "up-"+itoa(i), 8).Obj()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("up")}
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
		if got := GangKey(p); got != "ns/up" {
			t.Errorf("GangKey = %q, want ns/up", got)
		}
	}
	upstream := func(policy string) *unstructured.Unstructured {
		// As the informer decodes it.
		u := &unstructured.Unstructured{}
		j, err := yaml.YAMLToJSON([]byte("apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: up, namespace: ns}\nspec: {schedulingPolicy: " + policy + "}"))
		if err == nil {
			err = u.UnmarshalJSON(j)
		}
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if why, _ := r.incomplete("ns", "up", true); !strings.HasPrefix(why, "waiting for PodGroup ns/up") {
		t.Errorf("before its PodGroup: incomplete = %q", why)
	}
	if !r.setUpstreamPodGroup("ns/up", upstreamPodGroupInfo(upstream("{gang: {minCount: 3}}"))) {
		t.Error("setUpstreamPodGroup did not report the pods held for it")
	}
	if why, _ := r.incomplete("ns", "up", true); why != "waiting for 1 more pod(s) of gang ns/up (minMember 3)" {
		t.Errorf("gang.minCount 3, 2 pods: incomplete = %q", why)
	}
	r.setUpstreamPodGroup("ns/up", upstreamPodGroupInfo(upstream("{basic: {}}")))
	if why, _ := r.incomplete("ns", "up", true); why != "" {
		t.Errorf("basic policy: incomplete = %q, want complete", why)
	}
	r.setPodGroup(podGroup("ns", "up", 4))
	if info, _ := r.podGroup("ns", "up"); info.minMember != 4 {
		t.Errorf("with both PodGroups: minMember %d, want scheduler-plugins' 4", info.minMember)
	}
	r.deletePodGroup("ns/up", false)
	if info, _ := r.podGroup("ns", "up"); info.minMember != 1 {
		t.Errorf("scheduler-plugins' deleted: minMember %d, want the upstream PodGroup's 1", info.minMember)
	}
	r.deletePodGroup("ns/up", true)
	if _, ok := r.podGroup("ns", "up"); ok {
		t.Error("the deleted upstream PodGroup is still known")
	}
}
