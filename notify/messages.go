package notify

import (
	"context"

	"github.com/msgapi/msgapi/messages"
)

// messageTypes maps a message status to the event that announces it.
var messageTypes = map[string]string{
	messages.StatusSent:        TypeMessageSent,
	messages.StatusFailed:      TypeMessageFailed,
	messages.StatusUnknown:     TypeMessageUnknown,
	messages.StatusDelivered:   TypeMessageDelivered,
	messages.StatusUndelivered: TypeMessageUndelivered,
	messages.StatusReceived:    TypeMessageReceived,
	messages.StatusSuppressed:  TypeMessageSuppressed,
	messages.StatusScheduled:   TypeMessageScheduled,
	messages.StatusCanceled:    TypeMessageCanceled,
}

// MessageFact is the fact "message m reached its status", or ok=false when
// the status has no event (sending, read).
func MessageFact(m messages.Message) (Fact, bool) {
	typ, ok := messageTypes[m.Status]
	if !ok {
		return Fact{}, false
	}
	return Fact{WorkspaceID: m.WorkspaceID, Type: typ, SubjectID: m.ID, Data: map[string]any{"message": m}, At: m.UpdatedAt}, true
}

// RecordMessage records the event of m's status, if it has one: the hook
// of messages.Store.OnOutcome and of inbound messages.
func (o *Outbox) RecordMessage(ctx context.Context, m messages.Message) error {
	f, ok := MessageFact(m)
	if !ok {
		return nil
	}
	_, err := o.Record(ctx, f)
	return err
}

// MessageEvent prepares the event of m's status, to be inserted in one
// command with the status itself (messages.Store.RecordOutcome, which this
// makes a messages.Events); ok is false when the status has no event.
func (o *Outbox) MessageEvent(m messages.Message) (ev messages.Event, ok bool, err error) {
	f, ok := MessageFact(m)
	if !ok {
		return nil, false, nil
	}
	p, err := o.Prepare(f)
	if err != nil {
		return nil, false, err
	}
	return p, true, nil
}

// RecordDuplicate records that the duplicate guard blocked a request
// (blockedID: the message id that request had allocated) and answered with
// sibling.
func (o *Outbox) RecordDuplicate(ctx context.Context, workspaceID, blockedID, lockID string, sibling messages.Message) error {
	_, err := o.Record(ctx, Fact{WorkspaceID: workspaceID, Type: TypeMessageDuplicateBlocked, SubjectID: blockedID,
		Data: map[string]any{"lockId": lockID, "message": sibling}})
	return err
}
