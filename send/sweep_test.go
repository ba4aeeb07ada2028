package send_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/send"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

type env struct {
	st    *store.Store
	ms    *messages.Store
	g     *guard.Guard
	logs  *strings.Builder
	lost  atomic.Int64
	sweep *send.Sweeper
	clock *clock // the sweeper's
}

// clock is a wall clock a test moves forward.
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

func newEnv(t testing.TB) *env {
	st := storetest.New(t, append(append([]store.Collection{}, messages.Collections...), guard.Collections...)...)
	ms := messages.NewStore(st)
	e := &env{st: st, ms: ms, logs: &strings.Builder{}, clock: &clock{}}
	e.g = guard.New(guard.Options{Store: st, Sibling: send.Sibling(ms), Fence: ms.Fence})
	e.sweep = send.NewSweeper(send.SweeperOptions{Messages: ms, Holders: e.g.Holders, After: 10 * time.Second,
		Now: e.clock.Now, Log: zerolog.New(e.logs), Lost: func() { e.lost.Add(1) }})
	return e
}

// send plays a request that won its lock and wrote its message age ago,
// with status.
func (e *env) send(t testing.TB, body string, age time.Duration, status string) string {
	t.Helper()
	ctx := context.Background()
	id := msgapi.NewID("msg")
	d, err := e.g.Acquire(ctx, guard.Key{WorkspaceID: "ws_1", Phone: "+15550100000", Body: body}, id)
	if err != nil || d.Outcome != guard.Won {
		t.Fatalf("acquire: %v %v", d.Outcome, err)
	}
	at := time.Now().Add(-age).UTC().Truncate(time.Millisecond)
	_, err = e.st.Collection("messages").InsertOne(ctx, messages.Message{ID: id, WorkspaceID: "ws_1", Channel: "sms",
		Direction: "outbound", Body: body, Status: status, Provider: "twilio", CreatedAt: at, UpdatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	// The lock's own times, as the request would have written them.
	_, err = e.st.Collection("message_dedup_locks").UpdateOne(ctx, bson.D{{Key: "_id", Value: d.LockID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "createdAt", Value: at}, {Key: "expiresAt", Value: at.Add(15 * time.Minute)}}}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *env) status(t *testing.T, id string) (string, string) {
	t.Helper()
	m, found, err := e.ms.Get(context.Background(), id)
	if err != nil || !found {
		t.Fatalf("get %s: %v %v", id, found, err)
	}
	return m.Status, m.Error
}

func TestSweepMarksLostOutcomesUnknown(t *testing.T) {
	e := newEnv(t)
	lost := e.send(t, "lost", time.Minute, messages.StatusSending)
	done := e.send(t, "done", time.Minute, messages.StatusSent)

	// The first pass sees the lost one sending; it decides once it has
	// watched it for After on its own clock.
	if n, err := e.sweep.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("first Sweep = %d, %v; want 0 (nothing watched for 10s yet)", n, err)
	}
	e.clock.advance(10 * time.Second)
	// 1 s old on the sweeper's clock, now 10 s ahead of the real one.
	young := e.send(t, "still with its provider", time.Second-10*time.Second, messages.StatusSending)
	n, err := e.sweep.Sweep(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if st, er := e.status(t, lost); st != messages.StatusUnknown || er != send.LostError {
		t.Errorf("lost message: %s %q, want unknown with the lost-outcome error", st, er)
	}
	if st, _ := e.status(t, young); st != messages.StatusSending {
		t.Errorf("a message younger than send timeout + margin became %s", st)
	}
	if st, _ := e.status(t, done); st != messages.StatusSent {
		t.Errorf("a sent message became %s", st)
	}
	if e.lost.Load() != 1 || !strings.Contains(e.logs.String(), `"event":"message.api.outcome_lost"`) ||
		!strings.Contains(e.logs.String(), `"messageId":"`+lost+`"`) || !strings.Contains(e.logs.String(), `"ageMs":`) {
		t.Errorf("counter %d, log %s; want one outcome_lost event with the message id and age", e.lost.Load(), e.logs.String())
	}

	// Another pass reads no message: the two decided ones are remembered
	// and the young one is skipped by its lock's age. Only the lock scan.
	before := e.st.RoundTrips.Total()
	if n, err := e.sweep.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("another Sweep = %d, %v; want 0", n, err)
	}
	if got := e.st.RoundTrips.Total() - before; got != 1 {
		t.Errorf("another pass: %d round trips, want 1 (the lock scan)", got)
	}
}

// Finding 1's clock half: a sweeper whose clock runs ahead of the writer's
// by more than After judged a message that had just been written as lost
// (its createdAt looked old) and marked it unknown while its provider call
// was running; a replay could answer that. Judged by how long this sweeper
// has watched it, skew decides nothing.
func TestSweepIgnoresASkewedClock(t *testing.T) {
	e := newEnv(t)
	e.clock.advance(time.Minute) // the sweeper's clock is a minute ahead
	id := e.send(t, "just written", 0, messages.StatusSending)
	for range 3 {
		if n, err := e.sweep.Sweep(context.Background()); err != nil || n != 0 {
			t.Fatalf("Sweep = %d, %v; want 0: the message is a moment old", n, err)
		}
	}
	if st, _ := e.status(t, id); st != messages.StatusSending {
		t.Fatalf("a message a moment old became %s", st)
	}
}

// RELIABILITY.md finding 1: the provider's answer for a message arrives
// late (its process stalled, or the store was slow), in the moment between
// the sweeper's read of the message (still sending) and its write of
// "unknown". The sweeper must not move it back from sent: the first
// outcome is decided by an insert, and the loser may only move it up.
func TestSweepDoesNotOverwriteALateOutcome(t *testing.T) {
	e := newEnv(t)
	id := e.send(t, "late answer", time.Minute, messages.StatusSending)
	late := messages.NewStore(storetest.Second(t, e.st)) // the sender's process
	if n, err := e.sweep.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("first Sweep = %d, %v; want 0", n, err)
	}
	e.clock.advance(11 * time.Second)

	// The sweeper's first write: before it goes out, the late answer
	// lands, through the other process's store.
	var fired atomic.Bool
	e.st.RoundTrips.Before(func(ctx context.Context, ev *event.CommandStartedEvent) {
		if (store.InsertCollections(ev) == nil && ev.CommandName != "update") || !fired.CompareAndSwap(false, true) {
			return
		}
		m, found, err := late.Get(context.Background(), id)
		if err != nil || !found {
			t.Errorf("late sender's read: %v %v", found, err)
			return
		}
		m.Status, m.ProviderMessageID = messages.StatusSent, "SM_late"
		if err := late.RecordOutcome(context.Background(), &m); err != nil {
			t.Errorf("late outcome: %v", err)
		}
	})
	defer e.st.RoundTrips.Before(nil)
	if _, err := e.sweep.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !fired.Load() {
		t.Fatal("the sweeper wrote nothing: the race was not played")
	}
	if st, _ := e.status(t, id); st != messages.StatusSent {
		t.Errorf("a message the provider accepted is %s after the sweep, want sent", st)
	}
}

