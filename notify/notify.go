// Package notify tells a workspace what happened: it stores the workspace's
// webhook endpoints and its events, and delivers each event to each
// subscribed endpoint as a signed Standard Webhooks POST.
//
// What it decides, and how, with unique inserts only (the one atomic
// operation on MongoDB and the embedded engine alike, no transactions):
//
//   - An event is decided once. Its _id is derived from the fact (the
//     subject, e.g. the message id, and the event type), and it is inserted
//     into outbox_pending no later than the fact itself (a status) is
//     written: by Record before it, or, for a message's status, in the same
//     command as the status on the embedded engine (one transaction) and
//     just before it on MongoDB (Prepared; store.InsertTogether). A repeat
//     collides on the _id.
//   - The dispatcher moves a pending event into outbox_events (insert; a
//     duplicate means it was moved before, so a late repeat of a fact never
//     becomes a second event), appends it to the workspace's event log
//     (listing), creates one delivery per subscribed endpoint (deterministic
//     _id) and only then deletes the pending document. A crash anywhere
//     leaves the pending document, and the next pass redoes each step, each
//     of which finds what the last one wrote.
//   - Each attempt is claimed by inserting attempt(delivery, n) before the
//     HTTP call; only the inserter sends, so no two processes ever send one
//     attempt. Its outcome is inserted as result(delivery, n). A claim with
//     no result after its lease (the claimer died) lets the next pass claim
//     n+1: delivery is at least once, never the same attempt twice.
//   - The webhook-id is the event id: identical across retries and manual
//     redeliveries, so receivers de-duplicate on it.
//
// Everything a slow or dead endpoint could grow is bounded: a fixed number
// of workers, a per-attempt timeout, batches of at most BatchSize per poll,
// and response bodies cut to 1 KiB. The send path only inserts one document.
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/egress"
	"github.com/msgapi/msgapi/secrets"
	"github.com/msgapi/msgapi/store"
)

// Event types a workspace can subscribe to. Receivers branch on them:
// never rename one.
const (
	TypeMessageSent             = "message.sent"
	TypeMessageFailed           = "message.failed"
	TypeMessageUnknown          = "message.unknown"
	TypeMessageDelivered        = "message.delivered"
	TypeMessageUndelivered      = "message.undelivered"
	TypeMessageReceived         = "message.received"
	TypeMessageDuplicateBlocked = "message.duplicate_blocked"
	TypeEndpointDisabled        = "webhook_endpoint.disabled"
	// The recipient was on the suppression list: the message was written
	// as suppressed and never sent.
	TypeMessageSuppressed = "message.suppressed"
	// An address was put on / taken off the workspace's suppression list.
	TypeSuppressionCreated = "suppression.created"
	TypeSuppressionDeleted = "suppression.deleted"
	// A message was accepted with a sendAt (scheduled), or canceled before
	// its time.
	TypeMessageScheduled = "message.scheduled"
	TypeMessageCanceled  = "message.canceled"
)

// Types lists every event type, in the order the documentation shows them.
var Types = []string{
	TypeMessageSent, TypeMessageFailed, TypeMessageUnknown, TypeMessageDelivered,
	TypeMessageUndelivered, TypeMessageReceived, TypeMessageDuplicateBlocked, TypeEndpointDisabled,
	TypeMessageSuppressed, TypeSuppressionCreated, TypeSuppressionDeleted, TypeMessageScheduled, TypeMessageCanceled,
}

func knownType(t string) bool {
	for _, k := range Types {
		if k == t {
			return true
		}
	}
	return false
}

const (
	collPending    = "outbox_pending"
	collEvents     = "outbox_events"
	collLog        = "outbox_log"
	collDeliveries = "outbox_deliveries"
	collAttempts   = "outbox_attempts"
	collResults    = "outbox_results"
	collEndpoints  = "webhook_endpoints"
	collSlots      = "webhook_endpoint_slots"

	// Retention of events, their log and their attempts (Stripe keeps 30 days).
	Retention = 30 * 24 * time.Hour
)

// Collections used by this package. outbox_pending and outbox_deliveries
// hold only the backlog (documents leave them when handled), so the
// dispatcher's scans of them cost what the backlog costs, not what the
// history costs.
var Collections = []store.Collection{
	{Name: collPending},
	{Name: collEvents, ExpiresField: "expiresAt"},
	{Name: collLog, ExpiresField: "expiresAt"},
	{Name: collDeliveries},
	{Name: collAttempts, ExpiresField: "expiresAt"},
	{Name: collResults, ExpiresField: "expiresAt"},
	{Name: collEndpoints},
	{Name: collSlots},
}

