package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/store"
)

// maxSteps bounds how many times one request re-judges a lock whose holder
// keeps changing under it (lost claims, vanished locks, releases). Each step
// is a real change of owner, so hitting it means pathological contention.
const maxSteps = 16

// refuseRetryAfter is what a refused request suggests (RefuseOnStoreError).
const refuseRetryAfter = 5 * time.Second

// Acquire decides whether the request for k may send a message with the
// pre-allocated messageID. messageID must be fresh for every call: a lock
// generation is identified by it.
//
// The lock is read first: a live lock makes the request a duplicate (or a
// waiter, or a taker) without a write, and only a request that finds no
// lock inserts one, the insert deciding, as ever, which of several such
// requests wins. So the winner's Acquire costs two round trips (the read
// and the insert), and a duplicate whose sibling is already written two
// reads (the lock and the sibling) and no write: on the embedded engine a
// losing insert costs the one writer as much as a winning one.
//
// The only store error that lets the request send is a failure of the first
// insert (Unguarded). Once a live lock is known to exist, a store error is
// returned instead (a *msgapi.Error with CodeUnavailable): sending then could
// be the second message. An error is also returned when ctx ends, because a
// caller that is gone cannot send anyway.
func (g *Guard) Acquire(ctx context.Context, k Key, messageID string) (Decision, error) {
	return g.AcquireWith(ctx, k, messageID, Limits{Window: g.o.Window, Wait: g.o.Wait})
}

// Limits are one request's dedup window and wait: a workspace's own
// settings, or the guard's (Window, Wait).
type Limits struct{ Window, Wait time.Duration }

// Window and Wait are the guard's defaults.
func (g *Guard) Window() time.Duration { return g.o.Window }
func (g *Guard) Wait() time.Duration   { return g.o.Wait }

// AcquireWith is Acquire with a request's own window and wait (a
// workspace's settings). A non-positive window is the guard's; a wait of
// zero means "do not wait".
func (g *Guard) AcquireWith(ctx context.Context, k Key, messageID string, l Limits) (Decision, error) {
	if l.Window <= 0 {
		l.Window = g.o.Window
	}
	l.Wait = max(l.Wait, 0)
	lockID := LockID(k)
	// Registered before the insert, so that a loser in this process that
	// finds the lock also finds something to wait on.
	g.track(messageID)
	d, err := g.acquire(ctx, l, k.WorkspaceID, lockID, messageID)
	if d.Outcome != Won {
		g.finish(messageID, false)
	}
	return d, err
}

func (g *Guard) acquire(ctx context.Context, l Limits, workspaceID, lockID, messageID string) (Decision, error) {
	if v, err := g.observe(ctx, lockID); err == nil && v != nil {
		return g.contendFrom(ctx, l, workspaceID, lockID, messageID, v)
	}
	// No lock (or the read failed, which the insert's own outcome decides
	// below): the insert decides.
	err := g.insertLock(ctx, workspaceID, lockID, messageID, l.Window)
	switch {
	case err == nil:
		return Decision{Outcome: Won, LockID: lockID, MessageID: messageID}, nil
	case store.IsDuplicateKey(err):
		return g.contend(ctx, l, workspaceID, lockID, messageID)
	case ctx.Err() != nil:
		return Decision{}, fmt.Errorf("acquire lock %s: %w", lockID, ctx.Err())
	}
	// The insert failed, or timed out and may have landed after all: a
	// slow store under load, not a broken one, answers the lock read. Then
	// the lock decides as usual (ours if the insert landed; contended if
	// another request's did). Only a store that cannot answer either sends
	// unguarded — else a timed-out insert that never landed would let the
	// next identical request win the lock and send a second time.
	if _, oerr := g.observe(ctx, lockID); oerr == nil {
		return g.contend(ctx, l, workspaceID, lockID, messageID)
	}
	if g.o.RefuseOnStoreError {
		g.event(ctx, zerolog.ErrorLevel, events.DuplicateGuardError, workspaceID, lockID).
			Err(err).Str("messageId", messageID).Bool("refused", true).
			Msg("duplicate guard unavailable; request refused (MSGAPI_DEDUP_ON_STORE_ERROR=refuse)")
		e := unavailable("insert lock", lockID, err).(*msgapi.Error)
		e.RetryAfter = refuseRetryAfter
		return Decision{}, e
	}
	g.event(ctx, zerolog.ErrorLevel, events.DuplicateGuardError, workspaceID, lockID).
		Err(err).Str("messageId", messageID).
		Msg("duplicate guard unavailable; sending without duplicate protection")
	return Decision{Outcome: Unguarded, LockID: lockID, MessageID: messageID}, nil
}

