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

package progress

import (
	"strings"
	"testing"
)

// TestPresignScope: a pod reads under its job's prefix and writes only under its current
// attempt's directory; everything else is refused with the prefix named.
func TestPresignScope(t *testing.T) {
	const root, attempt = "s3://ckpt/team-a/llm", "s3://ckpt/team-a/llm/attempt-1"
	for _, c := range []struct {
		name, op, key string
		podAttempt    int32
		want          string // "" when allowed, else a part of the refusal
	}{
		{"get own checkpoint of an earlier attempt", PresignGet, "team-a/llm/attempt-0/epoch-3/manifest.json", 1, ""},
		{"list own root", PresignList, "team-a/llm/", 1, ""},
		{"put in the current attempt", PresignPut, "team-a/llm/attempt-1/epoch-4/rank-0.json", 1, ""},
		{"delete in the current attempt", PresignDelete, "team-a/llm/attempt-1/epoch-1/manifest.json", 1, ""},
		{"get another job's sharing a name prefix", PresignGet, "team-a/llm2/attempt-0/x", 1, "its prefix s3://ckpt/team-a/llm"},
		{"list another team", PresignList, "team-b/", 1, "its prefix s3://ckpt/team-a/llm"},
		{"list the root without its slash, which another job's shares", PresignList, "team-a/llm", 1, "its prefix"},
		{"list the whole bucket", PresignList, "", 1, "its prefix"},
		{"get with dot-dot", PresignGet, "team-a/llm/../other/x", 1, "its prefix"},
		{"put in an earlier attempt", PresignPut, "team-a/llm/attempt-0/epoch-9/manifest.json", 1, "current attempt's prefix s3://ckpt/team-a/llm/attempt-1"},
		{"put at the root", PresignPut, "team-a/llm/x", 1, "current attempt's prefix"},
		{"put the attempt directory itself", PresignPut, "team-a/llm/attempt-1", 1, "current attempt's prefix"},
		{"delete another job's", PresignDelete, "team-b/x/attempt-1/m", 1, "current attempt's prefix"},
		{"put from a pod of an earlier attempt", PresignPut, "team-a/llm/attempt-1/x", 0, "only the current attempt writes"},
		{"an unknown op", "copy", "team-a/llm/attempt-1/x", 1, "put, get, list, delete or a multipart upload's"},
		{"a part in the current attempt", PresignUploadPart, "team-a/llm/attempt-1/epoch-4/rank-0/model.pt", 1, ""},
		{"a multipart upload in an earlier attempt", PresignCreateMultipart, "team-a/llm/attempt-0/epoch-4/rank-0/model.pt", 1, "current attempt's prefix"},
		{"completing another job's upload", PresignCompleteMultipart, "team-a/llm2/attempt-1/x", 1, "current attempt's prefix"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := PresignScope(root, attempt, c.podAttempt, 1, c.op, c.key)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want a refusal naming %q", err, c.want)
			}
		})
	}
	// An Azure container's prefix is scoped the same, and named with its scheme.
	if err := PresignScope("az://ckpt/team-a/llm", "az://ckpt/team-a/llm/attempt-1", 1, 1, PresignGet, "team-a/llm2/x"); err == nil || !strings.Contains(err.Error(), "its prefix az://ckpt/team-a/llm/") {
		t.Errorf("get of a sibling prefix in an Azure container: %v, want a refusal naming az://ckpt/team-a/llm/", err)
	}
}
