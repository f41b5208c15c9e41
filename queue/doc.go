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

// Package queue makes every TrainingJob that names a queue a Kueue workload, through Kueue's
// jobframework as Kueue's own integrations and its external frameworks (AppWrapper) do:
//
//   - Job adapts a TrainingJob to jobframework.GenericJob, so that Kueue's generic job reconciler
//     creates one Workload per job with one PodSet per role (worker, ps, scheduler), keeps the job
//     suspended until the Workload is admitted, injects the admitted flavors' node selectors and
//     tolerations into spec.scheduling, and suspends the whole job again when the Workload is evicted.
//   - Webhook is the admission webhook that keeps spec.scheduling.queue and the
//     kueue.x-k8s.io/queue-name label in agreement and suspends a new job that names a queue.
//   - Integration wires both into the operator's manager and reports what Kueue says about a job
//     (why it waits, where it was admitted, who preempted it) to the TrainingJob reconciler.
//
// Kueue itself runs unchanged; its configuration names TrainingJob.v1alpha1.convoy.dev as an
// external framework (deploy/kueue).
package queue
