package send

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/messages"
)

// The message insert is the commit (SPEC: Fencing). Every request that may
// send allocates its message id before it claims anything — the
// Idempotency-Key claim and the dedup lock both record it — and calls its
// provider only if the insert of its message under that id wins
// (messages.Store.Insert). Whoever declares a holder gone first inserts a
// tombstone under the holder's id (messages.Store.Fence). This file is how
// the two layers that claim read that commit point: the duplicate guard
// through Sibling, the Idempotency-Key layer through Commits.

// Sibling adapts the message store to the guard (guard.Options.Sibling):
// one read by _id of the message a lock names. The guard's Fence is
// messages.Store.Fence.
func Sibling(ms *messages.Store) func(ctx context.Context, id string) (guard.Sibling, bool, error) {
	return func(ctx context.Context, id string) (guard.Sibling, bool, error) {
		m, found, err := ms.Get(ctx, id)
		if err != nil || !found {
			return guard.Sibling{}, found, err
		}
		return guard.Sibling{
			ID: m.ID, Status: m.Status, CreatedAt: m.CreatedAt, Doc: m,
			Tombstone: m.Status == messages.StatusTombstone,
			Refused:   m.Status != messages.StatusTombstone && !messages.Reached(m.Status),
		}, true, nil
	}
}

// Commits is the send route's commit point as the Idempotency-Key layer
// sees it (idempotency.Commits): a keyed request's claim names its message
// id, and a retry after the claim's lease answers from that message.
type Commits struct{ Messages *messages.Store }

// NewID allocates a message id.
func (Commits) NewID() string { return msgapi.NewID("msg") }

// Fence inserts tombstones under message ids.
func (c Commits) Fence(ctx context.Context, reason string, ids ...string) ([]bool, error) {
	return c.Messages.Fence(ctx, reason, ids...)
}

// Resolve tells what became of the request whose message id is id, and
// rebuilds its answer once it is final: the send answer from the message
// (201 when that request created the lead), or, for a keyed request that
// was answered as a duplicate, the duplicate answer naming the original.
// They are the bytes the first answer had, built by the same code, except
// that a message's outcome recorded later shows in it.
func (c Commits) Resolve(ctx context.Context, id string) (idempotency.Resolution, error) {
	m, found, err := c.Messages.Get(ctx, id)
	switch {
	case err != nil:
		return idempotency.Resolution{}, err
	case !found:
		return idempotency.Resolution{State: idempotency.CommitMissing}, nil
	case m.Status == messages.StatusTombstone && m.DuplicateOf != "":
		orig, found, err := c.Messages.Get(ctx, m.DuplicateOf)
		if err != nil {
			return idempotency.Resolution{}, err
		}
		if !found || orig.Status == messages.StatusTombstone {
			return idempotency.Resolution{State: idempotency.CommitFenced}, nil
		}
		lockID := orig.DedupLockID
		if lockID == "" {
			body := orig.Body
			if orig.Test {
				body = testGuardPrefix + body
			}
			lockID = guard.LockID(guard.Key{WorkspaceID: orig.WorkspaceID, Phone: orig.RecipientPhone, Email: orig.RecipientEmail, Body: body})
		}
		return done(http.StatusOK, duplicateOf(orig, lockID, m.CreatedAt.Sub(orig.CreatedAt)))
	case m.Status == messages.StatusTombstone:
		return idempotency.Resolution{State: idempotency.CommitFenced}, nil
	case !messages.Final(m.Status):
		return idempotency.Resolution{State: idempotency.CommitInFlight}, nil
	}
	status := http.StatusOK
	if m.LeadCreated {
		status = http.StatusCreated
	}
	return done(status, sentOf(m, m.LeadID, m.CRM))
}

func done(status int, v any) (idempotency.Resolution, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return idempotency.Resolution{}, err
	}
	return idempotency.Resolution{State: idempotency.CommitDone, Status: status, ContentType: "application/json", Body: b}, nil
}
