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

package podgpus_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/gpuinfo"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/nvmlmock"
	"github.com/convoy-dev/convoy/scheduler-plugin/pkg/nodeagent/podgpus"
)

// podWrapper builds pods for tests.
type podWrapper struct{ corev1.Pod }

func makePod(name string) *podWrapper {
	return &podWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "main"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}}
}

func gpus(n int) corev1.ResourceList {
	return corev1.ResourceList{convoy.ResourceGPU: *resource.NewQuantity(int64(n), resource.DecimalSI)}
}

func (w *podWrapper) GPUs(n int) *podWrapper {
	w.Spec.Containers[0].Resources.Limits = gpus(n)
	return w
}

func (w *podWrapper) Container(n int) *podWrapper {
	w.Spec.Containers = append(w.Spec.Containers, corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Limits: gpus(n)}})
	return w
}

func (w *podWrapper) Init(n int, sidecar bool) *podWrapper {
	c := corev1.Container{Name: "init", Resources: corev1.ResourceRequirements{Requests: gpus(n)}}
	if sidecar {
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	}
	w.Spec.InitContainers = append(w.Spec.InitContainers, c)
	return w
}

func (w *podWrapper) Indices(v string) *podWrapper {
	w.Annotations = map[string]string{convoy.AnnotationGPUIndices: v}
	return w
}

func (w *podWrapper) Phase(p corev1.PodPhase) *podWrapper {
	w.Status.Phase = p
	return w
}

func (w *podWrapper) Created(sec int) *podWrapper {
	w.CreationTimestamp = metav1.NewTime(time.Unix(int64(1000+sec), 0))
	return w
}

func (w *podWrapper) Obj() *corev1.Pod { return &w.Pod }

func (w *podWrapper) Request(t *testing.T) podgpus.Pod {
	t.Helper()
	p, ok := podgpus.FromPod(w.Obj())
	if !ok {
		t.Fatalf("pod %s holds no GPUs", w.Name)
	}
	return p
}

func TestFromPod(t *testing.T) {
	cases := map[string]struct {
		pod    *corev1.Pod
		want   podgpus.Pod
		wantOK bool
	}{
		"no GPUs":   {pod: makePod("a").Obj()},
		"succeeded": {pod: makePod("a").GPUs(2).Phase(corev1.PodSucceeded).Obj()},
		"failed":    {pod: makePod("a").GPUs(2).Phase(corev1.PodFailed).Obj()},
		"pending pod bound to the node holds its GPUs": {
			pod:    makePod("a").GPUs(2).Phase(corev1.PodPending).Obj(),
			want:   podgpus.Pod{Key: "team-a/a", UID: "uid-a", GPUs: 2},
			wantOK: true,
		},
		"containers add up": {
			pod:    makePod("a").GPUs(2).Container(3).Obj(),
			want:   podgpus.Pod{Key: "team-a/a", UID: "uid-a", GPUs: 5},
			wantOK: true,
		},
		"a larger init container wins": {
			pod:    makePod("a").GPUs(1).Init(4, false).Obj(),
			want:   podgpus.Pod{Key: "team-a/a", UID: "uid-a", GPUs: 4},
			wantOK: true,
		},
		"sidecars add to the containers": {
			pod:    makePod("a").GPUs(1).Init(1, true).Init(1, false).Obj(),
			want:   podgpus.Pod{Key: "team-a/a", UID: "uid-a", GPUs: 2},
			wantOK: true,
		},
		"scheduler's indices": {
			pod:    makePod("a").GPUs(4).Indices("4, 5,6,7").Obj(),
			want:   podgpus.Pod{Key: "team-a/a", UID: "uid-a", GPUs: 4, Indices: []int{4, 5, 6, 7}},
			wantOK: true,
		},
		"indices that do not parse are ignored": {
			pod:    makePod("a").GPUs(2).Indices("0,x").Obj(),
			want:   podgpus.Pod{Key: "team-a/a", UID: "uid-a", GPUs: 2},
			wantOK: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := podgpus.FromPod(tc.pod)
			if ok != tc.wantOK {
				t.Fatalf("FromPod ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FromPod (-want,+got):\n%s", diff)
			}
		})
	}
}

