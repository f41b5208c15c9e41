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
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// DefaultTerminationLog is where the kubelet reads a container's termination message.
const DefaultTerminationLog = "/dev/termination-log"

// Main is `convoy-operator publish`: it pushes --checkpoint to --image and writes the Result as
// JSON to stdout and to --termination-log, or the error there, returning the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	o.Annotations = map[string]string{}
	fs.StringVar(&o.Checkpoint, "checkpoint", "", "The checkpoint to push: a directory (each file one layer), a file, or an s3://, gs:// or az:// prefix (its objects, read with the job's identity or the AWS_*, STORAGE_EMULATOR_HOST or AZURE_STORAGE_* environment).")
	fs.StringVar(&o.Root, "root", "", "The checkpoint storage's mount point, or the job's s3://, gs:// or az:// prefix, which --checkpoint lies in; nothing outside the checkpoint is read. Empty is the checkpoint's directory.")
	fs.StringVar(&o.Reference, "image", "", "Where to push it: registry/repository:tag.")
	fs.StringVar(&o.DockerConfig, "docker-config", "", "A Docker config.json with the registry's credentials; empty pushes anonymously.")
	fs.BoolVar(&o.PlainHTTP, "plain-http", false, "Talk to the registry over plain HTTP.")
	terminationLog := fs.String("termination-log", DefaultTerminationLog, "Where to write the result or the error for the kubelet; empty writes none.")
	fs.Func("annotation", "A manifest annotation key=value; repeatable.", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", kv)
		}
		o.Annotations[k] = v
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.Checkpoint == "" || o.Reference == "" {
		fmt.Fprintln(stderr, "publish needs --checkpoint and --image")
		return 2
	}
	res, err := Push(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "publishing failed:", err)
		writeTerminationLog(*terminationLog, err.Error(), stderr)
		return 1
	}
	out, _ := json.Marshal(res) // two strings
	fmt.Fprintln(stdout, string(out))
	writeTerminationLog(*terminationLog, string(out), stderr)
	return 0
}

// maxTerminationMessage is the kubelet's limit of a termination message.
const maxTerminationMessage = 4096

func writeTerminationLog(path, message string, stderr io.Writer) {
	if path == "" {
		return
	}
	if len(message) > maxTerminationMessage {
		message = message[:maxTerminationMessage]
	}
	if err := os.WriteFile(path, []byte(message), 0o644); err != nil {
		fmt.Fprintln(stderr, "writing the termination message:", err)
	}
}
