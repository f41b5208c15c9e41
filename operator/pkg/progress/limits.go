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
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// clientIdle is how long a client's limiter is kept after its last request.
const clientIdle = 5 * time.Minute

// clientLimits rate-limits requests per client address (a pod's IP), before any token review.
type clientLimits struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	limiters  map[string]*clientLimiter
	lastPrune time.Time
}

type clientLimiter struct {
	limiter *rate.Limiter
	last    time.Time
}

func newClientLimits(c clock.PassiveClock) *clientLimits {
	return &clientLimits{clock: c, limiters: map[string]*clientLimiter{}, lastPrune: c.Now()}
}

// allow reports whether the client at remoteAddr (host:port) may send another request now.
func (l *clientLimits) allow(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastPrune) > clientIdle {
		for k, c := range l.limiters {
			if now.Sub(c.last) > clientIdle {
				delete(l.limiters, k)
			}
		}
		l.lastPrune = now
	}
	c := l.limiters[host]
	if c == nil {
		c = &clientLimiter{limiter: rate.NewLimiter(clientRate, clientBurst)}
		l.limiters[host] = c
	}
	c.last = now
	return c.limiter.AllowN(now, 1)
}

// The TokenReviews of the progress endpoint, which share the operator's client (--kube-api-qps,
// 100 by default) with its status writes and reconciles. A review past a budget is not queued: the
// request is answered at once with Retry-After, and the SDK retries it.
const (
	// reviewConcurrency reviews may be in flight at once, all namespaces together; past it, 503.
	// A review takes milliseconds: the cap binds when the API server is slow.
	reviewConcurrency = 64
	// reviewRate reviews a second, in bursts of reviewBurst, all namespaces together: under half
	// the client's QPS, so a flood of reviews never delays status writes; past it, 503.
	reviewRate  = 40
	reviewBurst = 80
	// The pods of one namespace share a quarter of each global budget, so no namespace spends it
	// all: namespaceReviewConcurrency in flight, namespaceReviewRate a second in bursts of
	// namespaceReviewBurst; past it, 429. A gang of 16 pods reporting at the same moment is
	// reviewed at once, one of 40 within a second. An accepted token is cached for tokenCacheTTL,
	// so a pod needs about one review a minute.
	namespaceReviewConcurrency = 16
	namespaceReviewRate        = 10
	namespaceReviewBurst       = 40
	// reviewTimeout bounds one review, the wait for the client's rate limit included.
	reviewTimeout = 5 * time.Second
)

// reviewBusy refuses a TokenReview that a budget has no room for.
type reviewBusy struct {
	code       int
	retryAfter time.Duration
	reason     string
}

func (b reviewBusy) Error() string { return b.reason }

// retryAfterSeconds is the Retry-After header's value: whole seconds, at least 1.
func (b reviewBusy) retryAfterSeconds() string {
	return fmt.Sprint(max(1, int(math.Ceil(b.retryAfter.Seconds()))))
}

// reviewLimits holds the global and per-namespace budgets of TokenReviews.
type reviewLimits struct {
	clock clock.PassiveClock

	mu         sync.Mutex
	inFlight   int
	rate       *rate.Limiter
	namespaces map[string]*namespaceReviews
	lastPrune  time.Time
}

type namespaceReviews struct {
	inFlight int
	rate     *rate.Limiter
	last     time.Time
}

func newReviewLimits(c clock.PassiveClock) *reviewLimits {
	return &reviewLimits{clock: c, rate: rate.NewLimiter(reviewRate, reviewBurst),
		namespaces: map[string]*namespaceReviews{}, lastPrune: c.Now()}
}

// acquire takes room for one review of a token of namespace, or returns a reviewBusy; release
// gives the concurrency back once the review is done.
func (l *reviewLimits) acquire(namespace string) (release func(), err error) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prune(now)
	ns := l.namespaces[namespace]
	if ns == nil {
		ns = &namespaceReviews{rate: rate.NewLimiter(namespaceReviewRate, namespaceReviewBurst)}
		l.namespaces[namespace] = ns
	}
	ns.last = now
	if ns.inFlight >= namespaceReviewConcurrency {
		return nil, reviewBusy{code: http.StatusTooManyRequests, retryAfter: time.Second, reason: fmt.Sprintf(
			"namespace %s has %d token reviews in flight, its share; retry later", namespace, namespaceReviewConcurrency)}
	}
	if l.inFlight >= reviewConcurrency {
		return nil, reviewBusy{code: http.StatusServiceUnavailable, retryAfter: time.Second, reason: fmt.Sprintf(
			"%d token reviews are in flight, the most the operator runs at once; retry later", reviewConcurrency)}
	}
	nsToken := ns.rate.ReserveN(now, 1)
	if wait := nsToken.DelayFrom(now); wait > 0 {
		nsToken.CancelAt(now)
		return nil, reviewBusy{code: http.StatusTooManyRequests, retryAfter: wait, reason: fmt.Sprintf(
			"namespace %s has spent its %d token reviews a second; retry later", namespace, namespaceReviewRate)}
	}
	token := l.rate.ReserveN(now, 1)
	if wait := token.DelayFrom(now); wait > 0 {
		token.CancelAt(now)
		nsToken.CancelAt(now)
		return nil, reviewBusy{code: http.StatusServiceUnavailable, retryAfter: wait, reason: fmt.Sprintf(
			"the operator has spent its %d token reviews a second; retry later", reviewRate)}
	}
	ns.inFlight++
	l.inFlight++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			ns.inFlight--
			l.inFlight--
		})
	}, nil
}

// prune forgets the namespaces idle for clientIdle.
func (l *reviewLimits) prune(now time.Time) {
	if now.Sub(l.lastPrune) <= clientIdle {
		return
	}
	for k, ns := range l.namespaces {
		if ns.inFlight == 0 && now.Sub(ns.last) > clientIdle {
			delete(l.namespaces, k)
		}
	}
	l.lastPrune = now
}
