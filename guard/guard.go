package guard

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

const (
	locksName     = "message_dedup_locks"
	takeoversName = "message_dedup_takeovers"
)

// Collections are the guard's collections, for store.Ensure. Both expire:
// a lock after the window, a takeover record after the window too, by which
// time the generation it ended is long gone. Locks are owned: only Reap
// deletes them, through claims (New registers it with the store).
var Collections = []store.Collection{
	{Name: locksName, ExpiresField: "expiresAt", Owned: true, ReapFields: []string{"workspaceId", "messageId"}},
	{Name: takeoversName, ExpiresField: "expiresAt"},
}

// Defaults of Options.
const (
	DefaultWindow = 15 * time.Minute
	DefaultWait   = 3 * time.Second
	DefaultLease  = 30 * time.Second
)

// Options configure New.
type Options struct {
	Store *store.Store
	// Window is the dedup window; default 15m.
	Window time.Duration
	// Wait is how long a loser waits for the sibling to be written; default 3s.
	Wait time.Duration
	// Lease: a lock whose message is not written after Lease is free; default 30s.
	Lease time.Duration
	// Now is the wall clock for lock times and ages; default time.Now.
	// Waiting itself always runs on the real clock.
	Now func() time.Time
	// Sibling reads the message a lock names, by id, in ONE primary-key read.
	// found=false when it has not been written yet. Doc is whatever the caller
	// wants back (its full message) and is passed through untouched.
	Sibling func(ctx context.Context, messageID string) (s Sibling, found bool, err error)
	// RefuseOnStoreError: when the lock cannot be written (a store error
	// other than a duplicate key), Acquire returns a *msgapi.Error with
	// CodeUnavailable and a Retry-After instead of Unguarded. The default
	// (false) sends without protection: the guard never breaks the send path.
	RefuseOnStoreError bool
	// Fence inserts a tombstone under each message id (one round trip), so
	// that the message can never be written afterwards; won[i] is false when
	// the id already held a document. The guard fences a holder before it
	// declares it gone (see the package comment).
	Fence func(ctx context.Context, reason string, messageIDs ...string) (won []bool, err error)
}

// Sibling is the message that an earlier identical request wrote (or the
// tombstone that fenced it).
type Sibling struct {
	ID        string
	Status    string // the message's status, for events
	CreatedAt time.Time
	// Tombstone: the id was fenced; no message was or will be sent under it.
	Tombstone bool
	// Refused: a definitive refusal (the provider or carrier said no); it
	// reached no one, so a retry of the same text may send.
	Refused bool
	Doc     any
}

// Key is what makes two messages the same. Phone is E.164 and Email lower
// case, already normalised; one of them may be "". The body is never
// normalised: one character of difference is a different message.
type Key struct {
	WorkspaceID, Phone, Email, Body string
}

// LockID is the hex SHA-256 of the key with every field length-prefixed, so
// moving characters from one field to the next always changes it.
func LockID(k Key) string {
	return msgapi.HashFields("msgapi/dedup-lock/v1", k.WorkspaceID, k.Phone, k.Email, k.Body)
}

// LockDoc names the lock document of k, which Acquire reads first: what a
// send prefetches (store.Prefetch).
func LockDoc(k Key) store.Doc { return store.Doc{Collection: locksName, ID: LockID(k)} }

// takeoverID names the claim on one generation of a lock: the holder whose
// message id is from.
func takeoverID(lockID, from string) string {
	return msgapi.HashFields("msgapi/dedup-takeover/v1", lockID, from)
}

// Outcome is what Acquire decided.
type Outcome int

// The outcomes.
const (
	Won       Outcome = iota + 1 // send, with the caller's message id
	Duplicate                    // do not send; return the sibling
	Pending                      // do not send; an identical request is still in flight
	Unguarded                    // the store failed; send without protection
)

func (o Outcome) String() string {
	switch o {
	case Won:
		return "won"
	case Duplicate:
		return "duplicate"
	case Pending:
		return "pending"
	case Unguarded:
		return "unguarded"
	}
	return "outcome(0)"
}

