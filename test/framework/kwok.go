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

package framework

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// KwokModule is the kwok module, at the version go.mod pins: bin/kwok is built from it, and KwokArgs
// reads its default stages.
const KwokModule = "sigs.k8s.io/kwok"

// PodDeleteKeepingFinalizers is the pod-delete stage as a kubelet acts: a pod going with finalizers
// stays, Terminating, until they are removed, and is deleted then. The default stage
// (podDeleteClearingFinalizers) empties the finalizers of every pod going at once, so a test
// cannot hold a pod in Terminating, as a slow-stopping training process or a controller's
// finalizer does.
var PodDeleteKeepingFinalizers = podDeleteStage(`
    - key: '.metadata.finalizers'
      operator: 'DoesNotExist'`, `
    delete: true`)

// podDeleteClearingFinalizers is the pod-delete stage of every cluster that names no other: a pod
// going is deleted at once, its finalizers emptied, as kwok's "fast" stages did up to v0.7 (from
// v0.8 kwok's own stage leaves the finalizers, and a pod holding one, Terminating, for ever).
var podDeleteClearingFinalizers = podDeleteStage("", `
    finalizers:
      empty: true
    delete: true`)

// podDeleteStage is the Stage "pod-delete" for pods being deleted that also match selector (more
// matchExpressions), moving them as next says.
func podDeleteStage(selector, next string) string {
	return `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'` + selector + `
  next:` + next + "\n"
}

// kwokStages are the stages of kwok's module that KwokArgs' config starts from, by file under
// kustomize/stage: a node is initialized and renews its Lease (the cluster runs kwok with
// --node-lease-duration-seconds), a pod runs at once and completes when its containers say so.
// kwok runs no stage of its own once a config names any.
var kwokStages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-complete.yaml",
}

// KwokArgs returns kwok's command-line arguments for a --config of the default stages (kwokStages,
// read from the pinned kwok module, and podDeleteClearingFinalizers), where each of stages replaces
// the default stage of its name or adds to them. The file is written once per content to the
// temporary directory. A cluster whose Options.KwokArgs have no --config runs with KwokArgs(ctx).
func KwokArgs(ctx context.Context, stages ...string) ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := ModuleDir(ctx, root, KwokModule)
	if err != nil {
		return nil, err
	}
	var docs, names []string
	for _, file := range kwokStages {
		data, err := os.ReadFile(filepath.Join(dir, "kustomize", "stage", filepath.FromSlash(file)))
		if err != nil {
			return nil, fmt.Errorf("kwok's default stages: %w", err)
		}
		docs, names = append(docs, string(data)), append(names, strings.TrimSuffix(filepath.Base(file), ".yaml"))
	}
	docs, names = append(docs, podDeleteClearingFinalizers), append(names, "pod-delete")
	for _, s := range stages {
		var meta struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(s), &meta); err != nil || meta.Metadata.Name == "" {
			return nil, fmt.Errorf("a kwok stage without a metadata.name (%v):\n%s", err, s)
		}
		if i := slices.Index(names, meta.Metadata.Name); i >= 0 {
			docs[i] = s
			continue
		}
		docs, names = append(docs, s), append(names, meta.Metadata.Name)
	}
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
