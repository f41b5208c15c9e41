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

package publish

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheckpointIsReadOnlyInsideItsRoot: the publisher lists and reads a checkpoint's files
// through its root; a symbolic link or ".." that leads out of the checkpoint (to the registry
// credentials, say) fails the publish with an error naming it, and nothing outside is read.
func TestCheckpointIsReadOnlyInsideItsRoot(t *testing.T) {
	base := t.TempDir()
	secret := filepath.Join(base, "registry", "config.json")
	storage := filepath.Join(base, "checkpoints")
	job := filepath.Join(storage, "ns", "job")
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	write(secret, `{"auths": {"registry.example.com": {"auth": "c2VjcmV0"}}}`)
	write(filepath.Join(job, "good", "model.safetensors"), "weights")
	write(filepath.Join(job, "good", "tokenizer", "vocab.txt"), "a b c")
	link("model.safetensors", filepath.Join(job, "good", "last.safetensors"))
	write(filepath.Join(job, "leaky", "model.safetensors"), "weights")
	link(secret, filepath.Join(job, "leaky", "config.json"))
	write(filepath.Join(job, "sneaky", "model.safetensors"), "weights")
	link("../good/model.safetensors", filepath.Join(job, "sneaky", "shared.safetensors"))
	link(secret, filepath.Join(job, "epoch-3.pt"))
	link(filepath.Dir(secret), filepath.Join(job, "creds"))
	write(filepath.Join(base, "other", "model.safetensors"), "another tenant's")

	cases := map[string]struct {
		root, checkpoint string
		want             []string
		wantErr          string
	}{
		"a directory, a link inside it read as its file": {root: storage, checkpoint: filepath.Join(job, "good"),
			want: []string{"last.safetensors", "model.safetensors", "tokenizer/vocab.txt"}},
		"a link to the registry credentials": {root: storage, checkpoint: filepath.Join(job, "leaky"),
			wantErr: "config.json is a symbolic link that leads out of the checkpoint"},
		"a link to a sibling checkpoint": {root: storage, checkpoint: filepath.Join(job, "sneaky"),
			wantErr: "shared.safetensors is a symbolic link that leads out of the checkpoint"},
		"a file checkpoint that links out": {root: storage, checkpoint: filepath.Join(job, "epoch-3.pt"),
			wantErr: "reading the checkpoint's epoch-3.pt"},
		"a directory on the way that links out": {root: storage, checkpoint: filepath.Join(job, "creds", "config.json"),
			wantErr: "creds is a symbolic link: publishing follows none"},
		"a path with .. out of the storage": {root: storage, checkpoint: job + "/../../../other",
			wantErr: "is not under " + storage},
		"no root: the checkpoint's own": {checkpoint: filepath.Join(job, "leaky"),
			wantErr: "config.json is a symbolic link that leads out of the checkpoint"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src, err := openCheckpoint(tc.root, tc.checkpoint)
			if err == nil {
				defer src.root.Close()
				_, err = src.describe()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, src.files); diff != "" {
				t.Errorf("files (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestCredentialsInTheCheckpointStorageAreRefused: the publisher refuses to run with the registry
// credentials inside the tree it reads.
func TestCredentialsInTheCheckpointStorageAreRefused(t *testing.T) {
	storage := t.TempDir()
	_, err := Push(t.Context(), Options{Root: storage, Checkpoint: filepath.Join(storage, "ns", "job", "epoch-1"),
		DockerConfig: filepath.Join(storage, "ns", "job", "config.json"), Reference: "registry.example.com/team/llm:v1"})
	if err == nil || !strings.Contains(err.Error(), "lie in the checkpoint storage") {
		t.Errorf("error %v, want the credentials refused", err)
	}
}
