package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Prefetch: the documents a request will read by _id, in one round trip.
//
// A send reads three documents whose _ids follow from the request alone —
// the recipient's suppression (consent), the dedup lock (guard) and the lead
// (messages) — and each was a find of its own: a round trip, and on the
// embedded engine the engine's whole per-command work, three times. Prefetch
// reads them together and returns a context that carries what it read; the
// reads of those packages go through FindByID, which answers from it.
//
// A prefetched document stands in for one read only, the first FindByID of
// it, and only within PrefetchMaxAge of the prefetch: a later read of the
// same document (a guard that contends reads its lock again), a read after
// the request waited, and a document that was not prefetched all go to the
// store. So a prefetched answer is never older than a read the request
// could have made itself a moment before: no decision that an insert makes
// (the lock, a lead's creation) moves to a read, and none is made on a
// stale one. A prefetch that fails changes nothing: each read then goes to
// the store and meets the failure itself.
//
// On the embedded engine the documents come back in one msgapiGet command
// (third_party/ferretdb/PATCHES.md, patch 12), whose lookups are each one
// indexed read, as separate finds are. On MongoDB the finds go side by side:
// one round trip of waiting, the same work for the server.

// PrefetchMaxAge is how long after a prefetch its documents may answer a
// read: a request's reads follow it within milliseconds, unless it waited
// (for a duplicate's original, for the writer under a burst), and then it
// reads afresh.
const PrefetchMaxAge = 250 * time.Millisecond

// PrefetchMax is the most documents one Prefetch reads (the engine's limit
// for one msgapiGet).
const PrefetchMax = 16

// GetCommand is the embedded engine's command that reads documents by _id
// from several collections (patch 12).
const GetCommand = "msgapiGet"

// Doc names one document: its collection and its _id.
type Doc struct {
	Collection string
	ID         string
}

type prefetchKey struct{}

// prefetched is what one Prefetch read, each document answering once.
type prefetched struct {
	db  string
	at  time.Time
	now func() time.Time

	mu   sync.Mutex
	docs map[Doc]bson.Raw // nil: the document does not exist
}

// take returns the prefetched answer for d and forgets it: found reports
// whether the document exists, ok whether the prefetch answers at all.
func (p *prefetched) take(db string, d Doc) (raw bson.Raw, found, ok bool) {
	if db != p.db || p.now().Sub(p.at) > PrefetchMaxAge {
		return nil, false, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	raw, ok = p.docs[d]
	if ok {
		delete(p.docs, d)
	}
	return raw, raw != nil, ok
}

// Prefetch reads docs (at most PrefetchMax, in s.DB) in one round trip and
// returns ctx carrying them for FindByID. On an error it returns ctx as it
// was: the reads then go to the store one by one.
func (s *Store) Prefetch(ctx context.Context, docs ...Doc) context.Context {
	if len(docs) == 0 || len(docs) > PrefetchMax {
		return ctx
	}
	at := time.Now()
	raws, err := s.getEach(ctx, docs)
	if err != nil {
		return ctx
	}
	p := &prefetched{db: s.DB.Name(), at: at, now: time.Now, docs: make(map[Doc]bson.Raw, len(docs))}
	for i, d := range docs {
		p.docs[d] = raws[i]
	}
	return context.WithValue(ctx, prefetchKey{}, p)
}

// getEach reads each of docs by _id: one msgapiGet on the embedded engine,
// finds side by side on MongoDB. A document that does not exist is nil.
func (s *Store) getEach(ctx context.Context, docs []Doc) ([]bson.Raw, error) {
	if s.ferret {
		return s.getEachCommand(ctx, docs)
	}
	return s.getEachFinds(ctx, docs)
}

// getEachFinds is getEach on MongoDB: one find per document, side by side.
func (s *Store) getEachFinds(ctx context.Context, docs []Doc) ([]bson.Raw, error) {
	out := make([]bson.Raw, len(docs))
	errs := make([]error, len(docs))
	var wg sync.WaitGroup
	for i, d := range docs {
		wg.Go(func() {
			raw, err := s.Collection(d.Collection).FindOne(ctx, ByID(d.ID)).Raw()
			switch {
			case IsNotFound(err):
			case err != nil:
				errs[i] = err
			default:
				out[i] = raw
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// getEachCommand is getEach on the embedded engine: one msgapiGet.
func (s *Store) getEachCommand(ctx context.Context, docs []Doc) ([]bson.Raw, error) {
	out := make([]bson.Raw, len(docs))
	gets := make(bson.A, len(docs))
	for i, d := range docs {
		gets[i] = bson.D{{Key: "collection", Value: d.Collection}, {Key: "id", Value: d.ID}}
	}
	var reply struct {
		Documents []bson.RawValue `bson:"documents"`
	}
	raw, err := s.DB.RunCommand(ctx, bson.D{{Key: GetCommand, Value: 1}, {Key: "gets", Value: gets}}).Raw()
	if err != nil {
		return nil, err
	}
	if err := bson.Unmarshal(raw, &reply); err != nil {
		return nil, err
	}
	if len(reply.Documents) != len(docs) {
		return nil, fmt.Errorf("%s answered %d documents for %d gets", GetCommand, len(reply.Documents), len(docs))
	}
	for i, v := range reply.Documents {
		switch v.Type {
		case bson.TypeNull:
		case bson.TypeEmbeddedDocument:
			out[i] = v.Document()
		default:
			return nil, fmt.Errorf("%s answered a %s for get %d", GetCommand, v.Type, i)
		}
	}
	return out, nil
}

// FindByID is c.FindOne(ctx, ByID(id)), answered from ctx's prefetch when
// it holds the document (see Prefetch), once.
func FindByID(ctx context.Context, c *mongo.Collection, id string) Result {
	if p, _ := ctx.Value(prefetchKey{}).(*prefetched); p != nil {
		if raw, found, ok := p.take(c.Database().Name(), Doc{Collection: c.Name(), ID: id}); ok {
			if !found {
				return Result{err: mongo.ErrNoDocuments}
			}
			return Result{raw: raw}
		}
	}
	raw, err := c.FindOne(ctx, ByID(id)).Raw()
	return Result{raw: raw, err: err}
}

// Result is one document read by FindByID, or the read's error
// (mongo.ErrNoDocuments when there is none: IsNotFound).
type Result struct {
	raw bson.Raw
	err error
}

// Decode decodes the document into v, as mongo.SingleResult.Decode does,
// with bson.Unmarshal: the driver's Decode makes a 4 KB read buffer for
// every document, and the send path decodes three per request.
func (r Result) Decode(v any) error {
	if r.err != nil {
		return r.err
	}
	return bson.Unmarshal(r.raw, v)
}
