package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Sends during a reaper pass (-expired): the store gets -expired dedup
// locks whose window ended five minutes ago, each naming a message the run
// sent (what locks left by traffic older than the window look like), and
// the server, which this tool starts with a reaper every 10 s, deletes
// them through its claims while unique sends are measured.

const locksCollection = "message_dedup_locks"

// seedExpired inserts n expired locks in batches, before any is timed.
func (s *rawStore) seedExpired(ctx context.Context, runID string, n int, messageIDs []string) error {
	now := time.Now()
	batch := make([]any, 0, 1000)
	for i := range n {
		id := sha256.Sum256(fmt.Appendf(nil, "expired/%s/%d", runID, i))
		batch = append(batch, bson.D{
			{Key: "_id", Value: hex.EncodeToString(id[:])},
			{Key: "workspaceId", Value: "ws_load_expired"},
			{Key: "messageId", Value: messageIDs[i%len(messageIDs)]},
			{Key: "createdAt", Value: now.Add(-20 * time.Minute)},
			{Key: "expiresAt", Value: now.Add(-5 * time.Minute)},
		})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := s.db.Collection(locksCollection).InsertMany(ctx, batch, options.InsertMany().SetOrdered(false)); err != nil {
				return fmt.Errorf("seed expired locks: %w", err)
			}
			batch = batch[:0]
		}
	}
	return nil
}

// expiredLocks counts the locks whose window has ended.
func (s *rawStore) expiredLocks(ctx context.Context) (int64, error) {
	n, err := s.db.Collection(locksCollection).CountDocuments(ctx, bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: time.Now()}}}})
	if err != nil {
		return 0, fmt.Errorf("count expired locks: %w", err)
	}
	return n, nil
}

// waitReaperStarted waits until fewer than n expired locks are left: the
// server's reaper is deleting them.
func (s *rawStore) waitReaperStarted(ctx context.Context, n int64) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		left, err := s.expiredLocks(ctx)
		if err != nil {
			return err
		}
		if left < n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("the server's reaper did not start deleting the %d expired locks within a minute", n)
}

// waitReaped waits up to bound for the reaper to delete every expired
// lock and returns how many are left and how long it waited.
func (s *rawStore) waitReaped(ctx context.Context, bound time.Duration) (left int64, waited time.Duration, err error) {
	start := time.Now()
	for {
		if left, err = s.expiredLocks(ctx); err != nil || left == 0 || time.Since(start) > bound {
			return left, time.Since(start), err
		}
		select {
		case <-ctx.Done():
			return left, time.Since(start), ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
