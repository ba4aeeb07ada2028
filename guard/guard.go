// Package guard is the atomic duplicate guard: the same text to the same
// recipient in the same workspace within the dedup window is sent once.
//
// For each request Acquire decides one of four things: the request may send
// (Won); an identical request already wrote its message, which is returned
// instead (Duplicate); an identical request holds the lock but has not written
// its message within the wait (Pending); or the store failed, and the request
// proceeds without protection because the guard never breaks the send path
// (Unguarded).
//
// Every race is decided by an insert against a unique _id, because that is the
// one write that is atomic both on MongoDB and on the embedded engine, whose
// conditional updates and deletes read, filter and write in separate steps.
// Winning the lock is an insert into message_dedup_locks. Every later change
// of owner (an expired lock, a winner that died before writing its message, a
// message the provider rejected, a release, an operator's delete) is first
// claimed by inserting a takeover record whose _id hashes (lock id, message id
// of the holder being replaced). A message id names one holder only, so each
// generation of a lock is claimed at most once, and only its claimant
// rewrites or deletes the lock document, by _id (and gives back a lock that
// turns out to name a holder it never saw).
//
// A loser whose winner has not written its message yet waits for it without
// hammering the store: in the winner's own process it blocks until Written
// or Release, elsewhere it polls by _id with backoff.
package guard

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/msgapi/msgapi/store"
)

const (
	locksName     = "message_dedup_locks"
	takeoversName = "message_dedup_takeovers"
)

// Collections are the guard's collections, for store.Ensure. Both expire:
// a lock after the window, a takeover record after the window too, by which
// time the generation it ended is long gone.
var Collections = []store.Collection{
	{Name: locksName, ExpiresField: "expiresAt"},
	{Name: takeoversName, ExpiresField: "expiresAt"},
}

// Defaults of Options.
const (
	DefaultWindow = 15 * time.Minute
	DefaultWait   = 3 * time.Second
	DefaultLease  = 30 * time.Second
)

// StatusFailed is the sibling status of a definitive provider rejection: the
// message reached no one, so its lock may be taken over by a retry.
const StatusFailed = "failed"

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
}

// Sibling is the message that an earlier identical request wrote.
type Sibling struct {
	ID        string
	Status    string // sending|sent|failed|unknown
	CreatedAt time.Time
	Doc       any
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
	return hashOf("msgapi/dedup-lock/v1", k.WorkspaceID, k.Phone, k.Email, k.Body)
}

// takeoverID names the claim on one generation of a lock: the holder whose
// message id is from.
func takeoverID(lockID, from string) string {
	return hashOf("msgapi/dedup-takeover/v1", lockID, from)
}

func hashOf(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		frame(h, f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func frame(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	_, _ = io.WriteString(h, s)
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
}

// Guard decides duplicates. It is safe for concurrent use.
type Guard struct {
	o         Options
	locks     *mongo.Collection
	takeovers *mongo.Collection

	mu      sync.Mutex
	flights map[string]*flight // messages this process won and has not written yet

	waiting atomic.Int64 // requests blocked in wait (tests use it as a barrier)
}

// New returns a guard. Store and Sibling are required.
func New(o Options) *Guard {
	if o.Store == nil || o.Sibling == nil {
		panic("guard.New: Options.Store and Options.Sibling are required")
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
	locks, takeovers := o.Store.Collection(locksName), o.Store.Collection(takeoversName)
	if o.Store.ReplicaSet {
		// A lock must survive a failover, or a retry after it sends again.
		majority := options.Collection().SetWriteConcern(writeconcern.Majority())
		locks, takeovers = locks.Clone(majority), takeovers.Clone(majority)
	}
	return &Guard{o: o, locks: locks, takeovers: takeovers, flights: map[string]*flight{}}
}

func (g *Guard) now() time.Time { return g.o.Now() }

// Written wakes same-process waiters: the message messageID is now in the
// store. Call it right after the message insert.
func (g *Guard) Written(messageID string) { g.finish(messageID, true) }

// Reasons of events.LockTakenOver, and of the takeover records.
const (
	reasonExpired       = "expired"
	reasonCrashed       = "crashed"
	reasonFailedSibling = "failed_sibling"
	reasonReleased      = "released"
	reasonDeleted       = "deleted"
)
