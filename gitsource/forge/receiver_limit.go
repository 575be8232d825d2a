package forge

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// limiter is a token bucket per source address, with a bounded number of
// addresses. Behind a reverse proxy every delivery shares the proxy's
// address: X-Forwarded-For is not trusted.
type limiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	max     int
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst, max int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), max: max, buckets: map[string]*bucket{}}
}

// allow takes a token from host's bucket.
func (l *limiter) allow(host string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[host]
	if b == nil {
		l.makeRoom(now)
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[host] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// makeRoom forgets buckets that have refilled (their sources are idle); if
// none has, it forgets an arbitrary one.
func (l *limiter) makeRoom(now time.Time) {
	if len(l.buckets) < l.max {
		return
	}
	for host, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, host)
		}
	}
	for host := range l.buckets {
		if len(l.buckets) < l.max {
			break
		}
		delete(l.buckets, host)
	}
}

func remoteHost(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return req.RemoteAddr
	}
	return host
}

// dedupe remembers delivery ids for a window, at most size of them.
type dedupe struct {
	mu     sync.Mutex
	window time.Duration
	size   int
	seen   map[string]time.Time
	order  []string
}

func newDedupe(window time.Duration, size int) *dedupe {
	return &dedupe{window: window, size: size, seen: map[string]time.Time{}}
}

// first records id and reports whether it was not seen within the window.
func (d *dedupe) first(id string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if at, ok := d.seen[id]; ok && now.Sub(at) < d.window {
		return false
	}
	if len(d.order) >= d.size {
		delete(d.seen, d.order[0])
		d.order = d.order[1:]
	}
	if _, ok := d.seen[id]; !ok {
		d.order = append(d.order, id)
	}
	d.seen[id] = now
	return true
}
