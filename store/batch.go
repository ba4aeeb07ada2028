package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
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
// collection, msgapiWrite (third_party/ferretdb/PATCHES.md, patches 6 and
// 8), whose documents commit in one SQLite transaction: a send's lock, message,
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
//
// On the embedded engine a conditional replace by _id (ReplaceOne) rides in
// the same command: the Idempotency-Key layer's completion of a keyed send,
// which was otherwise a write command of its own for each such request.
// The command runs alone among write commands (relay.go), and each replace
// reads and writes within its transaction (patch 8), so its condition and
// its write are still one atomic step, and its answer, matched or not, is
// its own. On MongoDB a replace goes at once, as a replaceOne.

// Batch limits: one command carries at most this many documents and bytes
// (MongoDB's limit is 100,000 documents and 48 MB per message; a
// msgapiWrite command is one BSON document, at most 16 MB).
const (
	batchMaxDocs  = 256
	batchMaxBytes = 8 << 20
)

// Batch writes into one collection through its queue. Safe for concurrent
// use; obtain it with Store.Batch.
type Batch struct {
	coll  *mongo.Collection
	q     *batchQueue
	group bool // the embedded engine's queue: replaces ride in it too
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

// batchOp is one caller's documents to insert, or, when filter is set, its
// replace of the document filter matches by docs[0].
type batchOp struct {
	ctx     context.Context
	coll    string
	colls   []string // per document, for an operation of several collections (InsertTogether); nil: all in coll
	docs    []bson.Raw
	filter  bson.Raw
	size    int
	errs    []error // per document, when err is nil
	matched bool    // a replace: whether its filter matched (when errs[0] and err are nil)
	err     error   // the command failed as a whole
	done    chan struct{}
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
			s.group = &batchQueue{parallel: 1, run: s.writeGroup}
		}
		q = s.group
	} else {
		c := s.Collection(collection)
		q = &batchQueue{parallel: 4, run: func(ops []*batchOp) { insertMany(c, ops) }} // MongoDB runs inserts side by side
	}
	b := &Batch{coll: s.Collection(collection), q: q, group: s.ferret}
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
	if err := b.q.wait(ctx, op); err != nil {
		return nil, err
	}
	return op.errs, nil
}

