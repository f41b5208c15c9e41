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

package nodeagent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
	"github.com/convoy-dev/convoy/test/util"
)

var (
	buildOnce sync.Once
	agentBin  string
	buildErr  error
)

// agentBinary builds convoy-node-agent (cgo) once per test run.
func agentBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := framework.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "convoy-node-agent-")
		if err != nil {
			buildErr = err
			return
		}
		agentBin = filepath.Join(dir, "convoy-node-agent")
		cmd := exec.Command("go", "build", "-o", agentBin, "./scheduler-plugin/cmd/convoy-node-agent")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build convoy-node-agent: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return agentBin
}

func TestBinaryServesFakeNodes(t *testing.T) {
	c := cluster(t)
	binA := framework.Unique(t, "bin-a")
	binB := framework.Unique(t, "bin-b")
	binOther := framework.Unique(t, "bin-other")
	selected := framework.Unique(t, "binary")
	ctx := context.Background()
	bin := agentBinary(t)
	var specs []framework.NodeSpec
	for _, n := range []string{binA, binB} {
		specs = append(specs, framework.NodeSpec{Name: n, GPUs: 8, Labels: map[string]string{"convoy.dev/agent-test": selected}})
	}
	specs = append(specs, framework.NodeSpec{Name: binOther, GPUs: 8}) // not selected
	if err := c.CreateNodes(ctx, specs...); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, agentNamespace, simulatorSA)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", util.FreePort(t))
	if err := c.StartProcess("convoy-node-agent", bin, []string{
		"--kubeconfig=" + kubeconfig,
		"--nvml=mock:a100-8",
		"--node-selector=convoy.dev/agent-test=" + selected,
		"--metrics-bind-address=" + addr,
		"--poll-interval=200ms",
		"--fault=" + binB + "/2=ecc",
		"--kube-api-qps=100",
	}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StopProcess("convoy-node-agent") })

	waitGPUNode(t, c, binA, 30*time.Second, "8 healthy GPUs", published(8, 8))
	b := waitGPUNode(t, c, binB, 30*time.Second, "7 healthy GPUs (the --fault flag)", published(8, 7))
	if b.Status.GPUs[2].Health != convoy.GPUUnhealthy {
		t.Errorf("bin-b GPU 2 is %s, want Unhealthy from --fault", b.Status.GPUs[2].Health)
	}

	faults := "http://" + addr + "/faults"
	do := func(method, query string) {
		t.Helper()
		req, _ := http.NewRequest(method, faults+"?"+query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s /faults?%s: %s %s", method, query, resp.Status, body)
		}
	}
	do(http.MethodPost, "node="+binA+"&gpu=5&fault=xid:79")
	a := waitGPUNode(t, c, binA, 5*time.Second, "GPU 5 unhealthy", published(8, 7))
	if a.Status.GPUs[5].HealthReason != "XID 79: GPU has fallen off the bus" {
		t.Errorf("bin-a GPU 5: %q", a.Status.GPUs[5].HealthReason)
	}
	do(http.MethodDelete, "node="+binB+"&gpu=2")
	waitGPUNode(t, c, binB, 5*time.Second, "healthy again", published(8, 8))

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var healthy5 string
	for _, line := range strings.Split(string(metrics), "\n") {
		if strings.HasPrefix(line, "convoy_gpu_healthy{") && strings.Contains(line, `node="`+binA+`"`) && strings.Contains(line, `gpu="5"`) {
			healthy5 = line
		}
	}
	if !strings.HasSuffix(healthy5, " 0") || !strings.Contains(string(metrics), "convoy_node_agent_publishes_total{") {
		t.Errorf("metrics: convoy_gpu_healthy for bin-a GPU 5 is %q; want 0, and publish counts", healthy5)
	}
	if _, err := getGPUNode(t, c, binOther); err == nil {
		t.Error("the agent published a GPUNode for bin-other, which its --node-selector does not select")
	}
}

func TestBinaryPrintsOnce(t *testing.T) {
	bin := agentBinary(t)
	cases := map[string]struct {
		args     []string
		capacity int32
		reason   string
	}{
		"mock PCIe server": {
			args:     []string{"--nvml=mock:pcie-4"},
			capacity: 4,
			reason:   convoy.GPUNodeReasonInitialized,
		},
		// This machine has no NVIDIA driver: the agent says so and exits cleanly.
		"real NVML without a driver": {
			args:   []string{"--nvml=real", "--nvml-library=/nonexistent/libnvidia-ml.so.1"},
			reason: convoy.GPUNodeReasonLibraryNotFound,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, append([]string{"--once", "--print", "--node-name=gpu-host"}, tc.args...)...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			g := &convoy.GPUNode{}
			if err := yaml.UnmarshalStrict(stdout.Bytes(), g); err != nil {
				t.Fatalf("output is not a GPUNode: %v\n%s", err, stdout.String())
			}
			cond := meta(g.Status.Conditions, convoy.GPUNodeNVMLAvailable)
			if g.Name != "gpu-host" || g.Status.Capacity != tc.capacity || cond == nil || cond.Reason != tc.reason {
				t.Errorf("GPUNode %s: capacity %d, condition %+v; want capacity %d, reason %s", g.Name, g.Status.Capacity, cond, tc.capacity, tc.reason)
			}
		})
	}
}
