package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
)

// Counter counts the commands (round trips) sent to the store, from the
// driver's command monitor. Round trips per request are exact and testable;
// they are the budget the hot paths are designed against.
type Counter struct {
	total atomic.Int64

	mu     sync.Mutex
	byName map[string]int64
	// observe, when set, receives each command's name and latency (metrics).
	observe func(cmd string, d time.Duration)
	// before, when set, runs synchronously before each command is sent.
	before func(ctx context.Context, e *event.CommandStartedEvent)
}

// NewCounter returns a zeroed counter.
func NewCounter() *Counter { return &Counter{byName: map[string]int64{}} }

// Monitor is the driver hook that feeds the counter.
func (c *Counter) Monitor() *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			c.total.Add(1)
			c.mu.Lock()
			c.byName[e.CommandName]++
			before := c.before
			c.mu.Unlock()
			if before != nil {
				before(ctx, e)
			}
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			c.emit(e.CommandName, e.Duration)
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			c.emit(e.CommandName, e.Duration)
		},
	}
}

// Observe registers a latency observer (set once, before traffic).
func (c *Counter) Observe(f func(cmd string, d time.Duration)) {
	c.mu.Lock()
	c.observe = f
	c.mu.Unlock()
}

func (c *Counter) emit(cmd string, d time.Duration) {
	c.mu.Lock()
	f := c.observe
	c.mu.Unlock()
	if f != nil {
		f(cmd, d)
	}
}

// Before registers a function that runs synchronously before each command
// is sent. Tests use it to stall one command at an exact point, the way a
// slow store, a GC pause or a SIGSTOP would; nil removes it.
func (c *Counter) Before(f func(ctx context.Context, e *event.CommandStartedEvent)) {
	c.mu.Lock()
	c.before = f
	c.mu.Unlock()
}

// Total is the number of commands started so far.
func (c *Counter) Total() int64 { return c.total.Load() }

// ByName returns a copy of the per-command counts.
func (c *Counter) ByName() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int64, len(c.byName))
	for k, v := range c.byName {
		m[k] = v
	}
	return m
}
