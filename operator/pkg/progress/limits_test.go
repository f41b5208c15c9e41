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

package progress

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// acquireN takes n reviews for namespace and returns their releases and the first refusal's code.
func acquireN(l *reviewLimits, namespace string, n int) ([]func(), int) {
	var releases []func()
	for range n {
		release, err := l.acquire(namespace)
		if busy := (reviewBusy{}); errors.As(err, &busy) {
			return releases, busy.code
		}
		releases = append(releases, release)
	}
	return releases, 0
}

func TestReviewConcurrency(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := newReviewLimits(clk)
	held, code := acquireN(l, "hostile", namespaceReviewConcurrency+1)
	if len(held) != namespaceReviewConcurrency || code != http.StatusTooManyRequests {
		t.Fatalf("namespace hostile got %d reviews in flight then %d, want %d then 429", len(held), code, namespaceReviewConcurrency)
	}
	// The other namespaces fill the rest of the global cap; one more is refused, whatever its namespace.
	for i := 1; i < reviewConcurrency/namespaceReviewConcurrency; i++ {
		more, code := acquireN(l, fmt.Sprint("team-", i), namespaceReviewConcurrency)
		if code != 0 {
			t.Fatalf("team-%d refused with %d while the global cap has room", i, code)
		}
		held = append(held, more...)
	}
	if _, code := acquireN(l, "quiet", 1); code != http.StatusServiceUnavailable {
		t.Fatalf("a review past %d in flight answered %d, want 503", reviewConcurrency, code)
	}
	held[0]()
	held[0]() // a second release gives nothing back
	if _, code := acquireN(l, "quiet", 2); code != http.StatusServiceUnavailable {
		t.Errorf("two reviews after one was released answered %d on the second, want 503", code)
	}
}

func TestReviewRate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := newReviewLimits(clk)
	// take acquires and releases at once, as fast reviews do, and returns how many were allowed.
	take := func(namespace string, n int) (int, error) {
		for i := range n {
			release, err := l.acquire(namespace)
			if err != nil {
				return i, err
			}
			release()
		}
		return n, nil
	}
	got, err := take("hostile", namespaceReviewBurst+1)
	busy := reviewBusy{}
	if got != namespaceReviewBurst || !errors.As(err, &busy) || busy.code != http.StatusTooManyRequests || busy.retryAfterSeconds() != "1" {
		t.Fatalf("namespace hostile got %d reviews then %v, want %d then 429 with Retry-After 1", got, err, namespaceReviewBurst)
	}
	// The spent namespace does not spend the others': they share the global burst.
	if got, err := take("team-a", namespaceReviewBurst); err != nil {
		t.Fatalf("team-a got %d reviews then %v, want its whole burst", got, err)
	}
	if got, err := take("team-b", 1); !errors.As(err, &busy) || busy.code != http.StatusServiceUnavailable {
		t.Fatalf("past the global burst of %d, team-b got %d reviews then %v, want 503", reviewBurst, got, err)
	}
	clk.Step(time.Second)
	if got, _ := take("hostile", namespaceReviewBurst); got != namespaceReviewRate {
		t.Errorf("a second later namespace hostile got %d reviews, want %d", got, namespaceReviewRate)
	}
	if got, _ := take("team-b", reviewBurst); got != reviewRate-namespaceReviewRate {
		t.Errorf("a second later team-b got %d reviews, want the %d the global rate has left", got, reviewRate-namespaceReviewRate)
	}
}