// Fact is something that happened that a workspace is told about.
type Fact struct {
	WorkspaceID string
	Type        string
	// SubjectID names what the fact is about (a message id, an endpoint
	// id). With Type it derives the event's _id: one event per (subject,
	// type), whoever records it and however often.
	SubjectID string
	// Data is the event's data object (JSON).
	Data any
	// At is when it happened; zero means now.
	At time.Time
}

// EventID is the _id of the event of a fact, and its webhook-id.
func EventID(workspaceID, typ, subjectID string) string {
	return "evt_" + msgapi.HashID("event", workspaceID, typ, subjectID)
}

// event is one event, pending or archived.
type event struct {
	ID          string    `bson:"_id"`
	WorkspaceID string    `bson:"workspaceId"`
	Type        string    `bson:"type"`
	SubjectID   string    `bson:"subjectId"`
	CreatedAt   time.Time `bson:"createdAt"`
	// Payload is the exact JSON body delivered to endpoints.
	Payload string `bson:"payload"`
	// Owner, on a pending event, names the process that recorded it: its
	// dispatcher archives it (Outbox.mine).
	Owner string `bson:"owner,omitempty"`
	// Scheduled: its log entry and deliveries exist (archive only).
	Scheduled   bool      `bson:"scheduled"`
	EndpointIDs []string  `bson:"endpointIds,omitempty"`
	ExpiresAt   time.Time `bson:"expiresAt,omitempty"`
}

// payload is the JSON body of an event.
type payload struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	CreatedAt   time.Time `json:"createdAt"`
	WorkspaceID string    `json:"workspaceId"`
	Data        any       `json:"data"`
}

// Metrics is what the outbox reports (package metrics implements it).
type Metrics interface {
	WebhookAttempt(outcome string, d time.Duration)
	WebhookBacklog(pendingEvents, activeDeliveries int64)
}

// Options are the Outbox's dependencies and tuning. Zero values take the
// defaults.
type Options struct {
	Store *store.Store
	Log   zerolog.Logger
	// Schedule is the delay before each attempt, counted from the previous
	// one (the first is usually 0); its length is the number of attempts.
	// Default: Svix's 0, 5s, 5m, 30m, 2h, 5h, 10h, 10h (about 27.6 h).
	Schedule []time.Duration
	// Jitter is the ± fraction applied to each delay (default 0.2).
	Jitter float64
	// SlowRetry is the least delay after a timeout or a 429 (default 60s).
	SlowRetry time.Duration
	// MaxRetryAfter clamps a Retry-After answer (default 1h).
	MaxRetryAfter time.Duration
	// Timeout bounds one attempt, connection to last byte (default 10s).
	// A claim whose result is missing after twice this (its claimer died)
	// is abandoned and the next attempt claimed.
	Timeout time.Duration
	// Workers is how many attempts run at once (default 8).
	Workers int
	// WorkspaceShare is how many of them one workspace may hold, queued or
	// running (default Workers/2, at least 1): a workspace whose endpoints
	// time out spends its own share, never another workspace's.
	WorkspaceShare int
	// EndpointShare is how many attempts one endpoint may have queued or
	// running at once (default 2).
	EndpointShare int
	// PollInterval is how often the store is scanned for due work besides
	// the in-process wake-ups (default 1s).
	PollInterval time.Duration
	// DisableAfter: an endpoint whose retries ran out and that has had no
	// success for this long is disabled (default 5 days).
	DisableAfter time.Duration
	// AllowHTTP allows http:// endpoint URLs on any host (development and
	// tests); otherwise only https (and http to loopback when Egress lets
	// loopback through).
	AllowHTTP bool
	// Egress is the dialer of every delivery: it refuses loopback, private,
	// link-local and metadata addresses unless allowlisted. Default: refuse
	// them all.
	Egress *egress.Dialer
	// Keyring seals endpoint secrets at rest (AES-256-GCM under
	// MSGAPI_SECRET_KEY, bound to workspace and endpoint); nil stores them
	// in clear.
	Keyring *secrets.Keyring
	Metrics Metrics
	// Now is the clock (tests).
	Now func() time.Time
}

// DefaultSchedule is Svix's retry schedule.
var DefaultSchedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Outbox records events and delivers them.
type Outbox struct {
	opts                               Options
	log                                zerolog.Logger
	pending, events, evlog, deliveries *mongo.Collection
	pendingBatch                       *store.Batch // Record's inserts, batched with concurrent ones
	eventsBatch, logBatch              *store.Batch // the archive's and the log's inserts (archiveQuiet)
	store                              *store.Store
	attempts, results, endpoints       *mongo.Collection
	slots                              *mongo.Collection
	client                             *http.Client
	now                                func() time.Time
	wake                               chan struct{}
	epCache                            *endpointCache
	seqMu                              sync.Mutex
	nextSeq                            map[string]int64 // workspace → next free log slot (a hint)
	inflightMu                         sync.Mutex
	inflight                           map[string]bool // deliveries queued or attempted in this process
	byWorkspace, byEndpoint            map[string]int  // how many of them each workspace and endpoint holds
	skipped                            bool            // a due delivery waited for its workspace's or endpoint's share
	countedAt                          time.Time       // the last backlog count (dispatcher goroutine only)
	owner                              string          // this process, on the events it records (Outbox.mine)
	otherGrace                         time.Duration   // otherGrace; tests shorten it
	seenMu                             sync.Mutex
	seenOthers                         map[string]time.Time // other processes' pending events: when first seen
}

