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

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/test/framework"
)

// placementCheck is deploy/queue's AdmissionCheck of convoy-scheduler's placement check.
const placementCheck kueue.AdmissionCheckReference = "convoy-placement"

// withCheck runs deploy/queue's placement check for every flavor of a ClusterQueue.
var withCheck = &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: placementCheck}}}

// bookingTimeout is how long the e2e scheduler holds an admitted gang's place for its pods.
const bookingTimeout = 20 * time.Second

// noPlace starts the Queued message of a job whose gang convoy-scheduler has no place for.
const noPlace = "convoy-scheduler has no place for the gang yet"

// fillRacks binds a pod of 8 GPUs to each of the first n nodes of every rack listed, as a job
// outside the queue would hold them, and returns the racks of the fleet by name, each with its
// nodes in order.
func (e *env) fillRacks(n int, racks ...string) map[string][]string {
	e.t.Helper()
	nodes := &corev1.NodeList{}
	must(e.t, e.k.List(e.t.Context(), nodes))
	byRack := map[string][]string{}
	for _, node := range nodes.Items {
		if r := node.Labels[framework.LabelRack]; r != "" {
			byRack[r] = append(byRack[r], node.Name)
		}
	}
	for _, r := range racks {
		slices.Sort(byRack[r])
		for _, node := range byRack[r][:n] {
			e.create8GPUPod("filler-"+node, node)
		}
	}
	return byRack
}

// create8GPUPod creates a pod of 8 GPUs bound to node, meeting the namespace's restricted Pod
// Security level.
func (e *env) create8GPUPod(name, node string) {
	e.t.Helper()
	must(e.t, e.k.Create(e.t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "c", Image: "filler:1",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")},
					Limits: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")}}}}},
	}))
}

func (e *env) deletePod(name string) {
	e.t.Helper()
	must(e.t, e.k.Delete(e.t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}, client.GracePeriodSeconds(0)))
}

// queuedMessage is the job's Queued condition's message while it is true.
func queuedMessage(j *convoy.TrainingJob) string {
	if c := meta.FindStatusCondition(j.Status.Conditions, convoy.ConditionQueued); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	return ""
}

func admitted(j *convoy.TrainingJob) bool {
	return meta.IsStatusConditionTrue(j.Status.Conditions, convoy.ConditionAdmitted)
}

// TestJobWithoutPlaceIsNotAdmittedUntilRoomAppears: with every rack fragmented (one node of each
// held by another pod), a job of 4 × 8 GPUs that requires one rack has its quota free but no
// place: Kueue does not admit it, no pod of it is created, and its Queued condition says why in
// the planner's words. Once a rack's filler is gone the job is admitted and its whole gang runs
// in that rack.
func TestJobWithoutPlaceIsNotAdmittedUntilRoomAppears(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, flavor, withCheck)
	racks := e.fillRacks(1, "rack-0-0-0", "rack-0-0-1", "rack-0-1-0", "rack-0-1-1")
	e.create(e.job("big", 4, 8, ""))

	j := e.waitJob("big", "told it has no place", func(j *convoy.TrainingJob) bool {
		return strings.Contains(queuedMessage(j), noPlace)
	})
	msg := queuedMessage(j)
	if !strings.Contains(msg, "rack") || !strings.Contains(msg, "quota reserved") {
		t.Errorf("Queued says %q, want the quota reserved and the planner's reason naming the rack it needs", msg)
	}
	t.Logf("Queued: %s", msg)
	e.consistently("big stays unadmitted, without pods", 5*time.Second, func() (bool, string) {
		j := e.get("big")
		return !admitted(j) && len(e.pods("big")) == 0, fmt.Sprintf("admitted %v, %d pods", admitted(j), len(e.pods("big")))
	})

	e.deletePod("filler-" + racks["rack-0-1-0"][0])
	e.waitState("big", convoy.StateRunning)
	pods := e.requireWholeGang("big", 4)
	if got := e.racks(pods); got[0] != "rack-0-1-0" {
		t.Errorf("big runs in %v, want rack-0-1-0, the one rack with room", got)
	}
}

// TestJobInFlavorWithoutNodesIsNotAdmitted: a ClusterQueue with quota in a flavor whose nodes the
// fleet does not have (A100 on-demand, on an H100 fleet) reserves the quota, but the job is not
// admitted: it says that no node fits.
func TestJobInFlavorWithoutNodesIsNotAdmitted(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, "a100-on-demand", withCheck)
	e.create(e.job("a100", 1, 8, ""))
	j := e.waitJob("a100", "told it has no place", func(j *convoy.TrainingJob) bool {
		return strings.Contains(queuedMessage(j), noPlace)
	})
	t.Logf("Queued: %s", queuedMessage(j))
	e.consistently("a100 stays unadmitted", 3*time.Second, func() (bool, string) {
		return !admitted(e.get("a100")), "admitted"
	})
}

