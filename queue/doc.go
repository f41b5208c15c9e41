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
