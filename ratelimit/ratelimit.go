// Package ratelimit decides whether a workspace may make one more request
// now: a token bucket of Limit.PerSecond tokens a second holding at most
// Limit.Burst.
//
// It decides it in one of two places. Without Redis each process keeps its
// own buckets, so N processes admit up to N × the limit between them (the
// price of costing nothing: no network call per request). With Redis the
// bucket is shared by every process (GCRA in one Lua script,
// github.com/go-redis/redis_rate), so the limit holds across the fleet. A
// Redis that fails or is slow does not stop sends: that one decision falls
// back to the process's own bucket and the error is returned for the log.
package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// Limit is a token bucket: PerSecond requests a second on average, up to
// Burst at once. The zero Limit means no limit.
type Limit struct {
	PerSecond int `bson:"perSecond" json:"perSecond"`
	Burst     int `bson:"burst" json:"burst"`
}

// Unlimited reports whether l limits nothing.
func (l Limit) Unlimited() bool { return l.PerSecond <= 0 }

func (l Limit) String() string { return fmt.Sprintf("%d/s (burst %d)", l.PerSecond, l.Burst) }

// Decision is the answer for one request.
type Decision struct {
	Allowed bool
	// RetryAfter is how long until one request would be allowed (0 when
	// Allowed).
	RetryAfter time.Duration
	// Backend is "local" or "redis": where the decision was taken.
	Backend string
	// Remaining is the whole tokens left in the bucket after this
	// request, and Full how long until the bucket is full again (the IETF
	// RateLimit header's r and t).
	Remaining int
	Full      time.Duration
}

// Backends.
const (
	BackendLocal = "local"
	BackendRedis = "redis"
)

// maxBuckets bounds the in-process buckets. Keys are authenticated
// workspace ids, so this is only a backstop; past it the buckets are reset
// (each workspace then starts with a full burst again).
const maxBuckets = 100_000

// Limiter holds the buckets.
type Limiter struct {
	redis *redis_rate.Limiter // nil: in process only
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// Options configure New.
type Options struct {
	// Redis shares the buckets between processes; nil keeps them in process.
	Redis *redis.Client
	// Now is the in-process buckets' clock (tests); default time.Now. Redis
	// uses its own clock.
	Now func() time.Time
}

// New returns a Limiter.
func New(o Options) *Limiter {
	l := &Limiter{now: o.Now, buckets: map[string]*rate.Limiter{}}
	if l.now == nil {
		l.now = time.Now
	}
	if o.Redis != nil {
		l.redis = redis_rate.NewLimiter(o.Redis)
	}
	return l
}

// Allow takes one token from key's bucket under lim. An error means Redis
// failed and the decision was taken by the process's own bucket instead.
func (l *Limiter) Allow(ctx context.Context, key string, lim Limit) (Decision, error) {
	if lim.Unlimited() {
		return Decision{Allowed: true, Backend: BackendLocal}, nil
	}
	lim.Burst = max(lim.Burst, 1)
	if l.redis == nil {
		return l.local(key, lim), nil
	}
	res, err := l.redis.Allow(ctx, "msgapi:"+key, redis_rate.Limit{Rate: lim.PerSecond, Burst: lim.Burst, Period: time.Second})
	if err != nil {
		return l.local(key, lim), fmt.Errorf("redis rate limit: %w", err)
	}
	if res.Allowed > 0 {
		return Decision{Allowed: true, Backend: BackendRedis, Remaining: res.Remaining, Full: res.ResetAfter}, nil
	}
	return Decision{RetryAfter: max(res.RetryAfter, time.Millisecond), Backend: BackendRedis, Remaining: res.Remaining, Full: res.ResetAfter}, nil
}

func (l *Limiter) local(key string, lim Limit) Decision {
	now := l.now()
	l.mu.Lock()
	b, ok := l.buckets[key]
	// A new workspace, or one whose limit the admin API changed, starts
	// with a full bucket of its (new) burst.
	if !ok || b.Limit() != rate.Limit(lim.PerSecond) || b.Burst() != lim.Burst {
		if !ok && len(l.buckets) >= maxBuckets {
			clear(l.buckets)
		}
		b = rate.NewLimiter(rate.Limit(lim.PerSecond), lim.Burst)
		l.buckets[key] = b
	}
	l.mu.Unlock()

	r := b.ReserveN(now, 1)
	d := Decision{Allowed: true, Backend: BackendLocal}
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		d = Decision{RetryAfter: wait, Backend: BackendLocal}
	}
	tokens := max(b.TokensAt(now), 0)
	d.Remaining = int(tokens)
	d.Full = time.Duration((float64(lim.Burst) - tokens) / float64(lim.PerSecond) * float64(time.Second))
	return d
}
