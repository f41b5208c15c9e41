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
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// elasticShrink is the phase of an elastic gang the resizer asked to shrink
// (convoy.AnnotationElasticShrinkTo): a running gang checkpoints first (checkpointFirst, bounded by
// spec.checkpoint.preemptionGraceSeconds), then its size drops to the one asked (p.shrinkTo, which
// the reconciler writes to convoy.AnnotationElasticWorkers before anything else) and tally deletes
// its highest-rank workers. A gang that is not running drops the request: the resizer asks again
// once it runs. It never decides the reconcile.
func (d *decision) elasticShrink() bool {
	to, ok := d.job.ElasticShrinkTo()
	if _, asked := d.job.Annotations[convoy.AnnotationElasticShrinkTo]; !asked {
		return false
	}
	from := d.job.WorkerCount()
	if !ok || !d.isTrue(convoy.ConditionRunning) {
		d.p.shrinkTo = from
		return false
	}
	why := fmt.Sprintf("a job of higher priority waits for the GPUs of the gang's ClusterQueue, and the gang shrinks from %d to %d workers", from, to)
	stops := "its highest-rank worker stops"
	if from-to > 1 {
		stops = fmt.Sprintf("its %d highest-rank workers stop", from-to)
	}
	if wait := checkpointFirst(d.job, d.st, d.o.pods, d.o.now, why, stops); wait > 0 {
		d.p.requeue(wait)
		return false
	}
	job := d.job.DeepCopy()
	metav1.SetMetaDataAnnotation(&job.ObjectMeta, convoy.AnnotationElasticWorkers, strconv.Itoa(int(to)))
	delete(job.Annotations, convoy.AnnotationElasticShrinkTo)
	d.job, d.o.job = job, job
	d.p.shrinkTo = to
	return false
}

// elasticMove is the phase of a running elastic gang whose grow Kueue admitted by moving it whole
// (convoy-scheduler's placement check booked the grown gang elsewhere, for the workers it adds had
// no room beside the running ones: QueueStatus.Move names the attempt that moves). The attempt
// checkpoints first (checkpointFirst), then the whole gang restarts at its grown size, which the
// scheduler places on the booking, spending neither backoffLimit nor disruptionLimit: PyTorch's
// elastic agents restart every worker from the latest checkpoint on any change of size, so a move
// loses no more work than a grow in place, only the pods' start.
func (d *decision) elasticMove() bool {
	attempt, ok := convoy.ElasticMoveAttempt(d.o.queue.Move)
	if !ok || attempt != d.st.RestartCount || !d.job.IsElastic() || !d.isTrue(convoy.ConditionRunning) {
		return false
	}
	why := fmt.Sprintf("the gang grows to %d workers, and convoy-scheduler holds a place for all of them elsewhere (%s)", d.job.WorkerCount(), d.o.queue.Move)
	if d.waitForCheckpoint(why) {
		return true
	}
	d.restart(convoy.ReasonElasticMove, why+"; restarting the whole gang there from the latest checkpoint without spending backoffLimit or disruptionLimit", false)
	return true
}
