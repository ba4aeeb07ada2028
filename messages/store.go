// Package messages owns the domain records of the send path — leads,
// conversations and messages. Package send validates a send request and
// decides when these records are written.
//
// Identity decides races: a lead's _id is a hash of (workspace, contact
// identifier) and a conversation's a hash of (workspace, address), so
// concurrent requests for a new contact all try to insert the same _id and
// exactly one insert wins; the others read the winner. Every read is by _id,
// the one lookup that is indexed and atomic on MongoDB and the embedded
// engine alike.
package messages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

// Collections used by this package.
var Collections = []store.Collection{{Name: "leads"}, {Name: "conversations"}, {Name: "messages"}, {Name: OutcomesCollection}, {Name: IndexCollection}}

// OutcomesCollection holds each outbound message's status after its commit
// point, under the message's id (outcome.go).
const OutcomesCollection = "message_outcomes"

// The channels a message can be sent on.
const (
	ChannelSMS      = "sms"
	ChannelIMessage = "imessage"
	ChannelEmail    = "email"
)

// Attachment is a file the provider fetches and attaches; the API never
// downloads it itself.
type Attachment struct {
	URL         string `json:"url" bson:"url"`
	Filename    string `json:"filename,omitempty" bson:"filename,omitempty"`
	ContentType string `json:"contentType,omitempty" bson:"contentType,omitempty"`
}

// CRMRefs are the caller's CRM identifiers for a lead, stored on the lead and
// echoed back. They are opaque to msgapi.
type CRMRefs struct {
	GHLContactID  string `json:"ghlContactId,omitempty" bson:"ghlContactId,omitempty"`
	GHLLocationID string `json:"ghlLocationId,omitempty" bson:"ghlLocationId,omitempty"`
	HSContactID   string `json:"hsContactId,omitempty" bson:"hsContactId,omitempty"`
	HSPortalID    string `json:"hsPortalId,omitempty" bson:"hsPortalId,omitempty"`
}

// Lead is one contact of a workspace: one phone number or one email address.
type Lead struct {
	ID          string    `bson:"_id"`
	WorkspaceID string    `bson:"workspaceId"`
	Phone       string    `bson:"phone,omitempty"`
	Email       string    `bson:"email,omitempty"`
	CRM         CRMRefs   `bson:"crm"`
	CreatedAt   time.Time `bson:"createdAt"`
	UpdatedAt   time.Time `bson:"updatedAt"`
}

// Conversation is the thread of one workspace with one address.
type Conversation struct {
	ID          string    `bson:"_id"`
	WorkspaceID string    `bson:"workspaceId"`
	LeadID      string    `bson:"leadId"`
	Phone       string    `bson:"phone,omitempty"`
	Email       string    `bson:"email,omitempty"`
	CreatedAt   time.Time `bson:"createdAt"`
}