// contend runs after the lock insert lost: it judges the holder, takes the
// lock over when the holder is gone, and otherwise returns its message or
// waits for it.
func (g *Guard) contend(ctx context.Context, l Limits, workspaceID, lockID, messageID string) (Decision, error) {
	v, err := g.observe(ctx, lockID)
	if err != nil {
		return Decision{}, err
	}
	return g.contendFrom(ctx, l, workspaceID, lockID, messageID, v)
}

// contendFrom is contend from the lock as v shows it (nil: none).
func (g *Guard) contendFrom(ctx context.Context, l Limits, workspaceID, lockID, messageID string, v *view) (Decision, error) {
	var (
		err   error
		sib   *Sibling  // the holder's message, when wait has just read it
		until time.Time // end of the wait (real clock), set when waiting starts
		seen  = holders{}
	)
	mode := func() string {
		if until.IsZero() {
			return events.ModeLockResolved
		}
		return events.ModeLockResolvedPolled
	}
	for step := 0; step < maxSteps; step++ {
		if err != nil {
			return Decision{}, err
		}
		if v == nil {
			// Released, deleted, or expired and reaped since our insert lost.
			// A holder we saw may still have sent: resolve it first.
			dup, derr := g.resolveSeen(ctx, lockID, seen, "")
			switch {
			case derr != nil:
				return Decision{}, derr
			case dup != nil:
				return g.duplicate(ctx, workspaceID, lockID, messageID, dup.createdAt, dup.sib, mode()), nil
			}
			ierr := g.insertLock(ctx, workspaceID, lockID, messageID, l.Window)
			switch {
			case ierr == nil:
				return Decision{Outcome: Won, LockID: lockID, MessageID: messageID}, nil
			case !store.IsDuplicateKey(ierr):
				return Decision{}, unavailable("insert lock", lockID, ierr)
			}
			v, err = g.observe(ctx, lockID)
			continue
		}
		if v.h.messageID == messageID {
			// Only our own write names our message id: a retried insert or
			// claim whose first attempt had landed. A claim still has to
			// rewrite the lock.
			won := len(v.chain) == 1
			if !won {
				won, v, err = g.rewrite(ctx, v, messageID, l.Window)
			}
			if won {
				return Decision{Outcome: Won, LockID: lockID, MessageID: messageID}, nil
			}
			continue
		}
		seen.saw(v)

		var (
			reason string
			dup    *Sibling
		)
		reason, dup, err = g.judge(ctx, lockID, v, sib)
		sib = nil
		switch {
		case err != nil:
			return Decision{}, err
		case dup != nil:
			return g.duplicate(ctx, workspaceID, lockID, messageID, v.h.createdAt, dup, mode()), nil
		case reason != "":
			seen.dead(v.h.messageID)
			if d, derr := g.resolveSeen(ctx, lockID, seen, v.h.messageID); derr != nil || d != nil {
				if derr != nil {
					return Decision{}, derr
				}
				return g.duplicate(ctx, workspaceID, lockID, messageID, d.createdAt, d.sib, mode()), nil
			}
			var won bool
			won, v, err = g.takeOver(ctx, workspaceID, lockID, v, messageID, reason, l.Window)
			if err == nil && won {
				return Decision{Outcome: Won, LockID: lockID, MessageID: messageID}, nil
			}
			continue
		}

		if until.IsZero() {
			until = time.Now().Add(l.Wait)
		}
		var w waited
		w, err = g.wait(ctx, lockID, v, until)
		switch {
		case err != nil:
			return Decision{}, err
		case w.sib != nil:
			sib = w.sib
		case w.moved:
			v = w.next
		default:
			return g.pending(ctx, workspaceID, lockID, messageID, v, l.Wait), nil
		}
	}
	return Decision{}, unavailable(fmt.Sprintf("no decision after %d changes of holder of", maxSteps), lockID, errContention)
}

var errContention = errors.New("lock contention")

// holders are the message holders one request has seen: before it may win
// the lock, each must be known not to have sent within its window.
type holders map[string]*seenHolder

