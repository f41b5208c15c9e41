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

package gangcore

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Convoy's scheduler metrics, served with kube-scheduler's own on its secure port's /metrics
// (deploy/scheduler/README.md lists them). They are registered in component-base's legacy
// registry, as upstream's scheduler metrics are, when the first State is made.
const metricsSubsystem = "convoy_scheduler"

// Results of a gang's planning.
const (
	planPlanned       = "planned"
	planUnschedulable = "unschedulable"
)

// Reasons a gang's plan is dropped before all its pods bind: the label values of
// convoy_scheduler_gang_plans_dropped_total.
const (
	dropTimeout        = "timeout"
	dropClusterChanged = "cluster_changed"
	dropRescheduled    = "pod_rescheduled"
	dropUnreserved     = "unreserved"
	dropNodeRejected   = "node_rejected"
	dropPodDeleted     = "pod_deleted"
)

var (
	gangPlans = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_plans_total",
		Help:           "Whole-gang placements GangPlacement computed, by result: planned (every pod of the gang has a slot) or unschedulable (the gang does not fit; its pods are told why). A gang's later pods follow its plan and are not counted.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	gangPlanDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_plan_duration_seconds",
		Help:           "Time GangPlacement took to compute a whole-gang placement (or to find there is none), by result.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	gangPlansDropped = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_plans_dropped_total",
		Help:           "Gang plans dropped before every pod bound, by reason: timeout, cluster_changed (a planned slot's GPUs were taken or its node changed), pod_rescheduled, unreserved (a later plugin turned a reserved pod away), node_rejected (another plugin's Filter rejected a planned node), pod_deleted (a pod of the gang was deleted before it bound). The gang's waiting pods go back to the queue and the gang is planned again.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	gangsPlanned = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gangs_planned",
		Help:           "Gangs with a plan whose pods are not all bound yet: waiting at Permit, or for the victims they preempted.",
		StabilityLevel: metrics.ALPHA,
	})
	gangsWaitingForRoom = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gangs_waiting_for_room",
		Help:           "Gangs that GangPlacement last found no room for, and preemption did not make room for, and that were neither planned nor deleted since: the gangs waiting for GPUs (or CPU, memory, topology) to free up.",
		StabilityLevel: metrics.ALPHA,
	})
	gangTimeToBound = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_time_to_bound_seconds",
		Help:           "Time from the creation of a gang's first pending pod to the binding of its last pod, for each gang whose plan bound whole.",
		Buckets:        metrics.ExponentialBuckets(0.1, 2, 18),
		StabilityLevel: metrics.ALPHA,
	})
	gangPreemptions = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "gang_preemptions_total",
		Help:           "Gangs that GangPreemption made room for by evicting victims.",
		StabilityLevel: metrics.ALPHA,
	})
	preemptionVictims = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_victims_total",
		Help:           "Victims GangPreemption evicted, by kind: gang (every pod of a lower-priority gang) or pod (a lower-priority pod of no gang).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	preemptionVictimPods = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_victim_pods_total",
		Help:           "Pods GangPreemption evicted, every pod of every victim.",
		StabilityLevel: metrics.ALPHA,
	})

	registerMetricsOnce sync.Once
)

// registerMetrics registers Convoy's scheduler metrics in the legacy registry, once.
func registerMetrics() {
	registerMetricsOnce.Do(func() {
		legacyregistry.MustRegister(gangPlans, gangPlanDuration, gangPlansDropped, gangsPlanned, gangsWaitingForRoom, gangTimeToBound,
			gangPreemptions, preemptionVictims, preemptionVictimPods)
	})
}

// observePlan records a whole-gang planning that began at start.
func observePlan(result string, start time.Time) {
	gangPlans.WithLabelValues(result).Inc()
	gangPlanDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
}

// RecordPreemption records the victims GangPreemption evicted for one gang.
func RecordPreemption(v *Victims) {
	gangPreemptions.Inc()
	if n := len(v.Gangs) - v.LonePods; n > 0 {
		preemptionVictims.WithLabelValues("gang").Add(float64(n))
	}
	if v.LonePods > 0 {
		preemptionVictims.WithLabelValues("pod").Add(float64(v.LonePods))
	}
	preemptionVictimPods.Add(float64(len(v.Pods)))
}