// Message is one outbound message. CRM is a snapshot of the lead's CRM
// references when the message was written, so that a duplicate answer needs
// no lead read.
type Message struct {
	ID                string         `bson:"_id"`
	WorkspaceID       string         `bson:"workspaceId"`
	LeadID            string         `bson:"leadId"`
	ConversationID    string         `bson:"conversationId"`
	Channel           string         `bson:"channel"`
	Direction         string         `bson:"direction"`
	RecipientPhone    string         `bson:"recipientPhone,omitempty"`
	RecipientEmail    string         `bson:"recipientEmail,omitempty"`
	Body              string         `bson:"body"`
	Subject           string         `bson:"subject,omitempty"`
	Attachments       []Attachment   `bson:"attachments,omitempty"`
	Metadata          map[string]any `bson:"metadata,omitempty"`
	Status            string         `bson:"status"`
	Provider          string         `bson:"provider,omitempty"`
	ProviderMessageID string         `bson:"providerMessageId,omitempty"`
	Error             string         `bson:"error,omitempty"`
	// ErrorCode and StatusAt come from a delivery receipt: the vendor's
	// error code and the vendor's time of the status.
	ErrorCode   string     `bson:"errorCode,omitempty"`
	StatusAt    *time.Time `bson:"statusAt,omitempty"`
	DedupLockID string     `bson:"dedupLockId,omitempty"`
	CRM         CRMRefs    `bson:"crm"`
	// LeadCreated: the request that wrote this message created its lead
	// (it answered 201). An Idempotency-Key retry that finds the message
	// answers from it with the same status code.
	LeadCreated bool `bson:"leadCreated,omitempty"`
	// Test: sent through a test key (mk_test_), on the log provider; it
	// reached no one.
	Test bool `bson:"test,omitempty"`
	// SendAt, on a scheduled message: when it is due.
	SendAt *time.Time `bson:"sendAt,omitempty"`
	// CancellationKey, optional on a scheduled message: the caller's key
	// that cancels every scheduled message carrying it.
	CancellationKey string `bson:"cancellationKey,omitempty"`
	// DuplicateOf, on a tombstone only: the keyed request that was fenced
	// here was answered with this earlier message as a duplicate.
	DuplicateOf string `bson:"duplicateOf,omitempty"`
	// FenceReason, on a tombstone only: who declared the holder gone.
	FenceReason string    `bson:"fenceReason,omitempty"`
	CreatedAt   time.Time `bson:"createdAt"`
	UpdatedAt   time.Time `bson:"updatedAt"`
}

// MarshalJSON is the message's API shape: every key present, null when
// empty, so clients never need to test for a missing key.
func (m Message) MarshalJSON() ([]byte, error) {
	atts := m.Attachments
	if atts == nil {
		atts = []Attachment{}
	}
	return json.Marshal(struct {
		ID                string         `json:"id"`
		WorkspaceID       string         `json:"workspaceId"`
		LeadID            string         `json:"leadId"`
		ConversationID    string         `json:"conversationId"`
		Channel           string         `json:"channel"`
		Direction         string         `json:"direction"`
		RecipientPhone    *string        `json:"recipientPhone"`
		RecipientEmail    *string        `json:"recipientEmail"`
		Body              string         `json:"body"`
		Subject           *string        `json:"subject"`
		Attachments       []Attachment   `json:"attachments"`
		Metadata          map[string]any `json:"metadata"`
		Status            string         `json:"status"`
		Provider          *string        `json:"provider"`
		ProviderMessageID *string        `json:"providerMessageId"`
		Error             *string        `json:"error"`
		ErrorCode         *string        `json:"errorCode"`
		StatusAt          *time.Time     `json:"statusAt"`
		DedupLockID       *string        `json:"dedupLockId"`
		SendAt            *time.Time     `json:"sendAt"`
		CancellationKey   *string        `json:"cancellationKey"`
		Test              bool           `json:"test"`
		CreatedAt         time.Time      `json:"createdAt"`
		UpdatedAt         time.Time      `json:"updatedAt"`
	}{
		m.ID, m.WorkspaceID, m.LeadID, m.ConversationID, m.Channel, m.Direction,
		null(m.RecipientPhone), null(m.RecipientEmail), m.Body, null(m.Subject), atts, m.Metadata,
		m.Status, null(m.Provider), null(m.ProviderMessageID), null(m.Error), null(m.ErrorCode), m.StatusAt, null(m.DedupLockID),
		m.SendAt, null(m.CancellationKey), m.Test, m.CreatedAt, m.UpdatedAt,
	})
}

