package guard

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// clock is a test wall clock that a test moves forward.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// watch makes g see the current holder of k's lock without waiting, as a
// request that finds it held does.
func watch(t *testing.T, e *env, g *Guard, id string) {
	t.Helper()
	d, err := g.AcquireWith(e.ctx, key, id, Limits{Wait: 0})
	if err != nil || d.Outcome != Pending {
		t.Fatalf("watching the holder = %v, %v; want pending", d.Outcome, err)
	}
}

// "The holder died" and "the remover died" are judged on the judging
// process's own clock: how long it has seen the lock's generation
// unchanged. Before, they were judged from the lock's or the claim's
// createdAt, written by another process, and a process whose clock ran a
// lease ahead took over at once: a live holder was fenced (it did not send,
// but its caller got no message), and a live remover's claim was taken over
// while its delete was still on its way — RELIABILITY.md's finding 5.
func TestSkewedClockDecidesNothing(t *testing.T) {
	ahead := func() time.Time { return time.Now().Add(31 * time.Second) }

	t.Run("a live holder", func(t *testing.T) {
		e := newEnv(t)
		holder := e.guard(Options{})
		if d, err := holder.Acquire(e.ctx, key, "msg_1"); err != nil || d.Outcome != Won {
			t.Fatalf("Acquire = %v, %v", d.Outcome, err)
		}
		skewed := e.guard(Options{Now: ahead, Wait: 200 * time.Millisecond})
		if d, err := skewed.Acquire(e.ctx, key, "msg_2"); err != nil || d.Outcome != Pending {
			t.Fatalf("a process with its clock a lease ahead = %v, %v; want pending (the holder is live)", d.Outcome, err)
		}
		if err := e.msgs.write(context.Background(), "msg_1", "sent"); err != nil {
			t.Fatalf("the live holder's own insert = %v, want it written (not fenced)", err)
		}
	})

	t.Run("a live remover", func(t *testing.T) {
		e := newEnv(t)
		uri, dir := storetest.URI(t)
		slow, err := store.Open(context.Background(), store.Options{URI: uri, SQLiteDir: dir, Database: e.s.DB.Name(), Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = slow.Client.Disconnect(context.Background()) })
		held, gate := make(chan struct{}), make(chan struct{})
		var once sync.Once
		slow.RoundTrips.Before(func(_ context.Context, ev *event.CommandStartedEvent) {
			if ev.CommandName == "delete" {
				once.Do(func() { close(held); <-gate })
			}
		})
		holder := e.guard(Options{Store: slow})
		d, err := holder.Acquire(e.ctx, key, "msg_1")
		if err != nil || d.Outcome != Won {
			t.Fatalf("Acquire = %v, %v", d.Outcome, err)
		}
		released := make(chan error, 1)
		go func() { released <- holder.Release(e.ctx, d.LockID, "msg_1") }()
		<-held // fenced and claimed; its delete is on its way
		skewed := e.guard(Options{Now: ahead, Wait: 200 * time.Millisecond})
		d2, err := skewed.Acquire(e.ctx, key, "msg_2")
		close(gate)
		if err != nil || d2.Outcome != Pending {
			t.Fatalf("a process with its clock a lease ahead = %v, %v; want pending (the remover is live)", d2.Outcome, err)
		}
		if err := <-released; err != nil {
			t.Fatal(err)
		}
		if _, ok := e.lock(d.LockID); ok {
			t.Fatal("the release did not delete the lock")
		}
	})
}
