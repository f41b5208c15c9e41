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

package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
)

// AnnotationSimExitCode on a running pod of a fake node makes its containers exit with this code:
// kwok's convoy-sim-exit stage moves the pod to Succeeded ("0") or Failed (any other code), as a
// kubelet would report the training process's exit. simtrainer sets "0" on a gang without a
// target accuracy after its last epoch; a test or a user may set any code, for example "137" for
// an OOM-killed worker:
//
//	kubectl annotate pod llm-worker-1 convoy.dev/sim-exit-code=137
const AnnotationSimExitCode = "convoy.dev/sim-exit-code"

// simExitStage is the kwok Stage behind AnnotationSimExitCode.
const simExitStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: convoy-sim-exit
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.annotations["` + AnnotationSimExitCode + `"]'
      operator: 'Exists'
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $code := index .metadata.annotations "` + AnnotationSimExitCode + `" }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: {{ $code }}
            finishedAt: {{ $now | Quote }}
            reason: {{ if eq $code "0" }}Completed{{ else }}Error{{ end }}
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
`

// AnnotationSimNodeNotReady on a fake node keeps kwok from making it Ready again: its kubelet, as it
// were, reports the NotReady that a test writes into the node's status, while kwok still renews
// the node's Lease and runs its pods, as a kubelet whose container runtime is down does.
const AnnotationSimNodeNotReady = "convoy.dev/sim-node-not-ready"

// KwokArgs returns kwok's command-line arguments for the stack: kwok's own default pod stages,
// the convoy-sim-exit stage, and kwok's node-initialize stage for nodes without
// AnnotationSimNodeNotReady only.
func KwokArgs(ctx context.Context) ([]string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := framework.ModuleDir(ctx, root, framework.KwokModule)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "kustomize", "stage", "node", "fast", "node-initialize.yaml"))
	if err != nil {
		return nil, fmt.Errorf("kwok's node-initialize stage: %w", err)
	}
	const selector = "  selector:\n    matchExpressions:\n"
	if !strings.Contains(string(data), selector) {
		return nil, fmt.Errorf("kwok's node-initialize stage has no %q to add to", selector)
	}
	initialize := strings.Replace(string(data), selector, selector+`    - key: '.metadata.annotations["`+AnnotationSimNodeNotReady+`"]'
      operator: 'DoesNotExist'
`, 1)
	return framework.KwokArgs(ctx, simExitStage, initialize)
}

// Main runs a package's tests on clusters fit for the stack: kwok with KwokArgs, Kubernetes' own
// gang API served on a 1.37 control plane, and a client that knows TrainingJobs, Kueue's objects
// and PodGroups.
func Main(m *testing.M) {
	kwokArgs, err := KwokArgs(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	framework.Main(m, framework.Options{KwokArgs: kwokArgs, WorkloadAPI: true, AddToScheme: []func(*runtime.Scheme) error{
		convoy.AddToScheme, kueue.AddToScheme, schedv1alpha1.AddToScheme}})
}
