package messages

// The message index: what lets a workspace list its messages newest first at
// a cost that does not grow with the collection, on both engines.
//
// The embedded engine answers exactly one filter from an index, {_id: <string>};
// any other filter, range or sort reads the whole collection (FerretDB
// v1.24.2 pushes down _id equality and nothing else, and sorts only by
// $natural on capped collections: internal/backends/sqlite/collection.go,
// internal/handler/msg_find.go). So every listing — a "feed": the workspace,
// one lead, one conversation — is a dense sequence of small documents whose
// _ids can be enumerated:
//
//	mi_<feed>_<n>  {messageId, createdAt, direction, channel, leadId, conversationId}
//
// with n = 1, 2, 3, … in the order messages were recorded. A slot is claimed
// by inserting it (a unique _id: exactly one writer wins it), so no two
// messages share a slot on any engine; a writer takes slot n only once slot
// n-1 is known to be taken, so taken slots form the prefix 1..head. A page
// reads slots head, head-1, … by _id: one indexed lookup each, whatever the
// collection holds. A cursor is a slot number: new messages take slots above
// the head, so paging down from a cursor never skips or repeats one.
//
// The head. Each process remembers per feed the highest slot it knows is
// taken and the next slot it may hand out (concurrent sends in one process
// never race each other for a slot). A first page probes the slot above the
// remembered head (one read) and gallops upward when other processes wrote
// meanwhile. A process that has never seen a feed starts from the feed's
// hint document (mh_<feed>, written by readers that had to gallop far), so a
// cold start costs a few reads, not a walk over the feed.
//
// Writes are the three entries, and for an inbound message a marker
// mx_<messageId> before them. The marker makes indexing idempotent: Index
// writes them in one ordered insert command, marker first, so that of two
// writers of one message's entries (an inbound webhook and its
// redelivery, which derive the same message id) only one writes entries;
// IndexOnce reads the marker first. A send's message id is the request's
// own (allocated by it, or by its Idempotency-Key claim), so nobody else
// indexes it and it needs no marker: its entries go unordered, beside its
// message insert, in one insert command with those of the requests
// indexing at the same time (InsertIndexed, store.Batch).
// An entry whose message then lost its insert to a tombstone names the
// tombstone, which readers skip. Slots this process reserved but could
// not use are filled with empty entries, so the prefix stays dense; readers
// skip them, and skip entries whose message is missing or a tombstone.

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

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

// IndexCollection holds the feed entries, the per-message markers and the
// per-feed head hints. Every document in it is read and written by _id.
const IndexCollection = "message_index"

// Feed kinds.
const (
	feedWorkspace    = "ws"
	feedLead         = "lead"
	feedConversation = "conv"
)

// indexEntry is one slot of one feed. An empty MessageID is a filler: a
// slot reserved by a writer that could not use it.
type indexEntry struct {
	ID             string    `bson:"_id"`
	MessageID      string    `bson:"messageId,omitempty"`
	WorkspaceID    string    `bson:"workspaceId,omitempty"`
	LeadID         string    `bson:"leadId,omitempty"`
	ConversationID string    `bson:"conversationId,omitempty"`
	Direction      string    `bson:"direction,omitempty"`
	Channel        string    `bson:"channel,omitempty"`
	CreatedAt      time.Time `bson:"createdAt"`
}

// indexMarker says "this message is indexed".
type indexMarker struct {
	ID        string    `bson:"_id"`
	MessageID string    `bson:"messageId"`
	CreatedAt time.Time `bson:"createdAt"`
}

// headHint is a lower bound on a feed's head, for processes that have not
// seen the feed yet.
type headHint struct {
	ID   string `bson:"_id"`
	Head int64  `bson:"head"`
}

// feedKey names one feed of one workspace; the workspace is always part of
// it, so another workspace's lead or conversation id names an empty feed.
func feedKey(workspaceID, kind, id string) string {
	return msgapi.HashID("feed", workspaceID, kind, id)
}

func slotID(feed string, n int64) string { return "mi_" + feed + "_" + strconv.FormatInt(n, 10) }
func hintID(feed string) string          { return "mh_" + feed }
func markerID(messageID string) string   { return "mx_" + messageID }
func (e indexEntry) filler() bool        { return e.MessageID == "" }
func entryFor(m *Message, id string) indexEntry {
	return indexEntry{
		ID: id, MessageID: m.ID, WorkspaceID: m.WorkspaceID, LeadID: m.LeadID, ConversationID: m.ConversationID,
		Direction: m.Direction, Channel: m.Channel, CreatedAt: m.CreatedAt,
	}
}

