package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	// Owned: each document names an owner (a lock, a claim), and deleting it
	// is a change of owner that must go through the owner package's claims
	// and fence the holder first — which a TTL monitor cannot do. An owned
	// collection gets no TTL index on any store; its expired documents are
	// deleted only by the ReapFunc its package registers (ReapWith), on
	// MongoDB too (where ExpiresField gets a plain index for the scan).
	Owned bool
	// ReapFields name the string fields an owned collection's ReapFunc
	// reads besides _id and ExpiresField. On the embedded engine's host the
	// reaper reads expired documents from SQLite with those fields only
	// (expiry.go); a field that is not a string there is left out.
	ReapFields []string
	// Indexes are secondary indexes. Hot paths read by _id only.
	Indexes []mongo.IndexModel
}

// Mongo error codes we act on.
const (
	codeNamespaceExists = 48
	codeNotImplemented  = 238
)

// Ensure creates the collections and their indexes. It is idempotent and
// runs at every start-up. A failure is tried again, with backoff, until ctx
// ends (RELIABILITY.md, finding 3): a process that starts while the engine
// it attaches to restarts, or under a load that makes a command outlive
// its time, sees its command interrupted or its connection dropped, and
// should start a moment later, not exit.
func (s *Store) Ensure(ctx context.Context, colls ...Collection) error {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.ensure(ctx, colls...)
		if err == nil || ctx.Err() != nil {
			return err
		}
		s.log.Warn().Err(err).Str("event", "store.ensure_retry").Int("attempt", attempt).Dur("retryIn", backoff).
			Msg("creating collections and indexes failed; trying again")
		if sleepCtx(ctx, backoff) != nil {
			return err
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (s *Store) ensure(ctx context.Context, colls ...Collection) error {
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
		if err := dropExtraIDIndexes(ctx, s.sqlite); err != nil {
			return fmt.Errorf("embedded store: %w", err)
		}
		if err := patchExpiryIndexes(ctx, s.sqlite, colls); err != nil {
			return fmt.Errorf("embedded store: %w", err)
		}
	}
	return nil
}

func (s *Store) ensureTTL(ctx context.Context, c Collection) error {
	if c.Owned {
		s.addReaped(c)
		if s.sqlite != "" {
			return nil // the embedded engine uses no index but _id's anyway
		}
		_, err := s.Collection(c.Name).Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys: bson.D{{Key: c.ExpiresField, Value: 1}}, Options: options.Index().SetName(c.ExpiresField + "_1"),
		})
		if err != nil {
			return fmt.Errorf("create index on %s.%s: %w", c.Name, c.ExpiresField, err)
		}
		return nil
	}
	_, err := s.Collection(c.Name).Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: c.ExpiresField, Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0).SetName(c.ExpiresField + "_ttl"),
	})
	switch {
	case err == nil:
		return nil
	case hasCode(err, codeNotImplemented):
		s.addReaped(c)
		return nil
	default:
		return fmt.Errorf("create TTL index on %s.%s: %w", c.Name, c.ExpiresField, err)
	}
}

// addReaped lists c for the reaper, once (Ensure may run more than once).
func (s *Store) addReaped(c Collection) {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	for _, have := range s.reaped {
		if have.Name == c.Name {
			return
		}
	}
	s.reaped = append(s.reaped, c)
}

// ReapFunc deletes a batch of expired documents of an owned collection
// through its owner's claims and returns how many it deleted. docs were
// expired at now when they were read; any of them may have changed owner
// since, which the owner's claims or conditional deletes detect. On the
// embedded engine's host a document
// carries only its _id, its expiry and the collection's ReapFields.
type ReapFunc func(ctx context.Context, now time.Time, docs []bson.Raw) (deleted int64, err error)

// ReapWith registers the reaper of an owned collection. Until it is
// registered, the collection's expired documents are left alone.
func (s *Store) ReapWith(collection string, f ReapFunc) {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	if s.reapers == nil {
		s.reapers = map[string]ReapFunc{}
	}
	s.reapers[collection] = f
}

