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

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// Backoff spaces the gang restarts caused by worker failures: Base after the first, doubling up to
// Max. The first restart after lost pods is not delayed; the next ones are, in the same way.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// DefaultBackoff is batch/v1 Job's pod-failure backoff.
var DefaultBackoff = Backoff{Base: 10 * time.Second, Max: 6 * time.Minute}

// delay is the wait before the gang starts again after its n-th failure restart.
func (b Backoff) delay(n int32) time.Duration {
	if n <= 0 {
		return 0
	}
	d := b.Base
	for i := int32(1); i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// restartBackoff is the phase of a Restarting gang: it waits until every pod of the attempt it
// stopped is gone, then the backoff (a failure restart's; a restart for lost pods after the first,
// unless the scheduler preempted the gang), and then passes on to create the next attempt.
func (d *decision) restartBackoff() bool {
	c := meta.FindStatusCondition(d.st.Conditions, convoy.ConditionRestarting)
	if c == nil || c.Status != metav1.ConditionTrue {
		return false
	}
	if len(d.o.pods) > 0 {
		d.deleteAll()
		return true
	}
	var delay time.Duration
	switch c.Reason {
	case convoy.ReasonPodFailed:
		delay = d.o.backoff.delay(d.st.FailureRestarts)
	case convoy.ReasonNodeLost:
		if !d.isTrue(convoy.ConditionPreempted) {
			delay = d.o.backoff.delay(d.st.DisruptionRestarts - 1)
		}
	}
	if left := c.LastTransitionTime.Add(delay).Sub(d.o.now); left > 0 {
		d.p.requeue(left)
		return true
	}
	d.set(convoy.ConditionRestarting, metav1.ConditionFalse, convoy.ReasonPodsCreated,
		fmt.Sprintf("the gang was recreated (restart %d)", d.st.RestartCount))
	return false
}
