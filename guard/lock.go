package guard

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

// Every operation here is a single-document operation whose filter is
// exactly {_id: <string>}: the one shape that is atomic and indexed on
// MongoDB and that the embedded engine pushes down to SQL.

// lockDoc is a document of message_dedup_locks.
type lockDoc struct {
	ID          string    `bson:"_id"`
	WorkspaceID string    `bson:"workspaceId"`
	MessageID   string    `bson:"messageId"` // the message the holder will write
	CreatedAt   time.Time `bson:"createdAt"`
	ExpiresAt   time.Time `bson:"expiresAt"`
}

// takeoverDoc is a document of message_dedup_takeovers: the claim that ends
// the generation of lock LockID held by message From.
type takeoverDoc struct {
	ID          string `bson:"_id"` // takeoverID(LockID, From)
	LockID      string `bson:"lockId"`
	WorkspaceID string `bson:"workspaceId,omitempty"`
	From        string `bson:"from"`
	// Next is the holder of the next generation: the claimant's message id,
	// or, for a release or a delete, a fresh id that no message will ever
	// have, so that even that claim can be taken over if its claimant dies
	// before it deletes the lock.
	Next      string    `bson:"next"`
	Reason    string    `bson:"reason"`
	CreatedAt time.Time `bson:"createdAt"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

// holder is whoever answers for the lock now: the message id the lock
// document names or, when that generation has been claimed, the claimant the
// takeover record names (its lock rewrite may not have landed yet).
type holder struct {
	messageID string
	createdAt time.Time
	expiresAt time.Time
	removing  bool // a release or delete claimed the lock: no message will come
}

// view is what a contender knows about a lock.
type view struct {
	lock lockDoc
	// chain lists the generations from the one the lock document names to
	// the current holder. A claimant may rewrite a lock that names any of
	// them; a lock naming anything else belongs to someone we never saw.
	chain []string
	h     holder
}

func viewOf(l lockDoc) *view {
	return &view{
		lock:  l,
		chain: []string{l.MessageID},
		h:     holder{messageID: l.MessageID, createdAt: l.CreatedAt, expiresAt: l.ExpiresAt},
	}
}

// insertLock tries to win the lock for messageID, for window.
func (g *Guard) insertLock(ctx context.Context, workspaceID, lockID, messageID string, window time.Duration) error {
	now := g.now()
	return g.lockBatch.InsertOne(ctx, lockDoc{
		ID: lockID, WorkspaceID: workspaceID, MessageID: messageID,
		CreatedAt: now, ExpiresAt: now.Add(window),
	})
}

// observe reads the lock; nil when there is none.
func (g *Guard) observe(ctx context.Context, lockID string) (*view, error) {
	var l lockDoc
	// The first read of the lock in a send may be answered by the send's
	// prefetch (store.Prefetch, LockDoc); every later one goes to the store.
	err := store.FindByID(ctx, g.locks, lockID).Decode(&l)
	switch {
	case store.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, unavailable("read lock", lockID, err)
	}
	return viewOf(l), nil
}

// claim inserts the takeover record that ends generation from of the lock.
// Exactly one claim per generation succeeds; claimed=false means another
// claimant was first.
func (g *Guard) claim(ctx context.Context, lockID, workspaceID, from, next, reason string, window time.Duration) (claimed bool, err error) {
	now := g.now()
	_, err = g.takeovers.InsertOne(ctx, takeoverDoc{
		ID: takeoverID(lockID, from), LockID: lockID, WorkspaceID: workspaceID,
		From: from, Next: next, Reason: reason,
		CreatedAt: now, ExpiresAt: now.Add(window),
	})
	switch {
	case err == nil:
		return true, nil
	case store.IsDuplicateKey(err):
		return false, nil
	default:
		return false, unavailable("claim lock", lockID, err)
	}
}

// successor follows a lost claim on v's holder to the holder its winner
// named. It returns the lock as it now stands when the record is gone.
func (g *Guard) successor(ctx context.Context, lockID string, v *view) (*view, error) {
	var t takeoverDoc
	err := g.takeovers.FindOne(ctx, store.ByID(takeoverID(lockID, v.h.messageID))).Decode(&t)
	switch {
	case store.IsNotFound(err):
		return g.observe(ctx, lockID)
	case err != nil:
		return nil, unavailable("read takeover of lock", lockID, err)
	}
	return &view{
		lock:  v.lock,
		chain: append(slices.Clip(v.chain), t.Next),
		h: holder{
			messageID: t.Next, createdAt: t.CreatedAt, expiresAt: t.ExpiresAt,
			removing: t.Reason == reasonReleased || t.Reason == reasonDeleted,
		},
	}, nil
}

// rewrite replaces the lock with one held by messageID, after a successful
// claim on v's holder. It reports whether the lock is now ours. The lock
// document answers what it held before: a lock naming a generation outside
// v's chain was won by a fresh insert after ours expired and was reaped, so
// it is given back and its holder is returned to be followed; no lock at all
// returns (false, nil), and the caller inserts.
func (g *Guard) rewrite(ctx context.Context, v *view, messageID string, window time.Duration) (won bool, next *view, err error) {
	now := g.now()
	mine := lockDoc{
		ID: v.lock.ID, WorkspaceID: v.lock.WorkspaceID, MessageID: messageID,
		CreatedAt: now, ExpiresAt: now.Add(window),
	}
	var before lockDoc
	err = g.locks.FindOneAndReplace(ctx, store.ByID(v.lock.ID), mine).Decode(&before)
	switch {
	case store.IsNotFound(err):
		return false, nil, nil
	case err != nil:
		// The rewrite may or may not have landed. If it did, the lock names
		// a message that will never be written, and it is free after Lease.
		return false, nil, unavailable("take over lock", v.lock.ID, err)
	case slices.Contains(v.chain, before.MessageID):
		return true, nil, nil
	}
	if _, err := g.locks.ReplaceOne(ctx, store.ByID(v.lock.ID), before); err != nil {
		return false, nil, unavailable("give back lock", v.lock.ID, err)
	}
	return false, viewOf(before), nil
}

func unavailable(what, lockID string, err error) error {
	return msgapi.Unavailable(fmt.Errorf("duplicate guard: %s %s: %w", what, lockID, err))
}
