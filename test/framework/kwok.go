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

// KwokModule is the pinned kwok module whose default stages KwokArgs reads.
const KwokModule = "sigs.k8s.io/kwok@v0.7.0"

// PodDeleteKeepingFinalizers is kwok's pod-delete stage as a kubelet acts: a pod going with
// finalizers stays, Terminating, until they are removed, and is deleted then. kwok's default
// ("fast") stage empties the finalizers of every pod going at once, so a test cannot hold a pod
// in Terminating, as a slow-stopping training process or a controller's finalizer does.
const PodDeleteKeepingFinalizers = `apiVersion: kwok.x-k8s.io/v1alpha1
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
      operator: 'Exists'
    - key: '.metadata.finalizers'
      operator: 'DoesNotExist'
  next:
    delete: true
`

// KwokArgs returns kwok's command-line arguments for a --config of kwok's own default pod stages,
// read from the pinned kwok module (a config that lists pod stages replaces them all), where each
// of stages replaces the default stage of its name or adds to them. The file is written once per
// content to the temporary directory.
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
	for _, name := range []string{"pod-ready", "pod-complete", "pod-delete"} {
		data, err := os.ReadFile(filepath.Join(dir, "kustomize", "stage", "pod", "fast", name+".yaml"))
		if err != nil {
			return nil, fmt.Errorf("kwok's default pod stages: %w", err)
		}
		docs, names = append(docs, string(data)), append(names, name)
	}
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
