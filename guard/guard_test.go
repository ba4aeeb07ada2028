package guard

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

var key = Key{WorkspaceID: "ws_a", Phone: "+15550100000", Body: "Your appointment is at 3pm"}

func TestLockID(t *testing.T) {
	base := Key{WorkspaceID: "ws_1", Phone: "+15550100000", Email: "ann@example.com", Body: "hi there"}
	if got := LockID(base); !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(got) {
		t.Fatalf("LockID = %q, want 64 lower-case hex characters", got)
	}
	// Lock ids are stored (_id of message_dedup_locks): the framing must
	// never change, or a deploy would forget every live lock.
	if got, want := LockID(base), "822a5bca1a0afa70e49bfd1d1323e2177823dedcb9a51d24433cd48402242570"; got != want {
		t.Fatalf("LockID = %s, want %s (the stored id of this key)", got, want)
	}
	differ := []struct {
		name string
		a, b Key
	}{
		{"workspace/phone boundary", Key{WorkspaceID: "ws1", Phone: "+1555"}, Key{WorkspaceID: "ws", Phone: "1+1555"}},
		{"phone/email boundary", Key{Phone: "+1555", Email: "a@b.c"}, Key{Phone: "+1555a", Email: "@b.c"}},
		{"email/body boundary", Key{Email: "a@b.c", Body: "hi"}, Key{Email: "a@b.ch", Body: "i"}},
		{"phone or email", Key{Phone: "x", Body: "b"}, Key{Email: "x", Body: "b"}},
		{"field into workspace", Key{WorkspaceID: "", Phone: "ws"}, Key{WorkspaceID: "ws", Phone: ""}},
		{"other workspace", base, Key{WorkspaceID: "ws_2", Phone: base.Phone, Email: base.Email, Body: base.Body}},
		{"one character of body", base, Key{WorkspaceID: base.WorkspaceID, Phone: base.Phone, Email: base.Email, Body: "hi there!"}},
		{"other phone", base, Key{WorkspaceID: base.WorkspaceID, Phone: "+15550100001", Email: base.Email, Body: base.Body}},
		{"other email", base, Key{WorkspaceID: base.WorkspaceID, Phone: base.Phone, Email: "bob@example.com", Body: base.Body}},
	}
	for _, tc := range differ {
		if LockID(tc.a) == LockID(tc.b) {
			t.Errorf("%s: %+v and %+v have the same lock id", tc.name, tc.a, tc.b)
		}
	}
}

// The winner's Acquire is two round trips, the lock read and the insert; a
// duplicate whose sibling is written is two reads and no write: the lock
// and the sibling.
func TestRoundTrips(t *testing.T) {
	e := newEnv(t)
	g := e.guard(Options{})

	before := e.roundTrips()
	won, err := g.Acquire(e.ctx, key, "msg_1")
	if err != nil || won.Outcome != Won {
		t.Fatalf("first Acquire = %v, %v; want won", won.Outcome, err)
	}
	if got := e.roundTrips() - before; got != 2 {
		t.Errorf("winner's Acquire: %d round trips, want 2", got)
	}
	e.write("msg_1", "sent")
	g.Written("msg_1")

	before = e.roundTrips()
	insertsBefore := e.s.RoundTrips.ByName()["insert"]
	dup, err := g.Acquire(e.ctx, key, "msg_2")
	if err != nil || dup.Outcome != Duplicate {
		t.Fatalf("second Acquire = %v, %v; want duplicate", dup.Outcome, err)
	}
	if got, inserts := e.roundTrips()-before, e.s.RoundTrips.ByName()["insert"]-insertsBefore; got != 2 || inserts != 0 {
		t.Errorf("duplicate's Acquire: %d round trips, %d inserts; want 2 reads, no insert", got, inserts)
	}
	if dup.MessageID != "msg_1" || dup.Mode != events.ModeLockResolved || dup.Sibling == nil || dup.Sibling.Status != "sent" {
		t.Errorf("duplicate decision %+v, want msg_1, mode %s, sibling sent", dup, events.ModeLockResolved)
	}
	ev := e.events(events.DuplicateBlocked)
	if len(ev) != 1 || ev[0]["mode"] != events.ModeLockResolved || ev[0]["siblingMessageId"] != "msg_1" ||
		ev[0]["workspaceId"] != key.WorkspaceID || ev[0]["lockId"] != won.LockID || ev[0]["requestId"] != "req_test" {
		t.Errorf("duplicate_blocked events %v, want one with mode, sibling, workspace, lock and the request's fields", ev)
	}
	if strings.Contains(string(e.logs.Bytes()), key.Body) || strings.Contains(string(e.logs.Bytes()), key.Phone) {
		t.Errorf("log holds the message body or recipient:\n%s", e.logs.Bytes())
	}
}

