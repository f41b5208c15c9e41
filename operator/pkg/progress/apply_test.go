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
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

func TestApplyReport(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Hyperparameters(convoy.Hyperparameters{Epochs: ptr.To[int32](20)}).Obj()
	cases := map[string]struct {
		status  convoy.TrainingJobStatus
		reports []Report
		want    convoy.TrainingJobStatus
	}{
		"first report: epochs from the hyperparameters, loss becomes the best": {
			reports: []Report{{Epoch: ptr.To[int32](5), Step: ptr.To[int64](500), Metrics: map[string]float64{"loss": 0.5, "lr": 1e-4}}},
			want: convoy.TrainingJobStatus{CurrentEpoch: 5, TotalEpochs: 20, Progress: "25%",
				Metrics: &convoy.TrainingMetrics{Loss: ptr.To(0.5), Step: 500, Additional: map[string]string{"lr": "0.0001"}},
				Best:    &convoy.BestMetric{Name: "loss", Value: 0.5, Epoch: 5}},
		},
		"a worse loss keeps the best; reported total epochs win": {
			status:  convoy.TrainingJobStatus{CurrentEpoch: 5, TotalEpochs: 20, Best: &convoy.BestMetric{Name: "loss", Value: 0.5, Epoch: 5}},
			reports: []Report{{Epoch: ptr.To[int32](6), TotalEpochs: ptr.To[int32](8), Metrics: map[string]float64{"loss": 0.7}}},
			want: convoy.TrainingJobStatus{CurrentEpoch: 6, TotalEpochs: 8, Progress: "75%",
				Metrics: &convoy.TrainingMetrics{Loss: ptr.To(0.7)}, Best: &convoy.BestMetric{Name: "loss", Value: 0.5, Epoch: 5}},
		},
		"accuracy replaces loss as the watched metric and only improves": {
			reports: []Report{
				{Epoch: ptr.To[int32](1), Metrics: map[string]float64{"loss": 0.3}},
				{Epoch: ptr.To[int32](2), Metrics: map[string]float64{"loss": 0.4, "accuracy": 0.8}},
				{Epoch: ptr.To[int32](3), Metrics: map[string]float64{"accuracy": 0.7}},
			},
			want: convoy.TrainingJobStatus{CurrentEpoch: 3, TotalEpochs: 20, Progress: "15%",
				Metrics: &convoy.TrainingMetrics{Loss: ptr.To(0.4), Accuracy: ptr.To(0.7)},
				Best:    &convoy.BestMetric{Name: "accuracy", Value: 0.8, Epoch: 2}},
		},
		"progress is capped at 100%": {
			reports: []Report{{Epoch: ptr.To[int32](25)}},
			want:    convoy.TrainingJobStatus{CurrentEpoch: 25, TotalEpochs: 20, Progress: "100%"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.status.DeepCopy()
			for i := range tc.reports {
				ApplyReport(job, st, &tc.reports[i])
			}
			if diff := cmp.Diff(tc.want, *st); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestApplyReportRecordsThroughputBySize(t *testing.T) {
	job := utiltesting.MakeTrainingJob("llm", "ns").Workers(8).Elastic(2, convoy.ElasticSpec{}).Obj()
	at := func(cur, target int32, tp ...convoy.SizeThroughput) convoy.TrainingJobStatus {
		return convoy.TrainingJobStatus{Elastic: &convoy.ElasticStatus{CurrentWorkers: cur, TargetWorkers: target, Throughput: tp}}
	}
	cases := map[string]struct {
		job    *convoy.TrainingJob
		status convoy.TrainingJobStatus
		sps    []float64
		want   convoy.TrainingJobStatus
	}{
		"the mean of the current size's reports": {
			job: job, status: at(4, 4, convoy.SizeThroughput{Workers: 2, SamplesPerSecond: 100, Reports: 3}), sps: []float64{380, 420},
			want: at(4, 4, convoy.SizeThroughput{Workers: 2, SamplesPerSecond: 100, Reports: 3}, convoy.SizeThroughput{Workers: 4, SamplesPerSecond: 400, Reports: 2}),
		},
		"not while the gang resizes": {
			job: job, status: at(4, 6), sps: []float64{400},
			want: at(4, 6),
		},
		"not for a job that is not elastic": {
			job: utiltesting.MakeTrainingJob("llm", "ns").Workers(8).Obj(), status: at(4, 4), sps: []float64{400},
			want: at(4, 4),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.status.DeepCopy()
			for _, v := range tc.sps {
				ApplyReport(tc.job, st, &Report{SamplesPerSecond: ptr.To(v)})
			}
			if diff := cmp.Diff(tc.want, *st); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestApplyCheckpoint(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := &convoy.TrainingJobStatus{}
	ApplyCheckpoint(st, &Checkpoint{Path: "s3://b/ns/llm/epoch-3", Epoch: 3}, 2, now)
	want := &convoy.CheckpointStatus{Latest: "s3://b/ns/llm/epoch-3", Epoch: 3, Time: ptr.To(metav1.NewTime(now)), Attempt: 2}
	if diff := cmp.Diff(want, st.Checkpoint); diff != "" {
		t.Errorf("checkpoint (-want,+got):\n%s", diff)
	}
}

// TestApplyCheckpointAnsweringARequest: a checkpoint recorded in the second the operator asked for
// one is stamped with the next second, so that the operator tells it from the checkpoints before.
func TestApplyCheckpointAnsweringARequest(t *testing.T) {
	asked := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for now, want := range map[time.Time]time.Time{
		asked.Add(300 * time.Millisecond):  asked.Add(time.Second),
		asked.Add(2500 * time.Millisecond): asked.Add(2500 * time.Millisecond),
	} {
		st := &convoy.TrainingJobStatus{Conditions: []metav1.Condition{{Type: convoy.ConditionCheckpointRequested,
			Status: metav1.ConditionTrue, Reason: convoy.ReasonStopRequested, LastTransitionTime: metav1.NewTime(asked)}}}
		ApplyCheckpoint(st, &Checkpoint{Path: "s3://b/ns/llm/epoch-3", Epoch: 3}, 0, now)
		if got := st.Checkpoint.Time.Time; !got.Equal(want) {
			t.Errorf("checkpoint reported at %s after a request at %s: time %s, want %s", now, asked, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	many := map[string]float64{}
	for i := range 33 {
		many[string(rune('a'+i%26))+string(rune('a'+i/26))] = 1
	}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"a good report":               {err: (&Report{Epoch: ptr.To[int32](1), Metrics: map[string]float64{"loss": 1}}).Validate()},
		"a negative epoch":            {err: (&Report{Epoch: ptr.To[int32](-1)}).Validate(), want: true},
		"zero total epochs":           {err: (&Report{TotalEpochs: ptr.To[int32](0)}).Validate(), want: true},
		"too many metrics":            {err: (&Report{Metrics: many}).Validate(), want: true},
		"an accuracy above 1":         {err: (&Report{Metrics: map[string]float64{"accuracy": 97}}).Validate(), want: true},
		"a negative accuracy":         {err: (&Report{Metrics: map[string]float64{"accuracy": -0.1}}).Validate(), want: true},
		"a throughput":                {err: (&Report{SamplesPerSecond: ptr.To(1250.5)}).Validate()},
		"a negative throughput":       {err: (&Report{SamplesPerSecond: ptr.To(-1.0)}).Validate(), want: true},
		"an infinite throughput":      {err: (&Report{SamplesPerSecond: ptr.To(math.Inf(1))}).Validate(), want: true},
		"a checkpoint":                {err: (&Checkpoint{Path: "/ckpt/1", Epoch: 1}).Validate()},
		"a checkpoint without a path": {err: (&Checkpoint{Epoch: 1}).Validate(), want: true},
		"a checkpoint negative epoch": {err: (&Checkpoint{Path: "p", Epoch: -2}).Validate(), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.err != nil; got != tc.want {
				t.Errorf("Validate() = %v, want an error: %v", tc.err, tc.want)
			}
		})
	}
}

func TestUnder(t *testing.T) {
	for p, want := range map[string]bool{
		"/checkpoints/ns/job":                  true,
		"/checkpoints/ns/job/epoch-3":          true,
		"/checkpoints/ns/job2/epoch-3":         false,
		"/checkpoints/ns/other/epoch-3":        false,
		"/checkpoints/ns/job/../other/epoch-3": false,
		"/checkpoints/ns/job/./epoch-3":        false,
		"s3://bucket/ns/job/epoch-3":           false,
	} {
		if got := Under(p, "/checkpoints/ns/job"); got != want {
			t.Errorf("Under(%q, /checkpoints/ns/job) = %v, want %v", p, got, want)
		}
	}
}

func TestSelfSignedCertificateVerifies(t *testing.T) {
	cert, err := selfSigned("convoy-operator.convoy-system.svc")
	if err != nil {
		t.Fatal(err)
	}
	secret := map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM, "ca.crt": cert.CAPEM}
	for host, want := range map[string]bool{"convoy-operator.convoy-system.svc": true, "127.0.0.1": true, "other.svc": false} {
		_, ok := usable(secretOf(secret), host)
		if ok != want {
			t.Errorf("usable for %s = %v, want %v", host, ok, want)
		}
	}
	if _, err := cert.TLSConfig(); err != nil {
		t.Error(err)
	}
}

func secretOf(data map[string][]byte) *corev1.Secret { return &corev1.Secret{Data: data} }
