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

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/convoy-dev/convoy/test/framework"
)

// TestDeploymentEnv: a benchmark starts a binary with the environment its Deployment sets (literal
// values, and the memory limit a resourceFieldRef names, in bytes or in its divisor; values of the
// Pod's metadata are left out) and the flags named of its command and args.
func TestDeploymentEnv(t *testing.T) {
	const manifest = `
apiVersion: v1
kind: ConfigMap
metadata: {name: convoy-scheduler}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: other}
spec:
  template:
    spec:
      containers:
      - name: c
        env: [{name: GOGC, value: "50"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: convoy-scheduler}
spec:
  template:
    spec:
      containers:
      - name: scheduler
        command: [/convoy-scheduler, --v=2]
        args: [--kube-api-qps=300, --kube-api-qpsx=1, --kube-api-burst=600, --kueue=auto]
        env:
        - {name: GOGC, value: "200"}
        - name: GOMEMLIMIT
          valueFrom: {resourceFieldRef: {resource: limits.memory}}
        - name: LIMIT_MIB
          valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}
        - name: POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        resources:
          limits: {memory: 1536Mi}
`
	got, err := framework.DeploymentEnv([]byte(manifest), "convoy-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"GOGC=200", "GOMEMLIMIT=1610612736", "LIMIT_MIB=1536"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DeploymentEnv (-want,+got):\n%s", diff)
	}

	flags, err := framework.DeploymentFlags([]byte(manifest), "convoy-scheduler", "--kube-api-qps", "--kube-api-burst", "--v")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"--v=2", "--kube-api-qps=300", "--kube-api-burst=600"}, flags); diff != "" {
		t.Errorf("DeploymentFlags (-want,+got):\n%s", diff)
	}

	noLimit := strings.Replace(manifest, "limits: {memory: 1536Mi}", "requests: {memory: 1536Mi}", 1)
	if _, err := framework.DeploymentEnv([]byte(noLimit), "convoy-scheduler"); err == nil || !strings.Contains(err.Error(), "GOMEMLIMIT refers to limits.memory") {
		t.Errorf("GOMEMLIMIT from a limit the container does not set: error %v, want one naming GOMEMLIMIT and limits.memory", err)
	}
}

// TestShippedSchedulerEnv: the benchmark finds the garbage collector's settings in what
// deploy/scheduler ships.
func TestShippedSchedulerEnv(t *testing.T) {
	env, err := framework.ShippedEnv("deploy/scheduler/deployment.yaml", "convoy-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"GOGC=", "GOMEMLIMIT="} {
		if !strings.Contains(strings.Join(env, " "), name) {
			t.Errorf("deploy/scheduler's convoy-scheduler sets %v, want %s among them", env, name)
		}
	}
	// The log verbosity every contender runs at by default is the one the Deployment's command
	// line gives.
	v, err := shippedVerbosity()
	if err != nil {
		t.Fatal(err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "scheduler", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"--v=%d"`, v); !strings.Contains(string(data), want) {
		t.Errorf("shippedVerbosity() = %d, but deploy/scheduler/deployment.yaml has no %s", v, want)
	}
}
