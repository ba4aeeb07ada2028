package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Group commit. On the embedded engine every write command runs alone
// (relay.go) and pays a SQLite transaction, its commit (the fsync of the
// write-ahead log) and the engine's per-command work: measured here, one
// small insert per command costs 0.48 ms of the writer, sixteen in one
// command 0.09 ms each (BenchmarkWriteCommand). So the inserts that
// concurrent requests make into one collection — dedup locks, message
// commits, outcomes, listing entries, events — wait while the collection's previous insert command runs and then go
// together, as one unordered insert command. Each document's insert is
// still decided alone, against the unique _id: exactly one of two inserts
// of the same _id wins, whether they travel in one command or two, so every
// race that an insert decides is decided as before. Nothing is acknowledged
// early: a caller returns when the command that carried its documents has
// been answered, so a crash loses only what no caller was told about.
//
// Alone, a request's insert goes at once (no timer, no added latency); under
// load the batch is whatever queued while the previous one ran.

// Batch limits: one command carries at most this many documents and bytes
// (MongoDB's limit is 100,000 documents and 48 MB per message).
const (
	batchMaxDocs  = 256
	batchMaxBytes = 8 << 20
)

// Batch sends the inserts waiting for one collection as one command.
// Safe for concurrent use; obtain it with Store.Batch.
type Batch struct {
	coll     *mongo.Collection
	parallel int // commands in flight at once

	mu      sync.Mutex
	queue   []*batchOp
	running int
}

// batchOp is one caller's documents.
type batchOp struct {
	ctx  context.Context
	docs []bson.Raw
	size int
	errs []error // per document, when err is nil
	err  error   // the command failed as a whole
	done chan struct{}
}

// Batch returns the collection's group-commit inserter, shared by every
// caller in this process.
func (s *Store) Batch(collection string) *Batch {
	s.batchMu.Lock()
	defer s.batchMu.Unlock()
	if b, ok := s.batches[collection]; ok {
		return b
	}
	parallel := 4 // MongoDB runs inserts side by side
	if s.ferret {
		parallel = 1 // one writer: a bigger batch is the only gain
	}
	b := &Batch{coll: s.Collection(collection), parallel: parallel}
	if s.batches == nil {
		s.batches = map[string]*Batch{}
	}
	s.batches[collection] = b
	return b
}

// InsertOne inserts doc, with the driver's InsertOne errors: a lost race
// is an error for which IsDuplicateKey is true.
func (b *Batch) InsertOne(ctx context.Context, doc any) error {
	errs, err := b.Insert(ctx, doc)
	if err != nil {
		return err
	}
	return errs[0]
}

// Insert inserts docs, unordered, and returns each one's outcome: nil when
// it was inserted, an error for which IsDuplicateKey is true when its _id
// was taken (by an earlier insert, or by another document of the same
// call). err is set when the command failed as a whole (the store is down,
// a timeout): then any of docs may or may not have been inserted, as with
// a single insert that timed out; it is never an error the server answered
// for these documents alone (see UncertainError).
func (b *Batch) Insert(ctx context.Context, docs ...any) (errs []error, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	op := &batchOp{ctx: ctx, done: make(chan struct{}), docs: make([]bson.Raw, len(docs))}
	for i, d := range docs {
		raw, err := bson.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("encode document for %s: %w", b.coll.Name(), err)
		}
		op.docs[i] = raw
		op.size += len(raw)
	}
	if len(docs) == 0 {
		return nil, nil
	}
	b.mu.Lock()
	b.queue = append(b.queue, op)
	if b.running < b.parallel {
		b.running++
		go b.flush()
	}
	b.mu.Unlock()
	select {
	case <-op.done:
		return op.errs, op.err
	case <-ctx.Done():
		// The command may already carry the documents: as with a single
		// insert whose caller gave up, they may land.
		return nil, ctx.Err()
	}
}

// flush sends batches until the queue is empty.
func (b *Batch) flush() {
	for {
		ops := b.take()
		if ops == nil {
			return
		}
		b.run(ops)
	}
}

// take removes the next batch from the queue: the oldest operations, up to
// the limits. Operations whose caller has gone are dropped unsent. nil when
// the queue is empty (and this flusher stops).
//
// Two inserts of one _id may share a batch (a storm of identical requests):
// the engine decides each document alone, as it would across two commands,
// and the first wins. On the embedded engine such a batch is retried one
// document at a time, a transaction each, which costs what separate
// commands would, without the losers waiting a writer turn each (measured
// with 400 storms of 10: the same rate, half the write commands, a shorter
// tail than sending each repeat in a later batch).
func (b *Batch) take() []*batchOp {
	b.mu.Lock()
	defer b.mu.Unlock()
	var (
		ops         []*batchOp
		rest        []*batchOp
		docs, bytes int
	)
	for _, op := range b.queue {
		if err := op.ctx.Err(); err != nil {
			op.err = err
			close(op.done)
			continue
		}
		if len(ops) > 0 && (docs+len(op.docs) > batchMaxDocs || bytes+op.size > batchMaxBytes) {
			rest = append(rest, op)
			continue
		}
		ops = append(ops, op)
		docs += len(op.docs)
		bytes += op.size
	}
	b.queue = rest
	if len(ops) == 0 {
		b.running--
		return nil
	}
	return ops
}

// run sends one batch and hands each operation its outcome.
func (b *Batch) run(ops []*batchOp) {
	var docs []any
	for _, op := range ops {
		for _, d := range op.docs {
			docs = append(docs, d)
		}
	}
	// The command lives as long as its most patient caller; with a caller
	// that has no deadline, the client's operation timeout.
	var deadline time.Time
	for _, op := range ops {
		d, ok := op.ctx.Deadline()
		if !ok {
			deadline = time.Time{}
			break
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	// Not any one caller's context: a caller that gives up must not cut
	// the others' inserts short.
	ctx := context.Background()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	_, err := b.coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	perDoc := make([]error, len(docs))
	var bwe mongo.BulkWriteException
	switch {
	case err == nil:
	case errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0:
		for _, we := range bwe.WriteErrors {
			if i := we.Index; i >= 0 && i < len(perDoc) {
				one := we.WriteError
				one.Index = 0 // as InsertOne reports it
				perDoc[i] = mongo.WriteException{WriteErrors: []mongo.WriteError{one}}
			}
		}
	default:
		if len(ops) > 1 {
			err = &UncertainError{Err: err}
		}
		for _, op := range ops {
			op.err = err
			close(op.done)
		}
		return
	}
	i := 0
	for _, op := range ops {
		op.errs = perDoc[i : i+len(op.docs)]
		i += len(op.docs)
		close(op.done)
	}
}

// UncertainError is the failure of a batch of several callers' inserts as
// a whole. Any of its documents may have been inserted: on the embedded
// engine a batch that hits a taken _id is retried one document at a time,
// and an error there answers the command after some of them landed. So it
// is never reported as the server's answer to one document (a
// mongo.ServerError, which a caller could take for "certainly not
// written"); a timeout or a network error inside stays visible to
// mongo.IsTimeout and mongo.IsNetworkError.
type UncertainError struct{ Err error }

func (e *UncertainError) Error() string {
	return "batched insert failed; its documents may or may not have been inserted: " + e.Err.Error()
}

// Unwrap exposes the cause unless it is the server's answer.
func (e *UncertainError) Unwrap() error {
	var se mongo.ServerError
	if errors.As(e.Err, &se) {
		return nil
	}
	return e.Err
}
