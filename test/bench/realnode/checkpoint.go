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
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/convoy-dev/convoy/test/framework"
)

//go:embed checkpoint_throughput.py
var throughputScript []byte

// checkpointThroughput saves and loads megabytes through the SDK to SeaweedFS's S3 gateway on
// loopback and to a local directory, and prints the throughputs and their ratio.
func checkpointThroughput(megabytes, rounds int) (err error) {
	ctx := context.Background()
	c, err := framework.Start(ctx, framework.Options{WithoutKwok: true, WithoutControllerManager: true})
	if err != nil {
		return err
	}
	defer func() {
		if serr := c.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	s, err := c.StartS3(ctx, "", []string{"bench"})
	if err != nil {
		return err
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	script := filepath.Join(c.StateDir, "checkpoint_throughput.py")
	if err := os.WriteFile(script, throughputScript, 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "python3", script, strconv.Itoa(megabytes), strconv.Itoa(rounds))
	cmd.Env = append(append(os.Environ(), s.Env(s.Admin)...), "CONVOY_BENCH_S3=s3://bench/job",
		"PYTHONPATH="+filepath.Join(root, "sdk", "python", "src"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %w", script, err)
	}
	var r map[string]struct {
		Save float64 `json:"save_mbps"`
		Load float64 `json:"load_mbps"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return fmt.Errorf("%s printed %q: %w", script, out, err)
	}
	v, o := r["volume"], r["s3"]
	fmt.Printf("\n| %d MiB checkpoint through the SDK (median of %d) | local volume | S3 (SeaweedFS, loopback) | S3 / volume |\n|---|---|---|---|\n", megabytes, rounds)
	fmt.Printf("| save | %.0f MiB/s | %.0f MiB/s | %.2f |\n", v.Save, o.Save, o.Save/v.Save)
	fmt.Printf("| load | %.0f MiB/s | %.0f MiB/s | %.2f |\n", v.Load, o.Load, o.Load/v.Load)
	return nil
}
