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

package gangplacement

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/apis/config"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/gangcore"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/planner"
)

func TestNewRejectsWrongArgs(t *testing.T) {
	if _, err := New(context.Background(), &config.GangPreemptionArgs{}, nil); err == nil {
		t.Error("New() with GangPreemptionArgs succeeded")
	}
	if _, err := New(context.Background(), &config.GangPlacementArgs{}, nil); err == nil {
		t.Error("New() with empty args succeeded, want validation errors")
	}
}

// TestFilter admits only the node of the pod's slot.
func TestFilter(t *testing.T) {
	placed := &gangcore.CycleState{Gang: "ns/job", Placed: true, Slot: gangcore.Slot{Node: "a", GPUs: planner.NewGPUSet(0, 1)}}
	unplaced := &gangcore.CycleState{Gang: "ns/job", Unplaceable: "ns/job needs 2 pod(s) × 8 GPU(s)"}
	cases := map[string]struct {
		state    *gangcore.CycleState
		node     string
		wantCode fwk.Code
		wantMsg  string
	}{
		"the slot's node":     {state: placed, node: "a", wantCode: fwk.Success},
		"another node":        {state: placed, node: "b", wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "the plan of gang ns/job puts the pod on node a"},
		"an unplaceable gang": {state: unplaced, node: "a", wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "ns/job needs 2 pod(s) × 8 GPU(s)"},
		"no PreFilter result": {node: "a", wantCode: fwk.Error, wantMsg: `reading "PreFilterGangPlacement" from the cycle state: not found`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := framework.NewCycleState()
			if tc.state != nil {
				cs.Write(gangcore.StateKey, tc.state)
			}
			ni := framework.NewNodeInfo()
			ni.SetNode(st.MakeNode().Name(tc.node).Obj())
			got := (&GangPlacement{}).Filter(context.Background(), cs, &corev1.Pod{}, ni)
			if got.Code() != tc.wantCode || got.Message() != tc.wantMsg {
				t.Errorf("Filter() = %v %q, want %v %q", got.Code(), got.Message(), tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestQueueingHints(t *testing.T) {
	pl := &GangPlacement{gpu: "nvidia.com/gpu"}
	pod := st.MakePod().Namespace("ns").Name("job-1").Label(schedv1alpha1.PodGroupLabel, "job").Obj()
	gpuPod := func(name, node string) *corev1.Pod {
		return st.MakePod().Namespace("ns").Name(name).Node(node).Req(map[corev1.ResourceName]string{"nvidia.com/gpu": "1"}).Obj()
	}
	cases := map[string]struct {
		hint     fwk.QueueingHintFn
		old, new any
		want     fwk.QueueingHint
	}{
		"a bound GPU pod deleted":    {hint: pl.freesGPUsOrSibling, old: gpuPod("x", "a"), want: fwk.Queue},
		"an unbound GPU pod deleted": {hint: pl.freesGPUsOrSibling, old: gpuPod("x", ""), want: fwk.QueueSkip},
		"a CPU pod deleted":          {hint: pl.freesGPUsOrSibling, old: st.MakePod().Namespace("ns").Name("x").Node("a").Obj(), want: fwk.QueueSkip},
		"a sibling deleted":          {hint: pl.freesGPUsOrSibling, old: st.MakePod().Namespace("ns").Name("job-0").Label(schedv1alpha1.PodGroupLabel, "job").Obj(), want: fwk.Queue},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.hint(klog.Background(), pod, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Errorf("hint = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// clientHandle is a scheduler framework handle with only a client set.
type clientHandle struct {
	fwk.Handle
	cs kubernetes.Interface
}

func (h clientHandle) ClientSet() kubernetes.Interface { return h.cs }

// TestBindCapsBindingsInFlight: with MaxConcurrentBindings 2, six pods released at once make at
// most two Binding requests at a time, and all six are bound, each with its GPU indices. A pod
// whose turn does not come neither binds nor writes its claims.
func TestBindCapsBindingsInFlight(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := 0, 0
	var annotations []string
	release := make(chan struct{})
	// An API server that holds every Binding until release (a fake clientset runs its reactors
	// one at a time).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b corev1.Binding
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/binding") || json.NewDecoder(r.Body).Decode(&b) != nil {
			http.Error(w, "want a Binding", http.StatusBadRequest)
			return
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		annotations = append(annotations, b.Annotations[gangcore.AnnotationGPUIndices])
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer srv.Close()
	var releaseOnce sync.Once
	// On a failure, let the held requests go before srv.Close waits for them.
	defer releaseOnce.Do(func() { close(release) })
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	pl := &GangPlacement{handle: clientHandle{cs: cs}, binds: make(chan struct{}, 2)}
	state := framework.NewCycleState()
	state.Write(gangcore.StateKey, &gangcore.CycleState{Gang: "ns/job", Placed: true,
		Slot: gangcore.Slot{Node: "a", Indexed: true, GPUs: planner.NewGPUSet(3)}})

	var wg sync.WaitGroup
	errs := make(chan *fwk.Status, 6)
	for i := range 6 {
		wg.Go(func() {
			pod := st.MakePod().Namespace("ns").Name(fmt.Sprintf("job-%d", i)).Obj()
			errs <- pl.Bind(context.Background(), state, pod, "a")
		})
	}
	requests := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return inFlight, len(annotations)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		n, _ := requests()
		return n == 2, nil
	}); err != nil {
		t.Fatalf("Binding requests in flight never reached 2")
	}
	time.Sleep(50 * time.Millisecond) // the other four stay queued
	if n, made := requests(); n != 2 || made != 2 {
		t.Errorf("with two Bindings blocked: %d in flight, %d made, want 2 and 2", n, made)
	}
	releaseOnce.Do(func() { close(release) })
	wg.Wait()
	close(errs)
	for s := range errs {
		if !s.IsSuccess() {
			t.Errorf("Bind() = %v", s)
		}
	}
	if most != 2 {
		t.Errorf("at most %d Binding requests in flight, want 2", most)
	}
	if want := []string{"3", "3", "3", "3", "3", "3"}; !slices.Equal(annotations, want) {
		t.Errorf("Bindings' GPU indices = %q, want %q", annotations, want)
	}

	// A pod whose binding cycle ends while it waits for a turn gets an error, and makes no request.
	pl.binds <- struct{}{}
	pl.binds <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s := pl.Bind(ctx, state, st.MakePod().Namespace("ns").Name("job-6").Obj(), "a"); s.IsSuccess() {
		t.Error("Bind() with its context done and no turn free succeeded")
	}
	if _, made := requests(); made != 6 {
		t.Errorf("%d Binding requests, want 6", made)
	}
	// Nor does a pod's PreBind write its DRA claims outside a turn.
	if s := pl.PreBind(ctx, state, st.MakePod().Namespace("ns").Name("job-6").Obj(), "a"); s.IsSuccess() {
		t.Error("PreBind() with its context done and no turn free succeeded")
	}
}

// TestBindRecordsTheNodesTopologyDomains: a pod bound by its gang's plan gets its node's domain at
// each configured level the node is labelled with (here GKE's), outer to inner, beside its GPU
// indices; on a node known by GPU count only with none of the labels, DefaultBinder binds it.
func TestBindRecordsTheNodesTopologyDomains(t *testing.T) {
	var got []map[string]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b corev1.Binding
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, "want a Binding", http.StatusBadRequest)
			return
		}
		got = append(got, b.Annotations)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	nodes := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, n := range []*corev1.Node{
		st.MakeNode().Name("gke-a").Label(convoy.LabelTopologyZone, "us-central1-a").Label("cloud.google.com/gce-topology-block", "b7").
			Label("cloud.google.com/gce-topology-subblock", "sb2").Label(convoy.LabelTopologyRack, "ignored").Obj(),
		st.MakeNode().Name("plain").Obj(),
	} {
		if err := nodes.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	pl := &GangPlacement{handle: clientHandle{cs: cs}, binds: make(chan struct{}, 1),
		levels: config.TopologyPresets[config.TopologyPresetGKE], nodes: corelisters.NewNodeLister(nodes)}
	bind := func(node string, indexed bool) *fwk.Status {
		state := framework.NewCycleState()
		slot := gangcore.Slot{Node: node, Indexed: indexed}
		if indexed {
			slot.GPUs = planner.NewGPUSet(0, 1)
		}
		state.Write(gangcore.StateKey, &gangcore.CycleState{Gang: "ns/job", Placed: true, Slot: slot})
		return pl.Bind(context.Background(), state, st.MakePod().Namespace("ns").Name("job-0").Obj(), node)
	}
	if s := bind("gke-a", true); !s.IsSuccess() {
		t.Fatalf("Bind() on gke-a = %v", s)
	}
	if s := bind("gke-a", false); !s.IsSuccess() {
		t.Fatalf("Bind() on gke-a, GPUs not indexed = %v", s)
	}
	if s := bind("plain", false); !s.IsSkip() {
		t.Errorf("Bind() on a node without GPU indices or level labels = %v, want Skip", s)
	}
	domains := "zone=us-central1-a,block=b7,subblock=sb2"
	want := []map[string]string{
		{gangcore.AnnotationGPUIndices: "0,1", convoy.AnnotationTopologyDomains: domains},
		{convoy.AnnotationTopologyDomains: domains},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Bindings' annotations (-want,+got):\n%s", diff)
	}
}