func null(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Store reads and writes leads, conversations and messages.
type Store struct {
	leads, convs, msgs *mongo.Collection
	msgBatch           *store.Batch // message inserts of concurrent requests, one command (store.Batch)
	outs               *mongo.Collection
	outBatch           *store.Batch      // outcome inserts (outcome.go)
	st                 *store.Store      // an outcome's insert together with its event (outcome.go)
	idx                *mongo.Collection // the feeds that list messages (index.go)
	idxBatch           *store.Batch      // Index's inserts, batched with concurrent ones
	heads              *heads
	convsSeen          *seenSet // conversations known to exist (never deleted)
	now                func() time.Time
	// events prepares the event of a status (package notify), written with
	// the status itself (RecordOutcome); nil records none.
	events    Events
	unfenced  bool // tests only: see UnfencedForTests
	oneWriter bool // every process's writes run one at a time (store.OneWriter)
}

// Event is the event of a status change, ready to insert (package
// notify's Prepared).
type Event interface {
	// Insert is its document. Inserting it again is a duplicate, never a
	// second event.
	Insert() store.Together
	// Inserted is told its insert's result (nil, or its duplicate-key
	// error) and reports whether that created the event.
	Inserted(err error) bool
}

// Events prepares the event of each status change (package notify's
// Outbox).
type Events interface {
	// MessageEvent returns the event of m's status, m as it will be after
	// the change; ok is false when the status has none.
	MessageEvent(m Message) (ev Event, ok bool, err error)
}

// OnOutcome sets where RecordOutcome gets the event of each status change,
// which it writes so that the event is durable no later than the change
// (set once, at wiring, before traffic).
func (s *Store) OnOutcome(e Events) { s.events = e }

// NewStore returns a Store on s.
func NewStore(s *store.Store) *Store {
	return &Store{
		leads: s.Collection("leads"), convs: s.Collection("conversations"), msgs: s.Collection("messages"), msgBatch: s.Batch("messages"),
		outs: s.Collection(OutcomesCollection), outBatch: s.Batch(OutcomesCollection), st: s,
		idx: s.Collection(IndexCollection), idxBatch: s.Batch(IndexCollection), heads: newHeads(), convsSeen: newSeenSet(maxFeeds), oneWriter: s.OneWriter(),
		now: func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
	}
}

// LeadID is the _id of the lead for one contact identifier.
func LeadID(workspaceID, phone, email string) string {
	if phone != "" {
		return "lead_" + msgapi.HashID(workspaceID, "phone", phone)
	}
	return "lead_" + msgapi.HashID(workspaceID, "email", email)
}

// LeadDoc names the lead document that FindOrCreateLead reads first: what a
// send prefetches (store.Prefetch).
func LeadDoc(workspaceID, phone, email string) store.Doc {
	return store.Doc{Collection: "leads", ID: LeadID(workspaceID, phone, email)}
}

// ConversationID is the _id of the thread with one address.
func ConversationID(workspaceID, phone, email string) string {
	if phone != "" {
		return "conv_" + msgapi.HashID(workspaceID, "phone", phone)
	}
	return "conv_" + msgapi.HashID(workspaceID, "email", email)
}

// GetLead reads a workspace's lead; another workspace's lead is not found.
func (s *Store) GetLead(ctx context.Context, workspaceID, id string) (Lead, error) {
	var l Lead
	err := s.leads.FindOne(ctx, store.ByID(id)).Decode(&l)
	switch {
	case store.IsNotFound(err), err == nil && l.WorkspaceID != workspaceID:
		return Lead{}, msgapi.Errorf(msgapi.CodeLeadNotFound, "lead %q does not exist in this workspace", id)
	case err != nil:
		return Lead{}, msgapi.Unavailable(fmt.Errorf("read lead %s: %w", id, err))
	}
	return l, nil
}

// FindOrCreateLead returns the lead for the contact (phone, else email),
// creating it if needed; created tells whether this call created it. CRM
// references given in crm are stored on the lead (an update only when they
// change something).
func (s *Store) FindOrCreateLead(ctx context.Context, workspaceID, phone, email string, crm CRMRefs) (Lead, bool, error) {
	id := LeadID(workspaceID, phone, email)
	var l Lead
	// A send's first read may be answered by its prefetch (store.Prefetch,
	// LeadDoc); the read of a winner below always goes to the store.
	err := store.FindByID(ctx, s.leads, id).Decode(&l)
	if store.IsNotFound(err) {
		now := s.now()
		l = Lead{ID: id, WorkspaceID: workspaceID, Phone: phone, Email: email, CRM: crm, CreatedAt: now, UpdatedAt: now}
		_, err = s.leads.InsertOne(ctx, l)
		if err == nil {
			return l, true, nil
		}
		if !store.IsDuplicateKey(err) {
			return Lead{}, false, msgapi.Unavailable(fmt.Errorf("insert lead: %w", err))
		}
		// Another request created it first: read the winner.
		err = s.leads.FindOne(ctx, store.ByID(id)).Decode(&l)
	}
	if err != nil {
		return Lead{}, false, msgapi.Unavailable(fmt.Errorf("read lead %s: %w", id, err))
	}
	l, err = s.UpdateCRM(ctx, l, crm)
	return l, false, err
}

// UpdateCRM stores the non-empty CRM references of crm on the lead when
// they differ from what it holds.
func (s *Store) UpdateCRM(ctx context.Context, l Lead, crm CRMRefs) (Lead, error) {
	merged := l.CRM.merge(crm)
	if merged == l.CRM {
		return l, nil
	}
	l.CRM, l.UpdatedAt = merged, s.now()
	_, err := s.leads.UpdateOne(ctx, store.ByID(l.ID), bson.D{{Key: "$set", Value: bson.D{{Key: "crm", Value: l.CRM}, {Key: "updatedAt", Value: l.UpdatedAt}}}})
	if err != nil {
		return Lead{}, msgapi.Unavailable(fmt.Errorf("update lead %s: %w", l.ID, err))
	}
	return l, nil
}

func (c CRMRefs) merge(in CRMRefs) CRMRefs {
	pick := func(old, new string) string {
		if new != "" {
			return new
		}
		return old
	}
	return CRMRefs{
		GHLContactID: pick(c.GHLContactID, in.GHLContactID), GHLLocationID: pick(c.GHLLocationID, in.GHLLocationID),
		HSContactID: pick(c.HSContactID, in.HSContactID), HSPortalID: pick(c.HSPortalID, in.HSPortalID),
	}
}

// EnsureConversation returns the id of the thread with (phone, else email),
// creating it if needed. fresh says the lead was just created, so the thread
// almost certainly does not exist and the read is skipped.
//
// A conversation is never deleted, so one this process has seen is not read
// again.
func (s *Store) EnsureConversation(ctx context.Context, workspaceID, leadID, phone, email string, fresh bool) (string, error) {
	id := ConversationID(workspaceID, phone, email)
	if s.convsSeen.has(id) {
		return id, nil
	}
	if !fresh {
		err := s.convs.FindOne(ctx, store.ByID(id)).Err()
		if err == nil {
			s.convsSeen.add(id)
			return id, nil
		}
		if !store.IsNotFound(err) {
			return "", msgapi.Unavailable(fmt.Errorf("read conversation %s: %w", id, err))
		}
	}
	_, err := s.convs.InsertOne(ctx, Conversation{ID: id, WorkspaceID: workspaceID, LeadID: leadID, Phone: phone, Email: email, CreatedAt: s.now()})
	if err != nil && !store.IsDuplicateKey(err) {
		return "", msgapi.Unavailable(fmt.Errorf("insert conversation: %w", err))
	}
	s.convsSeen.add(id)
	return id, nil
}

// seenSet is a bounded set of ids: past max one is forgotten (the next use
// of it costs a read, nothing more).
type seenSet struct {
	mu  sync.Mutex
	ids map[string]struct{}
	max int
}

func newSeenSet(max int) *seenSet { return &seenSet{ids: map[string]struct{}{}, max: max} }

func (s *seenSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[id]
	return ok
}

func (s *seenSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) >= s.max {
		for k := range s.ids { // forget one
			delete(s.ids, k)
			break
		}
	}
	s.ids[id] = struct{}{}
}

