// Package realnode tests Convoy on real nodes (test/e2e/realstack): real kubelets, containerd and
// containers from Convoy's images, a real PyTorch job trained, killed and resumed.
package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/e2e/realstack"
	"github.com/convoy-dev/convoy/test/e2e/stack"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/images"
)

var env *realstack.Env

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{RealNodes: true, KwokArgs: kwokArgs(),
		AddToScheme: realstack.AddToScheme})
}

func kwokArgs() []string {
	args, err := stack.KwokArgs(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return args
}

func setup(t *testing.T) *realstack.Env {
	t.Helper()
	if env == nil {
		var err error
		if env, err = realstack.Start(t.Context(), framework.Shared(t), t.Logf); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

// A user applies a 2-worker PyTorch TrainingJob: Kueue admits it, convoy-scheduler places the gang
// on both real nodes, the workers find each other through cluster DNS and train the digits example
// with gloo; a worker's process is killed; the whole gang restarts and resumes from its latest
// checkpoint, and the job completes with the accuracy it reached.
func TestPyTorchJobTrainsIsKilledAndResumesFromItsCheckpoint(t *testing.T) {
	e := setup(t)
	ns := framework.TestNamespace(t)
	var timeline bytes.Buffer
	res, err := e.RunStory(t.Context(), ns, &timeline)
	t.Logf("Timeline:\n%s", timeline.String())
	if err != nil {
		t.Fatal(err)
	}

	nodes := map[string]bool{}
	for _, n := range res.Nodes {
		nodes[n] = true
	}
	if len(nodes) != 2 {
		t.Errorf("the gang ran on nodes %v, want both real nodes", res.Nodes)
	}
	master := ""
	for pod, g := range res.GPUs {
		if !strings.HasPrefix(g.Visible, "GPU-") || g.AllocatedTo != ns+"/"+pod {
			t.Errorf("pod %s: NVIDIA_VISIBLE_DEVICES=%q, GPUNode says allocated to %q; want a GPU UUID allocated to %s/%s", pod, g.Visible, g.AllocatedTo, ns, pod)
		}
		if strings.HasSuffix(pod, "-0") {
			master = pod
		}
	}
	if res.ResolvedMaster == "" || res.ResolvedMaster != res.PodIPs[master] {
		t.Errorf("%s's DNS name resolved to %q, want its pod IP %q", master, res.ResolvedMaster, res.PodIPs[master])
	}
	if res.ResumedFrom < 1 || int32(res.ResumedFrom) < res.KilledAtEpoch {
		t.Errorf("the restarted gang resumed from epoch %d; the job had checkpointed epoch %d before the kill", res.ResumedFrom, res.KilledAtEpoch)
	}
	if res.Final.Status.State != convoy.StateCompleted {
		t.Fatalf("the job ended %s, want Completed: %+v", res.Final.Status.State, res.Final.Status.Conditions)
	}
	if res.Restarts < 1 {
		t.Errorf("status.restartCount = %d after a worker was killed, want at least 1", res.Restarts)
	}
	m := res.Final.Status.Metrics
	if m == nil || m.Accuracy == nil || *m.Accuracy < 0.85 {
		t.Errorf("status.metrics = %+v, want the accuracy the training reached (≥ 0.85)", m)
	}
	// Each rank's log shows its own training, and rank 0's final accuracy is the one in the status.
	for pod, log := range res.Logs {
		rank := pod[strings.LastIndex(pod, "-")+1:]
		if !strings.Contains(log, "rank="+rank+" ") {
			t.Errorf("kubectl logs %s has no line of rank %s:\n%s", pod, rank, log)
		}
	}
	final := regexp.MustCompile(`final accuracy=([0-9.]+)`).FindStringSubmatch(res.Logs[master])
	if final == nil {
		t.Fatalf("kubectl logs %s has no final accuracy:\n%s", master, res.Logs[master])
	}
	if got, _ := strconv.ParseFloat(final[1], 64); m != nil && m.Accuracy != nil && fmt.Sprintf("%.4f", got) != fmt.Sprintf("%.4f", *m.Accuracy) {
		t.Errorf("status.metrics.accuracy = %v, the log says %v", *m.Accuracy, got)
	}
}

// Each of Convoy's images, pulled from the registry by a real kubelet, starts as its non-root user
// and runs its binary: the node agent reads its (mock) GPUs once and prints the GPUNode, the others
// print their flags.
func TestConvoyImagesStartOnARealNode(t *testing.T) {
	e := setup(t)
	ns := framework.TestNamespace(t)
	ctx := t.Context()
	if err := e.Cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args []string
		want string
	}{
		images.Operator:  {args: []string{"--help"}, want: "progress-url"},
		images.Scheduler: {args: []string{"--help"}, want: "--config"},
		images.NodeAgent: {args: []string{"--once", "--print", "--nvml=mock:" + realstack.Profile, "--node-name=" + realstack.NodeNames[0]}, want: realstack.GPUProduct},
		images.Kueue:     {args: []string{"--help"}, want: "config"},
	}
	for name, tc := range cases {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{
				NodeName:      realstack.NodeNames[0],
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: e.Image(name), Args: tc.args}},
			},
		}
		if err := e.Cluster.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var pod corev1.Pod
			err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				if err := e.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
					return false, err
				}
				return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
			})
			logs, _ := e.Kubectl(ctx, "logs", "-n", ns, name)
			if err != nil || pod.Status.Phase != corev1.PodSucceeded {
				t.Fatalf("pod of image %s: phase %s (%v), want Succeeded; its status: %+v\nlogs:\n%s", e.Image(name), pod.Status.Phase, err, pod.Status.ContainerStatuses, logs)
			}
			if !strings.Contains(logs, tc.want) {
				t.Errorf("kubectl logs of image %s has no %q:\n%s", name, tc.want, logs)
			}
			if id := pod.Status.ContainerStatuses[0].ImageID; !strings.Contains(id, "sha256:") {
				t.Errorf("image ID %q, want a digest from the registry", id)
			}
		})
	}
}
