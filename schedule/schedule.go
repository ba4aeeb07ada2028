// Package schedule keeps the records of scheduled sends: when each one is
// due, who decided its fate, and which messages a caller's cancellation key
// names. The scheduler that acts on them is send/scheduler.go.
//
// What decides, on MongoDB and the embedded engine alike (every document is
// read and written by _id, the one lookup the embedded engine indexes):
//
//   - The decision. A scheduled message goes out, is canceled or is
//     suppressed by whoever first inserts its decision document
//     (sd_<messageId>): the scheduler's "send" and a caller's "cancel" race
//     on that one unique insert, so exactly one wins, in any number of
//     processes, whatever their clocks say. The loser reads the winner's.
//   - Due times. Each minute is a bucket; bucket B holds the dense slots
//     ss_B_1, ss_B_2, … (one per message due in that minute), taken by
//     inserting them, and only the slot after a taken one is ever tried,
//     so a walker reads a bucket by _id from 1 until a slot is missing.
//     What the scheduler reads per second is the buckets of the last few
//     minutes and the next one: it does not grow with the number of
//     messages due later.
//   - Cancellation keys. The messages given one cancellationKey are the
//     dense slots sk_<hash>_1, sk_<hash>_2, … of that key (hash of the
//     workspace and the key), with a head hint (skh_<hash>) written at
//     every append, so a cancel reads them all however old the first ones
//     are.
package schedule

