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
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/workloadslicing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	utiltesting "github.com/convoy-dev/convoy/operator/pkg/testing"
)

func TestSyncQueueName(t *testing.T) {
	job := func(spec, label string) *convoy.TrainingJob {
		w := utiltesting.MakeTrainingJob("a", "ns")
		if spec != "" {
			w.Queue(spec)
		}
		j := w.Obj()
		if label != "" {
			j.Labels = map[string]string{convoy.QueueNameLabel: label}
		}
		return j
	}
	cases := map[string]struct {
		job, old            *convoy.TrainingJob
		wantSpec, wantLabel string
		wantErr             string
	}{
		"no queue":                            {job: job("", "")},
		"spec names the queue":                {job: job("q", ""), wantSpec: "q", wantLabel: "q"},
		"label names the queue":               {job: job("", "q"), wantSpec: "q", wantLabel: "q"},
		"both agree":                          {job: job("q", "q"), wantSpec: "q", wantLabel: "q"},
		"both disagree on create":             {job: job("a", "b"), wantErr: `metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": names LocalQueue "b" but spec.scheduling.queue names "a"`},
		"spec changed: the label follows":     {job: job("b", "a"), old: job("a", "a"), wantSpec: "b", wantLabel: "b"},
		"label changed alone":                 {job: job("a", "b"), old: job("a", "a"), wantErr: `must name the same LocalQueue as spec.scheduling.queue ("a"): change spec.scheduling.queue instead`},
		"label removed: the spec restores it": {job: job("a", ""), old: job("a", "a"), wantSpec: "a", wantLabel: "a"},
		"spec removed: the label goes too":    {job: job("", "a"), old: job("a", "a")},
		"label added to a job without queue":  {job: job("", "q"), old: job("", ""), wantSpec: "q", wantLabel: "q"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := SyncQueueName(tc.job, tc.old)
			if tc.wantErr != "" {
				if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.wantErr) {
					t.Fatalf("errors = %v, want one containing %q", errs, tc.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got := struct{ Spec, Label string }{tc.job.QueueName(), tc.job.Labels[convoy.QueueNameLabel]}
			if tc.job.Spec.Scheduling != nil {
				got.Spec = tc.job.Spec.Scheduling.Queue
			}
			if diff := cmp.Diff(struct{ Spec, Label string }{tc.wantSpec, tc.wantLabel}, got); diff != "" {
				t.Errorf("queue (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPrebuiltWorkloadLabelIsAccepted: MultiKueue's copy of a job in a worker names its prebuilt
// Workload, which Kueue's own validation refuses for kinds outside its list; a label that is no
// Workload name is still refused.
func TestPrebuiltWorkloadLabelIsAccepted(t *testing.T) {
	w := &Webhook{}
	job := utiltesting.MakeTrainingJob("llama", "team-a").Queue("training").Obj()
	job.Labels = map[string]string{convoy.QueueNameLabel: "training", constants.PrebuiltWorkloadLabel: "trainingjob-llama-1785e"}
	if _, err := w.ValidateCreate(context.Background(), job); err != nil {
		t.Errorf("ValidateCreate with a prebuilt Workload: %v", err)
	}
	job.Labels[constants.PrebuiltWorkloadLabel] = "Not_A_Name"
	if _, err := w.ValidateCreate(context.Background(), job); err == nil || !strings.Contains(err.Error(), constants.PrebuiltWorkloadLabel) {
		t.Errorf("ValidateCreate with a prebuilt Workload label that is no name = %v, want it refused", err)
	}
}

// TestGPUSelectorsWithAQueueAreRefused: Kueue counts no GPU claim with CEL selectors, so a queued
// job's spec.gpu may name a DeviceClass but no product or memory; without a queue it may.
func TestGPUSelectorsWithAQueueAreRefused(t *testing.T) {
	cases := map[string]struct {
		job  *convoy.TrainingJob
		want string // "" when accepted
	}{
		"class with a queue":   {job: utiltesting.MakeTrainingJob("llama", "team-a").DRAGPUs("gpu.nvidia.com", "").Queue("training").Obj()},
		"product with a queue": {job: utiltesting.MakeTrainingJob("llama", "team-a").DRAGPUs("gpu.nvidia.com", "NVIDIA H100 80GB HBM3").Queue("training").Obj(), want: "spec.gpu.product: Invalid value: \"NVIDIA H100 80GB HBM3\": Kueue does not count GPU claims with selectors"},
		"product, no queue":    {job: utiltesting.MakeTrainingJob("llama", "team-a").DRAGPUs("gpu.nvidia.com", "NVIDIA H100 80GB HBM3").Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := (&Webhook{}).ValidateCreate(context.Background(), tc.job)
			if got := errString(err); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("ValidateCreate() = %q, want %q", got, tc.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestSyncElasticJob: an elastic job that Kueue queues is opted into Kueue's Workload slices,
// through which it resizes; other jobs are opted out, also of an annotation they carry.
func TestSyncElasticJob(t *testing.T) {
	features.SetFeatureGateDuringTest(t, features.ElasticJobsViaWorkloadSlices, true)
	base := utiltesting.MakeTrainingJob("llm", "team-a").Workers(4)
	cases := map[string]struct {
		job  *convoy.TrainingJob
		want bool
	}{
		"elastic, queued":        {job: base.Clone().Elastic(1, convoy.ElasticSpec{}).Queue("q").Obj(), want: true},
		"elastic, no queue":      {job: base.Clone().Elastic(1, convoy.ElasticSpec{}).Obj()},
		"not elastic, annotated": {job: base.Clone().Queue("q").Obj()},
		"elastic, run by MultiKueue": {job: func() *convoy.TrainingJob {
			j := base.Clone().Elastic(1, convoy.ElasticSpec{}).Queue("q").Obj()
			j.Spec.ManagedBy = ptr.To(kueue.MultiKueueControllerName)
			return j
		}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.job.Annotations = map[string]string{workloadslicing.EnabledAnnotationKey: workloadslicing.EnabledAnnotationValue}
			syncElasticJob(tc.job)
			if got := tc.job.Annotations[workloadslicing.EnabledAnnotationKey] == workloadslicing.EnabledAnnotationValue; got != tc.want {
				t.Errorf("annotation %s set = %v, want %v", workloadslicing.EnabledAnnotationKey, got, tc.want)
			}
		})
	}
}
