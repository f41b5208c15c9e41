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

package forecast

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Queue is one ClusterQueue as Plan sees it.
type Queue struct {
	// Name is the ClusterQueue's, for reasons.
	Name string
	// Now is when the plan starts.
	Now time.Time
	// Quota is the ClusterQueue's nominal quota per resource, in milli-units, summed over flavors.
	// A request for a resource the quota lacks is not counted.
	Quota map[corev1.ResourceName]int64
	// Admitted are the jobs holding quota now.
	Admitted []Job
	// Pending are the jobs waiting, in Kueue's order: priority, then queue time.
	Pending []Job
	// StrictFIFO: a pending job that does not fit holds back those behind it; otherwise
	// (BestEffortFIFO, Kueue's default) a job behind it that fits is admitted first.
	StrictFIFO bool
	// WithinClusterQueue is the ClusterQueue's spec.preemption.withinClusterQueue: under
	// PreemptLowerPriority or PreemptLowerOrNewerEqualPriority a pending job that does not fit
	// evicts admitted jobs it may preempt; any other value preempts none.
	WithinClusterQueue Preemption
}

// Preemption is a Kueue withinClusterQueue preemption policy.
type Preemption string

const (
	PreemptLowerPriority             Preemption = "LowerPriority"
	PreemptLowerOrNewerEqualPriority Preemption = "LowerOrNewerEqualPriority"
)

func (q Queue) preempts() bool {
	return q.WithinClusterQueue == PreemptLowerPriority || q.WithinClusterQueue == PreemptLowerOrNewerEqualPriority
}

// Job is a workload of the queue.
type Job struct {
	// Name is namespace/name, for reasons.
	Name string
	// Requests are its quota usage per resource, in milli-units.
	Requests map[corev1.ResourceName]int64
	// End is when an admitted job is expected to finish; zero while unknown. An End already past
	// counts as now.
	End time.Time
	// Runtime is how long a pending job is expected to run once admitted; zero while unknown.
	Runtime time.Duration
	// Priority is the Workload's priority.
	Priority int32
	// QueuedAt is Kueue's queue-order timestamp of the Workload (its creation, or its last
	// eviction): of two jobs of equal priority, the later is newer.
	QueuedAt time.Time
	// AdmittedAt is when an admitted job reserved quota: of two preemptible jobs of equal priority,
	// Kueue preempts the later first.
	AdmittedAt time.Time
}

// Estimate is a pending job's expected start.
type Estimate struct {
	Name string
	// Start is when it is expected to be admitted; zero when it cannot be estimated.
	Start time.Time
	// Reason names the jobs it waits for and the quota they free, or why Start is unknown.
	Reason string
	// Preempts names the admitted jobs Kueue evicts to make room for it, if any.
	Preempts []string
}

// maxNamed bounds the jobs a reason names.
const maxNamed = 3

// running is a job holding quota in the simulation.
type running struct {
	Job
	end   time.Time // zero: unknown
	since time.Time // admitted at
}

// plan is Plan's simulation.
type plan struct {
	q    Queue
	free map[corev1.ResourceName]int64
	held []running
	// pending are the jobs to admit, in order, linked from first through next past those admitted
	// (next[i] == len(pending) ends the list).
	pending []Job
	next    []int
	first   int
	// least is the least request of any pending job, per resource: with less free, none fits.
	least    map[corev1.ResourceName]int64
	finished []string
	// started is when each pending job was admitted, and after how many jobs finished.
	started map[string]start
	out     map[string]Estimate
}

type start struct {
	at       time.Time
	after    int
	preempts []string
}

