package guard

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

// Reap deletes expired locks (the store.ReapFunc of message_dedup_locks,
// registered by New). A delete is a change of owner like any other: for
// each lock it fences the holder (a holder stalled past its window before
// writing its message must never write it after its lock is gone), claims
// the lock's generation, and deletes only the locks whose claim it won and
// only while they still name the generation it claimed. A reaper that
// stalls past the lease after its claim is judged gone and its claim taken
// over like any remover's; the taker rewrites the lock, and the late delete
// no longer matches it (a delete by _id alone removed that fresh lock, and a
// third request then won an empty lock and sent again). Each batch of
// ReapBatch locks costs one fence insert, one claim insert and a delete
// statement per lock claimed, ten to a command (store.DeleteEach: on the
// embedded engine each finds its lock by _id, third_party/ferretdb/PATCHES.md).
func (g *Guard) Reap(ctx context.Context, now time.Time, docs []bson.Raw) (int64, error) {
	var total int64
	for raw := range slices.Chunk(docs, store.ReapBatch) {
		locks := make([]lockDoc, 0, len(raw))
		for _, d := range raw {
			var l lockDoc
			if err := bson.Unmarshal(d, &l); err != nil || l.MessageID == "" {
				continue // not a lock this code wrote; leave it
			}
			locks = append(locks, l)
		}
		if len(locks) == 0 {
			continue
		}
		holders := make([]string, len(locks))
		claims := make([]any, len(locks))
		for i, l := range locks {
			holders[i] = l.MessageID
			claims[i] = takeoverDoc{
				ID: takeoverID(l.ID, l.MessageID), LockID: l.ID, WorkspaceID: l.WorkspaceID,
				From: l.MessageID, Next: msgapi.NewID("reap"), Reason: reasonReaped,
				CreatedAt: now, ExpiresAt: now.Add(g.o.Window),
			}
		}
		if err := g.o.Store.Yield(ctx); err != nil { // requests' writes first (store.Yield)
			return total, err
		}
		if _, err := g.o.Fence(ctx, reasonReaped, holders...); err != nil {
			return total, fmt.Errorf("fence holders of expired locks: %w", err)
		}
		won, err := store.InsertAll(ctx, g.takeovers, claims)
		if err != nil {
			return total, fmt.Errorf("claim expired locks: %w", err)
		}
		var held []bson.D
		for i, l := range locks {
			if won[i] {
				held = append(held, holdsOneOf(l.ID, l.MessageID))
			}
		}
		n, err := g.o.Store.DeleteEach(ctx, locksName, held)
		total += n
		if err != nil {
			return total, fmt.Errorf("delete expired locks: %w", err)
		}
	}
	return total, nil
}

// Holder is a live lock's holder: the message its winner writes.
type Holder struct {
	LockID, WorkspaceID, MessageID string
	CreatedAt, ExpiresAt           time.Time
}

// Holders lists the holders of the locks that have not expired: every
// guarded message of the last window, which is what may still be in a
// provider call. One scan of the lock collection, whose size is bounded by
// the window and the send rate, never by the number of stored messages (on
// MongoDB an index range on expiresAt).
func (g *Guard) Holders(ctx context.Context) ([]Holder, error) {
	filter := bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$gt", Value: g.now()}}}}
	cur, err := g.locks.Find(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list lock holders: %w", err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var out []Holder
	for cur.Next(ctx) {
		var l lockDoc
		if err := cur.Decode(&l); err != nil || l.MessageID == "" {
			continue
		}
		out = append(out, Holder{LockID: l.ID, WorkspaceID: l.WorkspaceID, MessageID: l.MessageID, CreatedAt: l.CreatedAt, ExpiresAt: l.ExpiresAt})
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("list lock holders: %w", err)
	}
	return out, nil
}
