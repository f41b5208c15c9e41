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

	"github.com/google/go-cmp/cmp"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func TestTrackingValidate(t *testing.T) {
	cases := map[string]struct {
		body    Tracking
		wantErr string
	}{
		"an MLflow run and its page": {body: Tracking{MLflowRunID: "3b9d0c1e", URL: "http://mlflow:5000/#/experiments/1/runs/3b9d0c1e"}},
		"a W&B page only":            {body: Tracking{URL: "https://wandb.ai/team/llm/runs/ft-1"}},
		"nothing":                    {wantErr: "report mlflowRunId, url or both"},
		"a run id with a slash":      {body: Tracking{MLflowRunID: "../x"}, wantErr: "mlflowRunId must be"},
		"a run id too long":          {body: Tracking{MLflowRunID: strings.Repeat("a", MaxRunIDLen+1)}, wantErr: "mlflowRunId must be"},
		"a javascript url":           {body: Tracking{URL: "javascript:alert(1)"}, wantErr: "url must be an http or https URL"},
		"a url without a host":       {body: Tracking{URL: "http:///runs"}, wantErr: "url must be"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.body.Validate()
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestApplyTrackingKeepsTheFirstRun(t *testing.T) {
	st := &convoy.TrainingJobStatus{Tracking: &convoy.TrackingStatus{WandbRunID: "ft-1"}}
	if !ApplyTracking(st, &Tracking{MLflowRunID: "a"}) {
		t.Error("recording the first run changed nothing")
	}
	if !ApplyTracking(st, &Tracking{MLflowRunID: "a", URL: "http://m/runs/a"}) {
		t.Error("adding the run's page changed nothing")
	}
	if ApplyTracking(st, &Tracking{MLflowRunID: "b", URL: "http://m/runs/b"}) {
		t.Error("another run replaced the first")
	}
	want := &convoy.TrackingStatus{MLflowRunID: "a", WandbRunID: "ft-1", URL: "http://m/runs/a"}
	if diff := cmp.Diff(want, st.Tracking); diff != "" {
		t.Errorf("status.tracking (-want,+got):\n%s", diff)
	}
}