// Plan estimates the start of every pending job, in q.Pending's order: from q.Now, the pending
// jobs are admitted in order as they fit the free quota, and the next job to finish (by End, or
// by Runtime after its simulated start) frees its quota; under q.WithinClusterQueue a job that does
// not fit preempts admitted jobs (see preempt). A job waits for an unknown time once
// every job that could free quota for it has an unknown end.
func Plan(q Queue) []Estimate {
	p := &plan{q: q, free: maps.Clone(q.Quota), out: map[string]Estimate{}, started: map[string]start{}}
	for _, j := range q.Admitted {
		take(p.free, j.Requests)
		end := j.End
		if !end.IsZero() && end.Before(q.Now) {
			end = q.Now
		}
		p.held = append(p.held, running{Job: j, end: end, since: j.AdmittedAt})
	}
	free0 := maps.Clone(p.free)
	for _, j := range q.Pending {
		if over := lacking(q.Quota, j.Requests); len(over) > 0 {
			p.out[j.Name] = Estimate{Name: j.Name, Reason: fmt.Sprintf("unknown: it asks %s more than ClusterQueue %s's whole quota", quantities(over), q.Name)}
			continue
		}
		p.pending = append(p.pending, j)
	}
	p.next = make([]int, len(p.pending))
	for i := range p.next {
		p.next[i] = i + 1
	}
	p.least = least(p.pending)
	now := q.Now
	for {
		p.admit(now)
		if p.first == len(p.pending) {
			break
		}
		if !p.finishNext(&now) {
			p.unknown()
			break
		}
	}
	ests := make([]Estimate, 0, len(q.Pending))
	for _, j := range q.Pending {
		e, ok := p.out[j.Name]
		if s, started := p.started[j.Name]; !ok && started {
			e = Estimate{Name: j.Name, Start: s.at, Reason: waitedFor(q, p.finished[:s.after], lacking(free0, j.Requests))}
			if len(s.preempts) > 0 {
				e.Reason = fmt.Sprintf("preempts %s in ClusterQueue %s", names(s.preempts), q.Name)
				e.Preempts = s.preempts
			}
		}
		ests = append(ests, e)
	}
	return ests
}

// admit admits, at now, the pending jobs that fit in order (stopping at the first that does not
// under StrictFIFO, and once no pending job can fit). A job that fits only by preempting admitted
// jobs evicts them, and they queue again behind it.
func (p *plan) admit(now time.Time) {
	prev := -1
	for i := p.first; i < len(p.pending) && (p.q.preempts() || roomFor(p.free, p.least)); i = p.next[i] {
		j := p.pending[i]
		var victims []string
		if len(lacking(p.free, j.Requests)) > 0 {
			if victims = p.preempt(j, now); victims == nil {
				if p.q.StrictFIFO {
					return
				}
				prev = i
				continue
			}
		}
		take(p.free, j.Requests)
		var end time.Time
		if j.Runtime > 0 {
			end = now.Add(j.Runtime)
		}
		p.held = append(p.held, running{Job: j, end: end, since: now})
		p.started[j.Name] = start{at: now, after: len(p.finished), preempts: victims}
		if prev < 0 {
			p.first = p.next[i]
		} else {
			p.next[prev] = p.next[i]
		}
	}
}

// preempt evicts, at now, the fewest held jobs that j may preempt and that make room for it, as
// Kueue picks them: lowest priority first, then the most recently admitted first. The victims
// queue again, after the pending jobs of their priority, for the rest of their run. It returns
// their names, nil when no such set makes room.
func (p *plan) preempt(j Job, now time.Time) []string {
	if !p.q.preempts() {
		return nil
	}
	var cands []int
	for k, r := range p.held {
		if r.Priority < j.Priority || p.q.WithinClusterQueue == PreemptLowerOrNewerEqualPriority && r.Priority == j.Priority && j.QueuedAt.Before(r.QueuedAt) {
			cands = append(cands, k)
		}
	}
	slices.SortStableFunc(cands, func(a, b int) int {
		return cmp.Or(cmp.Compare(p.held[a].Priority, p.held[b].Priority), p.held[b].since.Compare(p.held[a].since))
	})
	free := maps.Clone(p.free)
	n := 0
	for n < len(cands) && len(lacking(free, j.Requests)) > 0 {
		give(free, p.held[cands[n]].Requests)
		n++
	}
	if len(lacking(free, j.Requests)) > 0 {
		return nil
	}
	// Fewest: drop, last chosen first, each victim without which the job still fits.
	victims := cands[:n]
	for k := len(victims) - 1; k >= 0; k-- {
		take(free, p.held[victims[k]].Requests)
		if len(lacking(free, j.Requests)) > 0 {
			give(free, p.held[victims[k]].Requests)
			continue
		}
		victims = slices.Delete(victims, k, k+1)
	}
	var out []string // names lists them from the last, so first chosen first
	for _, k := range slices.Backward(victims) {
		out = append(out, p.held[k].Name)
	}
	slices.Sort(victims)
	for k := len(victims) - 1; k >= 0; k-- {
		r := p.held[victims[k]]
		p.held = slices.Delete(p.held, victims[k], victims[k]+1)
		give(p.free, r.Requests)
		v := r.Job
		v.Runtime, v.QueuedAt = 0, now
		if !r.end.IsZero() {
			v.Runtime = r.end.Sub(now)
		}
		p.requeue(v)
	}
	return out
}

