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

package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The rank 0 log of a resumed attempt, as `kubectl logs --timestamps` shows it.
const resumedLog = `2026-11-29T10:00:00.000000000Z rank=0 resumed from epoch 4
2026-11-29T10:00:01.000000000Z rank=0 epoch=5/1000 loss=0.1000 accuracy=0.9000
2026-11-29T10:00:03.000000000Z rank=1 epoch=5/1000 loss=0.1000 accuracy=0.9000
2026-11-29T10:00:03.500000000Z rank=0 epoch=6/1000 loss=0.0900 accuracy=0.9100
`

func TestReadTrainerLog(t *testing.T) {
	resumed, epochs := readTrainerLog(resumedLog)
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := map[int]time.Time{5: at("2026-11-29T10:00:01Z"), 6: at("2026-11-29T10:00:03.5Z")}
	if resumed != 4 || !cmp.Equal(epochs, want) {
		t.Errorf("readTrainerLog = %d, %v; want 4, %v", resumed, epochs, want)
	}
}

// What the old attempt wrote where it must not is found: into its own directory after its
// containers were gone, or into the new attempt's, of an epoch the new one did not log, or before
// the new one logged it; what each attempt wrote in its own directory in its time is not.
func TestReadCheckpointsFindsTheOldAttemptsWrites(t *testing.T) {
	dir := t.TempDir()
	failed := time.Date(2026, 11, 29, 9, 59, 0, 0, time.UTC)
	gone := time.Date(2026, 11, 29, 10, 0, 2, 0, time.UTC)
	_, epochs := readTrainerLog(resumedLog)
	write := func(rel string, mtime time.Time) {
		path := filepath.Join(dir, "ns", "lost", rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	// The old attempt, before the fault, during it, and once gone.
	write("attempt-0/epoch-4.pt", failed.Add(-time.Second))
	write("attempt-0/epoch-7.pt", failed.Add(30*time.Second))
	write("attempt-0/epoch-9.pt", gone.Add(time.Second))
	// The new attempt's own checkpoints, and a file being written.
	write("attempt-1/epoch-5.pt", epochs[5].Add(100*time.Millisecond))
	write("attempt-1/epoch-6.pt", epochs[6].Add(100*time.Millisecond))
	write("attempt-1/.epoch-7.pt.tmp", gone.Add(5*time.Second))
	// The SDK's list of checkpoints, which every attempt's rank 0 rewrites.
	write(".convoy-checkpoints.json", gone.Add(5*time.Second))
	cp, err := readCheckpoints(dir, "attempt-1", "0", failed, gone, 4, epochs)
	if err != nil {
		t.Fatal(err)
	}
	if cp.oldWrites != 2 || len(cp.violations) != 1 || !strings.Contains(cp.violations[0], "attempt-0/epoch-9.pt") {
		t.Errorf("old writes %d, violations %q; want 2 and attempt-0/epoch-9.pt alone", cp.oldWrites, cp.violations)
	}

	// The old attempt writing into the new attempt's directory.
	write("attempt-1/epoch-3.pt", failed.Add(40*time.Second))
	write("attempt-1/epoch-8.pt", failed.Add(50*time.Second))
	write("attempt-1/epoch-6.pt", epochs[6].Add(-2*time.Second))
	cp, err = readCheckpoints(dir, "attempt-1", "0", failed, gone, 4, epochs)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cp.violations, "\n")
	for _, want := range []string{"attempt-1/epoch-3.pt in the new attempt's directory: an epoch before",
		"attempt-1/epoch-8.pt in the new attempt's directory: an epoch its rank 0 never logged",
		"attempt-1/epoch-6.pt in the new attempt's directory written at"} {
		if !strings.Contains(got, want) {
			t.Errorf("violations have no %q:\n%s", want, got)
		}
	}
	if len(cp.violations) != 4 {
		t.Errorf("%d violations, want 4:\n%s", len(cp.violations), got)
	}
}