type seenHolder struct {
	createdAt, expiresAt time.Time
	gone                 bool // fenced, refused or expired: it counts for nothing
}

// saw records v's holder and the generation the lock document names.
func (hs holders) saw(v *view) {
	add := func(id string, created, expires time.Time) {
		if _, ok := hs[id]; !ok {
			hs[id] = &seenHolder{createdAt: created, expiresAt: expires}
		}
	}
	add(v.lock.MessageID, v.lock.CreatedAt, v.lock.ExpiresAt)
	if !v.h.removing {
		add(v.h.messageID, v.h.createdAt, v.h.expiresAt)
	}
}

func (hs holders) dead(id string) {
	if h := hs[id]; h != nil {
		h.gone = true
	}
}

// found is a sibling that resolveSeen turned up.
type found struct {
	sib       *Sibling
	createdAt time.Time
}

// resolveSeen makes sure that no holder in seen (but skip) may have sent
// within its window: a holder whose message is written, not refused and not
// expired is returned as the answer; one whose message is not written is
// fenced. On the common path every holder is already resolved and this costs
// nothing; after a lock vanished or moved it costs a read (and a fence) per
// holder seen.
func (g *Guard) resolveSeen(ctx context.Context, lockID string, seen holders, skip string) (*found, error) {
	for id, h := range seen {
		if h.gone || id == skip {
			continue
		}
		sib, err := g.sibling(ctx, lockID, id)
		if err != nil {
			return nil, err
		}
		if sib == nil {
			won, err := g.fence(ctx, lockID, reasonCrashed, id)
			if err != nil {
				return nil, err
			}
			if won {
				h.gone = true
				continue
			}
			if sib, err = g.sibling(ctx, lockID, id); err != nil {
				return nil, err
			}
			if sib == nil {
				return nil, unavailable(fmt.Sprintf("message %s neither written nor fenced, lock", id), lockID, errContention)
			}
		}
		if sib.Tombstone || sib.Refused || !g.now().Before(h.expiresAt) {
			h.gone = true
			continue
		}
		return &found{sib: sib, createdAt: h.createdAt}, nil
	}
	return nil, nil
}

// judge decides about v's holder: a reason means the holder is gone and the
// lock may be taken over; a sibling means its message is written (the request
// is a duplicate); neither means wait. sib, when set, is the holder's message
// as wait just read it.
//
// A holder whose message is not written after its lease (or past its window)
// is fenced before it is declared gone: if the tombstone loses, its message
// was written in the meantime and is judged like any other.
func (g *Guard) judge(ctx context.Context, lockID string, v *view, sib *Sibling) (reason string, dup *Sibling, err error) {
	now := g.now()
	held := g.heldFor(lockID, v.h.messageID)
	if v.h.removing {
		// Its remover deletes the lock within milliseconds; one that has
		// not after Lease (seen from here) died doing so, or stalls: its
		// late delete matches only the generation it claimed. A remover
		// writes no message.
		if held >= g.o.Lease {
			return reasonCrashed, nil, nil
		}
		return "", nil, nil
	}
	expired := !now.Before(v.h.expiresAt)
	for range 2 {
		if sib == nil {
			if sib, err = g.sibling(ctx, lockID, v.h.messageID); err != nil {
				return "", nil, err
			}
		}
		switch {
		case sib != nil && sib.Tombstone:
			// Fenced by someone else: it never sends. Name why it was.
			switch {
			case expired:
				return reasonExpired, nil, nil
			case held >= g.o.Lease:
				return reasonCrashed, nil, nil
			}
			return reasonFenced, nil, nil
		case sib != nil && sib.Refused:
			return reasonFailedSibling, nil, nil // it reached no one: send again
		case sib != nil && expired:
			return reasonExpired, nil, nil
		case sib != nil:
			return "", sib, nil
		case !expired && held < g.o.Lease:
			return "", nil, nil // still within its lease, as seen from here: wait for it
		}
		reason = reasonCrashed // its winner died (or stalls) before writing the message
		if expired {
			reason = reasonExpired
		}
		won, err := g.fence(ctx, lockID, reason, v.h.messageID)
		if err != nil || won {
			return reason, nil, err
		}
		// The tombstone lost: the message was written just now. Judge it.
	}
	return "", nil, unavailable(fmt.Sprintf("message %s neither written nor fenced, lock", v.h.messageID), lockID, errContention)
}