func TestConcurrentAcquireOneWinner(t *testing.T) {
	e := newEnv(t)
	g := e.guard(Options{})
	ds, errs := race(50, func(int) (Decision, error) { return e.request(g, e.msgs, key, 200*time.Millisecond) })
	winner := oneWinner(t, ds, errs)
	blocked := len(e.events(events.DuplicateBlocked)) + len(e.events(events.DuplicatePending))
	if blocked != 49 {
		t.Errorf("%d duplicate_blocked/pending events, want 49", blocked)
	}
	if l, ok := e.lock(ds[winner].LockID); !ok || l.MessageID != ds[winner].MessageID {
		t.Errorf("lock %+v (found %v), want it to name the winner %s", l, ok, ds[winner].MessageID)
	}
}

// A loser in the winner's process blocks on Written instead of polling.
func TestSameProcessLoserWokenByWritten(t *testing.T) {
	e := newEnv(t)
	g := e.guard(Options{Wait: 10 * time.Second})
	if d, err := g.Acquire(e.ctx, key, "msg_1"); err != nil || d.Outcome != Won {
		t.Fatalf("Acquire = %v, %v; want won", d.Outcome, err)
	}

	before := e.roundTrips()
	type result struct {
		d   Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := g.Acquire(e.ctx, key, "msg_2")
		done <- result{d, err}
	}()
	waitFor(t, "the loser to wait", func() bool { return g.waiting.Load() == 1 })
	time.Sleep(300 * time.Millisecond) // a polling loser would read the store 4 times by now
	if got := e.roundTrips() - before; got != 2 {
		t.Errorf("loser's round trips before the message was written: %d, want 2 (lock read, sibling read)", got)
	}
	e.write("msg_1", "sent")
	g.Written("msg_1")
	r := <-done
	if r.err != nil || r.d.Outcome != Duplicate || r.d.MessageID != "msg_1" || r.d.Mode != events.ModeLockResolvedPolled {
		t.Fatalf("loser = %+v, %v; want duplicate of msg_1, mode %s", r.d, r.err, events.ModeLockResolvedPolled)
	}
	if got := e.roundTrips() - before; got != 4 {
		t.Errorf("round trips: %d, want 4 (loser's 2, the message write, one sibling read on wake-up)", got)
	}
}

// Two processes on one store: one winner; the other process's losers find
// the sibling by polling.
func TestCrossProcessOneWinner(t *testing.T) {
	e := newEnv(t)
	s2 := e.secondProcess()
	type proc struct {
		g  *Guard
		tb table
	}
	procs := [2]proc{
		{e.guard(Options{}), e.msgs},
		{e.guard(Options{Store: s2}), table{s2.Collection(messagesColl.Name)}},
	}
	ds, errs := race(50, func(i int) (Decision, error) {
		p, other := procs[i%2], procs[(i+1)%2]
		// The winner writes once a loser in the other process waits, so
		// that the polling path is taken whatever the machine's speed.
		return e.requestThen(p.g, p.tb, key, func() error {
			for deadline := time.Now().Add(10 * time.Second); other.g.waiting.Load() == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					return errors.New("no loser in the other process waits")
				}
			}
			return nil
		})
	})
	winner := oneWinner(t, ds, errs)
	polled := 0
	for i, d := range ds {
		if i%2 == winner%2 {
			continue
		}
		if d.Outcome != Duplicate {
			t.Errorf("request %d in the other process: %v, want duplicate", i, d.Outcome)
		}
		if d.Mode == events.ModeLockResolvedPolled {
			polled++
		}
	}
	if polled == 0 {
		t.Errorf("no loser in the other process resolved by polling (mode %s)", events.ModeLockResolvedPolled)
	}
}