// Reaped lists the collections whose expired documents the reaper deletes:
// those without a TTL index, and the owned ones.
func (s *Store) Reaped() []string {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	names := make([]string, len(s.reaped))
	for i, c := range s.reaped {
		names[i] = c.Name
	}
	return names
}

// The reaper works in rounds. A round reads up to ReapRound expired
// documents (one scan that stops early) and hands them to the collection's
// ReapFunc, which claims them in insert batches of ReapBatch and deletes the
// ones it claimed by _id (DeleteIDs); then it pauses before the next round.
// Memory and every statement stay bounded whatever the backlog (the
// engine's own DeleteMany of every expired document failed with "too many
// SQL variables" past SQLite's limit).
//
// Every command it sends is short, because on the embedded engine each one
// holds the process's single writer (writegate.go) while requests queue
// behind it: a batch's insert is one SQLite transaction, a delete command
// one transaction per document. And before each of its commands it yields
// (Store.Yield): while request writes are queued it waits for them, up to
// 100 ms. So a pass over any backlog costs a request at most one short
// command's wait, and takes, under a saturating load, a tenth of the
// writer at most; idle, it runs at full speed.
const (
	ReapRound = 10_000
	ReapBatch = 50
	// scanBatch documents come in each reply of a round's scan (a read:
	// it does not hold the writer).
	scanBatch = 1_000
	reapPause = 20 * time.Millisecond
	// deleteChunk ids go in one delete command: a statement and a
	// transaction each, about a millisecond each on the embedded engine.
	deleteChunk = 10
	// reapRoundTimeout bounds one round, in place of the store's per-call
	// timeout, which a round of thousands of deletes would outlast.
	reapRoundTimeout = 5 * time.Minute
)

// Reap deletes, once, every document expired at now from each reaped
// collection, round by round, and returns how many it deleted.
func (s *Store) Reap(ctx context.Context, now time.Time) (int64, error) {
	s.reapMu.Lock()
	colls := append([]Collection(nil), s.reaped...)
	reapers := maps.Clone(s.reapers)
	s.reapMu.Unlock()
	var total int64
	for _, c := range colls {
		f := reapers[c.Name]
		if f == nil && c.Owned {
			s.log.Error().Str("collection", c.Name).Msg("owned collection has no registered reaper: its expired documents stay")
			continue
		}
		if f == nil {
			f = s.deleteExpired(c)
		}
		n, err := s.reapCollection(ctx, c, now, f)
		total += n
		if err != nil {
			return total, fmt.Errorf("reap %s: %w", c.Name, err)
		}
	}
	return total, nil
}

func (s *Store) reapCollection(ctx context.Context, c Collection, now time.Time, f ReapFunc) (int64, error) {
	var total int64
	for {
		n, read, err := s.reapRound(ctx, c, now, f)
		total += n
		switch {
		case err != nil:
			return total, err
		case read < ReapRound || n == 0:
			// All read, or a round made no progress (every document it read
			// is held by a claim of someone else): the next pass retries.
			return total, nil
		}
		if err := sleepCtx(ctx, reapPause); err != nil {
			return total, err
		}
	}
}

func (s *Store) reapRound(ctx context.Context, c Collection, now time.Time, f ReapFunc) (deleted int64, read int, err error) {
	ctx, cancel := context.WithTimeout(ctx, reapRoundTimeout)
	defer cancel()
	docs, err := s.expired(ctx, c, now)
	if err != nil || len(docs) == 0 {
		return 0, 0, err
	}
	deleted, err = f(ctx, now, docs)
	return deleted, len(docs), err
}

