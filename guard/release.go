package guard

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
)

// releaseMargin: Release leaves alone a lock this close to expiry. It is free
// to take over anyway, and deleting it could race the TTL monitor (or the
// reaper) deleting it first and a fresh insert winning in between.
const releaseMargin = 2 * time.Second

// ErrWritten is Release's answer when the request's message exists after
// all (its insert landed although the call reported an error): the lock
// stays, and the caller records that the message was never sent.
var ErrWritten = errors.New("the message was written; the lock is kept")

// Release frees the lock held for messageID when the request failed before
// writing its message, only if messageID still holds it. It fences
// messageID first, so that an insert of it still in flight can never land
// after the lock is gone. It costs four round trips: the fence, the claim on
// messageID's generation, the lock read, the delete.
//
// A lost claim means the lock was already taken over (or released): it is
// someone else's and Release does nothing. Same-process waiters on messageID
// wake up and decide again; the first to insert sends.
func (g *Guard) Release(ctx context.Context, lockID, messageID string) error {
	defer g.finish(messageID, false) // after the delete, so waiters find the lock gone
	won, err := g.fence(ctx, lockID, reasonReleased, messageID)
	if err != nil {
		return err
	}
	if !won {
		sib, err := g.sibling(ctx, lockID, messageID)
		if err != nil {
			return err
		}
		if sib != nil && !sib.Tombstone {
			return ErrWritten
		}
	}
	claimed, err := g.claim(ctx, lockID, "", messageID, msgapi.NewID("rel"), reasonReleased, g.o.Window)
	if err != nil || !claimed {
		return err
	}
	// Nobody else can claim this generation now, so the lock cannot change
	// hands between this read and the delete.
	v, err := g.observe(ctx, lockID)
	if err != nil || v == nil || v.lock.MessageID != messageID {
		return err
	}
	if !g.now().Before(v.lock.ExpiresAt.Add(-releaseMargin)) {
		return nil
	}
	if _, err := g.locks.DeleteOne(ctx, holdsOneOf(lockID, messageID)); err != nil {
		return unavailable("release lock", lockID, err)
	}
	return nil
}

// Delete removes a workspace's lock (operator action), so that the next
// identical message is sent. Another workspace's or a missing lock is a
// *msgapi.Error with CodeNotFound.
//
// Delete fences the holder (a holder that has not written its message yet
// never will, and never sends) and claims the lock's current generation,
// like a takeover, so that no takeover or release in flight rewrites the
// lock after it is deleted. Requests already waiting on the deleted holder,
// in any process, answer with its message if it was written (it may be
// with the provider right now); the next new request sends.
func (g *Guard) Delete(ctx context.Context, workspaceID, lockID string) error {
	v, err := g.observe(ctx, lockID)
	for step := 0; step < maxSteps; step++ {
		if err != nil {
			return err
		}
		if v == nil || v.lock.WorkspaceID != workspaceID {
			return msgapi.Errorf(msgapi.CodeNotFound, "no duplicate lock %s in this workspace", lockID)
		}
		if !v.h.removing {
			if _, err := g.fence(ctx, lockID, reasonDeleted, v.h.messageID); err != nil {
				return err
			}
		}
		claimed, cerr := g.claim(ctx, lockID, workspaceID, v.h.messageID, msgapi.NewID("del"), reasonDeleted, g.o.Window)
		if cerr != nil {
			return cerr
		}
		if !claimed {
			v, err = g.successor(ctx, lockID, v)
			continue
		}
		if _, err := g.locks.DeleteOne(ctx, holdsOneOf(lockID, v.chain...)); err != nil {
			return unavailable("delete lock", lockID, err)
		}
		g.event(ctx, zerolog.InfoLevel, events.DedupLockDeleted, workspaceID, lockID).
			Str("siblingMessageId", v.lock.MessageID).
			Int64("siblingAgeMs", ageMs(g.now(), v.lock.CreatedAt)).
			Msg("duplicate lock deleted by operator")
		return nil
	}
	return unavailable("delete: too many changes of holder of", lockID, errContention)
}

// holdsOneOf matches the lock only while it names one of the generations
// its remover claimed. A remover (a release, an operator's delete, the
// reaper) that stalls past the lease is judged gone, and its claim taken
// over: the taker rewrites the lock, and the remover's late delete must not
// remove that fresh lock (a third request would then win an empty lock and
// send a second time — the chaos run found it). The condition is atomic on
// MongoDB, and on the embedded engine because every write command runs
// alone there (store/relay.go); there a filter beyond _id reads the lock
// collection, whose size the window and the send rate bound.
func holdsOneOf(lockID string, messageIDs ...string) bson.D {
	return bson.D{{Key: "_id", Value: lockID}, {Key: "messageId", Value: bson.D{{Key: "$in", Value: messageIDs}}}}
}
