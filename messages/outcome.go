package messages

// A message's outcome. The message document in "messages" is written once,
// at the commit point (status sending, or scheduled), and what becomes of
// it afterwards — the provider's answer, the outcome sweeper's "unknown", a
// delivery receipt — is the whole message again, with its outcome, under
// the same id in message_outcomes. A read of a message reads
// message_outcomes first: a message that has an outcome (almost every one)
// costs one read by _id; one still with its provider, or a tombstone, costs
// a second read, of the commit.
//
// Why not update the message: on the embedded engine an update is a read
// and a rewrite of the whole document in its own transaction, 1 ms of
// the one writer, and updates cannot share a transaction, while an insert
// joins the inserts of concurrent requests in one command (store.Batch,
// 0.1 ms each). And the first outcome is decided by an insert, on both
// engines: the provider's answer and the sweeper's "unknown" race for the
// same _id and exactly one wins, so a late answer can no longer be
// overwritten by the sweeper (RELIABILITY.md, finding 1). Whoever loses
// reads the winner and moves it on only upward (CanMove): a late "sent"
// after "unknown" is a legal move, "unknown" after "sent" is not.
//
// Later moves (receipts, a late answer) are updates of the outcome by _id,
// after a read: conditional and atomic on MongoDB; on the embedded engine
// two such moves of one message racing within one round trip can still
// land in either order (each is a legal move from what its writer read).
//
// The price is storage: the message's text is stored twice, in its commit
// and in its outcome. A message written before message_outcomes existed
// has no outcome document and is read from "messages" as it always was.

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

// Get reads a message by id, as its outcome left it; found=false when it
// does not exist (yet). One read when the message has an outcome, two when
// it has none (still with its provider, scheduled, a tombstone).
func (s *Store) Get(ctx context.Context, id string) (Message, bool, error) {
	var m Message
	err := s.outs.FindOne(ctx, store.ByID(id)).Decode(&m)
	if store.IsNotFound(err) {
		err = s.msgs.FindOne(ctx, store.ByID(id)).Decode(&m)
	}
	switch {
	case store.IsNotFound(err):
		return Message{}, false, nil
	case err != nil:
		return Message{}, false, msgapi.Unavailable(fmt.Errorf("read message %s: %w", id, err))
	}
	m.Metadata = jsonSafe(m.Metadata)
	return m, true, nil
}

// GetMany reads messages by id, as their outcomes left them, in one read
// (those with an outcome) or two (the others, from "messages"): what Get
// does for one, for a page of a listing. Ids that hold no message are
// absent from the map.
func (s *Store) GetMany(ctx context.Context, ids []string) (map[string]Message, error) {
	out := make(map[string]Message, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var withOutcome []Message
	if err := store.FindIDs(ctx, s.outs, ids, &withOutcome); err != nil {
		return nil, msgapi.Unavailable(fmt.Errorf("read %d message outcomes: %w", len(ids), err))
	}
	for _, m := range withOutcome {
		out[m.ID] = m
	}
	var rest []string
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			rest = append(rest, id)
		}
	}
	if len(rest) > 0 {
		var written []Message
		if err := store.FindIDs(ctx, s.msgs, rest, &written); err != nil {
			return nil, msgapi.Unavailable(fmt.Errorf("read %d messages: %w", len(rest), err))
		}
		for _, m := range written {
			out[m.ID] = m
		}
	}
	for id, m := range out {
		m.Metadata = jsonSafe(m.Metadata)
		out[id] = m
	}
	return out, nil
}

// RecordOutcome moves a message to m.Status: the one place an outbound
// status is written (the send path, the outcome sweeper, delivery receipts
// and the scheduler). It is idempotent and safe to repeat until it lands:
//
//  1. the outcome's event (OnOutcome; its _id is derived from the message
//     and the status, so a repeat is a no-op) is durable no later than the
//     status: its insert and the outcome's go together
//     (store.InsertTogether: one command and one transaction on the
//     embedded engine, the event's insert first on MongoDB), so a crash can
//     never leave a status without its event;
//  2. the status is written only over a state that may move to it
//     (CanMove): the first outcome by an insert, which exactly one writer
//     wins; a later one over the outcome it read (see the file comment).
//
// m needs ID and Status. With WorkspaceID set, m is the caller's whole
// message and its stored status is one that may move to m.Status (the send
// path: sending; receipts check CanMove themselves). Without it (a sweeper
// that knows only the id), the message is read first, and an outcome it
// cannot move to records nothing, not even an event (one extra read).
//
// A scheduled message whose time came moves to sending on the message
// itself (an update; the scheduler's path, not the send path's): its
// outcome comes after.
func (s *Store) RecordOutcome(ctx context.Context, m *Message) error {
	if m.WorkspaceID == "" && s.events != nil {
		cur, found, err := s.Get(ctx, m.ID)
		if err != nil {
			return fmt.Errorf("record outcome of %s: %w", m.ID, err)
		}
		if !found {
			return fmt.Errorf("record outcome of %s: no such message", m.ID)
		}
		if !CanMove(cur.Status, m.Status) {
			return nil // already there, or past it
		}
		cur.Status, cur.Error, cur.ErrorCode, cur.StatusAt = m.Status, m.Error, m.ErrorCode, m.StatusAt
		if m.ProviderMessageID != "" {
			cur.ProviderMessageID = m.ProviderMessageID
		}
		*m = cur
	}
	m.UpdatedAt = s.now()
	if m.Status == StatusSending {
		return s.markSending(ctx, m) // sending has no event
	}
	var ev Event
	if s.events != nil {
		e, ok, err := s.events.MessageEvent(*m)
		if err != nil {
			return fmt.Errorf("record outcome event of %s: %w", m.ID, err)
		}
		if ok {
			ev = e
		}
	}
	if err := s.putOutcome(ctx, m, ev); err != nil {
		return fmt.Errorf("record outcome of %s: %w", m.ID, err)
	}
	return nil
}

