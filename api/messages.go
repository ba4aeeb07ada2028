package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/sender"
)

// Sender delivers one message through one provider.
type Sender interface {
	Send(ctx context.Context, m sender.Message) sender.Result
	Name() string
}

// SendOptions are the send path's dependencies.
type SendOptions struct {
	Messages *messages.Store
	Guard    *guard.Guard
	// Senders by channel: "sms", "imessage", "email".
	Senders map[string]Sender
	// DefaultRegion for phone numbers without a country code (e.g. "US").
	DefaultRegion string
	// Metrics, optional, observes outcomes.
	Metrics SendMetrics
	// Lifetime ends when the process gives up on in-flight work (the
	// shutdown timeout has passed): outcome writes stop retrying then.
	// Default: never.
	Lifetime context.Context
	// OnDuplicate, optional, records a blocked duplicate's event
	// (notify.Outbox.RecordDuplicate): blockedID is the id this request had
	// allocated. A failure is logged; the answer stands.
	OnDuplicate func(ctx context.Context, workspaceID, blockedID, lockID string, sibling messages.Message) error
}

// SendMetrics is what the send path reports (nil-safe through noMetrics).
type SendMetrics interface {
	Sent(channel, status string)
	Duplicate(mode string)
}

// SiblingReader adapts the message store to the guard: one read by _id.
// (The guard's Fence is messages.Store.Fence.)
func SiblingReader(ms *messages.Store) func(ctx context.Context, id string) (guard.Sibling, bool, error) {
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

// sendResponse is the answer to a send that ran: 201 (new lead) or 200.
type sendResponse struct {
	Success bool             `json:"success"`
	Status  string           `json:"status"`
	Message messages.Message `json:"message"`
	crmKeys
}

// duplicateResponse is the answer when the guard caught a duplicate.
// Pending marks the "still in flight" answer (message null): not a
// finished request, to be retried.
type duplicateResponse struct {
	Success          bool              `json:"success"`
	DuplicateOnly    bool              `json:"duplicateOnly"`
	Pending          bool              `json:"pending,omitempty"`
	OriginalAgeMs    *int64            `json:"originalAgeMs,omitempty"`
	DuplicateMessage string            `json:"duplicateMessage"`
	LockID           string            `json:"lockId"`
	Message          *messages.Message `json:"message"`
	crmKeys
}

// crmKeys are always present, null when unknown.
type crmKeys struct {
	LeadID        *string `json:"leadId"`
	GHLContactID  *string `json:"ghlContactId"`
	GHLLocationID *string `json:"ghlLocationId"`
	HSContactID   *string `json:"hsContactId"`
	HSPortalID    *string `json:"hsPortalId"`
}

func keysOf(leadID string, c messages.CRMRefs) crmKeys {
	return crmKeys{ptr(leadID), ptr(c.GHLContactID), ptr(c.GHLLocationID), ptr(c.HSContactID), ptr(c.HSPortalID)}
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// sendMessage is POST /api/messages. The order of work is SPEC's:
// authenticate and Idempotency-Key (middleware) → validate → duplicate
// guard → lead, conversation, message → sender → outcome.
func (s *Server) sendMessage(c echo.Context) error {
	ctx := c.Request().Context()
	ws := currentWorkspace(c)
	o := s.opts.Send

	// Validate. Nothing below this block runs for a bad request: it holds
	// no lock and writes nothing.
	if err := requireJSON(c); err != nil {
		return err
	}
	req, err := messages.ParseSendRequest(Body(c), ws.DefaultRegion(o.DefaultRegion))
	if err != nil {
		return err
	}
	var lead *messages.Lead
	if req.LeadID != "" {
		l, err := o.Messages.GetLead(ctx, ws.ID, req.LeadID)
		if err != nil {
			return err
		}
		if err := req.FillFromLead(l.Phone, l.Email); err != nil {
			return err
		}
		lead = &l
	}
	snd, ok := o.Senders[req.Channel]
	if !ok {
		return fmt.Errorf("no sender configured for channel %s", req.Channel)
	}

	// Duplicate guard. The message id is allocated before anything is
	// claimed (a keyed request's claim already names it), and the insert
	// of the message under it is the commit point: see messages.Insert.
	phone, email := req.DeliveryAddress()
	keyed := idempotency.CommitID(ctx)
	msgID := keyed
	if msgID == "" {
		msgID = msgapi.NewID("msg")
	}
	limits := guard.Limits{Window: ws.DedupWindow(o.Guard.Window()), Wait: ws.DedupWait(o.Guard.Wait())}
	d, err := o.Guard.AcquireWith(ctx, guard.Key{WorkspaceID: ws.ID, Phone: phone, Email: email, Body: req.Body}, msgID, limits)
	if err != nil {
		return err
	}
	switch d.Outcome {
	case guard.Duplicate:
		// A duplicate answer is a send-stage outcome: an Idempotency-Key
		// replays it. Under a key, the decision is also committed under
		// the request's own id, so that a retry after this process dies
		// answers the same duplicate instead of running again (and
		// sending, once the window has passed).
		if keyed != "" {
			if err := o.Messages.FenceAsDuplicate(ctx, msgID, d.Sibling.ID); err != nil {
				return err
			}
		}
		idempotency.MarkSendStage(ctx)
		s.metricDuplicate(d.Mode)
		s.recordDuplicate(c, msgID, d)
		return s.writeDuplicate(c, d)
	case guard.Pending:
		// Not stored under an Idempotency-Key: a retry with the key must
		// get the original once it is written, not this placeholder.
		s.metricDuplicate("pending")
		return s.writePending(c, d.LockID, d.RetryAfter, d.SiblingAge)
	}

	// Won (or Unguarded: the guard's store failed and we send without it).
	written := false
	if d.Outcome == guard.Won {
		defer func() {
			if written {
				return
			}
			// Failed before the message existed: free the lock for a retry.
			rctx := context.WithoutCancel(ctx)
			err := o.Guard.Release(rctx, d.LockID, msgID)
			if errors.Is(err, guard.ErrWritten) {
				// The insert landed although it reported an error; the
				// provider was never called. Say so on the message, which
				// also frees its text for a retry.
				err = o.Messages.MarkNotSent(rctx, msgID, "not sent: the request failed after its message was written")
			}
			if err != nil {
				logger(c).Warn().Err(err).Str("lockId", d.LockID).Str("messageId", msgID).Msg("release dedup lock")
			}
		}()
	}

	created := false
	if lead == nil {
		l, isNew, err := o.Messages.FindOrCreateLead(ctx, ws.ID, req.RecipientPhone, req.RecipientEmail, req.CRM)
		if err != nil {
			return err
		}
		lead, created = &l, isNew
	} else if l, err := o.Messages.UpdateCRM(ctx, *lead, req.CRM); err != nil {
		return err
	} else {
		lead = &l
	}
	convID, err := o.Messages.EnsureConversation(ctx, ws.ID, lead.ID, phone, email, created)
	if err != nil {
		return err
	}

	m := &messages.Message{
		ID: msgID, WorkspaceID: ws.ID, LeadID: lead.ID, ConversationID: convID,
		Channel: req.Channel, Direction: "outbound",
		RecipientPhone: phone, RecipientEmail: email,
		Body: req.Body, Subject: req.Subject, Attachments: req.Attachments, Metadata: req.Metadata,
		Status: messages.StatusSending, Provider: snd.Name(), CRM: lead.CRM, LeadCreated: created,
	}
	if d.Outcome == guard.Won {
		m.DedupLockID = d.LockID
	}
	if err := o.Messages.Insert(ctx, m); errors.Is(err, messages.ErrFenced) {
		// Declared gone while it stalled (lease, operator delete, a
		// takeover of its key): whoever fenced it sends instead. Nothing
		// was sent; the caller retries and gets that message.
		logger(c).Warn().Str("event", events.SendFenced).Str("workspaceId", ws.ID).
			Str("messageId", msgID).Str("lockId", d.LockID).Msg("request fenced before its message was written; not sent")
		return s.writePending(c, d.LockID, time.Second, 0)
	} else if err != nil {
		return err
	}
	written = true
	o.Guard.Written(msgID)
	idempotency.MarkSendStage(ctx)
	s.inflight.Store(msgID, ws.ID)
	defer s.inflight.Delete(msgID)
	// The listing index, after the commit point (one insert command). A
	// failure never stops the send: the message exists and goes out; it is
	// only missing from GET /api/messages.
	if err := o.Messages.Index(ctx, m, created); err != nil {
		logger(c).Error().Err(err).Str("event", events.IndexFailed).Str("messageId", m.ID).Msg("message not added to the listing index")
	}

	// Send. A client that hangs up must not cut a provider call in half:
	// the send runs to its own timeout whatever the request does.
	sendCtx := context.WithoutCancel(ctx)
	res := snd.Send(sendCtx, toSenderMessage(m))
	m.Status, m.ProviderMessageID, m.Error = string(res.Status), res.ProviderMessageID, res.Error
	s.recordOutcome(c, m)

	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(c, status, echo.MIMEApplicationJSON, sendResponse{
		Success: true, Status: m.Status, Message: *m, crmKeys: keysOf(lead.ID, lead.CRM),
	})
}

// recordOutcome stores the provider's answer. The send already happened, so
// its outcome must not be lost to a store hiccup: it retries with backoff
// until the write lands or the process gives up (SendOptions.Lifetime),
// and the answer waits for it, so a caller is never told "sent" while the
// message says "sending" for longer than a blip. What is abandoned anyway
// is logged by message id; the outcome sweeper turns it into "unknown".
func (s *Server) recordOutcome(c echo.Context, m *messages.Message) {
	ctx := context.WithoutCancel(c.Request().Context())
	log := logger(c)
	life := s.opts.Send.Lifetime
	if life == nil {
		life = context.Background()
	}
	backoff := outcomeBackoffFirst
	for attempt := 1; ; attempt++ {
		err := s.opts.Send.Messages.RecordOutcome(ctx, m)
		if err == nil {
			break
		}
		if life.Err() != nil {
			log.Error().Err(err).Str("workspaceId", m.WorkspaceID).Str("messageId", m.ID).Str("status", m.Status).
				Msg("send outcome abandoned at shutdown; the message says sending until the outcome sweeper marks it unknown")
			break
		}
		log.Warn().Err(err).Str("messageId", m.ID).Int("attempt", attempt).Dur("retryIn", backoff).Msg("could not record the send outcome; retrying")
		select {
		case <-time.After(backoff):
		case <-life.Done():
		}
		backoff = min(2*backoff, outcomeBackoffMax)
	}
	ev := log.Info().Str("event", events.Sent)
	if m.Status != messages.StatusSent {
		ev = log.Warn().Str("event", events.SendFailed).Str("error", sender.Scrub(m.Error, toSenderMessage(m)))
	}
	ev.Str("workspaceId", m.WorkspaceID).Str("messageId", m.ID).Str("channel", m.Channel).Str("provider", m.Provider).Str("status", m.Status).Msg("send outcome")
	if s.opts.Send.Metrics != nil {
		s.opts.Send.Metrics.Sent(m.Channel, m.Status)
	}
}

// Backoff of outcome writes: 100 ms doubling to 5 s.
const (
	outcomeBackoffFirst = 100 * time.Millisecond
	outcomeBackoffMax   = 5 * time.Second
)

// recordDuplicate records the message.duplicate_blocked event (one insert).
func (s *Server) recordDuplicate(c echo.Context, blockedID string, d guard.Decision) {
	if s.opts.Send.OnDuplicate == nil {
		return
	}
	m, _ := d.Sibling.Doc.(messages.Message)
	if err := s.opts.Send.OnDuplicate(c.Request().Context(), WorkspaceID(c), blockedID, d.LockID, m); err != nil {
		logger(c).Warn().Err(err).Str("lockId", d.LockID).Msg("could not record the duplicate_blocked event")
	}
}

func (s *Server) metricDuplicate(mode string) {
	if s.opts.Send.Metrics != nil {
		s.opts.Send.Metrics.Duplicate(mode)
	}
}

func (s *Server) writeDuplicate(c echo.Context, d guard.Decision) error {
	m, _ := d.Sibling.Doc.(messages.Message)
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, duplicateOf(m, d.LockID, d.SiblingAge))
}

// duplicateOf is the duplicate answer naming the original message m.
func duplicateOf(m messages.Message, lockID string, age time.Duration) duplicateResponse {
	secs := int(max(age, 0).Round(time.Second) / time.Second)
	text := fmt.Sprintf("The same text was sent to this contact %d seconds ago; the existing message is returned and nothing was sent again.", secs)
	return duplicateResponse{
		Success: true, DuplicateOnly: true, DuplicateMessage: text, LockID: lockID,
		Message: &m, crmKeys: keysOf(m.LeadID, m.CRM),
	}
}

// writePending is the "still in flight" answer: not a finished request.
// Retry-After says when a retry will find the original (at least 1 s);
// originalAgeMs is how long the original has been in flight.
func (s *Server) writePending(c echo.Context, lockID string, retryAfter, age time.Duration) error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(retryAfter.Seconds())))))
	ms := age.Milliseconds()
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, duplicateResponse{
		Success: true, DuplicateOnly: true, Pending: true, OriginalAgeMs: &ms, LockID: lockID,
		DuplicateMessage: "An identical request for this contact is still being processed; retry after it completes to get the original message.",
	})
}

func toSenderMessage(m *messages.Message) sender.Message {
	atts := make([]sender.Attachment, len(m.Attachments))
	for i, a := range m.Attachments {
		atts[i] = sender.Attachment{URL: a.URL, Filename: a.Filename, ContentType: a.ContentType}
	}
	return sender.Message{
		ID: m.ID, WorkspaceID: m.WorkspaceID, Channel: m.Channel,
		RecipientPhone: m.RecipientPhone, RecipientEmail: m.RecipientEmail,
		Body: m.Body, Subject: m.Subject, Attachments: atts, Metadata: m.Metadata,
	}
}

// getMessage is GET /api/messages/{id}: the workspace's own messages only.
func (s *Server) getMessage(c echo.Context) error {
	m, err := s.opts.Send.Messages.GetForWorkspace(c.Request().Context(), WorkspaceID(c), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "message": m})
}

// deleteDedupLock is DELETE /api/dedup-locks/{lockId}: an operator frees a
// lock so the same text can be sent again at once.
func (s *Server) deleteDedupLock(c echo.Context) error {
	id := c.Param("lockId")
	if err := s.opts.Send.Guard.Delete(c.Request().Context(), WorkspaceID(c), id); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "deleted": true, "lockId": id})
}
