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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// EnvUpgradeFrom names a directory holding convoy-operator and convoy-scheduler of the release to
// upgrade from (`make test-upgrade FROM=<git ref>` builds them). Unset, the test upgrades this
// tree's binaries to themselves: the in-place procedure with the same version on both sides.
const EnvUpgradeFrom = "CONVOY_UPGRADE_FROM"

// TestUpgradeInPlaceKeepsRunningAndQueuedGangs upgrades Convoy as the README's upgrade section
// says (CRDs, then the operator, then the scheduler) with one gang running, one admitted but not
// yet placed (no scheduler running) and one queued over quota: the running gang keeps its pods,
// the other two run whole once the new scheduler is up and the quota raised, and each job keeps
// exactly one Workload.
func TestUpgradeInPlaceKeepsRunningAndQueuedGangs(t *testing.T) {
	e := setup(t)
	from := os.Getenv(EnvUpgradeFrom)
	if from != "" {
		// An operator older than restricted-by-default builds pods that meet baseline only.
		e.podSecurity = "baseline"
	}
	e.queue(48)
	if from != "" {
		t.Logf("upgrading from the binaries in %s", from)
		e.swapBinaries(filepath.Join(from, "convoy-operator"), filepath.Join(from, "convoy-scheduler"))
	} else {
		t.Logf("%s is unset: upgrading this tree's binaries to themselves", EnvUpgradeFrom)
	}
	t.Cleanup(func() {
		// Whatever happened, the next test finds this tree's binaries running.
		if e.OperatorBinary != "" || e.SchedulerBinary != "" {
			e.swapBinaries("", "")
		}
	})

	e.create(e.job("running", 4, 8, "normal"))
	e.waitState("running", convoy.StateRunning)
	before := uids(e.requireWholeGang("running", 4))

	must(t, e.StopScheduler())
	e.create(e.job("placing", 2, 8, "normal"))
	e.waitJob("placing", "admitted with its pods created", func(*convoy.TrainingJob) bool { return len(e.pods("placing")) == 2 })
	e.create(e.job("queued", 4, 8, "normal"))
	e.waitJob("queued", "queued over quota", func(j *convoy.TrainingJob) bool {
		c := meta.FindStatusCondition(j.Status.Conditions, string(convoy.ConditionQueued))
		return c != nil && c.Status == metav1.ConditionTrue
	})

	// The upgrade: CRDs, then the operator, then the scheduler.
	if out, err := e.Kubectl(t.Context(), "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(e.Root, "deploy", "crd", "bases")); err != nil {
		t.Fatalf("applying the CRDs: %v\n%s", err, out)
	}
	e.swapBinaries("", "")

	// The administrator makes room for the queued job.
	if _, err := e.Kubectl(t.Context(), "patch", "clusterqueue", e.ns, "--type=json", "-p",
		`[{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": 80}]`); err != nil {
		t.Fatal(err)
	}
	e.waitState("placing", convoy.StateRunning)
	e.requireWholeGang("placing", 2)
	e.waitState("queued", convoy.StateRunning)
	e.requireWholeGang("queued", 4)

	running := e.get("running")
	if running.Status.State != convoy.StateRunning || running.Status.RestartCount != 0 {
		t.Errorf("the running job is %s with %d restarts, want Running with none", running.Status.State, running.Status.RestartCount)
	}
	if after := uids(e.requireWholeGang("running", 4)); !slices.Equal(before, after) {
		t.Errorf("the running gang's pods changed across the upgrade: %v, then %v", before, after)
	}
	wls := &kueue.WorkloadList{}
	must(t, e.k.List(t.Context(), wls, client.InNamespace(e.ns)))
	owners := map[string]int{}
	for _, wl := range wls.Items {
		for _, o := range wl.OwnerReferences {
			owners[o.Name]++
		}
		if !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
			t.Errorf("Workload %s is not admitted", wl.Name)
		}
	}
	if want := map[string]int{"running": 1, "placing": 1, "queued": 1}; !maps.Equal(owners, want) {
		t.Errorf("Workloads by job: %v, want one each: %v", owners, want)
	}
}

// swapBinaries restarts the operator, then the scheduler, from the given binaries ("" for this
// tree's build).
func (e *env) swapBinaries(operator, scheduler string) {
	e.t.Helper()
	must(e.t, e.StopOperator())
	e.OperatorBinary = operator
	must(e.t, e.StartOperator(e.t.Context()))
	_ = e.StopScheduler() // it may be stopped already
	e.SchedulerBinary = scheduler
	must(e.t, e.StartScheduler(e.t.Context()))
}

func uids(pods []corev1.Pod) []types.UID {
	var out []types.UID
	for _, p := range pods {
		out = append(out, p.UID)
	}
	slices.Sort(out)
	return out
}
