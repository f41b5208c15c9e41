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
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestPythonSDKBodies decodes what the Python SDK posts (sdk/python/tests/testdata, which the SDK's
// tests check it writes) as the server does, refusing unknown fields, so a field renamed on either
// side fails a test.
func TestPythonSDKBodies(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "sdk", "python", "tests", "testdata")
	decode := func(name string, v any) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	r := &Report{}
	decode("progress.json", r)
	if err := r.Validate(); err != nil {
		t.Errorf("progress.json: %v", err)
	}
	if r.Epoch == nil || r.TotalEpochs == nil || r.Step == nil || len(r.Metrics) == 0 || r.SamplesPerSecond == nil {
		t.Errorf("progress.json left fields of Report empty: %+v", r)
	}
	c := &Checkpoint{}
	decode("checkpoint.json", c)
	if err := c.Validate(); err != nil {
		t.Errorf("checkpoint.json: %v", err)
	}
	if c.Epoch == 0 {
		t.Errorf("checkpoint.json has no epoch: %+v", c)
	}
	tr := &Tracking{}
	decode("tracking.json", tr)
	if err := tr.Validate(); err != nil {
		t.Errorf("tracking.json: %v", err)
	}
	if tr.MLflowRunID == "" || tr.URL == "" {
		t.Errorf("tracking.json left fields of Tracking empty: %+v", tr)
	}
}
