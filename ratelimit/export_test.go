package ratelimit

import "time"

// SetClock replaces the in-process buckets' clock.
func (l *Limiter) SetClock(now func() time.Time) { l.now = now }
