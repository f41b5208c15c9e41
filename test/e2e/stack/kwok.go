package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

// KwokArgs returns kwok's command-line arguments for the stack: a --config with kwok's own default
// pod stages, read from the pinned kwok module (a config that lists pod stages replaces them),
// and the convoy-sim-exit stage. The file is written once per content to the temporary directory.
func KwokArgs(ctx context.Context) ([]string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := framework.ModuleDir(ctx, root, "sigs.k8s.io/kwok@v0.7.0")
	if err != nil {
		return nil, err
	}
	docs := []string{}
	for _, name := range []string{"pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, "kustomize", "stage", "pod", "fast", name))
		if err != nil {
			return nil, fmt.Errorf("kwok's default pod stages: %w", err)
		}
		docs = append(docs, string(data))
	}
	docs = append(docs, simExitStage)
	config := strings.Join(docs, "\n---\n")
	sum := sha256.Sum256([]byte(config))
	path := filepath.Join(os.TempDir(), "convoy-kwok-stages-"+hex.EncodeToString(sum[:6])+".yaml")
	if _, err := os.Stat(path); err != nil {
		if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
			return nil, err
		}
	}
	return []string{"--config=" + path}, nil
}