// requeue puts v back among the pending jobs, after those of its priority or higher.
func (p *plan) requeue(v Job) {
	k := len(p.pending)
	p.pending = append(p.pending, v)
	for i := range p.next {
		if p.next[i] == k {
			p.next[i] = k + 1
		}
	}
	p.next = append(p.next, k+1)
	if p.first == k {
		p.first = k + 1
	}
	prev := -1
	for i := p.first; i != k+1 && p.pending[i].Priority >= v.Priority; i = p.next[i] {
		prev = i
	}
	if prev < 0 {
		p.next[k], p.first = p.first, k
	} else {
		p.next[k], p.next[prev] = p.next[prev], k
	}
	for r, v := range v.Requests {
		p.least[r] = min(p.least[r], v)
	}
}

// finishNext ends the held job that finishes first, moving now to its end; false when every held
// job's end is unknown.
func (p *plan) finishNext(now *time.Time) bool {
	next := -1
	for i, r := range p.held {
		if !r.end.IsZero() && (next < 0 || r.end.Before(p.held[next].end)) {
			next = i
		}
	}
	if next < 0 {
		return false
	}
	r := p.held[next]
	p.held = slices.Delete(p.held, next, next+1)
	*now = r.end
	give(p.free, r.Requests)
	p.finished = append(p.finished, r.Name)
	return true
}

// unknown gives the jobs still pending an unknown start, naming the jobs of unknown end they
// wait for.
func (p *plan) unknown() {
	var blockers []string
	for _, r := range p.held {
		blockers = append(blockers, r.Name)
	}
	for i := p.first; i < len(p.pending); i = p.next[i] {
		j := p.pending[i]
		p.out[j.Name] = Estimate{Name: j.Name, Reason: fmt.Sprintf("unknown: it waits for %s, whose completion cannot be estimated yet (no measured epoch rate)", names(blockers))}
	}
}

// waitedFor says what a job admitted in the simulation after the jobs in finished waited for.
func waitedFor(q Queue, finished []string, short map[corev1.ResourceName]int64) string {
	if len(finished) == 0 {
		return fmt.Sprintf("fits the free quota of ClusterQueue %s", q.Name)
	}
	s := fmt.Sprintf("%s must finish first, to free the %s it lacks in ClusterQueue %s", names(finished), quantities(short), q.Name)
	if len(short) == 0 {
		s = fmt.Sprintf("%s must finish first, to free quota in ClusterQueue %s for the jobs ahead of it", names(finished), q.Name)
	}
	return s
}

// names lists jobs, the last ones to finish first, at most maxNamed of them.
func names(jobs []string) string {
	var shown []string
	for i := len(jobs) - 1; i >= 0 && len(shown) < maxNamed; i-- {
		shown = append(shown, jobs[i])
	}
	s := strings.Join(shown, ", ")
	if more := len(jobs) - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

func take(free, req map[corev1.ResourceName]int64) {
	for r, v := range req {
		if _, ok := free[r]; ok {
			free[r] -= v
		}
	}
}

func give(free, req map[corev1.ResourceName]int64) {
	for r, v := range req {
		if _, ok := free[r]; ok {
			free[r] += v
		}
	}
}

// lacking is what req asks beyond free, for the resources free has.
func lacking(free, req map[corev1.ResourceName]int64) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for r, v := range req {
		if have, ok := free[r]; ok && v > have {
			out[r] = v - max(have, 0)
		}
	}
	return out
}

// quantities prints resources as "8 nvidia.com/gpu, 4 cpu".
func quantities(m map[corev1.ResourceName]int64) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, resource.NewMilliQuantity(m[r], resource.DecimalSI).String()+" "+string(r))
	}
	return strings.Join(parts, ", ")
}

// least is the least any of jobs requests of each resource (zero for a job that does not ask it).
func least(jobs []Job) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for i, j := range jobs {
		for r := range out {
			out[r] = min(out[r], j.Requests[r])
		}
		if i == 0 {
			maps.Copy(out, j.Requests)
		}
	}
	return out
}

// roomFor says whether free may hold a job asking at least least.
func roomFor(free, least map[corev1.ResourceName]int64) bool {
	for r, v := range least {
		if have, ok := free[r]; ok && v > have {
			return false
		}
	}
	return true
}
