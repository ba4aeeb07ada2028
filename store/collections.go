package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Collection declares one collection and what it needs from the store.
// Packages export their own declarations; cmd/msgapi hands them all to
// Ensure at start-up.
type Collection struct {
	Name string
	// ExpiresField names a date field after which a document is garbage.
	// A TTL index deletes such documents where the store supports it, the
	// reaper elsewhere. Correctness never depends on either: readers treat
	// an expired document as absent.
	ExpiresField string
	// Indexes are secondary indexes. Hot paths read by _id only.
	Indexes []mongo.IndexModel
}

// Mongo error codes we act on.
const (
	codeNamespaceExists = 48
	codeNotImplemented  = 238
)

// Ensure creates the collections and their indexes. It is idempotent and
// runs at every start-up.
func (s *Store) Ensure(ctx context.Context, colls ...Collection) error {
	for _, c := range colls {
		err := s.DB.CreateCollection(ctx, c.Name)
		if err != nil && !hasCode(err, codeNamespaceExists) {
			return fmt.Errorf("create collection %s: %w", c.Name, err)
		}
		if len(c.Indexes) > 0 {
			if _, err := s.Collection(c.Name).Indexes().CreateMany(ctx, c.Indexes); err != nil {
				return fmt.Errorf("create indexes on %s: %w", c.Name, err)
			}
		}
		if c.ExpiresField != "" {
			if err := s.ensureTTL(ctx, c); err != nil {
				return err
			}
		}
	}
	if s.sqlite != "" {
		if err := patchIDIndexes(ctx, s.sqlite); err != nil {
			return fmt.Errorf("embedded store: %w", err)
		}
	}
	return nil
}

func (s *Store) ensureTTL(ctx context.Context, c Collection) error {
	_, err := s.Collection(c.Name).Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: c.ExpiresField, Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0).SetName(c.ExpiresField + "_ttl"),
	})
	switch {
	case err == nil:
		return nil
	case hasCode(err, codeNotImplemented):
		s.reapMu.Lock()
		s.reaped = append(s.reaped, c)
		s.reapMu.Unlock()
		return nil
	default:
		return fmt.Errorf("create TTL index on %s.%s: %w", c.Name, c.ExpiresField, err)
	}
}

// Reaped lists the collections whose expired documents the reaper deletes
// because the store has no TTL indexes.
func (s *Store) Reaped() []string {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	names := make([]string, len(s.reaped))
	for i, c := range s.reaped {
		names[i] = c.Name
	}
	return names
}

// Reap deletes expired documents once from every collection without a TTL
// index and returns how many it deleted.
func (s *Store) Reap(ctx context.Context, now time.Time) (int64, error) {
	s.reapMu.Lock()
	colls := append([]Collection(nil), s.reaped...)
	s.reapMu.Unlock()
	var total int64
	for _, c := range colls {
		res, err := s.Collection(c.Name).DeleteMany(ctx, bson.D{{Key: c.ExpiresField, Value: bson.D{{Key: "$lte", Value: now}}}})
		if err != nil {
			return total, fmt.Errorf("reap %s: %w", c.Name, err)
		}
		total += res.DeletedCount
	}
	return total, nil
}

// RunReaper calls Reap every interval until ctx ends. It is garbage
// collection only: a failed pass is logged and retried at the next tick.
func (s *Store) RunReaper(ctx context.Context, interval time.Duration) {
	if len(s.Reaped()) == 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n, err := s.Reap(ctx, now)
			if err != nil && ctx.Err() == nil {
				s.log.Warn().Err(err).Str("event", "store.reap_failed").Msg("expiry reaper pass failed")
				continue
			}
			if n > 0 {
				s.log.Debug().Int64("deleted", n).Str("event", "store.reaped").Msg("expired documents deleted")
			}
		}
	}
}

func hasCode(err error, code int) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return int(ce.Code) == code
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		return se.HasErrorCode(code)
	}
	return false
}