func simulator(t *testing.T, profile string) *podgpus.Simulator {
	t.Helper()
	srv, err := nvmlmock.New(profile, nvmlmock.Options{Seed: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := gpuinfo.Open(srv, gpuinfo.Options{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	s, err := podgpus.NewSimulator(srv, r.IndexOfUUID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func allUsable(int) bool { return true }

func TestSimulatorPicksConnectedGPUs(t *testing.T) {
	cases := map[string]struct {
		profile string
		pods    []*podWrapper
		want    podgpus.Holders
	}{
		"PCIe: a pair behind one switch": {
			profile: nvmlmock.ProfilePCIe4,
			pods:    []*podWrapper{makePod("a").GPUs(1).Indices("1").Created(0), makePod("b").GPUs(2).Created(1)},
			want:    podgpus.Holders{1: "team-a/a", 2: "team-a/b", 3: "team-a/b"},
		},
		"NVLink bridges: a bridged pair, not a split one": {
			profile: nvmlmock.ProfileNVLinkPairs8,
			pods: []*podWrapper{
				makePod("a").GPUs(1).Indices("2").Created(0),
				makePod("b").GPUs(2).Created(1),
				makePod("c").GPUs(2).Created(2),
			},
			// GPU 3, whose bridge partner is taken, is the worst choice for either pair.
			want: podgpus.Holders{2: "team-a/a", 0: "team-a/b", 1: "team-a/b", 4: "team-a/c", 5: "team-a/c"},
		},
		"NVSwitch: four GPUs of one socket": {
			profile: nvmlmock.ProfileH100x8,
			pods:    []*podWrapper{makePod("a").GPUs(4).Indices("0,1,2,3").Created(0), makePod("b").GPUs(4).Created(1)},
			want: podgpus.Holders{0: "team-a/a", 1: "team-a/a", 2: "team-a/a", 3: "team-a/a",
				4: "team-a/b", 5: "team-a/b", 6: "team-a/b", 7: "team-a/b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := simulator(t, tc.profile)
			var pods []podgpus.Pod
			for _, w := range tc.pods {
				pods = append(pods, w.Request(t))
			}
			got := s.Assign(pods, allUsable)
			if diff := cmp.Diff(tc.want, got.Holders); diff != "" {
				t.Errorf("holders (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSimulatorKeepsAssignments(t *testing.T) {
	s := simulator(t, nvmlmock.ProfileH100x8)
	a := makePod("a").GPUs(2).Created(0).Request(t)
	first := s.Assign([]podgpus.Pod{a}, allUsable).Holders

	// A second pod arrives with indices that name a's GPUs.
	b := makePod("b").GPUs(2).Created(1).Indices("0,1").Request(t)
	if first[0] != "team-a/a" || first[1] != "team-a/a" {
		t.Fatalf("first assignment %v; want GPUs 0 and 1 for pod a", first)
	}
	got := s.Assign([]podgpus.Pod{b, a}, allUsable)
	if got.Holders[0] != "team-a/a" || got.Holders[1] != "team-a/a" {
		t.Errorf("pod a lost its GPUs: %v", got.Holders)
	}
	if got.Ignored["team-a/b"] != "GPU 0 is held by team-a/a" {
		t.Errorf("why b's indices were ignored: %q", got.Ignored["team-a/b"])
	}
	bGPUs := 0
	for _, holder := range got.Holders {
		if holder == "team-a/b" {
			bGPUs++
		}
	}
	if bGPUs != 2 {
		t.Errorf("pod b holds %d GPUs, want 2: %v", bGPUs, got.Holders)
	}
	again := s.Assign([]podgpus.Pod{a, b}, allUsable)
	if diff := cmp.Diff(got.Holders, again.Holders); diff != "" {
		t.Errorf("assignment changed between polls (-before,+after):\n%s", diff)
	}

	// a ends: its GPUs are free for the next pod that names them.
	c := makePod("c").GPUs(2).Created(2).Indices("0,1").Request(t)
	got = s.Assign([]podgpus.Pod{b, c}, allUsable)
	if got.Holders[0] != "team-a/c" || got.Holders[1] != "team-a/c" || len(got.Ignored) != 0 {
		t.Errorf("after a ended, c named GPUs 0,1: holders %v, ignored %v", got.Holders, got.Ignored)
	}
}

func TestSimulatorSkipsUnhealthyAndFull(t *testing.T) {
	s := simulator(t, nvmlmock.ProfilePCIe4)
	healthy := func(i int) bool { return i != 0 }
	pods := []podgpus.Pod{
		makePod("a").GPUs(1).Indices("0").Created(0).Request(t),
		makePod("b").GPUs(3).Created(1).Request(t),
		makePod("c").GPUs(2).Created(2).Request(t),
	}
	got := s.Assign(pods, healthy)
	want := podgpus.Result{
		Holders:  podgpus.Holders{1: "team-a/a", 2: "team-a/c", 3: "team-a/c"},
		Unplaced: []string{"team-a/b"},
		Ignored:  map[string]string{"team-a/a": "GPU 0 is unhealthy"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("assignment (-want,+got):\n%s", diff)
	}
}

// kubelet is a PodResources server on a unix socket, standing in for the kubelet.
type kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	pods []*podresourcesv1.PodResources
}

func (k *kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

func TestKubeletHolders(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	dev := func(resource string, ids ...string) *podresourcesv1.ContainerDevices {
		return &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: ids}
	}
	podresourcesv1.RegisterPodResourcesListerServer(srv, &kubelet{pods: []*podresourcesv1.PodResources{
		{Namespace: "team-a", Name: "train-0", Containers: []*podresourcesv1.ContainerResources{
			{Devices: []*podresourcesv1.ContainerDevices{dev(convoy.ResourceGPU, "GPU-aaa", "GPU-bbb"), dev("example.com/nic", "GPU-ccc")}},
		}},
		{Namespace: "team-b", Name: "shared", Containers: []*podresourcesv1.ContainerResources{
			{Devices: []*podresourcesv1.ContainerDevices{dev(convoy.ResourceGPU, "GPU-ddd::1", "MIG-xyz")}},
		}},
		{Namespace: "team-a", Name: "shared", Containers: []*podresourcesv1.ContainerResources{
			{Devices: []*podresourcesv1.ContainerDevices{dev(convoy.ResourceGPU, "GPU-ddd::0")}},
		}},
		{Namespace: "team-c", Name: "by-index", Containers: []*podresourcesv1.ContainerResources{
			{Devices: []*podresourcesv1.ContainerDevices{dev(convoy.ResourceGPU, "5")}},
		}},
	}})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	k, err := podgpus.DialKubelet(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	index := map[string]int{"GPU-aaa": 0, "GPU-bbb": 1, "GPU-ccc": 2, "GPU-ddd": 3}
	got, err := k.Holders(t.Context(), func(u string) (int, bool) { i, ok := index[u]; return i, ok })
	if err != nil {
		t.Fatal(err)
	}
	want := podgpus.Holders{0: "team-a/train-0", 1: "team-a/train-0", 3: "team-a/shared", 5: "team-c/by-index"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("holders (-want,+got):\n%s", diff)
	}

	if _, err := podgpus.DialKubelet(filepath.Join(t.TempDir(), "absent.sock")); err == nil {
		t.Error("DialKubelet on a missing socket: no error; a fake node must fall back to simulation")
	}
}
