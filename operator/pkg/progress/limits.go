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
	"net"
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