// ErrFenced is Insert's answer when a tombstone already holds the message's
// id: whoever judged the request gone (lease, operator delete, reaper, a
// takeover of its Idempotency-Key) fenced it, and it must not send.
var ErrFenced = errors.New("message id fenced: the request was declared gone before its message was written")

// Insert writes a new message (status sending) before the provider is
// called. This insert is the commit point of a send: the provider is called
// only if it wins. It loses (ErrFenced) only to a tombstone under the same
// id, since message ids are never reused.
//
// A message that is final when it is written (received, suppressed) gets
// its outcome at once too, the same document, so that reading it costs one
// read like any other (outcome.go). That second insert is a copy for
// readers only: if it fails, reads find the message all the same, in two.
func (s *Store) Insert(ctx context.Context, m *Message) error {
	if m.CreatedAt.IsZero() {
		now := s.now()
		m.CreatedAt, m.UpdatedAt = now, now
	}
	doc := *m
	doc.Metadata = bsonSafe(m.Metadata)
	err := s.msgBatch.InsertOne(ctx, doc)
	switch {
	case err == nil:
		if !Due(m.Status) && m.Status != StatusTombstone {
			_ = s.outBatch.InsertOne(ctx, doc)
		}
		return nil
	case store.IsDuplicateKey(err):
		// Inbound messages have derived ids, where the same answer means
		// "this event was already recorded": store.IsDuplicateKey holds too.
		return fmt.Errorf("insert message %s: %w: %w", m.ID, ErrFenced, err)
	}
	return msgapi.Unavailable(fmt.Errorf("insert message %s: %w", m.ID, err))
}

