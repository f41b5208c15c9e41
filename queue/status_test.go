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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/controller"
)

func TestDescribe(t *testing.T) {
	workload := func(conds ...metav1.Condition) *kueue.Workload {
		return &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "trainingjob-a-1234", Namespace: "team-a"},
			Spec:       kueue.WorkloadSpec{QueueName: "training"},
			Status:     kueue.WorkloadStatus{Conditions: conds},
		}
	}
	cond := func(condType string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message}
	}
	admitted := func(wl *kueue.Workload) *kueue.Workload {
		wl.Status.Admission = &kueue.Admission{ClusterQueue: "team-a", PodSetAssignments: []kueue.PodSetAssignment{
			{Name: "worker", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": "h100", "cpu": "h100"}},
			{Name: "ps", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "cpu-only"}},
		}}
		return wl
	}
	preemptor := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "trainingjob-urgent-99", Namespace: "team-b",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "convoy.dev/v1alpha1", Kind: "TrainingJob", Name: "urgent", Controller: ptr.To(true)}}},
		Spec:   kueue.WorkloadSpec{Priority: ptr.To[int32](1000), PriorityClassRef: kueue.NewPodPriorityClassRef("high")},
		Status: kueue.WorkloadStatus{Admission: &kueue.Admission{ClusterQueue: "team-a"}},
	}
	preempted := cond(kueue.WorkloadPreempted, metav1.ConditionTrue, kueue.InClusterQueueReason,
		"Preempted to accommodate a workload (UID: 1, JobUID: 2) due to prioritization in the ClusterQueue")

	cases := map[string]struct {
		wl           *kueue.Workload
		clusterQueue string
		preemptor    *kueue.Workload
		want         controller.QueueStatus
	}{
		"new, no verdict yet": {
			wl:           workload(),
			clusterQueue: "team-a",
			want:         controller.QueueStatus{},
		},
		"over quota": {
			wl: workload(cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending",
				"couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more needed")),
			clusterQueue: "team-a",
			want: controller.QueueStatus{WaitingMessage: `waiting in ClusterQueue "team-a" (LocalQueue "training"): ` +
				"role worker needs 16 more nvidia.com/gpu than flavor h100 has free"},
		},
		"missing LocalQueue": {
			wl: workload(cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, kueue.WorkloadInadmissible, "LocalQueue training doesn't exist")),
			want: controller.QueueStatus{WaitingMessage: `waiting in LocalQueue "training": LocalQueue training doesn't exist: ` +
				"create it, or name an existing one in spec.scheduling.queue (`kubectl get localqueues`)"},
		},
		"admitted": {
			wl: admitted(workload(cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", ""),
				cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", ""))),
			clusterQueue: "team-a",
			want: controller.QueueStatus{
				Admission: &convoy.AdmissionStatus{ClusterQueue: "team-a", Flavors: map[string]string{"nvidia.com/gpu": "h100", "cpu": "h100,cpu-only"}},
			},
		},
		"preempted, the gang still stopping": {
			wl: admitted(workload(cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", ""),
				cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, "Preempted to accommodate ..."), preempted)),
			clusterQueue: "team-a",
			preemptor:    preemptor,
			want: controller.QueueStatus{
				WaitingMessage: `evicted from ClusterQueue "team-a" (LocalQueue "training") (Preempted); the gang is stopping and the job then waits to be admitted again`,
				Admission:      &convoy.AdmissionStatus{ClusterQueue: "team-a", Flavors: map[string]string{"nvidia.com/gpu": "h100", "cpu": "h100,cpu-only"}},
				Preempted: "preempted by TrainingJob team-b/urgent (priority class high, 1000) in ClusterQueue team-a, for prioritization in the ClusterQueue; " +
					"the whole gang was stopped and resumes from its latest checkpoint once admitted again",
			},
		},
		"preempted, back in the queue": {
			wl: workload(cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", "Preempted to accommodate a workload (UID: 1, JobUID: 2) due to prioritization in the ClusterQueue"),
				cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, "Preempted to accommodate ..."), preempted),
			clusterQueue: "team-a",
			want: controller.QueueStatus{
				WaitingMessage: `waiting in ClusterQueue "team-a" (LocalQueue "training") to be admitted again after its preemption`,
				Preempted: "preempted by another workload, for prioritization in the ClusterQueue; " +
					"the whole gang was stopped and resumes from its latest checkpoint once admitted again",
			},
		},
		"Kueue gave up": {
			wl:           workload(cond(kueue.WorkloadFinished, metav1.ConditionTrue, "FailedToStart", "conflict for nodeSelector")),
			clusterQueue: "team-a",
			want:         controller.QueueStatus{WaitingMessage: "Kueue finished the job's Workload trainingjob-a-1234 without running it (FailedToStart): conflict for nodeSelector"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, describe(tc.wl, tc.clusterQueue, tc.preemptor)); diff != "" {
				t.Errorf("describe (-want,+got):\n%s", diff)
			}
		})
	}
}
