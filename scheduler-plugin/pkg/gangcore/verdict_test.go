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
	"testing"
	"time"
)

// TestVerdictsHold: a verdict holds until the cluster's generation changes or verdictTTL passes,
// and the gauge counts each gang with one once.
func TestVerdictsHold(t *testing.T) {
	registerMetrics()
	m := meter{t}
	before := m.gauge(gangsWaitingForRoom)
	v := newVerdicts(gangsWaitingForRoom)
	now := time.Now()
	v.set("ns/a", verdict{generation: 3, at: now, message: "no room"})
	v.set("ns/a", verdict{generation: 4, at: now, message: "still no room"})
	if got, ok := v.holds("ns/a", 4, now.Add(time.Second)); !ok || got.message != "still no room" {
		t.Errorf("holds = %q, %v; want the latest verdict", got.message, ok)
	}
	if _, ok := v.holds("ns/a", 5, now); ok {
		t.Error("a verdict held after the cluster changed")
	}
	if _, ok := v.holds("ns/a", 4, now.Add(verdictTTL)); ok {
		t.Error("a verdict held past verdictTTL")
	}
	if got := m.gauge(gangsWaitingForRoom) - before; got != 1 {
		t.Errorf("gangs_waiting_for_room rose by %v for one gang, want 1", got)
	}
	v.clear("ns/a")
	v.clear("ns/a")
	if got := m.gauge(gangsWaitingForRoom) - before; got != 0 {
		t.Errorf("gangs_waiting_for_room is %v above where it began once the verdict went, want 0", got)
	}
	// Preemption's verdicts count in no gauge.
	newPreemptions().cannot.set("ns/b", verdict{})
	if got := m.gauge(gangsWaitingForRoom) - before; got != 0 {
		t.Errorf("a preemption verdict moved gangs_waiting_for_room by %v", got)
	}
}
