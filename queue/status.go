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
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workloadslicing"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/controller"
)

// Status reports what Kueue says of the job: whether it is Kueue's (Management) and admitted,
// why it waits, where it was admitted, who preempted it. It reads the job's namespace, its
// Workload, its LocalQueue and, after a preemption, the preemptor's Workload from the manager's
// cache.
func (i *Integration) Status(ctx context.Context, job *convoy.TrainingJob) (controller.QueueStatus, error) {
	managed, err := i.opts.Management.managesInNamespace(ctx, i.client, job)
	if err != nil || !managed {
		return controller.QueueStatus{}, err
	}
	wl, grow, err := i.slicesOf(ctx, job)
	if err != nil {
		return controller.QueueStatus{}, err
	}
	if wl == nil {
		return controller.QueueStatus{Managed: true, WaitingMessage: "Kueue has not created the job's Workload yet"}, nil
	}
	clusterQueue := ""
	if wl.Status.Admission != nil {
		clusterQueue = string(wl.Status.Admission.ClusterQueue)
	} else {
		lq := &kueue.LocalQueue{}
		if err := i.client.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}, lq); client.IgnoreNotFound(err) != nil {
			return controller.QueueStatus{}, err
		} else if err == nil {
			clusterQueue = string(lq.Spec.ClusterQueue)
		}
	}
	var preemptor *kueue.Workload
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
		if preemptor, err = i.preemptor(ctx, c.Message); err != nil {
			return controller.QueueStatus{}, err
		}
	}
	qs := describe(wl, clusterQueue, preemptor)
	qs.Managed, qs.Admitted = true, workload.IsAdmitted(wl)
	if grow != nil && qs.Admitted {
		qs.GrowWaiting = cmp.Or(describe(grow, clusterQueue, nil).WaitingMessage, fmt.Sprintf("waiting in ClusterQueue %q", clusterQueue))
	}
	if qs.Admitted {
		for _, c := range wl.Status.AdmissionChecks {
			if _, move := convoy.ElasticMoveAttempt(c.Message); move && c.State == kueue.CheckStateReady {
				qs.Move = c.Message
			}
		}
	}
	return qs, nil
}

// workloadOf returns the Workload the job controls, nil while Kueue has not created it. An
// elastic job that grows has two Workload slices for a while: the one it runs with is the one
// admitted, also in the moment after Kueue finished it for its replacement and before it admitted
// that.
func (i *Integration) workloadOf(ctx context.Context, job *convoy.TrainingJob) (*kueue.Workload, error) {
	wl, _, err := i.slicesOf(ctx, job)
	return wl, err
}

// slicesOf returns workloadOf's Workload and, while it is admitted and a larger slice of an
// elastic job that grows waits to be admitted in its place, that slice.
func (i *Integration) slicesOf(ctx context.Context, job *convoy.TrainingJob) (wl, grow *kueue.Workload, err error) {
	list := &kueue.WorkloadList{}
	if err := i.client.List(ctx, list, client.InNamespace(job.Namespace), jobframework.OwnerReferenceIndexFieldMatcher(GVK, job.Name)); err != nil {
		return nil, nil, err
	}
	rank := func(wl *kueue.Workload) int {
		switch admitted, finished := workload.IsAdmitted(wl), workload.IsFinished(wl); {
		case admitted && !finished:
			return 0
		case admitted && workloadslicing.IsReplaced(wl.Status):
			return 1
		case !finished:
			return 2
		}
		return 3
	}
	var best *kueue.Workload
	for k := range list.Items {
		if wl := &list.Items[k]; metav1.IsControlledBy(wl, job) && (best == nil || rank(wl) < rank(best)) {
			best = wl
		}
	}
	// Kueue finishes the running slice as replaced once the grow's slice reserves quota, before
	// that slice's admission checks pass.
	if best == nil || rank(best) > 1 {
		return best, nil, nil
	}
	for k := range list.Items {
		if wl := &list.Items[k]; metav1.IsControlledBy(wl, job) && rank(wl) == 2 {
			grow = wl
		}
	}
	return best, grow, nil
}

var preemptorJobUID = regexp.MustCompile(`JobUID: ([^,;)\s]+)`)