// putOutcome writes m's outcome, with its event ev (nil: none): the whole
// message, inserted when it has no outcome yet, otherwise the status and
// what came with it written over the outcome there only if that may move
// to m.Status.
func (s *Store) putOutcome(ctx context.Context, m *Message, ev Event) error {
	doc := *m
	doc.Metadata = bsonSafe(m.Metadata)
	ins := []store.Together{{Batch: s.outBatch, Doc: doc}}
	if ev != nil {
		ins = []store.Together{ev.Insert(), ins[0]}
	}
	errs, err := s.st.InsertTogether(ctx, ins...)
	if err != nil {
		return err
	}
	if ev != nil {
		if e := errs[0]; e != nil && !store.IsDuplicateKey(e) {
			return fmt.Errorf("record event: %w", e)
		}
		ev.Inserted(errs[0])
	}
	err = errs[len(errs)-1]
	if err == nil || !store.IsDuplicateKey(err) {
		return err
	}
	// Someone decided first: a receipt, the sweeper, or an earlier try of
	// ours that landed although it reported an error.
	var cur struct {
		Status string `bson:"status"`
	}
	if err := s.outs.FindOne(ctx, store.ByID(m.ID)).Decode(&cur); err != nil {
		return fmt.Errorf("read outcome: %w", err)
	}
	if !CanMove(cur.Status, m.Status) {
		return nil
	}
	set := bson.D{{Key: "status", Value: m.Status}, {Key: "updatedAt", Value: m.UpdatedAt}}
	for _, f := range []struct{ k, v string }{{"provider", m.Provider}, {"providerMessageId", m.ProviderMessageID}, {"error", m.Error}, {"errorCode", m.ErrorCode}} {
		if f.v != "" {
			set = append(set, bson.E{Key: f.k, Value: f.v})
		}
	}
	if m.StatusAt != nil {
		set = append(set, bson.E{Key: "statusAt", Value: *m.StatusAt})
	}
	// The move is conditional and atomic on both engines: an outcome that
	// moved past ours since the read above is left as it is. (On the
	// embedded engine the write runs alone (store/relay.go) and finds its
	// document by the _id conjunct: third_party/ferretdb/PATCHES.md.)
	filter := bson.D{{Key: "_id", Value: m.ID}, {Key: "status", Value: bson.D{{Key: "$in", Value: From(m.Status)}}}}
	if _, err := s.outs.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: set}}); err != nil {
		return fmt.Errorf("update outcome: %w", err)
	}
	return nil
}

// markSending moves a scheduled message to sending, on the message itself.
func (s *Store) markSending(ctx context.Context, m *Message) error {
	filter := bson.D{{Key: "_id", Value: m.ID}, {Key: "status", Value: bson.D{{Key: "$in", Value: From(StatusSending)}}}}
	set := bson.D{{Key: "status", Value: StatusSending}, {Key: "updatedAt", Value: m.UpdatedAt}}
	if m.Provider != "" {
		set = append(set, bson.E{Key: "provider", Value: m.Provider})
	}
	if _, err := s.msgs.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: set}}); err != nil {
		return fmt.Errorf("record outcome of %s: %w", m.ID, err)
	}
	return nil
}

// MarkNotSent records that a written message was never handed to its
// provider (the request failed right after the insert): it is failed, so it
// blocks nothing and no sweeper takes it for a lost outcome.
func (s *Store) MarkNotSent(ctx context.Context, id, reason string) error {
	m, found, err := s.Get(ctx, id)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("mark message %s not sent: no such message", id)
	}
	if !CanMove(m.Status, StatusFailed) {
		return nil
	}
	m.Status, m.Error, m.UpdatedAt = StatusFailed, reason, s.now()
	if err := s.putOutcome(ctx, &m, nil); err != nil {
		return msgapi.Unavailable(fmt.Errorf("mark message %s not sent: %w", id, err))
	}
	return nil
}