// TestTwoJobsRaceForTheLastRack: three racks full, one free; two jobs that each need a whole rack
// have quota for both. Exactly one is admitted and runs in the free rack; the other waits, told
// why, and is never admitted while the first runs.
func TestTwoJobsRaceForTheLastRack(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, flavor, withCheck)
	e.fillRacks(4, "rack-0-0-0", "rack-0-0-1", "rack-0-1-0")
	e.create(e.job("first", 4, 8, ""))
	e.create(e.job("second", 4, 8, ""))

	var winner, loser string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		a, b := e.get("first"), e.get("second")
		if admitted(a) && admitted(b) {
			return false, fmt.Errorf("both jobs were admitted for one rack")
		}
		switch {
		case admitted(a) && strings.Contains(queuedMessage(b), noPlace):
			winner, loser = "first", "second"
		case admitted(b) && strings.Contains(queuedMessage(a), noPlace):
			winner, loser = "second", "first"
		}
		return winner != "", nil
	})
	if err != nil {
		t.Fatalf("waiting for one job admitted and the other told it has no place: %v", err)
	}
	e.waitState(winner, convoy.StateRunning)
	if got := e.racks(e.requireWholeGang(winner, 4)); got[0] != "rack-0-1-1" {
		t.Errorf("%s runs in %v, want rack-0-1-1", winner, got)
	}
	e.consistently(loser+" stays unadmitted while "+winner+" runs", 5*time.Second, func() (bool, string) {
		j := e.get(loser)
		return !admitted(j) && len(e.pods(loser)) == 0, queuedMessage(j)
	})
}

// TestUnusedBookingIsReleased: a Workload admitted into the one free rack whose pods never come
// (no job runs it) holds the rack only for the booking timeout: then its check goes to Retry,
// saying why, Kueue gives its quota back, and a job that waited for the rack is admitted and runs
// there.
func TestUnusedBookingIsReleased(t *testing.T) {
	e := setup(t)
	e.clusterQueue(64, flavor, withCheck)
	e.fillRacks(4, "rack-0-0-0", "rack-0-0-1", "rack-0-1-0")
	idle := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "idle"},
		Spec: kueue.WorkloadSpec{QueueName: "training", PodSets: []kueue.PodSet{{Name: "worker", Count: 4,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{convoy.AnnotationTopologyLevel: string(convoy.TopologyRack)}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "idle:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")}}}}},
			}}}},
	}
	must(t, e.k.Create(t.Context(), idle))
	e.waitWorkload("idle", "admitted", func(wl *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
	})
	admittedAt := time.Now()
	e.create(e.job("waiting", 4, 8, ""))
	e.waitJob("waiting", "told it has no place", func(j *convoy.TrainingJob) bool {
		return strings.Contains(queuedMessage(j), noPlace)
	})

	wl := e.waitWorkload("idle", "sent back through the check", func(wl *kueue.Workload) bool {
		c := findCheck(wl)
		return c != nil && strings.Contains(c.Message, "did not reach convoy-scheduler")
	})
	t.Logf("idle's check after %s: %s: %s", time.Since(admittedAt).Round(time.Second), findCheck(wl).State, findCheck(wl).Message)
	// The booking is made before Kueue admits, and the admission is seen a poll later still: a
	// second's slack for both; a booking released without waiting its timeout is far below it.
	if waited := time.Since(admittedAt); waited < bookingTimeout-time.Second {
		t.Errorf("idle's booking was released %s after admission, before the %s timeout", waited, bookingTimeout)
	}
	e.waitState("waiting", convoy.StateRunning)
	if got := e.racks(e.requireWholeGang("waiting", 4)); got[0] != "rack-0-1-1" {
		t.Errorf("waiting runs in %v, want rack-0-1-1", got)
	}
}

func findCheck(wl *kueue.Workload) *kueue.AdmissionCheckState {
	for i := range wl.Status.AdmissionChecks {
		if wl.Status.AdmissionChecks[i].Name == placementCheck {
			return &wl.Status.AdmissionChecks[i]
		}
	}
	return nil
}

// waitWorkload waits until cond holds for the test's Workload name.
func (e *env) waitWorkload(name, what string, cond func(*kueue.Workload) bool) *kueue.Workload {
	e.t.Helper()
	var wl *kueue.Workload
	err := wait.PollUntilContextTimeout(e.t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		w := &kueue.Workload{}
		if err := e.k.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, w); err != nil {
			return false, nil
		}
		wl = w
		return cond(w), nil
	})
	if err != nil {
		e.t.Fatalf("waiting for Workload %s to be %s: %v; its status: %+v", name, what, err, wl)
	}
	return wl
}

// consistently fails the test when cond does not hold at any poll during d.
func (e *env) consistently(what string, d time.Duration, cond func() (bool, string)) {
	e.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if ok, why := cond(); !ok {
			e.t.Fatalf("%s: %s", what, why)
		}
	}
}
