package guard

import (
	"context"
	"slices"
	"time"
)

// Polling schedule for holders in other processes: the first read after
// 25 ms, doubling to 400 ms, so a 3 s wait costs about ten sibling reads
// plus a lock read every third poll, not one every few milliseconds.
const (
	pollFirst        = 25 * time.Millisecond
	pollMax          = 400 * time.Millisecond
	lockRecheckEvery = 3
)

// flight is a message this process won the lock for and has not written
// yet. Same-process losers block on done instead of polling the store.
type flight struct {
	done    chan struct{}
	written bool // set before done is closed: false means released or abandoned
	timer   *time.Timer
}

func (g *Guard) track(messageID string) {
	f := &flight{done: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	// A caller that never calls Written or Release (a panic) must not leak
	// the entry; its lock is free to take over after Lease by then anyway.
	f.timer = time.AfterFunc(g.o.Lease+g.o.Wait, func() { g.finishFlight(messageID, f, false) })
	g.flights[messageID] = f
}

func (g *Guard) inFlight(messageID string) *flight {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.flights[messageID]
}

// finish ends messageID's flight and wakes its waiters.
func (g *Guard) finish(messageID string, written bool) { g.finishFlight(messageID, nil, written) }

// finishFlight ends messageID's flight, only if it is f when f is not nil.
func (g *Guard) finishFlight(messageID string, f *flight, written bool) {
	g.mu.Lock()
	cur := g.flights[messageID]
	if cur == nil || (f != nil && cur != f) {
		g.mu.Unlock()
		return
	}
	delete(g.flights, messageID)
	g.mu.Unlock()
	cur.timer.Stop()
	cur.written = written
	close(cur.done)
}

// waited is the result of wait. Neither field set means the wait ran out.
type waited struct {
	sib   *Sibling // the holder's message appeared
	moved bool     // judge again: next is the lock as it now stands (nil: gone)
	next  *view
}

// wait waits for v's holder to write its message, until the real-clock
// deadline until.
func (g *Guard) wait(ctx context.Context, lockID string, v *view, until time.Time) (waited, error) {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)

	if f := g.inFlight(v.h.messageID); f != nil {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return waited{}, ctx.Err()
		case <-t.C:
			return waited{}, nil
		case <-f.done:
		}
		if !f.written {
			// Released: no message will come, and the first to insert sends.
			next, err := g.observe(ctx, lockID)
			return waited{moved: true, next: next}, err
		}
		sib, err := g.sibling(ctx, lockID, v.h.messageID)
		if err != nil || sib != nil {
			return waited{sib: sib}, err
		}
		// Written, yet not visible: poll for the rest of the wait.
	}
	return g.poll(ctx, lockID, v, until)
}

// poll waits for a holder in another process: it reads the sibling with
// backoff and re-reads the lock now and then to follow a new holder.
func (g *Guard) poll(ctx context.Context, lockID string, v *view, until time.Time) (waited, error) {
	backoff := pollFirst
	for n := 1; ; n++ {
		if err := sleep(ctx, min(backoff, time.Until(until))); err != nil {
			return waited{}, err
		}
		backoff = min(2*backoff, pollMax)
		// A remover's holder never writes a message: watch the lock only.
		if !v.h.removing {
			sib, err := g.sibling(ctx, lockID, v.h.messageID)
			if err != nil || sib != nil {
				return waited{sib: sib}, err
			}
		}
		if !time.Now().Before(until) {
			return waited{}, nil
		}
		if v.h.removing || n%lockRecheckEvery == 0 {
			next, err := g.observe(ctx, lockID)
			if err != nil {
				return waited{}, err
			}
			if next == nil || !slices.Contains(v.chain, next.lock.MessageID) {
				return waited{moved: true, next: next}, nil
			}
		}
		if g.heldFor(lockID, v.h.messageID) >= g.o.Lease {
			return waited{moved: true, next: v}, nil // judge the holder as crashed
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