// New returns an Outbox; Run starts its dispatcher.
func New(o Options) *Outbox {
	if len(o.Schedule) == 0 {
		o.Schedule = DefaultSchedule
	}
	if o.Jitter == 0 {
		o.Jitter = 0.2
	}
	if o.SlowRetry == 0 {
		o.SlowRetry = time.Minute
	}
	if o.MaxRetryAfter == 0 {
		o.MaxRetryAfter = time.Hour
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.WorkspaceShare <= 0 {
		o.WorkspaceShare = max(1, o.Workers/2)
	}
	if o.EndpointShare <= 0 {
		o.EndpointShare = 2
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Second
	}
	if o.DisableAfter == 0 {
		o.DisableAfter = 5 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Egress == nil {
		o.Egress = egress.New(egress.Options{})
	}
	client := o.Egress.Client(0) // each attempt's context bounds it
	s := o.Store
	return &Outbox{
		opts: o, log: o.Log,
		pending: s.Collection(collPending), pendingBatch: s.Batch(collPending), events: s.Collection(collEvents), evlog: s.Collection(collLog),
		eventsBatch: s.Batch(collEvents), logBatch: s.Batch(collLog), store: s,
		deliveries: s.Collection(collDeliveries), attempts: s.Collection(collAttempts), results: s.Collection(collResults),
		endpoints: s.Collection(collEndpoints), slots: s.Collection(collSlots),
		client:   client,
		now:      func() time.Time { return o.Now().UTC().Truncate(time.Millisecond) },
		wake:     make(chan struct{}, 1),
		epCache:  newEndpointCache(5 * time.Second),
		nextSeq:  map[string]int64{},
		inflight: map[string]bool{}, byWorkspace: map[string]int{}, byEndpoint: map[string]int{},
		owner: msgapi.NewID("proc"), otherGrace: otherGrace, seenOthers: map[string]time.Time{},
	}
}

// Record writes the event of a fact, once: the first write decides it and
// every repeat (a retried outcome, a redelivered inbound webhook) is a
// no-op. It reports whether this call created the event. One round trip.
func (o *Outbox) Record(ctx context.Context, f Fact) (bool, error) {
	p, err := o.Prepare(f)
	if err != nil {
		return false, err
	}
	err = o.pendingBatch.InsertOne(ctx, p.doc)
	if err != nil && !store.IsDuplicateKey(err) {
		return false, msgapi.Unavailable(fmt.Errorf("record event %s: %w", p.doc.ID, err))
	}
	return p.Inserted(err), nil
}

// Prepared is the event of a fact, encoded and ready to insert: by Record
// alone, or in one command with the write that the fact is about
// (store.InsertTogether; messages.Store.RecordOutcome).
type Prepared struct {
	o   *Outbox
	doc event
}

// Prepare encodes the event of f.
func (o *Outbox) Prepare(f Fact) (Prepared, error) {
	if !knownType(f.Type) {
		return Prepared{}, fmt.Errorf("notify: unknown event type %q", f.Type)
	}
	at := f.At
	if at.IsZero() {
		at = o.now()
	}
	at = at.UTC().Truncate(time.Millisecond)
	id := EventID(f.WorkspaceID, f.Type, f.SubjectID)
	body, err := json.Marshal(payload{ID: id, Type: f.Type, CreatedAt: at, WorkspaceID: f.WorkspaceID, Data: f.Data})
	if err != nil {
		return Prepared{}, fmt.Errorf("encode event %s: %w", id, err)
	}
	return Prepared{o: o, doc: event{ID: id, WorkspaceID: f.WorkspaceID, Type: f.Type, SubjectID: f.SubjectID, CreatedAt: at, Payload: string(body), Owner: o.owner}}, nil
}

// Insert is the event's document, for store.InsertTogether. Its _id is
// derived from the fact, so a repeat is a duplicate, never a second event.
func (p Prepared) Insert() store.Together { return store.Together{Batch: p.o.pendingBatch, Doc: p.doc} }

// Inserted is told the result of the event's insert (nil, or its
// duplicate-key error) and reports whether it created the event; a new
// event wakes the dispatcher.
func (p Prepared) Inserted(err error) bool {
	if err != nil {
		return false
	}
	p.o.Wake()
	return true
}

// Wake asks the dispatcher to look for work now.
func (o *Outbox) Wake() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}