// InsertIndexed is Insert and Index at once, for a send, whose message id
// is its own (no other request writes or indexes it): the message's
// listing entries go out beside its insert instead of after it, so a send
// waits for one write, not two. An entry whose message then lost its
// insert (fenced) names a tombstone, which readers skip, as they skip an
// entry whose message is missing. err is Insert's; indexErr is Index's,
// when the insert won (the message exists but is missing from the
// listing).
func (s *Store) InsertIndexed(ctx context.Context, m *Message, fresh bool) (indexErr, err error) {
	now := s.now()
	m.CreatedAt, m.UpdatedAt = now, now
	idx := *m
	done := make(chan error, 1)
	go func() { done <- s.indexOwn(ctx, &idx, fresh) }()
	err = s.Insert(ctx, m)
	indexErr = <-done
	if err != nil {
		return nil, err
	}
	return indexErr, nil
}

// UnfencedForTests returns a copy of s whose Fence writes nothing: it only
// reports whether each id is still free, the judgement msgapi made before
// the fence existed, so a holder declared gone can still write its message
// and send. It exists only so that test/chaos can show the double sends the
// fence prevents (MSGAPI_TEST_UNFENCED=1, refused unless MSGAPI_ENV=test).
// Never use it anywhere else.
func (s *Store) UnfencedForTests() *Store {
	c := *s
	c.unfenced = true
	return &c
}

// Fence inserts a tombstone under each id, so that a message that is not
// written yet can never be written (and sent) afterwards. won[i] tells
// whether the tombstone for ids[i] was inserted by this call; false means
// the id already holds a document (a real message, or an earlier
// tombstone: read it to know which). One unordered insert for all ids.
// A tombstone is never answered, counted or listed as a message.
func (s *Store) Fence(ctx context.Context, reason string, ids ...string) (won []bool, err error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if s.unfenced {
		won = make([]bool, len(ids))
		for i, id := range ids {
			err := s.msgs.FindOne(ctx, store.ByID(id)).Err()
			if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
				return nil, msgapi.Unavailable(fmt.Errorf("read message %s: %w", id, err))
			}
			won[i] = err != nil
		}
		return won, nil
	}
	won = make([]bool, len(ids))
	absent := make([]int, 0, len(ids)) // indexes into ids of the tombstones to insert
	for i := range ids {
		absent = append(absent, i)
	}
	if s.oneWriter && len(ids) > 1 {
		// On the embedded engine every write command holds the one writer
		// that requests queue for, and an insert that loses still costs it
		// a statement. The ids a batch fences (the reaper's expired locks)
		// mostly hold their message already, so read first (one read, which
		// does not hold the writer) and insert only the absent ones. A
		// message written in between still makes its tombstone's insert
		// lose, as without the read.
		if absent, err = s.absent(ctx, ids); err != nil {
			return nil, err
		}
	}
	now := s.now()
	docs := make([]any, len(absent))
	for j, i := range absent {
		docs[j] = Message{ID: ids[i], Status: StatusTombstone, FenceReason: reason, CreatedAt: now, UpdatedAt: now}
	}
	inserted, err := store.InsertAll(ctx, s.msgs, docs)
	if err != nil {
		return nil, msgapi.Unavailable(fmt.Errorf("fence %d message ids: %w", len(ids), err))
	}
	for j, i := range absent {
		won[i] = inserted[j]
	}
	return won, nil
}