// heads is the process's memory of feed heads. It is bounded: past
// maxFeeds remembered feeds one is forgotten (the next use of it pays a cold
// start, nothing more).
type heads struct {
	mu    sync.Mutex
	feeds map[string]*feedHead
	max   int
}

type feedHead struct {
	top  int64 // highest slot known taken
	next int64 // next slot this process may hand out (> top once known)
}

const maxFeeds = 100_000

func newHeads() *heads { return &heads{feeds: map[string]*feedHead{}, max: maxFeeds} }

// get returns the remembered state of feed, or false.
func (h *heads) get(feed string) (feedHead, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.feeds[feed]
	if !ok {
		return feedHead{}, false
	}
	return *f, true
}

// saw records that slot n of feed is taken.
func (h *heads) saw(feed string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.entry(feed)
	f.top = max(f.top, n)
	f.next = max(f.next, n+1)
}

// reserve hands out the next slot of a known feed.
func (h *heads) reserve(feed string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.entry(feed)
	if f.next <= f.top {
		f.next = f.top + 1
	}
	n := f.next
	f.next++
	return n
}

func (h *heads) entry(feed string) *feedHead {
	f, ok := h.feeds[feed]
	if !ok {
		if len(h.feeds) >= h.max {
			for k := range h.feeds { // forget one
				delete(h.feeds, k)
				break
			}
		}
		f = &feedHead{}
		h.feeds[feed] = f
	}
	return f
}

// Index records m in its workspace's, lead's and conversation's feeds. Call
// it only after m's insert succeeded. fresh says the lead was created by
// this request, so its feeds are new and need no head lookup.
//
// It costs one insert command when this process knows the feeds' heads;
// more when another process wrote to a feed meanwhile (one more insert per
// lost slot) or the feed is new to this process (a hint read and a few
// probes).
func (s *Store) Index(ctx context.Context, m *Message, fresh bool) error {
	return s.indexOrdered(ctx, m, fresh)
}

// indexOwn is Index for a message whose id only this request uses (a send's
// own message id): its documents go unordered, batched with concurrent
// requests' (store.Batch), and nothing else writes them. It writes no
// marker: the marker only stops a second indexer of the same message (an
// inbound redelivery, IndexOnce), and a send has none.
func (s *Store) indexOwn(ctx context.Context, m *Message, fresh bool) error {
	feeds, slots, err := s.reserve(ctx, m, fresh)
	if err != nil {
		return err
	}
	pending := []int{0, 1, 2} // feeds whose entry is not written yet
	var docs []any
	lost := [3]int{}
	for attempt := 0; ; attempt++ {
		if attempt >= maxSlotAttempts {
			s.fill(ctx, feeds, slots, pending)
			return msgapi.Unavailable(fmt.Errorf("index message %s: no free slot after %d attempts", m.ID, attempt))
		}
		for _, i := range pending {
			docs = append(docs, entryFor(m, slotID(feeds[i], slots[i])))
		}
		errs, err := s.idxBatch.Insert(ctx, docs...)
		if err != nil {
			// The insert may or may not have landed, and the slots stay
			// ours: fill what we reserved so readers are not stopped by a
			// gap (a filler that loses to our own landed entry is harmless).
			s.fill(ctx, feeds, slots, pending)
			return msgapi.Unavailable(fmt.Errorf("index message %s: %w", m.ID, err))
		}
		var retry []int
		for j, i := range pending {
			switch e := errs[j]; {
			case e == nil:
				s.heads.saw(feeds[i], slots[i])
			case store.IsDuplicateKey(e):
				// Another process took this slot: it is taken, so the next
				// one is ours to try. After a few losses, look for the head.
				s.heads.saw(feeds[i], slots[i])
				if lost[i]++; lost[i] >= 3 {
					if _, err := s.findHead(ctx, feeds[i]); err != nil {
						s.fill(ctx, feeds, slots, append(retry, pending[j:]...))
						return err
					}
				}
				slots[i] = s.heads.reserve(feeds[i])
				retry = append(retry, i)
			default:
				s.fill(ctx, feeds, slots, append(retry, pending[j:]...))
				return msgapi.Unavailable(fmt.Errorf("index message %s: %w", m.ID, e))
			}
		}
		if len(retry) == 0 {
			return nil
		}
		pending, docs = retry, nil
	}
}