// BenchmarkSweepPass: one pass with 50 live locks (10 of them lost
// outcomes) among 1,000 and 100,000 stored messages. Its cost follows the
// live locks, not the stored messages.
func BenchmarkSweepPass(b *testing.B) {
	for _, stored := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", stored), func(b *testing.B) {
			e := newEnv(b)
			ctx := context.Background()
			batch := make([]any, 0, 1000)
			for i := range stored {
				batch = append(batch, messages.Message{ID: fmt.Sprintf("msg_old%07d", i), WorkspaceID: "ws_1", Status: messages.StatusSent, CreatedAt: time.Now()})
				if len(batch) == cap(batch) {
					if _, err := e.st.Collection("messages").InsertMany(ctx, batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			for i := range 50 {
				status := messages.StatusSent
				if i < 10 {
					status = messages.StatusSending
				}
				e.send(b, fmt.Sprintf("text %d", i), time.Minute, status)
			}
			b.ResetTimer()
			for range b.N {
				// A fresh sweeper each time: a process's first pass, the
				// most expensive (it reads every live lock's message).
				s := send.NewSweeper(send.SweeperOptions{Messages: e.ms, Holders: e.g.Holders, After: 10 * time.Second, Log: zerolog.Nop()})
				if _, err := s.Sweep(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
