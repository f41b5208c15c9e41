package gangplacement

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

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
