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

package operator

import (
	"net/http"
	"strings"
	"testing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
	"github.com/convoy-dev/convoy/test/util"
)

// TestTrackingRunAcrossRestarts: every attempt of a job logs into one tracker run. W&B's run id is
// the operator's, derived from the job; the MLflow run is the one rank 0 reported, which only rank
// 0 of the current attempt may report, which never changes once recorded, and which the restarted
// gang's pods get as MLFLOW_RUN_ID.
func TestTrackingRunAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	e.startOperator()
	e.create(utiltesting.MakeTrainingJob("tr", e.ns).Workers(2).FailurePolicy(convoy.RestartOnFailure, 3).
		Monitoring(convoy.MonitoringSpec{MLflowTrackingURI: "http://mlflow.example:5000", WandbProject: "llm"}).Obj())
	pods := e.startGang("tr", 2, 0)
	job := e.job("tr")
	wandbID := job.WandbRunID()
	if !strings.HasPrefix(wandbID, "tr-") || len(wandbID) != len("tr-")+12 {
		t.Errorf("W&B run id %q, want tr-<12 hex digits of the UID>", wandbID)
	}
	for name, p := range pods {
		for variable, want := range map[string]string{"WANDB_PROJECT": "llm", "WANDB_RUN_ID": wandbID, "WANDB_RESUME": "allow",
			"MLFLOW_TRACKING_URI": "http://mlflow.example:5000", "MLFLOW_RUN_ID": ""} {
			if got := util.EnvOf(p, variable); got != want {
				t.Errorf("first attempt's pod %s: %s = %q, want %q", name, variable, got, want)
			}
		}
	}
	if tr := job.Status.Tracking; tr == nil || tr.WandbRunID != wandbID || tr.MLflowRunID != "" {
		t.Errorf("status.tracking before any report = %+v, want the W&B run id %s only", tr, wandbID)
	}

	const runID, runURL = "8d1f2c", "http://mlflow.example:5000/#/experiments/1/runs/8d1f2c"
	w0, w1 := pods["tr-worker-0"], pods["tr-worker-1"]
	if code, answer := e.post(w1, "tracking", e.podToken(w1, progress.Audience), progress.Tracking{MLflowRunID: "rank-1s-run"}); code != http.StatusForbidden {
		t.Errorf("rank 1 reporting a run: %d %s, want 403", code, answer)
	}
	e.report(w0, "tracking", progress.Tracking{MLflowRunID: runID, URL: runURL})
	job = e.job("tr")
	if tr := job.Status.Tracking; tr == nil || tr.MLflowRunID != runID || tr.URL != runURL || tr.WandbRunID != wandbID {
		t.Fatalf("status.tracking after rank 0's report = %+v", tr)
	}
	e.waitEvents("tr", progress.ReasonTrackingRun)
	e.report(w0, "tracking", progress.Tracking{MLflowRunID: runID}) // the same run again: fine
	for name, body := range map[string]progress.Tracking{
		"another run":      {MLflowRunID: "other"},
		"another run page": {URL: "http://evil.example/runs/1"},
	} {
		if code, answer := e.post(w0, "tracking", e.podToken(w0, progress.Audience), body); code != http.StatusConflict {
			t.Errorf("%s from rank 0: %d %s, want 409", name, code, answer)
		}
	}

	e.finishPod("tr-worker-1", 1)
	e.waitEvents("tr", convoy.ReasonPodFailed)
	pods = e.waitPods("tr", 2, 1)
	for name, p := range pods {
		if got := util.EnvOf(p, "MLFLOW_RUN_ID"); got != runID {
			t.Errorf("restarted pod %s: MLFLOW_RUN_ID = %q, want the recorded run %s", name, got, runID)
		}
		if got := util.EnvOf(p, "WANDB_RUN_ID"); got != wandbID {
			t.Errorf("restarted pod %s: WANDB_RUN_ID = %q, want %s as before", name, got, wandbID)
		}
	}
	e.bindAll("tr")
	e.waitState("tr", convoy.StateRunning)
	w0 = pods[util.WorkerPod("tr", 0, 1)]
	if code, answer := e.post(w0, "tracking", e.podToken(w0, progress.Audience), progress.Tracking{MLflowRunID: "fresh-run"}); code != http.StatusConflict {
		t.Errorf("the restarted rank 0 reporting a new run: %d %s, want 409", code, answer)
	}
	if tr := e.job("tr").Status.Tracking; tr.MLflowRunID != runID || tr.URL != runURL {
		t.Errorf("status.tracking after the restart = %+v, want run %s at %s", tr, runID, runURL)
	}
}