// An expired lock still in the store (the TTL monitor has not run) is free:
// exactly one of many takers gets it.
func TestExpiredLockTakenOverOnce(t *testing.T) {
	e := newEnv(t)
	g := e.guard(Options{})
	lockID := LockID(key)
	now := time.Now()
	_, err := e.s.Collection(locksName).InsertOne(context.Background(), lockDoc{
		ID: lockID, WorkspaceID: key.WorkspaceID, MessageID: "msg_old",
		CreatedAt: now.Add(-20 * time.Minute), ExpiresAt: now.Add(-5 * time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.write("msg_old", "sent")

	ds, errs := race(8, func(int) (Decision, error) { return e.request(g, e.msgs, key, 50*time.Millisecond) })
	winner := oneWinner(t, ds, errs)
	if l, _ := e.lock(lockID); l.MessageID != ds[winner].MessageID || !l.ExpiresAt.After(now) {
		t.Errorf("lock %+v, want it to name the winner %s and expire in the future", l, ds[winner].MessageID)
	}
	ev := e.events(events.LockTakenOver)
	if len(ev) != 1 || ev[0]["reason"] != reasonExpired || ev[0]["siblingMessageId"] != "msg_old" {
		t.Errorf("lock_taken_over events %v, want one with reason expired", ev)
	}
}

// A winner that died before writing its message frees the lock after Lease.
func TestCrashedWinnerTakenOverOnce(t *testing.T) {
	e := newEnv(t)
	crashed := e.guard(Options{})
	if d, err := crashed.Acquire(e.ctx, key, "msg_crashed"); err != nil || d.Outcome != Won {
		t.Fatalf("Acquire = %v, %v; want won", d.Outcome, err)
	}
	clk := &clock{}
	later := e.guard(Options{Now: clk.Now})
	watch(t, e, later, "msg_watch")
	clk.advance(31 * time.Second) // later has seen the holder for a lease
	ds, errs := race(8, func(int) (Decision, error) { return e.request(later, e.msgs, key, 50*time.Millisecond) })
	winner := oneWinner(t, ds, errs)
	if ds[winner].MessageID == "msg_crashed" {
		t.Fatal("the crashed winner is still the holder")
	}
	ev := e.events(events.LockTakenOver)
	if len(ev) != 1 || ev[0]["reason"] != reasonCrashed || ev[0]["siblingMessageId"] != "msg_crashed" {
		t.Errorf("lock_taken_over events %v, want one with reason crashed", ev)
	}

	// Within the lease, the same lock is not taken over.
	e2 := newEnv(t)
	g := e2.guard(Options{Wait: 50 * time.Millisecond})
	if d, _ := g.Acquire(e2.ctx, key, "msg_slow"); d.Outcome != Won {
		t.Fatalf("Acquire = %v, want won", d.Outcome)
	}
	if d, err := g.Acquire(e2.ctx, key, "msg_2"); err != nil || d.Outcome != Pending {
		t.Fatalf("Acquire within the lease = %v, %v; want pending", d.Outcome, err)
	}
}

// A claimant that died between its claim and its rewrite of the lock does
// not block the contact: after Lease its claim is taken over in turn.
func TestDeadClaimantTakenOver(t *testing.T) {
	e := newEnv(t)
	first := e.guard(Options{Wait: 50 * time.Millisecond})
	d, err := first.Acquire(e.ctx, key, "msg_1")
	if err != nil || d.Outcome != Won {
		t.Fatalf("Acquire = %v, %v; want won", d.Outcome, err)
	}
	// msg_dead claimed msg_1's generation and died before rewriting the lock.
	if ok, err := first.claim(context.Background(), d.LockID, key.WorkspaceID, "msg_1", "msg_dead", reasonCrashed, first.o.Window); err != nil || !ok {
		t.Fatalf("claim = %v, %v", ok, err)
	}

	if got, err := first.Acquire(e.ctx, key, "msg_2"); err != nil || got.Outcome != Pending {
		t.Fatalf("Acquire within the lease = %+v, %v; want pending", got, err)
	}
	clk := &clock{}
	later := e.guard(Options{Now: clk.Now})
	watch(t, e, later, "msg_watch1")
	clk.advance(31 * time.Second) // msg_1 is judged gone; its claimant msg_dead is seen
	watch(t, e, later, "msg_watch2")
	clk.advance(31 * time.Second) // and msg_dead has been seen for a lease
	got, err := later.Acquire(e.ctx, key, "msg_3")
	if err != nil || got.Outcome != Won {
		t.Fatalf("Acquire after the lease = %+v, %v; want won", got, err)
	}
	if l, _ := e.lock(d.LockID); l.MessageID != "msg_3" {
		t.Errorf("lock names %s, want msg_3", l.MessageID)
	}
}

// A takeover claimant that finds a lock it does not know (the old one
// expired, was reaped, and a fresh insert won meanwhile) gives it back.
func TestRewriteGivesBackAFreshLock(t *testing.T) {
	e := newEnv(t)
	g := e.guard(Options{})
	lockID := LockID(key)
	stale := viewOf(lockDoc{ID: lockID, WorkspaceID: key.WorkspaceID, MessageID: "msg_reaped", ExpiresAt: time.Now().Add(-time.Minute)})
	if d, err := g.Acquire(e.ctx, key, "msg_fresh"); err != nil || d.Outcome != Won {
		t.Fatalf("Acquire = %v, %v; want won", d.Outcome, err)
	}
	won, next, err := g.rewrite(context.Background(), stale, "msg_late", g.o.Window)
	if err != nil || won || next == nil || next.h.messageID != "msg_fresh" {
		t.Fatalf("rewrite = %v, %+v, %v; want lost, following msg_fresh", won, next, err)
	}
	if l, _ := e.lock(lockID); l.MessageID != "msg_fresh" {
		t.Errorf("lock names %s, want msg_fresh (given back)", l.MessageID)
	}
}

func TestSiblingStatus(t *testing.T) {
	tests := []struct {
		status string
		want   Outcome
	}{
		{"failed", Won}, // a definitive rejection reached no one: the retry sends
		{"unknown", Duplicate},
		{"sending", Duplicate},
		{"sent", Duplicate},
	}
	for _, tc := range tests {
		t.Run(tc.status, func(t *testing.T) {
			e := newEnv(t)
			g := e.guard(Options{})
			if d, err := g.Acquire(e.ctx, key, "msg_1"); err != nil || d.Outcome != Won {
				t.Fatalf("first Acquire = %v, %v", d.Outcome, err)
			}
			e.write("msg_1", tc.status)
			g.Written("msg_1")
			d, err := g.Acquire(e.ctx, key, "msg_2")
			if err != nil || d.Outcome != tc.want {
				t.Fatalf("retry after a %s sibling = %v, %v; want %v", tc.status, d.Outcome, err, tc.want)
			}
			l, _ := e.lock(d.LockID)
			ev := e.events(events.LockTakenOver)
			if tc.want == Won {
				if l.MessageID != "msg_2" || len(ev) != 1 || ev[0]["reason"] != reasonFailedSibling {
					t.Errorf("lock names %s, events %v; want msg_2 and one failed_sibling takeover", l.MessageID, ev)
				}
				return
			}
			if d.MessageID != "msg_1" || d.Sibling.Status != tc.status || l.MessageID != "msg_1" || len(ev) != 0 {
				t.Errorf("decision %+v, lock %s, takeovers %v; want msg_1 returned and kept", d, l.MessageID, ev)
			}
		})
	}
}

// An original slower than Wait leaves its duplicate pending; once it is
// written, a retry gets it.
func TestSlowOriginalPendingThenDuplicate(t *testing.T) {
	e := newEnv(t)
	g := e.guard(Options{Wait: 150 * time.Millisecond})
	if d, err := g.Acquire(e.ctx, key, "msg_1"); err != nil || d.Outcome != Won {
		t.Fatalf("Acquire = %v, %v; want won", d.Outcome, err)
	}
	start := time.Now()
	d, err := g.Acquire(e.ctx, key, "msg_2")
	if err != nil || d.Outcome != Pending || d.MessageID != "msg_1" {
		t.Fatalf("Acquire while msg_1 is unwritten = %+v, %v; want pending on msg_1", d, err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("pending after %s, want it to wait Wait (150ms) first", waited)
	}
	if ev := e.events(events.DuplicatePending); len(ev) != 1 || ev[0]["siblingMessageId"] != "msg_1" {
		t.Errorf("duplicate_pending events %v, want one naming msg_1", ev)
	}
	e.write("msg_1", "sent")
	g.Written("msg_1")
	if d, err := g.Acquire(e.ctx, key, "msg_3"); err != nil || d.Outcome != Duplicate || d.MessageID != "msg_1" || d.Mode != events.ModeLockResolved {
		t.Fatalf("retry = %+v, %v; want duplicate of msg_1, mode %s", d, err, events.ModeLockResolved)
	}
}

func TestRelease(t *testing.T) {
	t.Run("frees the lock", func(t *testing.T) {
		e := newEnv(t)
		g := e.guard(Options{})
		d, _ := g.Acquire(e.ctx, key, "msg_1")
		before := e.roundTrips()
		if err := g.Release(e.ctx, d.LockID, "msg_1"); err != nil {
			t.Fatal(err)
		}
		if got := e.roundTrips() - before; got != 4 {
			t.Errorf("Release: %d round trips, want 4 (fence, claim, lock read, delete)", got)
		}
		if _, ok := e.lock(d.LockID); ok {
			t.Fatal("lock still there after Release")
		}
		before = e.roundTrips()
		if d, err := g.Acquire(e.ctx, key, "msg_2"); err != nil || d.Outcome != Won {
			t.Fatalf("Acquire after Release = %v, %v; want won", d.Outcome, err)
		}
		if got := e.roundTrips() - before; got != 2 {
			t.Errorf("Acquire after Release: %d round trips, want 2 (the lock read, the insert)", got)
		}
	})

	t.Run("wakes a waiter that then wins", func(t *testing.T) {
		e := newEnv(t)
		g := e.guard(Options{Wait: 10 * time.Second})
		d1, _ := g.Acquire(e.ctx, key, "msg_1")
		done := make(chan Decision, 1)
		go func() {
			d, err := g.Acquire(e.ctx, key, "msg_2")
			if err != nil {
				t.Error(err)
			}
			done <- d
		}()
		waitFor(t, "the loser to wait", func() bool { return g.waiting.Load() == 1 })
		if err := g.Release(e.ctx, d1.LockID, "msg_1"); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-done:
			if d.Outcome != Won || d.MessageID != "msg_2" {
				t.Fatalf("waiter after Release = %+v, want won with msg_2", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by Release")
		}
		if l, _ := e.lock(d1.LockID); l.MessageID != "msg_2" {
			t.Errorf("lock names %s, want msg_2", l.MessageID)
		}
	})

	// The request's insert landed although it reported an error: the
	// message exists, so its lock stays and Release says so.
	t.Run("keeps the lock of a written message", func(t *testing.T) {
		e := newEnv(t)
		g := e.guard(Options{})
		d, _ := g.Acquire(e.ctx, key, "msg_1")
		e.write("msg_1", "sending")
		if err := g.Release(e.ctx, d.LockID, "msg_1"); !errors.Is(err, ErrWritten) {
			t.Fatalf("Release of a written message = %v, want ErrWritten", err)
		}
		if l, ok := e.lock(d.LockID); !ok || l.MessageID != "msg_1" {
			t.Fatalf("lock %+v (found %v), want it kept for msg_1", l, ok)
		}
	})

	// Release fences its own id first: an insert of it still in flight can
	// never land after the lock is gone.
	t.Run("fences the released message id", func(t *testing.T) {
		e := newEnv(t)
		g := e.guard(Options{})
		d, _ := g.Acquire(e.ctx, key, "msg_1")
		if err := g.Release(e.ctx, d.LockID, "msg_1"); err != nil {
			t.Fatal(err)
		}
		if err := e.msgs.write(context.Background(), "msg_1", "sending"); !store.IsDuplicateKey(err) {
			t.Fatalf("late insert of the released message = %v, want a duplicate-key error (fenced)", err)
		}
	})

	t.Run("by a non-holder after a takeover does nothing", func(t *testing.T) {
		e := newEnv(t)
		slow := e.guard(Options{})
		d1, _ := slow.Acquire(e.ctx, key, "msg_1")
		clk := &clock{}
		later := e.guard(Options{Now: clk.Now})
		watch(t, e, later, "msg_watch")
		clk.advance(31 * time.Second)
		if d, err := later.Acquire(e.ctx, key, "msg_2"); err != nil || d.Outcome != Won {
			t.Fatalf("takeover = %v, %v; want won", d.Outcome, err)
		}
		if err := slow.Release(e.ctx, d1.LockID, "msg_1"); err != nil {
			t.Fatal(err)
		}
		if l, ok := e.lock(d1.LockID); !ok || l.MessageID != "msg_2" {
			t.Fatalf("lock %+v (found %v) after the old holder's Release, want msg_2's", l, ok)
		}
	})
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	g := e.guard(Options{})
	d, _ := g.Acquire(e.ctx, key, "msg_1")

	for _, tc := range []struct{ name, ws, lockID string }{
		{"another workspace's lock", "ws_other", d.LockID},
		{"a missing lock", key.WorkspaceID, LockID(Key{WorkspaceID: key.WorkspaceID, Body: "nope"})},
	} {
		if err := g.Delete(e.ctx, tc.ws, tc.lockID); msgapi.ErrorCode(err) != msgapi.CodeNotFound {
			t.Errorf("Delete of %s = %v, want %s", tc.name, err, msgapi.CodeNotFound)
		}
	}
	if _, ok := e.lock(d.LockID); !ok {
		t.Fatal("another workspace deleted the lock")
	}

	if err := g.Delete(e.ctx, key.WorkspaceID, d.LockID); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.lock(d.LockID); ok {
		t.Fatal("lock still there after Delete")
	}
	if ev := e.events(events.DedupLockDeleted); len(ev) != 1 || ev[0]["lockId"] != d.LockID {
		t.Errorf("dedup_lock_deleted events %v, want one", ev)
	}
	if d, err := g.Acquire(e.ctx, key, "msg_2"); err != nil || d.Outcome != Won {
		t.Fatalf("Acquire after Delete = %v, %v; want won", d.Outcome, err)
	}
}

// A store failure on the lock insert never breaks the send path.
func TestStoreErrorUnguarded(t *testing.T) {
	e := newEnv(t)
	uri, dir := storetest.URI(t)
	broken, err := store.Open(context.Background(), store.Options{URI: uri, SQLiteDir: dir, Database: e.s.DB.Name(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := broken.Client.Disconnect(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := e.guard(Options{Store: broken})

	d, err := g.Acquire(e.ctx, key, "msg_1")
	if err != nil || d.Outcome != Unguarded || d.MessageID != "msg_1" || d.LockID != LockID(key) {
		t.Fatalf("Acquire on a broken store = %+v, %v; want unguarded with msg_1", d, err)
	}
	ev := e.events(events.DuplicateGuardError)
	if len(ev) != 1 || ev[0]["level"] != "error" || ev[0]["error"] == nil || ev[0]["lockId"] != d.LockID || ev[0]["workspaceId"] != key.WorkspaceID {
		t.Errorf("duplicate_guard_error events %v, want one error line with the error, lock and workspace", ev)
	}

	// MSGAPI_DEDUP_ON_STORE_ERROR=refuse: a 503 with Retry-After instead.
	refuse := e.guard(Options{Store: broken, RefuseOnStoreError: true})
	_, err = refuse.Acquire(e.ctx, key, "msg_3")
	var me *msgapi.Error
	if !errors.As(err, &me) || me.Code != msgapi.CodeUnavailable || me.RetryAfter <= 0 {
		t.Errorf("refusing guard on a broken store: %v, want unavailable with a Retry-After", err)
	}

	// A caller that is gone gets an error, not an unguarded send.
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if d, err := e.guard(Options{}).Acquire(ctx, key, "msg_2"); err == nil {
		t.Errorf("Acquire with a canceled context = %+v, want an error", d)
	}
}

// Once a live lock is known, a store error is returned (503), never a send.
func TestLoserStoreErrorIsUnavailable(t *testing.T) {
	e := newEnv(t)
	if d, err := e.guard(Options{}).Acquire(e.ctx, key, "msg_1"); err != nil || d.Outcome != Won {
		t.Fatalf("Acquire = %v, %v; want won", d.Outcome, err)
	}
	down := errors.New("messages unreachable")
	g := e.guard(Options{Sibling: func(context.Context, string) (Sibling, bool, error) { return Sibling{}, false, down }})
	d, err := g.Acquire(e.ctx, key, "msg_2")
	if msgapi.ErrorCode(err) != msgapi.CodeUnavailable || !errors.Is(err, down) {
		t.Fatalf("Acquire with the sibling read failing = %+v, %v; want a %s error wrapping the cause", d, err, msgapi.CodeUnavailable)
	}
	if len(e.events(events.DuplicateGuardError)) != 0 {
		t.Error("a loser's store error was logged as an unguarded send")
	}
}

// Two successive claimants: C1 takes over a crashed holder and then stalls
// before writing its message for longer than the lease; C2 judges C1 gone
// and takes over in turn. C1 resumes: its message id was fenced, so its
// write fails and only C2 sends.
func TestSuccessiveClaimantsSendOnce(t *testing.T) {
	e := newEnv(t)
	if d, err := e.guard(Options{}).Acquire(e.ctx, key, "msg_crashed"); err != nil || d.Outcome != Won {
		t.Fatalf("Acquire = %v, %v; want won", d.Outcome, err)
	}
	clk1, clk2 := &clock{}, &clock{}
	c1 := e.guard(Options{Now: clk1.Now})
	watch(t, e, c1, "msg_w1")
	clk1.advance(31 * time.Second)
	d1, err := c1.Acquire(e.ctx, key, "msg_c1")
	if err != nil || d1.Outcome != Won {
		t.Fatalf("first claimant = %v, %v; want won", d1.Outcome, err)
	}
	// C1 stalls; C2 watches its claim for a lease.
	c2 := e.guard(Options{Now: clk2.Now})
	watch(t, e, c2, "msg_w2")
	clk2.advance(31 * time.Second)
	d2, err := e.requestThen(c2, e.msgs, key, func() error { return nil })
	if err != nil || d2.Outcome != Won {
		t.Fatalf("second claimant = %+v, %v; want won and written", d2, err)
	}
	// C1 resumes and tries to commit.
	if err := e.msgs.write(context.Background(), "msg_c1", "sent"); !store.IsDuplicateKey(err) {
		t.Fatalf("the first claimant's late write = %v, want a duplicate key (fenced): it would send twice", err)
	}
	if sib, found, _ := e.msgs.sibling(context.Background(), "msg_c1"); !found || !sib.Tombstone {
		t.Errorf("msg_c1 = %+v (found %v), want a tombstone", sib, found)
	}
}

// A lock insert that times out on a slow (not broken) store is decided by
// the lock as usual, not sent unguarded: a timed-out insert that never
// landed would otherwise let the next identical request win and send too.
func TestSlowLockInsertIsNotUnguarded(t *testing.T) {
	e := newEnv(t)
	uri, dir := storetest.URI(t)
	slow, err := store.Open(context.Background(), store.Options{URI: uri, SQLiteDir: dir, Database: e.s.DB.Name(), OpTimeout: 200 * time.Millisecond, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.Client.Disconnect(context.Background()) })
	var once sync.Once
	slow.RoundTrips.Before(func(_ context.Context, ev *event.CommandStartedEvent) {
		if store.InsertCollections(ev) != nil {
			once.Do(func() { time.Sleep(300 * time.Millisecond) }) // past the op timeout
		}
	})
	g := e.guard(Options{Store: slow})
	d, err := g.Acquire(e.ctx, key, "msg_1")
	if err != nil || d.Outcome != Won {
		t.Fatalf("Acquire after a timed-out lock insert = %v, %v; want won through the lock, not unguarded", d.Outcome, err)
	}
	if l, ok := e.lock(d.LockID); !ok || l.MessageID != "msg_1" {
		t.Errorf("lock %+v (found %v), want it held by msg_1", l, ok)
	}
	if ev := e.events(events.DuplicateGuardError); len(ev) != 0 {
		t.Errorf("guard error events %v, want none", ev)
	}
}

// A release that stalls before its delete past the lease is judged a
// crashed remover and taken over; its late delete must leave the taker's
// lock alone, or a third request wins an empty lock and sends again (the
// chaos run's seed 103).
func TestStalledReleaseKeepsTheTakersLock(t *testing.T) {
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
	<-held // fenced and claimed; its delete is stalled

	clk := &clock{}
	taker := e.guard(Options{Now: clk.Now})
	watch(t, e, taker, "msg_watch")
	clk.advance(31 * time.Second) // the stalled remover has been seen for a lease
	if d2, err := taker.Acquire(e.ctx, key, "msg_2"); err != nil || d2.Outcome != Won {
		t.Fatalf("taker = %v, %v; want won over the stalled remover", d2.Outcome, err)
	}
	close(gate)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if l, ok := e.lock(d.LockID); !ok || l.MessageID != "msg_2" {
		t.Fatalf("lock %+v (found %v) after the stalled release's delete, want the taker's msg_2", l, ok)
	}
}
