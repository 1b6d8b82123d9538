package server

import (
	"math"
	"net"
	"net/netip"
	"sync"
	"time"
)

// bucket is a token bucket: tokens refill at rate a second up to burst.
type bucket struct {
	tokens float64
	last   time.Time
}

// take spends one token at now if there is one; otherwise it says how long
// until there is.
func (b *bucket) take(r Rate, now time.Time) (bool, time.Duration) {
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(float64(r.Burst), b.tokens+el*r.Rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / r.Rate * float64(time.Second))
}

// full reports whether the bucket has refilled by now (forgetting it
// loses nothing).
func (b *bucket) full(r Rate, now time.Time) bool {
	return b.tokens+now.Sub(b.last).Seconds()*r.Rate >= float64(r.Burst)
}

// maxKeys bounds the buckets a limiter keeps: past it, the full ones are
// forgotten, and when none is, new keys share one bucket.
const maxKeys = 10000

// limiter keeps a token bucket per key (a token's name, a remote
// address), in bounded memory.
type limiter struct {
	mu       sync.Mutex
	buckets  map[string]*bucket
	overflow bucket
}

func newLimiter() *limiter { return &limiter{buckets: map[string]*bucket{}} }

// allow spends a token of key's bucket at rate r; when there is none, it
// says how long until there is.
func (l *limiter) allow(key string, r Rate, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxKeys {
			for k, o := range l.buckets {
				if o.full(r, now) {
					delete(l.buckets, k)
				}
			}
		}
		if len(l.buckets) >= maxKeys {
			return l.overflow.take(r, now)
		}
		b = &bucket{tokens: float64(r.Burst), last: now}
		l.buckets[key] = b
	}
	return b.take(r, now)
}

// remoteKey is the address a limit counts a remote by: its IP, or for
// IPv6, its /64 (what one host usually gets).
func remoteKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return capString(host, 64)
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// retryAfter is a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