// preemptor finds the Workload named by a Preempted condition's message, nil when it is gone.
func (i *Integration) preemptor(ctx context.Context, message string) (*kueue.Workload, error) {
	m := preemptorJobUID.FindStringSubmatch(message)
	if m == nil || m[1] == "UNKNOWN" {
		return nil, nil
	}
	list := &kueue.WorkloadList{}
	if err := i.client.List(ctx, list, client.MatchingLabels{constants.JobUIDLabel: m[1]}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// describe is the QueueStatus of a job whose Workload is wl, in ClusterQueue clusterQueue (empty
// when its LocalQueue is missing), preempted by preemptor (nil when not preempted or unknown).
func describe(wl *kueue.Workload, clusterQueue string, preemptor *kueue.Workload) controller.QueueStatus {
	var qs controller.QueueStatus
	where := fmt.Sprintf("LocalQueue %q", wl.Spec.QueueName)
	if wl.Spec.QueueName == "" {
		where = fmt.Sprintf("no LocalQueue (the job names none and namespace %s has no LocalQueue %q: name one in spec.scheduling.queue)", wl.Namespace, constants.DefaultLocalQueueName)
	} else if clusterQueue != "" {
		where = fmt.Sprintf("ClusterQueue %q (LocalQueue %q)", clusterQueue, wl.Spec.QueueName)
	}
	if a := wl.Status.Admission; a != nil {
		qs.Admission = &convoy.AdmissionStatus{ClusterQueue: string(a.ClusterQueue), Flavors: flavors(a)}
	}
	conds := wl.Status.Conditions
	if c := meta.FindStatusCondition(conds, kueue.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
		qs.Preempted = preemptedMessage(c, preemptor)
	}
	evicted := meta.FindStatusCondition(conds, kueue.WorkloadEvicted)
	reserved := meta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved)
	switch {
	case meta.IsStatusConditionTrue(conds, kueue.WorkloadFinished):
		c := meta.FindStatusCondition(conds, kueue.WorkloadFinished)
		qs.WaitingMessage = fmt.Sprintf("Kueue finished the job's Workload %s without running it (%s): %s", wl.Name, c.Reason, c.Message)
	case evicted != nil && evicted.Status == metav1.ConditionTrue && reserved != nil && reserved.Status == metav1.ConditionTrue:
		qs.WaitingMessage = fmt.Sprintf("evicted from %s (%s); the gang is stopping and the job then waits to be admitted again", where, evicted.Reason)
	case meta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted):
		// Admitted: the job starts in a moment; the message it waited with stays, and so the status
		// is written once less for every job.
	case reserved != nil && reserved.Status == metav1.ConditionTrue:
		qs.WaitingMessage = fmt.Sprintf("quota reserved in %s; waiting for admission checks%s", where, pendingChecks(wl))
	case reserved != nil && reserved.Message != "" && !strings.HasPrefix(reserved.Message, "Preempted to accommodate"):
		qs.WaitingMessage = fmt.Sprintf("waiting in %s: %s", where, plainPending(reserved.Message))
	case qs.Preempted != "":
		qs.WaitingMessage = fmt.Sprintf("waiting in %s to be admitted again after its preemption", where)
	default:
		// Kueue has no verdict yet (most jobs are admitted before it has one): the operator's generic
		// message says where the job waits.
	}
	return qs
}

// flavors maps each resource to the flavor it was admitted to, over all pod sets; a resource given
// different flavors for different roles lists them all.
func flavors(a *kueue.Admission) map[string]string {
	byResource := map[string][]string{}
	for _, ps := range a.PodSetAssignments {
		for res, flavor := range ps.Flavors {
			if !slices.Contains(byResource[string(res)], string(flavor)) {
				byResource[string(res)] = append(byResource[string(res)], string(flavor))
			}
		}
	}
	out := make(map[string]string, len(byResource))
	for _, res := range slices.Sorted(maps.Keys(byResource)) {
		out[res] = strings.Join(byResource[res], ",")
	}
	return out
}

func pendingChecks(wl *kueue.Workload) string {
	var pending []string
	for _, c := range wl.Status.AdmissionChecks {
		if c.State != kueue.CheckStateReady {
			s := string(c.Name)
			if c.Message != "" {
				s += ": " + c.Message
			}
			pending = append(pending, s)
		}
	}
	if len(pending) == 0 {
		return ""
	}
	return " (" + strings.Join(pending, "; ") + ")"
}

// preemptedMessage says by whom and why the job was preempted.
func preemptedMessage(c *metav1.Condition, preemptor *kueue.Workload) string {
	why := preemption.HumanReadablePreemptionReasons[c.Reason]
	if why == "" || why == "UNKNOWN" {
		why = c.Reason
	}
	by := "another workload"
	if preemptor != nil {
		by = "Workload " + preemptor.Namespace + "/" + preemptor.Name
		if owner := metav1.GetControllerOf(preemptor); owner != nil {
			by = owner.Kind + " " + preemptor.Namespace + "/" + owner.Name
		}
		if p := preemptor.Spec.Priority; p != nil {
			if ref := preemptor.Spec.PriorityClassRef; ref != nil {
				by += fmt.Sprintf(" (priority class %s, %d)", ref.Name, *p)
			} else {
				by += fmt.Sprintf(" (priority %d)", *p)
			}
		}
		if a := preemptor.Status.Admission; a != nil {
			by += " in ClusterQueue " + string(a.ClusterQueue)
		}
	}
	return fmt.Sprintf("preempted by %s, for %s; the whole gang was stopped and resumes from its latest checkpoint once admitted again", by, why)
}
