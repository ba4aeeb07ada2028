package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi/store"
)

// Collection names.
const (
	keysCollection      = "idempotency_keys"
	takeoversCollection = "idempotency_takeovers"
)

// Collections are the collections this package needs; cmd/msgapi hands them
// to store.Ensure. expiresAt is garbage collection only: readers treat an
// expired record as absent whether or not it is still stored.
var Collections = []store.Collection{
	{Name: keysCollection, ExpiresField: "expiresAt", Owned: true, ReapFields: []string{"state", "token", "commitId"}},
	{Name: takeoversCollection, ExpiresField: "expiresAt"},
}

// Record states.
const (
	stateInProgress = "in_progress"
	stateCompleted  = "completed"
)

// record is one document of idempotency_keys. Every generation of a record
// (a claim, a completion) carries a fresh random token; the token names the
// generation that a takeover replaces.
type record struct {
	ID          string `bson:"_id"`
	WorkspaceID string `bson:"workspaceId"`
	Method      string `bson:"method"`
	Path        string `bson:"path"`
	Fingerprint string `bson:"fingerprint"`
	State       string `bson:"state"`
	Token       string `bson:"token"`
	// CommitID names the commit point of the claim's request (its message
	// id): what a retry after the lease answers from.
	CommitID    string    `bson:"commitId,omitempty"`
	ClaimedAt   time.Time `bson:"claimedAt"`
	LeaseUntil  time.Time `bson:"leaseUntil"`
	Status      int       `bson:"status,omitempty"`
	ContentType string    `bson:"contentType,omitempty"`
	Body        []byte    `bson:"body,omitempty"`
	CompletedAt time.Time `bson:"completedAt,omitempty"`
	CreatedAt   time.Time `bson:"createdAt"`
	ExpiresAt   time.Time `bson:"expiresAt"`
}