// Decision is Acquire's answer.
type Decision struct {
	Outcome    Outcome
	LockID     string
	MessageID  string        // Won/Unguarded: the caller's messageID; Duplicate/Pending: the sibling's id
	Sibling    *Sibling      // Duplicate: the sibling as read (Doc included)
	SiblingAge time.Duration // Duplicate/Pending: now - sibling (or lock) creation
	Mode       string        // Duplicate: events.ModeLockResolved or events.ModeLockResolvedPolled
	RetryAfter time.Duration // Pending: until the holder's lease ends (at least 1s)
}

// Guard decides duplicates. It is safe for concurrent use.
type Guard struct {
	o         Options
	locks     *mongo.Collection
	lockBatch *store.Batch // the lock inserts of concurrent requests, one command (store.Batch)
	takeovers *mongo.Collection

	mu      sync.Mutex
	flights map[string]*flight // messages this process won and has not written yet

	waiting atomic.Int64 // requests blocked in wait (tests use it as a barrier)

	seenMu sync.Mutex
	seen   map[string]time.Time // (lock, holder) → when this process first saw it (heldFor)
}

// New returns a guard. Store and Sibling are required.
func New(o Options) *Guard {
	if o.Store == nil || o.Sibling == nil || o.Fence == nil {
		panic("guard.New: Options.Store, Options.Sibling and Options.Fence are required")
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	// On a replica set every collection writes with majority and reads the
	// primary (store.Open), so a lock survives a failover.
	locks, takeovers := o.Store.Collection(locksName), o.Store.Collection(takeoversName)
	g := &Guard{o: o, locks: locks, lockBatch: o.Store.Batch(locksName), takeovers: takeovers, flights: map[string]*flight{}, seen: map[string]time.Time{}}
	o.Store.ReapWith(locksName, g.Reap)
	return g
}

func (g *Guard) now() time.Time { return g.o.Now() }

// seenMax bounds the memory of heldFor. Forgetting a holder is always safe:
// it only makes this process watch it for a lease again.
const seenMax = 10_000

// heldFor is how long this process has seen holder hold lockID's current
// generation, on its own clock: the age by which "the holder (or remover)
// died" is judged. A lock's createdAt was written by another process, whose
// clock may be seconds off; judged by it, a process whose clock runs ahead
// declares a live holder or remover dead at once. Judged by what this
// process has watched, skew decides nothing: a holder is gone only after
// some process has seen it unchanged for a whole lease. The first sight
// counts from zero, so a crashed holder is taken over a lease after the
// first request that meets it, not a lease after it was written.
func (g *Guard) heldFor(lockID, holder string) time.Duration {
	now := g.now()
	k := lockID + "\x00" + holder
	g.seenMu.Lock()
	defer g.seenMu.Unlock()
	if t, ok := g.seen[k]; ok {
		return max(now.Sub(t), 0)
	}
	if len(g.seen) >= seenMax {
		for k, t := range g.seen {
			if now.Sub(t) > 2*(g.o.Lease+g.o.Wait) {
				delete(g.seen, k)
			}
		}
		if len(g.seen) >= seenMax {
			clear(g.seen)
		}
	}
	g.seen[k] = now
	return 0
}

// Written wakes same-process waiters: the message messageID is now in the
// store. Call it right after the message insert.
func (g *Guard) Written(messageID string) { g.finish(messageID, true) }

// Fenced wakes same-process waiters of a winner whose message insert found
// a tombstone: it never sends, and it does not Release (whoever fenced it
// owns the takeover). The waiters judge the lock again; a fenced holder is
// taken over at once.
func (g *Guard) Fenced(messageID string) { g.finish(messageID, false) }

// Reasons of events.LockTakenOver, and of the takeover records.
const (
	reasonExpired       = "expired"
	reasonCrashed       = "crashed"
	reasonFailedSibling = "failed_sibling"
	reasonReleased      = "released"
	reasonDeleted       = "deleted"
	reasonFenced        = "fenced" // its message id holds a tombstone
	reasonReaped        = "reaped"
)
