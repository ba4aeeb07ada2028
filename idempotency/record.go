package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store"
)

// Collection names.
const (
	keysCollection = "idempotency_keys"
	// retiredTakeovers held the takeover documents that decided a change of
	// owner before the embedded engine made conditional writes atomic and
	// cheap. Nothing writes it now; it stays declared so that the reaper
	// (or MongoDB's TTL index) empties it of what an earlier version left.
	retiredTakeovers = "idempotency_takeovers"
)

// Collections are the collections this package needs; cmd/msgapi hands them
// to store.Ensure. expiresAt is garbage collection only: readers treat an
// expired record as absent whether or not it is still stored.
var Collections = []store.Collection{
	{Name: keysCollection, ExpiresField: "expiresAt", Owned: true, ReapFields: []string{"state", "token", "commitId"}},
	{Name: retiredTakeovers, ExpiresField: "expiresAt"},
}

// Record states.
const (
	stateInProgress = "in_progress"
	stateCompleted  = "completed"
)

// record is one document of idempotency_keys. Every generation of a record
// (a claim, a completion) carries a fresh random token; the token names the
// generation that a change of owner replaces, and the write that replaces
// it is conditional on it (generation).
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

// generation filters the record rec.ID while it is still generation
// token. Every change of owner is a write with this filter: exactly one
// writer can replace or delete a generation, because the write and its
// condition are one atomic step on both engines — on MongoDB by the
// document's lock, on the embedded engine because every write command runs
// alone (store/relay.go) and finds its document by the _id conjunct
// (third_party/ferretdb/PATCHES.md). A write that fails or times out may
// still land later, but only on the generation it names: if another writer
// replaced that generation first, the late write matches nothing.
func generation(id, token string) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "token", Value: token}}
}

// replace writes next over generation old of its record. won is false when
// another writer replaced or removed that generation first. On the
// embedded engine it rides in a group command with the inserts of
// concurrent requests (store.Batch.ReplaceOne): a keyed send's completion
// then costs the one writer no command of its own.
func (k *Keys) replace(ctx context.Context, old, next record) (won bool, err error) {
	won, err = k.store.Batch(keysCollection).ReplaceOne(ctx, generation(old.ID, old.Token), next)
	if err != nil {
		return false, fmt.Errorf("write idempotency record %s: %w", old.ID, err)
	}
	return won, nil
}

// remove deletes generation token of record id; won is false when another
// writer replaced or removed it first.
func (k *Keys) remove(ctx context.Context, id, token string) (won bool, err error) {
	res, err := k.store.Collection(keysCollection).DeleteOne(ctx, generation(id, token))
	if err != nil {
		return false, fmt.Errorf("delete idempotency record %s: %w", id, err)
	}
	return res.DeletedCount == 1, nil
}

// Reap deletes expired records (the store.ReapFunc of idempotency_keys,
// registered by New). Deleting a record ends its generation, so it is a
// delete of the generation the scan read (generation): a record taken over
// (rewritten with a fresh lifetime) after the scan read it no longer
// matches and stays. A claim still in progress has its commit id fenced
// first. Each batch costs one fence insert and a delete statement per
// record, ten to a command (store.DeleteEach).
func (k *Keys) Reap(ctx context.Context, now time.Time, docs []bson.Raw) (int64, error) {
	var total int64
	for raw := range slices.Chunk(docs, store.ReapBatch) {
		var (
			gens    []bson.D
			commits []string
		)
		for _, d := range raw {
			var r record
			if err := bson.Unmarshal(d, &r); err != nil || r.Token == "" {
				continue // not a record this code wrote; leave it
			}
			gens = append(gens, generation(r.ID, r.Token))
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
		n, err := k.store.DeleteEach(ctx, keysCollection, gens)
		total += n
		if err != nil {
			return total, fmt.Errorf("delete expired idempotency records: %w", err)
		}
	}
	return total, nil
}
