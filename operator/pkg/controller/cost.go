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

package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/cost"
)

const (
	// costRefresh is how often the cost of a job whose pods hold resources is brought up to date
	// when nothing else in its status changes.
	costRefresh = time.Minute
	// costSettle: usage is counted up to this long before now, so that a pod bound just before a
	// reconcile, whose binding the cache does not show yet, is counted whole by the next one.
	costSettle = 2 * time.Second
)

// costNodes reads the GPU product and capacity type of the pods' nodes from their labels.
func (o observation) costNodes() map[string]cost.Node {
	out := make(map[string]cost.Node, len(o.nodes))
	for name, labels := range o.nodes {
		out[name] = cost.NodeFromLabels(labels, o.spotNodeLabels)
	}
	return out
}

// overBudget says why, when the job's amount reached spec.budget.
func overBudget(job *convoy.TrainingJob, c *convoy.CostStatus) (string, bool) {
	if job.Spec.Budget == nil || c == nil || c.Amount == nil || *c.Amount < *job.Spec.Budget {
		return "", false
	}
	return fmt.Sprintf("the job's cost %.2f %s reached spec.budget %g", *c.Amount, c.Currency, *job.Spec.Budget), true
}

// budget is the phase of a job whose cost reached spec.budget: after a checkpoint the gang is
// stopped and the job fails with BudgetExceeded.
func (d *decision) budget() bool {
	why, over := overBudget(d.job, d.o.cost)
	if !over {
		return false
	}
	if d.waitForCheckpoint(why) {
		return true
	}
	d.finish(convoy.ConditionFailed, convoy.ReasonBudgetExceeded, why+
		"; the gang was stopped after its checkpoint (or spec.checkpoint.preemptionGraceSeconds): resume from status.checkpoint.latest in a new job with a larger spec.budget")
	return true
}

// settleCost puts the job's cost into the plan's status when the status is written anyway, when
// costRefresh has passed, or when the reconcile stops pods or finishes the job (then counted up to
// now: those pods' time must not be lost with them), and has the job looked at again for the next
// refresh and for the moment its budget would be reached.
func settleCost(o observation, p *plan) {
	old := o.job.Status.Cost
	fresh := o.cost
	if len(p.delete) > 0 || (p.status.IsFinished() && !o.job.Status.IsFinished()) {
		fresh = cost.Update(old, o.pods, o.costNodes(), o.prices, o.now)
	}
	rest := p.status
	rest.Cost = old
	changed := !equality.Semantic.DeepEqual(rest, o.job.Status)
	due := old == nil || old.AccruedAt == nil || o.now.Sub(old.AccruedAt.Time) >= costRefresh
	same := fresh != nil && old != nil && equality.Semantic.DeepEqual(fresh.Usage, old.Usage) && equality.Semantic.DeepEqual(fresh.Amount, old.Amount)
	if changed || (due && !same) {
		p.status.Cost = fresh
	} else {
		p.status.Cost = old
	}

	holding := false
	next := costRefresh
	for _, pod := range o.pods {
		if start, end, ok := cost.Held(pod); ok && end.IsZero() {
			holding = true
			if p.status.Cost == nil {
				// The first usage is counted once it has settled.
				next = min(next, start.Add(costSettle+time.Second).Sub(o.now))
			}
		}
	}
	// Only a gang kept running is looked at again for its cost: pods being stopped wake the job as
	// they go.
	if !holding || !p.ensureChildren {
		return
	}
	if c := p.status.Cost; c != nil && c.AccruedAt != nil {
		next = c.AccruedAt.Add(costRefresh).Sub(o.now)
	}
	p.requeue(max(next, time.Second))
	if b := o.job.Spec.Budget; b != nil && fresh != nil && fresh.Amount != nil && *fresh.Amount < *b {
		if rate := cost.HourlyRate(o.pods, o.costNodes(), o.prices.List, o.now); rate > 0 {
			left := time.Duration((*b - *fresh.Amount) / rate * float64(time.Hour))
			p.requeue(max(left+costSettle, time.Second))
		}
	}
}