// expired reads up to ReapRound documents of c expired at now. On the
// embedded engine's host they come from SQLite through the expiry index,
// with only the fields the collection's reaper reads (expiry.go).
func (s *Store) expired(ctx context.Context, c Collection, now time.Time) ([]bson.Raw, error) {
	if s.sqlite != "" {
		return s.expiredFromFile(ctx, c, now, ReapRound)
	}
	filter := bson.D{{Key: c.ExpiresField, Value: bson.D{{Key: "$lte", Value: now}}}}
	cur, err := s.Collection(c.Name).Find(ctx, filter, options.Find().SetLimit(ReapRound).SetBatchSize(scanBatch))
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var docs []bson.Raw
	for cur.Next(ctx) {
		docs = append(docs, slices.Clone(cur.Current))
	}
	return docs, cur.Err()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// deleteExpired is the reaper of a collection that is not owned (its
// documents are written once and never renewed): one DeleteMany of the
// batch's ids.
func (s *Store) deleteExpired(c Collection) ReapFunc {
	return func(ctx context.Context, now time.Time, docs []bson.Raw) (int64, error) {
		return s.DeleteIDs(ctx, c.Name, IDsOf(docs))
	}
}

// IDsOf returns the _id of each document.
func IDsOf(docs []bson.Raw) []any {
	ids := make([]any, len(docs))
	for i, d := range docs {
		ids[i] = d.Lookup("_id")
	}
	return ids
}

// DeleteIDs deletes the documents with these _ids: one delete command per
// deleteChunk ids, a statement per document (DeleteEach), so that on the
// embedded engine request writes interleave with a long reaper pass
// instead of waiting behind it.
func (s *Store) DeleteIDs(ctx context.Context, collection string, ids []any) (int64, error) {
	filters := make([]bson.D, len(ids))
	for i, id := range ids {
		filters[i] = bson.D{{Key: "_id", Value: id}}
	}
	return s.DeleteEach(ctx, collection, filters)
}

// DeleteEach deletes each document that still matches its filter (every
// filter names an _id beside its other conditions): one delete statement
// per filter, deleteChunk to a command. Each statement is atomic on both
// engines: on MongoDB by its document's lock, on the embedded engine
// because every write command runs alone (relay.go) and finds its document
// by the _id conjunct (third_party/ferretdb/PATCHES.md), so a delete
// costs one lookup, not a read of the collection.
func (s *Store) DeleteEach(ctx context.Context, collection string, filters []bson.D) (int64, error) {
	var total int64
	for chunk := range slices.Chunk(filters, deleteChunk) {
		if err := s.Yield(ctx); err != nil {
			return total, err
		}
		models := make([]mongo.WriteModel, len(chunk))
		for i, f := range chunk {
			models[i] = mongo.NewDeleteOneModel().SetFilter(f)
		}
		res, err := s.Collection(collection).BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		if res != nil {
			total += res.DeletedCount
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// ReapsHere reports whether this process's reaper runs. It does on MongoDB
// and in the embedded engine's host; a process attached to msgapi's
// embedded engine by MONGODB_URI runs none. The host's reaper already
// deletes what expired in every collection, with the same code (the same
// msgapi version: Open checks the engine's), and reads the expired
// documents through an index in the engine's file (expiry.go); an attached
// process cannot open that file, so its passes would read every document
// of every reaped collection, in the engine's host, for nothing. The host
// is always there for them: the engine runs inside it.
func (s *Store) ReapsHere() bool { return !s.ferret || s.sqlite != "" }

// RunReaper calls Reap every interval until ctx ends. It is garbage
// collection only: a failed pass is logged and retried at the next tick.
// A process attached to msgapi's embedded engine runs none (ReapsHere).
func (s *Store) RunReaper(ctx context.Context, interval time.Duration) {
	if len(s.Reaped()) == 0 || !s.ReapsHere() {
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

// InsertAll inserts docs in one unordered command and reports which inserts
// won: a duplicate key is a lost race (won[i] false), any other error fails
// the call. It is the batch form of "decide every race with an insert".
func InsertAll(ctx context.Context, coll *mongo.Collection, docs []any) ([]bool, error) {
	won := make([]bool, len(docs))
	for i := range won {
		won[i] = true
	}
	if len(docs) == 0 {
		return won, nil
	}
	_, err := coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err == nil {
		return won, nil
	}
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
		return nil, err
	}
	for _, we := range bwe.WriteErrors {
		if !mongo.IsDuplicateKeyError(we) {
			return nil, we
		}
		won[we.Index] = false
	}
	return won, nil
}