// IndexOnce indexes a written message that may have been indexed already
// (an inbound redelivery that found its message written by an earlier,
// interrupted delivery): it looks for the message's marker first (one
// read), and indexes the stored message only when there is none.
func (s *Store) IndexOnce(ctx context.Context, messageID string) error {
	err := s.idx.FindOne(ctx, store.ByID(markerID(messageID))).Err()
	switch {
	case err == nil:
		return nil
	case !store.IsNotFound(err):
		return msgapi.Unavailable(fmt.Errorf("read index marker of %s: %w", messageID, err))
	}
	m, found, err := s.Get(ctx, messageID)
	if err != nil || !found || m.Status == StatusTombstone {
		return err
	}
	return s.indexOrdered(ctx, &m, false)
}

// maxSlotAttempts bounds one message's tries for a free entry in its feeds.
// Each lost try means another writer took that entry, so a burst of N
// concurrent sends to one feed (from several processes) can cost a writer
// up to N-1 tries; 12 failed under 24 concurrent writers on a loaded
// machine.
const maxSlotAttempts = 64

// reserve names m's three feeds and reserves a slot in each, finding the
// head of a feed this process has not seen (the lead's and conversation's
// feeds of a lead created by this request are new: fresh).
func (s *Store) reserve(ctx context.Context, m *Message, fresh bool) (feeds [3]string, slots [3]int64, err error) {
	feeds = [3]string{
		feedKey(m.WorkspaceID, feedWorkspace, m.WorkspaceID),
		feedKey(m.WorkspaceID, feedLead, m.LeadID),
		feedKey(m.WorkspaceID, feedConversation, m.ConversationID),
	}
	for i, f := range feeds {
		if _, known := s.heads.get(f); !known && !(fresh && i > 0) {
			if _, err := s.findHead(ctx, f); err != nil {
				return feeds, slots, err
			}
		}
		slots[i] = s.heads.reserve(f)
	}
	return feeds, slots, nil
}

// indexOrdered indexes m with its marker first, in one ordered insert
// command: if the marker exists (another caller indexed m), nothing else is
// written.
func (s *Store) indexOrdered(ctx context.Context, m *Message, fresh bool) error {
	feeds, slots, err := s.reserve(ctx, m, fresh)
	if err != nil {
		return err
	}
	pending := []int{0, 1, 2} // feeds whose entry is not written yet
	withMarker := true
	lost := [3]int{}
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt >= maxSlotAttempts {
			s.fill(ctx, feeds, slots, pending)
			return msgapi.Unavailable(fmt.Errorf("index message %s: no free slot after %d attempts", m.ID, attempt))
		}
		var docs []any
		if withMarker {
			docs = append(docs, indexMarker{ID: markerID(m.ID), MessageID: m.ID, CreatedAt: m.CreatedAt})
		}
		for _, i := range pending {
			docs = append(docs, entryFor(m, slotID(feeds[i], slots[i])))
		}
		_, err := s.idx.InsertMany(ctx, docs, options.InsertMany().SetOrdered(true))
		failed, dup := firstWriteError(err)
		if err != nil && failed < 0 {
			// Not a per-document error (the store is down, a timeout): the
			// insert may or may not have landed, and the slots stay ours.
			// Fill what we reserved so readers are not stopped by a gap;
			// a filler that loses to our own landed entry is harmless.
			s.fill(ctx, feeds, slots, pending)
			return msgapi.Unavailable(fmt.Errorf("index message %s: %w", m.ID, err))
		}
		if err == nil {
			failed = len(docs)
		}
		// Ordered: every document before failed is written.
		written := failed
		if withMarker {
			if written == 0 { // the marker exists: the message is indexed
				if !dup {
					return msgapi.Unavailable(fmt.Errorf("index message %s: %w", m.ID, err))
				}
				s.fill(ctx, feeds, slots, pending)
				return nil
			}
			withMarker = false
			written--
		}
		for _, i := range pending[:written] {
			s.heads.saw(feeds[i], slots[i])
		}
		pending = pending[written:]
		if len(pending) == 0 {
			return nil
		}
		if !dup {
			s.fill(ctx, feeds, slots, pending)
			return msgapi.Unavailable(fmt.Errorf("index message %s: %w", m.ID, err))
		}
		// Another process took this slot: it is taken, so the next one is
		// ours to try. After a few losses, look for the head instead.
		i := pending[0]
		s.heads.saw(feeds[i], slots[i])
		if lost[i]++; lost[i] >= 3 {
			if _, err := s.findHead(ctx, feeds[i]); err != nil {
				s.fill(ctx, feeds, slots, pending)
				return err
			}
		}
		slots[i] = s.heads.reserve(feeds[i])
	}
	return nil
}

