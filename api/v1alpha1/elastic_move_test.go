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

package v1alpha1

import "testing"

func TestElasticMoveMessageReadsBack(t *testing.T) {
	const where = "convoy-scheduler holds 16 GPU(s) for the gang on node(s) b-0, b-1"
	why := "rack a has 4 free GPUs: the 2 added workers ask 16: see the job's events"
	msg := where + ElasticMoveMessage(3, why)
	if a, ok := ElasticMoveAttempt(msg); !ok || a != 3 {
		t.Errorf("ElasticMoveAttempt(%q) = %d, %v, want 3, true", msg, a, ok)
	}
	if got := ElasticMoveReason(msg); got != why {
		t.Errorf("ElasticMoveReason(%q) = %q, want %q", msg, got, why)
	}
	for _, m := range []string{where, "", "the gang's pods reached convoy-scheduler and took the place held for them"} {
		if a, ok := ElasticMoveAttempt(m); ok {
			t.Errorf("ElasticMoveAttempt(%q) = %d, true, want no move", m, a)
		}
		if got := ElasticMoveReason(m); got != "" {
			t.Errorf("ElasticMoveReason(%q) = %q, want empty", m, got)
		}
	}
}
