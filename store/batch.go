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
// concurrent requests make — dedup locks, message commits, outcomes,
// listing entries, events — wait while the previous insert command runs and
// then go together. On MongoDB they go as one unordered insert command per
// collection. On the embedded engine they go as one command for every
// collection, msgapiInsert (third_party/ferretdb/PATCHES.md, patch 6), whose
// documents commit in one SQLite transaction: a send's lock, message,
// listing entries, outcome and event are five collections, and five
// commits became one. Each document's insert is still decided alone,
// against the unique _id: exactly one of two inserts of the same _id wins,
// whether they travel in one command or two, so every race that an insert
// decides is decided as before. Nothing is acknowledged early: a caller
// returns when the command that carried its documents has been answered,
// so a crash loses only what no caller was told about.
//
// Alone, a request's insert goes at once (no timer, no added latency); under
// load the batch is whatever queued while the previous one ran.

// Batch limits: one command carries at most this many documents and bytes
// (MongoDB's limit is 100,000 documents and 48 MB per message; a
// msgapiInsert command is one BSON document, at most 16 MB).
const (
	batchMaxDocs  = 256
	batchMaxBytes = 8 << 20
)

// Batch inserts into one collection through its queue. Safe for concurrent
// use; obtain it with Store.Batch.
type Batch struct {
	coll *mongo.Collection
	q    *batchQueue
}

// batchQueue is the inserts waiting to go: one collection's on MongoDB,
// every collection's on the embedded engine.
type batchQueue struct {
	parallel int                  // commands in flight at once
	run      func(ops []*batchOp) // sends one batch and hands each operation its outcome

	mu      sync.Mutex
	queue   []*batchOp
	running int
}