// fence inserts a tombstone under messageID; won=false when the id already
// holds a document.
func (g *Guard) fence(ctx context.Context, lockID, reason, messageID string) (bool, error) {
	won, err := g.o.Fence(ctx, reason, messageID)
	if err != nil {
		return false, unavailable(fmt.Sprintf("fence message %s of", messageID), lockID, err)
	}
	return len(won) == 1 && won[0], nil
}

// takeOver claims v's holder's generation for messageID and, having won the
// claim, rewrites the lock. A lost claim returns the holder that won it.
func (g *Guard) takeOver(ctx context.Context, workspaceID, lockID string, v *view, messageID, reason string, window time.Duration) (won bool, next *view, err error) {
	claimed, err := g.claim(ctx, lockID, workspaceID, v.h.messageID, messageID, reason, window)
	if err != nil {
		return false, nil, err
	}
	if !claimed {
		next, err = g.successor(ctx, lockID, v)
		return false, next, err
	}
	won, next, err = g.rewrite(ctx, v, messageID, window)
	if err != nil || !won {
		return false, next, err
	}
	level := zerolog.InfoLevel
	if reason == reasonCrashed {
		level = zerolog.WarnLevel
	}
	g.event(ctx, level, events.LockTakenOver, workspaceID, lockID).
		Str("reason", reason).Str("messageId", messageID).
		Str("siblingMessageId", v.h.messageID).
		Int64("siblingAgeMs", ageMs(g.now(), v.h.createdAt)).
		Msg("duplicate lock taken over")
	return true, nil, nil
}

// sibling reads the holder's message; nil when it is not written yet.
func (g *Guard) sibling(ctx context.Context, lockID, messageID string) (*Sibling, error) {
	s, found, err := g.o.Sibling(ctx, messageID)
	if err != nil {
		return nil, unavailable(fmt.Sprintf("read message %s of", messageID), lockID, err)
	}
	if !found {
		return nil, nil
	}
	if s.ID == "" {
		s.ID = messageID
	}
	return &s, nil
}

func (g *Guard) duplicate(ctx context.Context, workspaceID, lockID, messageID string, lockCreated time.Time, s *Sibling, mode string) Decision {
	created := s.CreatedAt
	if created.IsZero() {
		created = lockCreated
	}
	now := g.now()
	g.event(ctx, zerolog.InfoLevel, events.DuplicateBlocked, workspaceID, lockID).
		Str("mode", mode).Str("messageId", messageID).Str("siblingMessageId", s.ID).
		Str("siblingStatus", s.Status).Int64("siblingAgeMs", ageMs(now, created)).
		Msg("duplicate message blocked")
	return Decision{
		Outcome: Duplicate, LockID: lockID, MessageID: s.ID, Sibling: s,
		SiblingAge: max(now.Sub(created), 0), Mode: mode,
	}
}

func (g *Guard) pending(ctx context.Context, workspaceID, lockID, messageID string, v *view, waited time.Duration) Decision {
	sibID := v.h.messageID
	if v.h.removing {
		sibID = v.lock.MessageID // the holder is a remover, not a message
	}
	now := g.now()
	g.event(ctx, zerolog.InfoLevel, events.DuplicatePending, workspaceID, lockID).
		Str("messageId", messageID).Str("siblingMessageId", sibID).
		Int64("siblingAgeMs", ageMs(now, v.h.createdAt)).Dur("waited", waited).
		Msg("duplicate request still in flight")
	// A retry after the holder's lease finds its message, or finds it gone
	// and takes over; one second is the least worth waiting.
	retry := max(g.o.Lease-g.heldFor(lockID, v.h.messageID), time.Second)
	return Decision{Outcome: Pending, LockID: lockID, MessageID: sibID, SiblingAge: max(now.Sub(v.h.createdAt), 0), RetryAfter: retry}
}

// event starts an event line on the request's logger.
func (g *Guard) event(ctx context.Context, level zerolog.Level, name, workspaceID, lockID string) *zerolog.Event {
	return zerolog.Ctx(ctx).WithLevel(level).Str("event", name).
		Str("workspaceId", workspaceID).Str("lockId", lockID)
}

func ageMs(now, t time.Time) int64 { return max(now.Sub(t), 0).Milliseconds() }
