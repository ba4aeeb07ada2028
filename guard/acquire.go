package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/store"
)

// maxSteps bounds how many times one request re-judges a lock whose holder
// keeps changing under it (lost claims, vanished locks, releases). Each step
// is a real change of owner, so hitting it means pathological contention.
const maxSteps = 16

// Acquire decides whether the request for k may send a message with the
// pre-allocated messageID. messageID must be fresh for every call: a lock
// generation is identified by it.
//
// The winner's Acquire costs one round trip (the insert). A duplicate whose
// sibling is already written costs three: the insert, the lock read and the
// sibling read.
//
// The only store error that lets the request send is a failure of the first
// insert (Unguarded). Once a live lock is known to exist, a store error is
// returned instead (a *msgapi.Error with CodeUnavailable): sending then could
// be the second message. An error is also returned when ctx ends, because a
// caller that is gone cannot send anyway.
func (g *Guard) Acquire(ctx context.Context, k Key, messageID string) (Decision, error) {
	lockID := LockID(k)
	// Registered before the insert, so that a loser in this process that
	// finds the lock also finds something to wait on.
	g.track(messageID)
	d, err := g.acquire(ctx, k.WorkspaceID, lockID, messageID)
	if d.Outcome != Won {
		g.finish(messageID, false)
	}
	return d, err
}

func (g *Guard) acquire(ctx context.Context, workspaceID, lockID, messageID string) (Decision, error) {
	err := g.insertLock(ctx, workspaceID, lockID, messageID)
	switch {
	case err == nil:
		return Decision{Outcome: Won, LockID: lockID, MessageID: messageID}, nil
	case store.IsDuplicateKey(err):
		return g.contend(ctx, workspaceID, lockID, messageID)
	case ctx.Err() != nil:
		return Decision{}, fmt.Errorf("acquire lock %s: %w", lockID, ctx.Err())
	}
	g.event(ctx, zerolog.ErrorLevel, events.DuplicateGuardError, workspaceID, lockID).
		Err(err).Str("messageId", messageID).
		Msg("duplicate guard unavailable; sending without duplicate protection")
	return Decision{Outcome: Unguarded, LockID: lockID, MessageID: messageID}, nil
}

// contend runs after the lock insert lost: it judges the holder, takes the
// lock over when the holder is gone, and otherwise returns its message or
// waits for it.
func (g *Guard) contend(ctx context.Context, workspaceID, lockID, messageID string) (Decision, error) {
	var (
		sib   *Sibling  // the holder's message, when wait has just read it
		until time.Time // end of the wait (real clock), set when waiting starts
	)
	v, err := g.observe(ctx, lockID)
	for step := 0; step < maxSteps; step++ {
		if err != nil {
			return Decision{}, err
		}
		if v == nil {
			// Released, deleted, or expired and reaped since our insert lost.
			ierr := g.insertLock(ctx, workspaceID, lockID, messageID)
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
				won, v, err = g.rewrite(ctx, v, messageID)
			}
			if won {
				return Decision{Outcome: Won, LockID: lockID, MessageID: messageID}, nil
			}
			continue
		}

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
			mode := events.ModeLockResolved
			if !until.IsZero() {
				mode = events.ModeLockResolvedPolled
			}
			return g.duplicate(ctx, workspaceID, lockID, messageID, v, dup, mode), nil
		case reason != "":
			var won bool
			won, v, err = g.takeOver(ctx, workspaceID, lockID, v, messageID, reason)
			if err == nil && won {
				return Decision{Outcome: Won, LockID: lockID, MessageID: messageID}, nil
			}
			continue
		}

		if until.IsZero() {
			until = time.Now().Add(g.o.Wait)
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
			return g.pending(ctx, workspaceID, lockID, messageID, v), nil
		}
	}
	return Decision{}, unavailable(fmt.Sprintf("no decision after %d changes of holder of", maxSteps), lockID, errContention)
}

var errContention = errors.New("lock contention")

// judge decides about v's holder: a reason means the holder is gone and the
// lock may be taken over; a sibling means its message is written (the request
// is a duplicate); neither means wait. sib, when set, is the holder's message
// as wait just read it.
func (g *Guard) judge(ctx context.Context, lockID string, v *view, sib *Sibling) (reason string, dup *Sibling, err error) {
	now := g.now()
	switch {
	case !now.Before(v.h.expiresAt):
		return reasonExpired, nil, nil
	case v.h.removing:
		// Its remover deletes the lock within milliseconds; one that has
		// not after Lease died doing so.
		if now.Sub(v.h.createdAt) >= g.o.Lease {
			return reasonCrashed, nil, nil
		}
		return "", nil, nil
	}
	if sib == nil {
		if sib, err = g.sibling(ctx, lockID, v.h.messageID); err != nil {
			return "", nil, err
		}
	}
	switch {
	case sib != nil && sib.Status == StatusFailed:
		return reasonFailedSibling, nil, nil // it reached no one: send again
	case sib != nil:
		return "", sib, nil
	case now.Sub(v.h.createdAt) >= g.o.Lease:
		return reasonCrashed, nil, nil // its winner died before writing the message
	}
	return "", nil, nil
}

// takeOver claims v's holder's generation for messageID and, having won the
// claim, rewrites the lock. A lost claim returns the holder that won it.
func (g *Guard) takeOver(ctx context.Context, workspaceID, lockID string, v *view, messageID, reason string) (won bool, next *view, err error) {
	claimed, err := g.claim(ctx, lockID, workspaceID, v.h.messageID, messageID, reason)
	if err != nil {
		return false, nil, err
	}
	if !claimed {
		next, err = g.successor(ctx, lockID, v)
		return false, next, err
	}
	won, next, err = g.rewrite(ctx, v, messageID)
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

func (g *Guard) duplicate(ctx context.Context, workspaceID, lockID, messageID string, v *view, s *Sibling, mode string) Decision {
	created := s.CreatedAt
	if created.IsZero() {
		created = v.h.createdAt
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

func (g *Guard) pending(ctx context.Context, workspaceID, lockID, messageID string, v *view) Decision {
	sibID := v.h.messageID
	if v.h.removing {
		sibID = v.lock.MessageID // the holder is a remover, not a message
	}
	now := g.now()
	g.event(ctx, zerolog.InfoLevel, events.DuplicatePending, workspaceID, lockID).
		Str("messageId", messageID).Str("siblingMessageId", sibID).
		Int64("siblingAgeMs", ageMs(now, v.h.createdAt)).Dur("waited", g.o.Wait).
		Msg("duplicate request still in flight")
	return Decision{Outcome: Pending, LockID: lockID, MessageID: sibID, SiblingAge: max(now.Sub(v.h.createdAt), 0)}
}

// event starts an event line on the request's logger.
func (g *Guard) event(ctx context.Context, level zerolog.Level, name, workspaceID, lockID string) *zerolog.Event {
	return zerolog.Ctx(ctx).WithLevel(level).Str("event", name).
		Str("workspaceId", workspaceID).Str("lockId", lockID)
}

func ageMs(now, t time.Time) int64 { return max(now.Sub(t), 0).Milliseconds() }