import (
	"context"
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

// Collection holds every document of this package.
const Collection = "scheduled_sends"

// Collections used by this package. Every document expires a week after
// the send it is about was due (Retention); nothing reads it by then.
var Collections = []store.Collection{{Name: Collection, ExpiresField: "expiresAt"}}

// Retention is how long a record outlives its message's due time.
const Retention = 7 * 24 * time.Hour

// MaxAhead is the furthest ahead a send may be scheduled (Twilio's limit).
const MaxAhead = 35 * 24 * time.Hour

// Decision kinds.
const (
	Send     = "send"     // the scheduler sends it (once: this insert is its commit point)
	Cancel   = "cancel"   // a caller canceled it
	Suppress = "suppress" // the recipient opted out before it was due
	Refuse   = "refuse"   // the workspace was disabled before it was due
)

// Slot is one message due in one minute.
type Slot struct {
	ID          string    `bson:"_id"`
	MessageID   string    `bson:"messageId"`
	WorkspaceID string    `bson:"workspaceId"`
	SendAt      time.Time `bson:"sendAt"`
	ExpiresAt   time.Time `bson:"expiresAt"`
}

// Decision is the fate of one scheduled message.
type Decision struct {
	ID        string    `bson:"_id"`
	MessageID string    `bson:"messageId"`
	Kind      string    `bson:"kind"`
	By        string    `bson:"by"` // the process or request that decided
	At        time.Time `bson:"at"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

type head struct {
	ID  string `bson:"_id"`
	Seq int64  `bson:"seq"`
}

// Store reads and writes the schedule. Safe for concurrent use.
type Store struct {
	c *mongo.Collection

	mu   sync.Mutex
	next map[string]int64 // list prefix → the next slot worth trying
}

// New returns a Store on s.
func New(s *store.Store) *Store {
	return &Store{c: s.Collection(Collection), next: map[string]int64{}}
}

// Bucket is the minute a time falls in.
func Bucket(t time.Time) int64 { return t.Unix() / 60 }

// BucketStart is when bucket b begins.
func BucketStart(b int64) time.Time { return time.Unix(b*60, 0).UTC() }

func bucketPrefix(b int64) string { return "ss_" + strconv.FormatInt(b, 10) + "_" }
func keyPrefix(ws, key string) string {
	return "sk_" + msgapi.HashID("cancellation-key", ws, key) + "_"
}
func decisionID(messageID string) string {
	return "sd_" + messageID
}

// Add records that message id of workspace ws is due at sendAt: one insert
// (more only when other processes took the same slot meanwhile).
func (s *Store) Add(ctx context.Context, ws, id string, sendAt time.Time) error {
	b := Bucket(sendAt)
	p := bucketPrefix(b)
	_, err := s.append(ctx, p, false, func(slotID string) any {
		return Slot{ID: slotID, MessageID: id, WorkspaceID: ws, SendAt: sendAt, ExpiresAt: sendAt.Add(Retention)}
	})
	if err != nil {
		return msgapi.Unavailable(fmt.Errorf("schedule message %s: %w", id, err))
	}
	return nil
}

// Slots reads bucket b's slots from slot n on, until the first missing one,
// at most max of them. It returns them and the next slot number to read.
func (s *Store) Slots(ctx context.Context, b, n int64, max int) ([]Slot, int64, error) {
	p := bucketPrefix(b)
	var out []Slot
	for len(out) < max {
		var sl Slot
		err := s.c.FindOne(ctx, store.ByID(p+strconv.FormatInt(n, 10))).Decode(&sl)
		if store.IsNotFound(err) {
			break
		}
		if err != nil {
			return out, n, msgapi.Unavailable(fmt.Errorf("read the schedule: %w", err))
		}
		out = append(out, sl)
		n++
	}
	return out, n, nil
}

// Decide inserts kind as the decision of message id. won says whether this
// call decided; when it did not, d is the decision that stands.
func (s *Store) Decide(ctx context.Context, id, kind, by string, sendAt time.Time) (d Decision, won bool, err error) {
	now := time.Now().UTC()
	d = Decision{ID: decisionID(id), MessageID: id, Kind: kind, By: by, At: now, ExpiresAt: later(sendAt, now).Add(Retention)}
	_, err = s.c.InsertOne(ctx, d)
	if err == nil {
		return d, true, nil
	}
	if !store.IsDuplicateKey(err) {
		return Decision{}, false, msgapi.Unavailable(fmt.Errorf("decide message %s: %w", id, err))
	}
	got, found, err := s.Decided(ctx, id)
	if err != nil {
		return Decision{}, false, err
	}
	if !found {
		return Decision{}, false, msgapi.Unavailable(fmt.Errorf("decide message %s: the decision that won is gone", id))
	}
	return got, false, nil
}

// Decided reads message id's decision, if any.
func (s *Store) Decided(ctx context.Context, id string) (Decision, bool, error) {
	var d Decision
	err := s.c.FindOne(ctx, store.ByID(decisionID(id))).Decode(&d)
	switch {
	case store.IsNotFound(err):
		return Decision{}, false, nil
	case err != nil:
		return Decision{}, false, msgapi.Unavailable(fmt.Errorf("read the decision of %s: %w", id, err))
	}
	return d, true, nil
}

// keyEntry is one message of a cancellation key.
type keyEntry struct {
	ID        string    `bson:"_id"`
	MessageID string    `bson:"messageId"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

// AddKey records that message id, due at sendAt, carries cancellation key
// key of workspace ws (two writes: the entry and the head hint).
func (s *Store) AddKey(ctx context.Context, ws, key, id string, sendAt time.Time) error {
	// Every entry of a key lives as long as the newest one could: a later
	// entry may be due 35 days after an earlier one was written.
	exp := time.Now().UTC().Add(MaxAhead + Retention)
	_, err := s.append(ctx, keyPrefix(ws, key), true, func(slotID string) any {
		return keyEntry{ID: slotID, MessageID: id, ExpiresAt: later(exp, sendAt.Add(Retention))}
	})
	if err != nil {
		return msgapi.Unavailable(fmt.Errorf("record the cancellation key of %s: %w", id, err))
	}
	return nil
}

// KeyMessages lists the message ids recorded under cancellation key key of
// workspace ws, oldest first (at most max).
func (s *Store) KeyMessages(ctx context.Context, ws, key string, max int) ([]string, error) {
	p := keyPrefix(ws, key)
	h, err := s.hint(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []string
	for n := int64(1); len(out) < max; n++ {
		var e keyEntry
		err := s.c.FindOne(ctx, store.ByID(p+strconv.FormatInt(n, 10))).Decode(&e)
		if store.IsNotFound(err) {
			if n <= h {
				continue // expired and reaped: the entries after it still count
			}
			break
		}
		if err != nil {
			return nil, msgapi.Unavailable(fmt.Errorf("read cancellation key: %w", err))
		}
		out = append(out, e.MessageID)
	}
	return out, nil
}

// append inserts the document doc(slotID) at the first free slot of the
// dense list prefix. With everyHint the head hint is written at every
// append, else at every 16th.
func (s *Store) append(ctx context.Context, prefix string, everyHint bool, doc func(slotID string) any) (int64, error) {
	s.mu.Lock()
	n, ok := s.next[prefix]
	s.mu.Unlock()
	if !ok {
		h, err := s.hint(ctx, prefix)
		if err != nil {
			return 0, err
		}
		n = h + 1
	}
	for range 100000 {
		_, err := s.c.InsertOne(ctx, doc(prefix+strconv.FormatInt(n, 10)))
		if err == nil {
			s.mu.Lock()
			if len(s.next) >= 10000 {
				clear(s.next)
			}
			s.next[prefix] = n + 1
			s.mu.Unlock()
			if everyHint || n%16 == 0 {
				// A hint only: a lost or late write costs readers a few reads.
				_, _ = s.c.UpdateOne(ctx, store.ByID(prefix+"head"), bson.D{{Key: "$max", Value: bson.D{{Key: "seq", Value: n}}}},
					options.UpdateOne().SetUpsert(true))
			}
			return n, nil
		}
		if !store.IsDuplicateKey(err) {
			return 0, err
		}
		n++
	}
	return 0, fmt.Errorf("no free slot in %s", prefix)
}

// hint is the head hint of a list (0 when none).
func (s *Store) hint(ctx context.Context, prefix string) (int64, error) {
	var h head
	err := s.c.FindOne(ctx, store.ByID(prefix+"head")).Decode(&h)
	if err != nil && !store.IsNotFound(err) {
		return 0, msgapi.Unavailable(fmt.Errorf("read the schedule: %w", err))
	}
	return h.Seq, nil
}

const lowWaterID = "low_water"

// LowWater is the oldest bucket a scheduler had not finished when it last
// said so: where a scheduler that starts walks from (ok=false: none yet).
func (s *Store) LowWater(ctx context.Context) (int64, bool, error) {
	var h head
	err := s.c.FindOne(ctx, store.ByID(lowWaterID)).Decode(&h)
	switch {
	case store.IsNotFound(err):
		return 0, false, nil
	case err != nil:
		return 0, false, msgapi.Unavailable(fmt.Errorf("read the schedule's low water: %w", err))
	}
	return h.Seq, true, nil
}

// SetLowWater records bucket b as the low water (a hint for restarts: the
// last writer wins; every scheduler also walks the last minutes anyway).
func (s *Store) SetLowWater(ctx context.Context, b int64) error {
	_, err := s.c.UpdateOne(ctx, store.ByID(lowWaterID), bson.D{{Key: "$set", Value: bson.D{{Key: "seq", Value: b}}}},
		options.UpdateOne().SetUpsert(true))
	return err
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Seed writes slots the fast way, in unordered batches of 1,000 per insert
// command, numbering each bucket's slots from 1 in the order given: for
// benchmarks and tests that need a store holding many future messages. The
// buckets must hold no slots yet.
func (s *Store) Seed(ctx context.Context, slots []Slot) error {
	next := map[int64]int64{}
	docs := make([]any, 0, 1000)
	flush := func() error {
		if len(docs) == 0 {
			return nil
		}
		_, err := s.c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
		docs = docs[:0]
		return err
	}
	for _, sl := range slots {
		b := Bucket(sl.SendAt)
		next[b]++
		sl.ID = bucketPrefix(b) + strconv.FormatInt(next[b], 10)
		sl.ExpiresAt = sl.SendAt.Add(Retention)
		docs = append(docs, sl)
		if len(docs) == cap(docs) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