// batchOp is one caller's documents.
type batchOp struct {
	ctx  context.Context
	coll string
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
	var q *batchQueue
	if s.ferret {
		// One writer: a bigger batch, and one commit for every
		// collection, are the only gains.
		if s.group == nil {
			s.group = &batchQueue{parallel: 1, run: s.insertGroup}
		}
		q = s.group
	} else {
		c := s.Collection(collection)
		q = &batchQueue{parallel: 4, run: func(ops []*batchOp) { insertMany(c, ops) }} // MongoDB runs inserts side by side
	}
	b := &Batch{coll: s.Collection(collection), q: q}
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
	op := &batchOp{ctx: ctx, coll: b.coll.Name(), done: make(chan struct{}), docs: make([]bson.Raw, len(docs))}
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
	q := b.q
	q.mu.Lock()
	q.queue = append(q.queue, op)
	if q.running < q.parallel {
		q.running++
		go q.flush()
	}
	q.mu.Unlock()
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
func (q *batchQueue) flush() {
	for {
		ops := q.take()
		if ops == nil {
			return
		}
		q.run(ops)
	}
}

// take removes the next batch from the queue: the oldest operations, up to
// the limits. Operations whose caller has gone are dropped unsent. nil when
// the queue is empty (and this flusher stops).
//
// Two inserts of one _id may share a batch (a storm of identical requests):
// the engine decides each document alone, as it would across two commands,
// and the first wins; on the embedded engine the others are reported in the
// same transaction (PATCHES.md, patch 3), so a storm's losers cost the
// writer a statement each, not a command each.
func (q *batchQueue) take() []*batchOp {
	q.mu.Lock()
	defer q.mu.Unlock()
	var (
		ops         []*batchOp
		rest        []*batchOp
		docs, bytes int
	)
	for _, op := range q.queue {
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
	q.queue = rest
	if len(ops) == 0 {
		q.running--
		return nil
	}
	return ops
}

// batchContext is the context of one batch's command: it lives as long as
// its most patient caller, and with a caller that has no deadline, the
// client's operation timeout. Not any one caller's context: a caller that
// gives up must not cut the others' inserts short.
func batchContext(ops []*batchOp) (context.Context, context.CancelFunc) {
	var deadline time.Time
	for _, op := range ops {
		d, ok := op.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	return context.WithDeadline(context.Background(), deadline)
}

// insertMany sends one batch into c as one unordered insert command.
func insertMany(c *mongo.Collection, ops []*batchOp) {
	var docs []any
	for _, op := range ops {
		for _, d := range op.docs {
			docs = append(docs, d)
		}
	}
	ctx, cancel := batchContext(ops)
	defer cancel()
	_, err := c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	perDoc := make([]error, len(docs))
	var bwe mongo.BulkWriteException
	switch {
	case err == nil:
	case errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0:
		for _, we := range bwe.WriteErrors {
			if i := we.Index; i >= 0 && i < len(perDoc) {
				perDoc[i] = oneWriteError(we.WriteError)
			}
		}
	default:
		fail(ops, err)
		return
	}
	deliver(ops, perDoc)
}

// insertGroup sends one batch, into whichever collections, as one
// msgapiInsert command (the embedded engine's; PATCHES.md, patch 6): the
// documents of each collection in the order their callers queued them, the
// collections in the order they first appear. Its answer is an unordered
// insert's, {n, writeErrors: [{index, code, errmsg}]}, indexes counting
// the documents of all collections in that order.
func (s *Store) insertGroup(ops []*batchOp) {
	type part struct {
		name string
		docs bson.A
	}
	var parts []*part
	byName := map[string]int{}
	at := make([][2]int, len(ops)) // each op's part and its first document's position in it
	for i, op := range ops {
		k, ok := byName[op.coll]
		if !ok {
			k = len(parts)
			byName[op.coll] = k
			parts = append(parts, &part{name: op.coll})
		}
		at[i] = [2]int{k, len(parts[k].docs)}
		for _, d := range op.docs {
			parts[k].docs = append(parts[k].docs, d)
		}
	}
	inserts := make(bson.A, len(parts))
	offset := make([]int, len(parts)) // where each part's documents start in the command
	total := 0
	for k, p := range parts {
		inserts[k] = bson.D{{Key: "collection", Value: p.name}, {Key: "documents", Value: p.docs}}
		offset[k] = total
		total += len(p.docs)
	}

	ctx, cancel := batchContext(ops)
	defer cancel()
	// The driver reports an answer with writeErrors as a WriteException.
	err := s.DB.RunCommand(ctx, bson.D{{Key: GroupInsertCommand, Value: 1}, {Key: "inserts", Value: inserts}}).Err()
	inCommand := make([]error, total)
	var wex mongo.WriteException
	switch {
	case err == nil:
	case errors.As(err, &wex) && wex.WriteConcernError == nil && len(wex.WriteErrors) > 0:
		for _, we := range wex.WriteErrors {
			if we.Index >= 0 && we.Index < total {
				inCommand[we.Index] = oneWriteError(we)
			}
		}
	default:
		fail(ops, err)
		return
	}
	perDoc := make([]error, 0, total)
	for i, op := range ops {
		from := offset[at[i][0]] + at[i][1]
		perDoc = append(perDoc, inCommand[from:from+len(op.docs)]...)
	}
	deliver(ops, perDoc)
}

// GroupInsertCommand is the embedded engine's insert into several
// collections at once (insertGroup).
const GroupInsertCommand = "msgapiInsert"

// oneWriteError is a document's write error as InsertOne reports it.
func oneWriteError(we mongo.WriteError) error {
	we.Index = 0
	return mongo.WriteException{WriteErrors: []mongo.WriteError{we}}
}

// deliver hands each operation its documents' outcomes, perDoc in the
// order of ops.
func deliver(ops []*batchOp, perDoc []error) {
	i := 0
	for _, op := range ops {
		op.errs = perDoc[i : i+len(op.docs)]
		i += len(op.docs)
		close(op.done)
	}
}

// fail answers every operation with the command's failure.
func fail(ops []*batchOp, err error) {
	if len(ops) > 1 {
		err = &UncertainError{Err: err}
	}
	for _, op := range ops {
		op.err = err
		close(op.done)
	}
}

// UncertainError is the failure of a batch of several callers' inserts as
// a whole. Any of its documents may have been inserted (a timeout, a lost
// reply, MongoDB's unordered insert that fails part-way). So it is never
// reported as the server's answer to one document (a
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
