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

// Package elastic is the resize policy of elastic TrainingJobs (spec.elastic): which running
// jobs grow into free GPUs and by how much, when measured throughput says growing stops paying,
// and which jobs shrink to make room for a higher-priority one. It is pure: the operator and
// test/bench/elastic call it with what they know and apply what it returns.
package elastic

import "time"

// GrowAdmitTimeout is how long a grow waits for Kueue to admit the larger Workload slice before
// it is withdrawn: a grow asks only for free nominal quota, which Kueue admits within seconds, so
// a slice still waiting after three of the resizer's rechecks (10 s) lost its quota to another
// workload meanwhile, or the placement check finds no place for its added workers beside the
// running ones, and they would wait at Kueue's gate, holding the quota, for ever.
const GrowAdmitTimeout = 30 * time.Second

// Job is what the policy knows of one running elastic job.
type Job struct {
	// Key names the job, namespace/name.
	Key string
	// Priority is the job's priority; a job only shrinks for one of higher priority.
	Priority int32
	// Min, Max and Current are spec.minWorkers, spec.numWorkers and the workers it runs with.
	Min, Max, Current int32
	// Admitted is the size Kueue admitted the job at: workers above it were grown into free GPUs
	// and are lent, given back to a waiting job of the same priority.
	Admitted int32
	// GPUsPerWorker is the GPUs each worker holds.
	GPUsPerWorker int32
	// LastResize is when the job last resized, or started; zero when never.
	LastResize time.Time
	// Cooldown is spec.elastic.resizeCooldownSeconds.
	Cooldown time.Duration
	// Withdrawn is the grows withdrawn in a row since the job last grew (status.elastic.withdrawnGrows):
	// each doubles the cooldown before the next grow (GrowBackoff).
	Withdrawn int32
	// MinEfficiency is the share (0 to 1) of the per-GPU throughput at the smallest measured
	// size that a larger size must keep for the job to grow (spec.elastic.minScalingEfficiency
	// or the platform default).
	MinEfficiency float64
	// Throughput is the measured samples per second by number of workers.
	Throughput map[int32]float64
}

// Resize is one decision: the job goes from From to To workers.
type Resize struct {
	Key      string
	From, To int32
	// Reason says why, for the Resized event.
	Reason string
}

// maxGrowBackoff caps the doublings of the cooldown after withdrawn grows: 16 times the cooldown.
const maxGrowBackoff = 4

// GrowBackoff is how long after its last resize the job may grow again: its cooldown, doubled for
// each grow withdrawn in a row (at most 16 times), so that a job whose grows find no quota or no
// place beside its gang does not hold the quota of a grow every cooldown while nothing changes.
func (j *Job) GrowBackoff() time.Duration {
	return j.Cooldown << min(max(j.Withdrawn, 0), maxGrowBackoff)
}

// CoolingDown reports whether the job resized less than GrowBackoff ago.
func (j *Job) CoolingDown(now time.Time) bool {
	return !j.LastResize.IsZero() && now.Sub(j.LastResize) < j.GrowBackoff()
}