// ReplaceOne replaces the document that filter matches with doc, as the
// driver's ReplaceOne without upsert does, and reports whether filter
// matched one. filter must name the document's _id (the embedded engine
// refuses any other: a replace is one indexed lookup, never a scan); doc
// keeps that _id. On the embedded engine it rides in the next group
// command with the queued inserts; on MongoDB it goes at once. As with
// the driver, an error other than the server's answer to this replace
// (a timeout, a lost connection) leaves it unknown whether it landed.
func (b *Batch) ReplaceOne(ctx context.Context, filter bson.D, doc any) (matched bool, err error) {
	if !b.group {
		res, err := b.coll.ReplaceOne(ctx, filter, doc)
		if err != nil {
			return false, err
		}
		return res.MatchedCount == 1, nil
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	f, err := bson.Marshal(filter)
	if err != nil {
		return false, fmt.Errorf("encode filter for %s: %w", b.coll.Name(), err)
	}
	raw, err := bson.Marshal(doc)
	if err != nil {
		return false, fmt.Errorf("encode document for %s: %w", b.coll.Name(), err)
	}
	op := &batchOp{ctx: ctx, coll: b.coll.Name(), done: make(chan struct{}), docs: []bson.Raw{raw}, filter: f, size: len(f) + len(raw)}
	if err := b.q.wait(ctx, op); err != nil {
		return false, err
	}
	if op.errs[0] != nil {
		return false, op.errs[0]
	}
	return op.matched, nil
}

// Together is one document of an InsertTogether: Doc, inserted into
// Batch's collection.
type Together struct {
	Batch *Batch
	Doc   any
}

// InsertTogether inserts ds so that a document never lands without the ones
// before it, and returns each one's outcome as Insert does (nil, or an
// error for which IsDuplicateKey is true). Each document is still decided
// alone against its unique _id.
//
// On the embedded engine they go in one group command, whose documents
// commit in one SQLite transaction (PATCHES.md, patch 6): all of them, or
// none when the command fails. That is one round trip where inserting them
// one after the other was one each, and a step fewer in the request's wait.
// (A document the engine refuses as malformed is reported alone there, as
// a duplicate is, while the others land: pass well-formed documents, as
// every one msgapi builds is.)
// On MongoDB, which has no such command without a transaction, they go one
// after the other, each only once the ones before it landed (inserted, or
// there already); a failure stops the rest, whose errors are then nil and
// err says why.
//
// err is set when a command failed as a whole: any of ds may then have
// landed, as with a single insert that timed out.
func (s *Store) InsertTogether(ctx context.Context, ds ...Together) (errs []error, err error) {
	if len(ds) == 0 {
		return nil, nil
	}
	if !ds[0].Batch.group {
		errs = make([]error, len(ds))
		for i, d := range ds {
			e, err := d.Batch.Insert(ctx, d.Doc)
			if err != nil {
				return errs, err
			}
			errs[i] = e[0]
			if e[0] != nil && !IsDuplicateKey(e[0]) {
				return errs, fmt.Errorf("insert into %s: %w", d.Batch.coll.Name(), e[0])
			}
		}
		return errs, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	op := &batchOp{ctx: ctx, done: make(chan struct{}), docs: make([]bson.Raw, len(ds)), colls: make([]string, len(ds))}
	for i, d := range ds {
		if d.Batch.q != ds[0].Batch.q {
			return nil, fmt.Errorf("insert together into %s and %s: the batches belong to different stores", ds[0].Batch.coll.Name(), d.Batch.coll.Name())
		}
		raw, err := bson.Marshal(d.Doc)
		if err != nil {
			return nil, fmt.Errorf("encode document for %s: %w", d.Batch.coll.Name(), err)
		}
		op.docs[i], op.colls[i] = raw, d.Batch.coll.Name()
		op.size += len(raw)
	}
	op.coll = op.colls[0]
	if err := ds[0].Batch.q.wait(ctx, op); err != nil {
		return nil, err
	}
	return op.errs, nil
}

// wait queues op, starts a flusher when fewer than parallel run, and waits
// for op's answer: nil when the command answered for op (op.errs, and for a
// replace op.matched, hold it), else why not.
func (q *batchQueue) wait(ctx context.Context, op *batchOp) error {
	q.mu.Lock()
	q.queue = append(q.queue, op)
	if q.running < q.parallel {
		q.running++
		go q.flush()
	}
	q.mu.Unlock()
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		// The command may already carry the documents: as with a single
		// write whose caller gave up, they may land.
		return ctx.Err()
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

// writeGroup sends one batch, into whichever collections, as one
// msgapiWrite command (the embedded engine's; PATCHES.md, patches 6 and 8):
// the documents to insert of each collection in the order their callers
// queued them, the collections in the order they first appear, then the
// replaces in the order they were queued. Its answer is an unordered
// insert's, {n, writeErrors: [{index, code, errmsg}]}, indexes counting the
// inserted documents of all collections in that order and then the
// replaces, with matched: [0 or 1 per replace].
func (s *Store) writeGroup(ops []*batchOp) {
	var (
		parts    []*groupPart
		replaces []*batchOp
	)
	byName := map[string]int{}
	part := func(name string) int {
		k, ok := byName[name]
		if !ok {
			k = len(parts)
			byName[name] = k
			parts = append(parts, &groupPart{name: name})
		}
		return k
	}
	at := make([][2]int, len(ops)) // an insert's part and its first document's position in it; a replace's position among the replaces
	var spread [][][2]int          // for an operation of several collections (InsertTogether): each document's part and position
	for i, op := range ops {
		switch {
		case op.filter != nil:
			at[i] = [2]int{-1, len(replaces)}
			replaces = append(replaces, op)
		case op.colls != nil:
			if spread == nil {
				spread = make([][][2]int, len(ops))
			}
			for j, d := range op.docs {
				k := part(op.colls[j])
				spread[i] = append(spread[i], [2]int{k, len(parts[k].docs)})
				parts[k].docs = append(parts[k].docs, d)
			}
		default:
			k := part(op.coll)
			at[i] = [2]int{k, len(parts[k].docs)}
			parts[k].docs = append(parts[k].docs, op.docs...)
		}
	}
	offset := make([]int, len(parts)) // where each part's documents start in the command
	total := 0
	for k, p := range parts {
		offset[k] = total
		total += len(p.docs)
	}
	cmd := groupCommand(parts, replaces)

	ctx, cancel := batchContext(ops)
	defer cancel()
	// The driver reports an answer with writeErrors as a WriteException,
	// which keeps the whole answer (Raw) for the replaces' matched.
	reply, err := s.DB.RunCommand(ctx, cmd).Raw()
	inCommand := make([]error, total+len(replaces))
	var wex mongo.WriteException
	switch {
	case err == nil:
	case errors.As(err, &wex) && wex.WriteConcernError == nil && len(wex.WriteErrors) > 0:
		for _, we := range wex.WriteErrors {
			if we.Index >= 0 && we.Index < len(inCommand) {
				inCommand[we.Index] = oneWriteError(we)
			}
		}
		reply = wex.Raw
	default:
		fail(ops, err)
		return
	}
	matched, err := matchedOf(reply, len(replaces))
	if err != nil {
		fail(ops, err)
		return
	}
	perDoc := make([]error, 0, len(inCommand))
	for i, op := range ops {
		switch {
		case op.filter != nil:
			j := at[i][1]
			perDoc = append(perDoc, inCommand[total+j])
			op.matched = matched[j]
		case op.colls != nil:
			for _, p := range spread[i] {
				perDoc = append(perDoc, inCommand[offset[p[0]]+p[1]])
			}
		default:
			from := offset[at[i][0]] + at[i][1]
			perDoc = append(perDoc, inCommand[from:from+len(op.docs)]...)
		}
	}
	deliver(ops, perDoc)
}

// groupPart is one collection's documents in a GroupWriteCommand.
type groupPart struct {
	name string
	docs []bson.Raw
}

// groupCommand is the GroupWriteCommand that carries parts and replaces:
// {msgapiWrite: 1, inserts: [{collection, documents: [...]}, ...],
// replaces: [{collection, filter, replacement}, ...]} (no replaces field
// when there are none). It is built directly into one buffer sized in
// advance, which the driver copies once into its own: encoding the same
// command from a bson.D, the way it was built before, went through the
// codecs' reflection for every element and copied every document into a
// buffer grown piece by piece (BENCHMARKS.md: a keyed send's CPU 10 %
// lower). The bytes are the same (groupcommand_test.go compares them).
func groupCommand(parts []*groupPart, replaces []*batchOp) bson.Raw {
	size := 64
	for _, p := range parts {
		size += 64 + len(p.name)
		for i, d := range p.docs {
			size += 2 + len(strconv.Itoa(i)) + len(d)
		}
	}
	for i, op := range replaces {
		size += 64 + len(strconv.Itoa(i)) + len(op.coll) + len(op.filter) + len(op.docs[0])
	}

	dst := make([]byte, 0, size)
	idx, dst := bsoncore.AppendDocumentStart(dst)
	dst = bsoncore.AppendInt32Element(dst, GroupWriteCommand, 1)
	var arr int32
	arr, dst = bsoncore.AppendArrayElementStart(dst, "inserts")
	for k, p := range parts {
		var part, docs int32
		part, dst = bsoncore.AppendDocumentElementStart(dst, strconv.Itoa(k))
		dst = bsoncore.AppendStringElement(dst, "collection", p.name)
		docs, dst = bsoncore.AppendArrayElementStart(dst, "documents")
		for i, d := range p.docs {
			dst = bsoncore.AppendDocumentElement(dst, strconv.Itoa(i), d)
		}
		dst, _ = bsoncore.AppendArrayEnd(dst, docs)
		dst, _ = bsoncore.AppendDocumentEnd(dst, part)
	}
	dst, _ = bsoncore.AppendArrayEnd(dst, arr)
	if len(replaces) > 0 {
		arr, dst = bsoncore.AppendArrayElementStart(dst, "replaces")
		for i, op := range replaces {
			var r int32
			r, dst = bsoncore.AppendDocumentElementStart(dst, strconv.Itoa(i))
			dst = bsoncore.AppendStringElement(dst, "collection", op.coll)
			dst = bsoncore.AppendDocumentElement(dst, "filter", op.filter)
			dst = bsoncore.AppendDocumentElement(dst, "replacement", op.docs[0])
			dst, _ = bsoncore.AppendDocumentEnd(dst, r)
		}
		dst, _ = bsoncore.AppendArrayEnd(dst, arr)
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// matchedOf reads a msgapiWrite answer's matched: one 0 or 1 per replace.
func matchedOf(reply bson.Raw, n int) ([]bool, error) {
	if n == 0 {
		return nil, nil
	}
	arr, ok := reply.Lookup("matched").ArrayOK()
	if !ok {
		return nil, fmt.Errorf("%s answer without matched: %s", GroupWriteCommand, reply)
	}
	vals, err := arr.Values()
	if err != nil || len(vals) != n {
		return nil, fmt.Errorf("%s answer: matched has %d values, want %d (%v)", GroupWriteCommand, len(vals), n, err)
	}
	out := make([]bool, n)
	for i, v := range vals {
		m, ok := v.AsInt64OK()
		if !ok {
			return nil, fmt.Errorf("%s answer: matched.%d is %s", GroupWriteCommand, i, v.Type)
		}
		out[i] = m == 1
	}
	return out, nil
}

// GroupWriteCommand is the embedded engine's write into several
// collections at once (writeGroup).
const GroupWriteCommand = "msgapiWrite"

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