// takeover is one document of idempotency_takeovers: proof that exactly one
// request replaced the record generation named by (RecordID, Replaced).
type takeover struct {
	ID        string    `bson:"_id"`
	RecordID  string    `bson:"recordId"`
	Replaced  string    `bson:"replacedToken"`
	By        string    `bson:"byToken,omitempty"`
	At        time.Time `bson:"at"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms (crypto/rand docs)
	return hex.EncodeToString(b[:])
}

// find reads the record; found is false when there is none.
func (k *Keys) find(ctx context.Context, id string) (rec record, found bool, err error) {
	err = k.store.Collection(keysCollection).FindOne(ctx, store.ByID(id)).Decode(&rec)
	switch {
	case err == nil:
		return rec, true, nil
	case store.IsNotFound(err):
		return record{}, false, nil
	default:
		return record{}, false, fmt.Errorf("read idempotency record %s: %w", id, err)
	}
}

// insert claims an absent record. A duplicate-key error (someone else's
// insert won) is returned as is for store.IsDuplicateKey.
func (k *Keys) insert(ctx context.Context, rec record) error {
	return k.store.Batch(keysCollection).InsertOne(ctx, rec)
}

// win inserts the takeover document for generation (recordID, token). Only
// one insert of it can ever succeed, so won is true for exactly one caller:
// the one entitled to rewrite or delete that generation. This is the
// compare-and-swap the embedded engine's conditional updates cannot give.
func (k *Keys) win(ctx context.Context, recordID, token, by string, now time.Time) (won bool, err error) {
	// A takeover document only has to outlive the moment between a reader's
	// read of the generation and its insert; it lives a lease (at least a
	// minute), so a winner that died before rewriting the record blocks the
	// key only until the TTL index or the reaper removes the document.
	life := max(k.lease, time.Minute)
	err = k.store.Batch(takeoversCollection).InsertOne(ctx, takeover{
		ID: takeoverID(recordID, token), RecordID: recordID, Replaced: token, By: by,
		At: now, ExpiresAt: now.Add(life),
	})
	switch {
	case err == nil:
		return true, nil
	case store.IsDuplicateKey(err):
		return false, nil
	default:
		return false, fmt.Errorf("take over idempotency record %s: %w", recordID, err)
	}
}

// takeOver replaces generation old with the claim next. won is false when
// another request took it over first.
func (k *Keys) takeOver(ctx context.Context, old, next record, now time.Time) (won bool, err error) {
	won, err = k.win(ctx, old.ID, old.Token, next.Token, now)
	if !won || err != nil {
		return false, err
	}
	if err := k.put(ctx, next); err != nil {
		// Our rewrite did not land, or we cannot tell. Give the generation
		// back (so the next request can take it over at once instead of
		// waiting for the takeover document to expire) only when it
		// certainly did not land: a rewrite that timed out may still run
		// on the server (on MongoDB after the driver has given up; on the
		// embedded engine it runs before any later write), and a second
		// winner of the same generation would then have its claim
		// overwritten by ours: two requests running under one key. An
		// uncertain failure keeps the claim; the key answers 409 until the
		// takeover document expires (a lease, at least a minute).
		if definitelyNotWritten(err) {
			_, _ = k.store.Collection(takeoversCollection).DeleteOne(context.WithoutCancel(ctx), store.ByID(takeoverID(old.ID, old.Token)))
		}
		if store.IsDuplicateKey(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// definitelyNotWritten reports whether a failed write certainly changed
// nothing: the server answered it with an error. A timeout, a cancelled
// context or a broken connection leaves it open.
func definitelyNotWritten(err error) bool {
	if store.IsDuplicateKey(err) {
		return true
	}
	if mongo.IsTimeout(err) || mongo.IsNetworkError(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var se mongo.ServerError
	return errors.As(err, &se)
}

// put writes rec over the record with its _id. Only a caller that won the
// takeover of the current generation calls it. If the record vanished
// meanwhile (the reaper deleted it), the write becomes an insert, which a
// concurrent claim of the empty slot may win: then put returns the
// duplicate-key error.
func (k *Keys) put(ctx context.Context, rec record) error {
	res, err := k.store.Collection(keysCollection).ReplaceOne(ctx, store.ByID(rec.ID), rec)
	if err != nil {
		return fmt.Errorf("write idempotency record %s: %w", rec.ID, err)
	}
	if res.MatchedCount == 0 {
		return k.insert(ctx, rec)
	}
	return nil
}

// remove deletes the record. Only the winner of its current generation calls it.
func (k *Keys) remove(ctx context.Context, id string) error {
	if _, err := k.store.Collection(keysCollection).DeleteOne(ctx, store.ByID(id)); err != nil {
		return fmt.Errorf("delete idempotency record %s: %w", id, err)
	}
	return nil
}

// Reap deletes expired records (the store.ReapFunc of idempotency_keys,
// registered by New). Deleting a record ends its generation, so it goes
// through the same claim as any takeover: the reaper inserts the takeover
// document of the generation it read and deletes only the records whose
// claim it won. A record taken over (rewritten with a fresh lifetime) after
// the scan read it was claimed by that takeover, so the reaper's claim
// loses and the live record stays. A claim still in progress has its
// commit id fenced first. Each batch costs one fence insert, one claim
// insert and one delete command.
func (k *Keys) Reap(ctx context.Context, now time.Time, docs []bson.Raw) (int64, error) {
	var total int64
	for raw := range slices.Chunk(docs, store.ReapBatch) {
		var (
			recs    []record
			commits []string
		)
		for _, d := range raw {
			var r record
			if err := bson.Unmarshal(d, &r); err != nil || r.Token == "" {
				continue // not a record this code wrote; leave it
			}
			recs = append(recs, r)
			if r.State == stateInProgress && r.CommitID != "" {
				commits = append(commits, r.CommitID)
			}
		}
		if err := k.store.Yield(ctx); err != nil { // requests' writes first (store.Yield)
			return total, err
		}
		if len(commits) > 0 && k.commits != nil {
			if _, err := k.commits.Fence(ctx, "idempotency_reaped", commits...); err != nil {
				return total, fmt.Errorf("fence commits of expired idempotency records: %w", err)
			}
		}
		life := max(k.lease, time.Minute)
		claims := make([]any, len(recs))
		for i, r := range recs {
			claims[i] = takeover{ID: takeoverID(r.ID, r.Token), RecordID: r.ID, Replaced: r.Token, At: now, ExpiresAt: now.Add(life)}
		}
		won, err := store.InsertAll(ctx, k.store.Collection(takeoversCollection), claims)
		if err != nil {
			return total, fmt.Errorf("claim expired idempotency records: %w", err)
		}
		var ids []any
		for i, r := range recs {
			if won[i] {
				ids = append(ids, r.ID)
			}
		}
		n, err := k.store.DeleteIDs(ctx, keysCollection, ids)
		total += n
		if err != nil {
			return total, fmt.Errorf("delete expired idempotency records: %w", err)
		}
	}
	return total, nil
}
