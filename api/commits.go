package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/messages"
)

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
			lockID = guard.LockID(guard.Key{WorkspaceID: orig.WorkspaceID, Phone: orig.RecipientPhone, Email: orig.RecipientEmail, Body: orig.Body})
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
	return done(status, sendResponse{Success: true, Status: m.Status, Message: m, crmKeys: keysOf(m.LeadID, m.CRM)})
}

func done(status int, v any) (idempotency.Resolution, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return idempotency.Resolution{}, err
	}
	return idempotency.Resolution{State: idempotency.CommitDone, Status: status, ContentType: echo.MIMEApplicationJSON, Body: b}, nil
}
