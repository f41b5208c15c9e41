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

package queue

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/progress"
)

// TestWaitingJobForecastsItsStartFromTheRunningJobsProgress: a job waiting behind a running one
// that fills the ClusterQueue has an unknown start naming that job until the job's epoch rate is
// measured; then its estimated start is the running job's estimated completion, shown by kubectl
// get, and it moves when the running job reports more epochs. Once admitted, the job has no
// estimated start.
func TestWaitingJobForecastsItsStartFromTheRunningJobsProgress(t *testing.T) {
	e := newEnv(t)
	e.create(clusterQueue(e.ns, "", 8, nil, nil, kueue.ClusterQueuePreemption{}))
	e.localQueue(e.ns)
	e.create(trainingJob(e.ns, "first", "q", "", 1, 8))
	e.waitJob(e.ns, "first", "admitted", func(j *convoy.TrainingJob) bool { return j.Status.Admission != nil })
	pods := e.startGang(e.ns, "first", 1)
	e.create(trainingJob(e.ns, "second", "q", "", 1, 8))

	forecastOf := func(j *convoy.TrainingJob) convoy.ForecastStatus {
		return ptr.Deref(j.Status.Forecast, convoy.ForecastStatus{})
	}
	second := forecastOf(e.waitJob(e.ns, "second", "a forecast", func(j *convoy.TrainingJob) bool { return forecastOf(j).Reason != "" }))
	if second.EstimatedStartTime != nil || !strings.HasPrefix(second.Reason, "unknown") || !strings.Contains(second.Reason, e.ns+"/first") {
		t.Errorf("forecast before the running job's rate is measured: start %v, reason %q; want none, and a reason naming %s/first", second.EstimatedStartTime, second.Reason, e.ns)
	}

	e.reportProgress(&pods[0], progress.Report{Epoch: ptr.To[int32](1), TotalEpochs: ptr.To[int32](100)})
	time.Sleep(time.Second) // an epoch passes
	e.reportProgress(&pods[0], progress.Report{Epoch: ptr.To[int32](2), TotalEpochs: ptr.To[int32](100)})
	first := forecastOf(e.waitJob(e.ns, "first", "an estimated completion", func(j *convoy.TrainingJob) bool {
		return forecastOf(j).EstimatedCompletionTime != nil
	}))
	second = forecastOf(e.waitJob(e.ns, "second", "an estimated start", func(j *convoy.TrainingJob) bool {
		return forecastOf(j).EstimatedStartTime != nil
	}))
	if !second.EstimatedStartTime.Equal(first.EstimatedCompletionTime) {
		t.Errorf("estimated start %v, want the running job's estimated completion %v", second.EstimatedStartTime, first.EstimatedCompletionTime)
	}
	want := e.ns + "/first must finish first, to free the 8 nvidia.com/gpu it lacks in ClusterQueue " + e.ns
	if second.Reason != want {
		t.Errorf("reason %q, want %q", second.Reason, want)
	}
	out := e.kubectl("get", "tj", "-n", e.ns, "second")
	if !strings.Contains(out, "STARTS") || !strings.Contains(out, second.EstimatedStartTime.UTC().Format(time.RFC3339)) {
		t.Errorf("kubectl get tj does not show the estimated start %v:\n%s", second.EstimatedStartTime, out)
	}

	// The running job now says it runs 10,000 epochs: its completion, and the start behind it, move
	// hours later.
	before := second.EstimatedStartTime.Time
	e.reportProgress(&pods[0], progress.Report{Epoch: ptr.To[int32](3), TotalEpochs: ptr.To[int32](10000)})
	e.waitJob(e.ns, "second", "the estimated start to move an hour later", func(j *convoy.TrainingJob) bool {
		s := forecastOf(j).EstimatedStartTime
		return s != nil && s.After(before.Add(time.Hour))
	})

	e.finishPod(&pods[0])
	e.waitJob(e.ns, "second", "admitted, without an estimated start", func(j *convoy.TrainingJob) bool {
		return j.Status.Admission != nil && forecastOf(j).EstimatedStartTime == nil && forecastOf(j).Reason == ""
	})
}