// absent returns the indexes of the ids that hold no message.
func (s *Store) absent(ctx context.Context, ids []string) ([]int, error) {
	var have []struct {
		ID string `bson:"_id"`
	}
	if err := store.FindIDs(ctx, s.msgs, ids, &have, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}})); err != nil {
		return nil, msgapi.Unavailable(fmt.Errorf("read %d message ids: %w", len(ids), err))
	}
	held := make(map[string]bool, len(have))
	for _, h := range have {
		held[h.ID] = true
	}
	var out []int
	for i, id := range ids {
		if !held[id] {
			out = append(out, i)
		}
	}
	return out, nil
}

// FenceAsDuplicate fences id, the message id of a keyed request that was
// answered with the earlier message duplicateOf: an Idempotency-Key retry
// that finds this tombstone answers with that message again, for the key's
// whole lifetime, instead of running the request once more.
func (s *Store) FenceAsDuplicate(ctx context.Context, id, duplicateOf string) error {
	now := s.now()
	_, err := s.msgs.InsertOne(ctx, Message{
		ID: id, Status: StatusTombstone, DuplicateOf: duplicateOf,
		FenceReason: "duplicate", CreatedAt: now, UpdatedAt: now,
	})
	if err != nil && !store.IsDuplicateKey(err) {
		return msgapi.Unavailable(fmt.Errorf("fence message %s: %w", id, err))
	}
	return nil
}

// GetForWorkspace reads a workspace's message; another workspace's is 404.
func (s *Store) GetForWorkspace(ctx context.Context, workspaceID, id string) (Message, error) {
	m, found, err := s.Get(ctx, id)
	if err != nil {
		return Message{}, err
	}
	if !found || m.WorkspaceID != workspaceID || m.Status == StatusTombstone {
		return Message{}, msgapi.Errorf(msgapi.CodeNotFound, "message %q does not exist in this workspace", id)
	}
	return m, nil
}

// bsonSafe turns the json.Numbers of decoded metadata into int64 or
// float64, which BSON stores as numbers (a json.Number would be a string).
func bsonSafe(v map[string]any) map[string]any {
	if v == nil {
		return nil
	}
	out := make(map[string]any, len(v))
	for k, x := range v {
		out[k] = bsonValue(x)
	}
	return out
}

func bsonValue(x any) any {
	switch t := x.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	case map[string]any:
		return bsonSafe(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = bsonValue(e)
		}
		return out
	}
	return x
}

// jsonSafe turns decoded BSON documents and arrays back into plain maps
// and slices for the JSON answer.
func jsonSafe(v map[string]any) map[string]any {
	if v == nil {
		return nil
	}
	out := make(map[string]any, len(v))
	for k, x := range v {
		out[k] = jsonValue(x)
	}
	return out
}

func jsonValue(x any) any {
	switch t := x.(type) {
	case bson.D:
		m := make(map[string]any, len(t))
		for _, e := range t {
			m[e.Key] = jsonValue(e.Value)
		}
		return m
	case map[string]any:
		return jsonSafe(t)
	case bson.A:
		return jsonValue([]any(t))
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = jsonValue(e)
		}
		return out
	}
	return x
}