// fill writes fillers into slots this process reserved but did not use, so
// the taken slots stay a prefix. Best effort: a filler that finds its slot
// taken (by our own insert that landed after all) is what we wanted anyway.
func (s *Store) fill(ctx context.Context, feeds [3]string, slots [3]int64, which []int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	docs := make([]any, 0, len(which))
	for _, i := range which {
		docs = append(docs, indexEntry{ID: slotID(feeds[i], slots[i]), CreatedAt: s.now()})
	}
	_, _ = s.idx.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	for _, i := range which {
		s.heads.saw(feeds[i], slots[i])
	}
}

// firstWriteError returns the index of the first document an insert
// refused and whether that was a duplicate key; -1 when err is not a
// per-document error.
func firstWriteError(err error) (int, bool) {
	var bwe mongo.BulkWriteException
	if err == nil || !errors.As(err, &bwe) || len(bwe.WriteErrors) == 0 {
		return -1, false
	}
	first := bwe.WriteErrors[0]
	for _, we := range bwe.WriteErrors[1:] {
		if we.Index < first.Index {
			first = we
		}
	}
	return first.Index, first.Code == 11000
}

// findHead finds the highest taken slot of feed, starting from what this
// process remembers or, for a feed it has never seen, from the feed's hint.
// It probes the slot above (one read when nothing new was written), then
// gallops up and bisects. It remembers the result and, after a long gallop,
// raises the hint so other processes start closer.
func (s *Store) findHead(ctx context.Context, feed string) (int64, error) {
	from, known := s.heads.get(feed)
	lo := from.top
	if !known {
		var h headHint
		err := s.idx.FindOne(ctx, store.ByID(hintID(feed))).Decode(&h)
		if err != nil && !store.IsNotFound(err) {
			return 0, msgapi.Unavailable(fmt.Errorf("read feed hint: %w", err))
		}
		lo = h.Head
	}
	start := lo
	// Gallop: lo is taken (or 0); find a free hi above it.
	step := int64(1)
	hi := lo + 1
	for {
		taken, err := s.slotTaken(ctx, feed, hi)
		if err != nil {
			return 0, err
		}
		if !taken {
			break
		}
		lo, step = hi, step*2
		hi = lo + step
	}
	// Bisect (lo taken, hi free).
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		taken, err := s.slotTaken(ctx, feed, mid)
		if err != nil {
			return 0, err
		}
		if taken {
			lo = mid
		} else {
			hi = mid
		}
	}
	s.heads.saw(feed, lo)
	if lo-start >= hintEvery {
		s.raiseHint(ctx, feed, lo)
	}
	return lo, nil
}

// hintEvery: a reader that had to gallop this far raises the hint.
const hintEvery = 64

func (s *Store) raiseHint(ctx context.Context, feed string, head int64) {
	// $max keeps the hint from going down; on the embedded engine the
	// update is not atomic, so a race may lower it: it is only a hint.
	_, _ = s.idx.UpdateOne(ctx, store.ByID(hintID(feed)),
		bson.D{{Key: "$max", Value: bson.D{{Key: "head", Value: head}}}}, options.UpdateOne().SetUpsert(true))
}

func (s *Store) slotTaken(ctx context.Context, feed string, n int64) (bool, error) {
	err := s.idx.FindOne(ctx, store.ByID(slotID(feed, n)), options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	switch {
	case err == nil:
		return true, nil
	case store.IsNotFound(err):
		return false, nil
	}
	return false, msgapi.Unavailable(fmt.Errorf("read feed slot: %w", err))
}
