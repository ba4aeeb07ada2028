// Package send sends a message once: it owns the send path from a request
// body to the recorded provider outcome, and the commit point that makes it
// exactly once.
//
// The order of work is SPEC's: validate → duplicate guard → lead,
// conversation, message → sender → outcome. The insert of the message
// document under its pre-allocated id is the commit point (commit.go): the
// provider is called only if that insert won, and the Idempotency-Key layer
// and the duplicate guard both resolve a stalled or dead request from what
// its message id became. The outcome is recorded with retries (outcome.go),
// and a sweeper decides outcomes a dead process never recorded (sweep.go).
//
// Nothing here knows HTTP: Send returns an Answer (a status and a JSON
// document) that package api encodes.
package send

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/schedule"
	"github.com/msgapi/msgapi/sender"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/workspace"
)

// Sender delivers one message through one provider.
type Sender interface {
	Send(ctx context.Context, m sender.Message) sender.Result
	Name() string
}

// Metrics is what the send path reports.
type Metrics interface {
	Sent(channel, status string)
	Duplicate(mode string)
}

// Options are the send path's dependencies.
type Options struct {
	Messages *messages.Store // required
	Guard    *guard.Guard    // required
	// Senders by channel: "sms", "imessage", "email" (at least one).
	Senders map[string]Sender
	// DefaultRegion for phone numbers without a country code (e.g. "US").
	DefaultRegion string
	// Metrics, optional, observes outcomes.
	Metrics Metrics
	// TestSender sends every message of a test key (mk_test_…): the log
	// provider, which reaches no one. Without it test keys cannot send.
	TestSender Sender
	// SendTimeout is the timeout of a provider call: a pending answer's
	// Retry-After is what is left of it for the original (at least 1 s).
	// Zero: the guard's estimate (the holder's lease).
	SendTimeout time.Duration
	// Lifetime ends when the process gives up on in-flight work (the
	// shutdown timeout has passed): outcome writes stop retrying then.
	// Default: never.
	Lifetime context.Context
	// OnDuplicate, optional, records a blocked duplicate's event
	// (notify.Outbox.RecordDuplicate): blockedID is the id this request had
	// allocated. A failure is logged; the answer stands.
	OnDuplicate func(ctx context.Context, workspaceID, blockedID, lockID string, sibling messages.Message) error
	// Suppressed, optional, reports whether a recipient address (E.164
	// phone or lower-case email) is on the workspace's suppression list,
	// and its source (consent.Store.Check: one read by _id). Nil sends to
	// everyone.
	Suppressed func(ctx context.Context, workspaceID, address string) (source string, suppressed bool, err error)
	// SuppressionDoc, optional beside Suppressed, names the document
	// Suppressed reads (consent.Doc), so that Store prefetches it.
	SuppressionDoc func(workspaceID, address string) store.Doc
	// Store, optional, reads the documents a send reads by _id — the
	// suppression, the dedup lock, the lead — in one round trip
	// (store.Prefetch). Nil: one read each.
	Store *store.Store
	// OnSuppressed, optional, records the message.suppressed event of a
	// suppressed message (notify.Outbox.RecordMessage) before the message
	// is written, as every outcome's event is.
	OnSuppressed func(ctx context.Context, m messages.Message) error
	// Schedule, optional, keeps scheduled sends (sendAt) and their
	// cancellations; without it a request with sendAt is refused.
	Schedule *schedule.Store
	// OnScheduled, optional, records the message.scheduled event of an
	// accepted scheduled message before it is written, and OnCanceled the
	// message.canceled event (notify.Outbox.RecordMessage).
	OnScheduled func(ctx context.Context, m messages.Message) error
	// Workspaces, required with Schedule, reads a workspace by id: the
	// scheduler checks it is still enabled when a message is due.
	Workspaces func(ctx context.Context, id string) (workspace.Workspace, error)
	// Now is the clock of sendAt (default time.Now).
	Now func() time.Time
}

// SuppressedMetrics is what the send path reports about suppressed sends,
// when its Metrics has it.
type SuppressedMetrics interface{ Suppressed(channel string) }

// Service sends messages. Safe for concurrent use.
type Service struct {
	o Options

	inflight sync.Map  // message id → workspace id, from the message insert to its recorded outcome
	local    *localSet // scheduled messages this process accepted (scheduler.go)
}

// New returns a Service. Messages, Guard and at least one sender are
// required.
func New(o Options) (*Service, error) {
	switch {
	case o.Messages == nil:
		return nil, errors.New("send.New: Messages is required")
	case o.Guard == nil:
		return nil, errors.New("send.New: Guard is required")
	case len(o.Senders) == 0:
		return nil, errors.New("send.New: at least one sender is required")
	}
	for ch, s := range o.Senders {
		if s == nil {
			return nil, fmt.Errorf("send.New: the sender of channel %s is nil", ch)
		}
	}
	if o.Lifetime == nil {
		o.Lifetime = context.Background()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Schedule != nil && o.Workspaces == nil {
		return nil, errors.New("send.New: Workspaces is required with Schedule")
	}
	return &Service{o: o, local: newLocalSet()}, nil
}

// DefaultRegion is the region of phone numbers without a country code,
// unless a workspace has its own.
func (s *Service) DefaultRegion() string { return s.o.DefaultRegion }

// Answer is the outcome of one send request: the HTTP status and the JSON
// document (SentAnswer or DuplicateAnswer) to answer with, and whether the
// request reached the send stage. It is msgapi.Answer, so that package api
// reads it without importing this package.
type Answer = msgapi.Answer

// Send validates body, a POST /api/messages document, and sends it once.
// messageID is the id the request's Idempotency-Key claim names; "" for a
// request without a key, which allocates its own. Errors are
// *msgapi.Error for the caller's mistakes and store outages; an Answer
// with no error may still be a duplicate or pending answer.
func (s *Service) Send(ctx context.Context, ws workspace.Workspace, body []byte, messageID string) (Answer, error) {
	o := s.o
	log := zerolog.Ctx(ctx)

	// Validate. Nothing below this block runs for a bad request: it holds
	// no lock and writes nothing.
	req, err := ParseRequest(body, ws.DefaultRegion(o.DefaultRegion))
	if err != nil {
		return Answer{}, err
	}
	scheduled, err := req.Scheduled(o.Now(), schedule.MaxAhead)
	if err != nil {
		return Answer{}, err
	}
	if scheduled && o.Schedule == nil {
		return Answer{}, msgapi.Errorf(msgapi.CodeInvalid, "scheduled sends (sendAt) are not enabled on this server")
	}
	if scheduled, err = s.quietHours(ctx, ws, &req, scheduled); err != nil {
		return Answer{}, err
	}
	var lead *messages.Lead
	if req.LeadID != "" {
		l, err := o.Messages.GetLead(ctx, ws.ID, req.LeadID)
		if err != nil {
			return Answer{}, err
		}
		if err := req.FillFromLead(l.Phone, l.Email); err != nil {
			return Answer{}, err
		}
		lead = &l
	}
	snd, ok := o.Senders[req.Channel]
	if ws.TestKey {
		// A test key runs the whole path (guard, key, events) and never
		// reaches a provider.
		snd, ok = o.TestSender, o.TestSender != nil
	}
	if !ok {
		return Answer{}, fmt.Errorf("no sender configured for channel %s (test key: %v)", req.Channel, ws.TestKey)
	}

	phone, email := req.DeliveryAddress()
	keyed := messageID != ""
	msgID := messageID
	if !keyed {
		msgID = msgapi.NewID("msg")
	}
	gk := guard.Key{WorkspaceID: ws.ID, Phone: phone, Email: email, Body: req.Body}
	if ws.TestKey {
		// Test sends guard among themselves: a test must not make the
		// live send of the same text a duplicate of a message that
		// reached no one (nor the other way round).
		gk.Body = testGuardPrefix + gk.Body
	}
	ctx = s.prefetch(ctx, ws.ID, req, lead, gk, phone+email)

	// Consent, after validation and before the guard: a recipient on the
	// suppression list is never sent to (one read by _id, answered by the
	// prefetch above). The request
	// takes no lock; it writes its message as suppressed and answers.
	if o.Suppressed != nil {
		source, suppressed, err := o.Suppressed(ctx, ws.ID, phone+email)
		if err != nil {
			return Answer{}, err
		}
		if suppressed {
			return s.suppress(ctx, ws, req, lead, msgID, phone, email, source)
		}
	}

	// Duplicate guard. The message id is allocated before anything is
	// claimed (a keyed request's claim already names it), and the insert
	// of the message under it is the commit point: see commit.go.
	limits := guard.Limits{Window: ws.DedupWindow(o.Guard.Window()), Wait: ws.DedupWait(o.Guard.Wait())}
	d, err := o.Guard.AcquireWith(ctx, gk, msgID, limits)
	if err != nil {
		return Answer{}, err
	}
	switch d.Outcome {
	case guard.Duplicate:
		// A duplicate answer is a send-stage outcome: an Idempotency-Key
		// replays it. Under a key, the decision is also committed under
		// the request's own id, so that a retry after this process dies
		// answers the same duplicate instead of running again (and
		// sending, once the window has passed).
		if keyed {
			if err := o.Messages.FenceAsDuplicate(ctx, msgID, d.Sibling.ID); err != nil {
				return Answer{}, err
			}
		}
		s.metricDuplicate(d.Mode)
		m, _ := d.Sibling.Doc.(messages.Message)
		s.recordDuplicate(ctx, ws.ID, msgID, d.LockID, m)
		return Answer{Status: http.StatusOK, Body: duplicateOf(m, d.LockID, d.SiblingAge), SendStage: true, Refused: refused(m.Status)}, nil
	case guard.Pending:
		// Not stored under an Idempotency-Key: a retry with the key must
		// get the original once it is written, not this placeholder.
		s.metricDuplicate("pending")
		retry := d.RetryAfter
		if o.SendTimeout > 0 {
			// Honest: the original should be done when its provider call's
			// timeout has passed, not when its lease ends.
			retry = o.SendTimeout - d.SiblingAge
		}
		return pending(d.LockID, retry, d.SiblingAge), nil
	}

	// Won (or Unguarded: the guard's store failed and we send without it).
	written, fenced := false, false
	if d.Outcome == guard.Won {
		defer func() {
			if written {
				return
			}
			if fenced {
				// Whoever fenced it owns the takeover (a taker between
				// its fence and its claim, a key takeover that fences
				// without claiming): a release here would claim the
				// generation and delete the lock under it. The lock names
				// a tombstone now, which the next request takes over at
				// once. Same-process waiters wake and judge it.
				o.Guard.Fenced(msgID)
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
				log.Warn().Err(err).Str("lockId", d.LockID).Str("messageId", msgID).Msg("release dedup lock")
			}
		}()
	}

	created := false
	if lead == nil {
		l, isNew, err := o.Messages.FindOrCreateLead(ctx, ws.ID, req.RecipientPhone, req.RecipientEmail, req.CRM)
		if err != nil {
			return Answer{}, err
		}
		lead, created = &l, isNew
	} else if l, err := o.Messages.UpdateCRM(ctx, *lead, req.CRM); err != nil {
		return Answer{}, err
	} else {
		lead = &l
	}
	convID, err := o.Messages.EnsureConversation(ctx, ws.ID, lead.ID, phone, email, created)
	if err != nil {
		return Answer{}, err
	}

	m := &messages.Message{
		ID: msgID, WorkspaceID: ws.ID, LeadID: lead.ID, ConversationID: convID,
		Channel: req.Channel, Direction: "outbound",
		RecipientPhone: phone, RecipientEmail: email,
		Body: req.Body, Subject: req.Subject, Attachments: req.Attachments, Metadata: req.Metadata,
		Status: messages.StatusSending, Provider: snd.Name(), CRM: lead.CRM, LeadCreated: created, Test: ws.TestKey,
	}
	if scheduled {
		at := req.SendAt
		m.Status, m.SendAt, m.CancellationKey = messages.StatusScheduled, &at, req.CancellationKey
	}
	if d.Outcome == guard.Won {
		m.DedupLockID = d.LockID
	}
	if scheduled {
		// Recorded before the message (the commit point), so that a
		// message that exists is always due somewhere: a walker that finds
		// a slot whose message is missing fences the id (scheduler.go).
		if err := s.schedule(ctx, m, req); err != nil {
			return Answer{}, err
		}
	}
	indexErr, err := o.Messages.InsertIndexed(ctx, m, created)
	if errors.Is(err, messages.ErrFenced) {
		// Declared gone while it stalled (lease, operator delete, a
		// takeover of its key): whoever fenced it sends instead. Nothing
		// was sent; the caller retries and gets that message. (A
		// duplicate key over our own message, a retried insert whose
		// first attempt landed, is not a fence: the deferred Release
		// finds it written and marks it not sent.)
		cur, found, gerr := o.Messages.Get(context.WithoutCancel(ctx), msgID)
		fenced = gerr != nil || !found || cur.Status == messages.StatusTombstone
		log.Warn().Str("event", events.SendFenced).Str("workspaceId", ws.ID).
			Str("messageId", msgID).Str("lockId", d.LockID).Msg("request fenced before its message was written; not sent")
		return pending(d.LockID, time.Second, 0), nil
	} else if err != nil {
		return Answer{}, err
	}
	// The commit point has passed: from here on the request has sent, as
	// far as any retry is concerned.
	written = true
	o.Guard.Written(msgID)
	s.inflight.Store(msgID, ws.ID)
	defer s.inflight.Delete(msgID)
	// The listing index went beside the commit insert. A failure never stops
	// the send: the message exists and goes out; it is only missing from
	// GET /api/messages.
	if indexErr != nil {
		log.Error().Err(indexErr).Str("event", events.IndexFailed).Str("messageId", m.ID).Msg("message not added to the listing index")
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	if scheduled {
		s.local.add(m.ID, *m.SendAt)
		log.Info().Str("event", events.Scheduled).Str("workspaceId", ws.ID).Str("messageId", m.ID).
			Time("sendAt", *m.SendAt).Msg("message scheduled")
		return Answer{Status: status, Body: sentOf(*m, lead.ID, lead.CRM), SendStage: true}, nil
	}

	// Send. A client that hangs up must not cut a provider call in half:
	// the send runs to its own timeout whatever the request does.
	sendCtx := context.WithoutCancel(ctx)
	res := snd.Send(sendCtx, toSenderMessage(m))
	m.Status, m.ProviderMessageID, m.Error, m.ErrorCode = string(res.Status), res.ProviderMessageID, res.Error, res.Code
	s.recordOutcome(ctx, m)
	return Answer{Status: status, Body: sentOf(*m, lead.ID, lead.CRM), SendStage: true, Refused: refused(m.Status)}, nil
}

// suppress answers a send to a suppressed recipient: its message is
// written final as suppressed (listed and readable like any other), its
// event recorded, and no provider is called. A keyed request's message id
// is its commit point as for a send, so an Idempotency-Key replays this
// answer, and a retry after a crash answers from the message.
func (s *Service) suppress(ctx context.Context, ws workspace.Workspace, req Request, lead *messages.Lead, msgID, phone, email, source string) (Answer, error) {
	o := s.o
	log := zerolog.Ctx(ctx)
	created := false
	if lead == nil {
		l, isNew, err := o.Messages.FindOrCreateLead(ctx, ws.ID, req.RecipientPhone, req.RecipientEmail, req.CRM)
		if err != nil {
			return Answer{}, err
		}
		lead, created = &l, isNew
	}
	convID, err := o.Messages.EnsureConversation(ctx, ws.ID, lead.ID, phone, email, created)
	if err != nil {
		return Answer{}, err
	}
	m := &messages.Message{
		ID: msgID, WorkspaceID: ws.ID, LeadID: lead.ID, ConversationID: convID,
		Channel: req.Channel, Direction: "outbound",
		RecipientPhone: phone, RecipientEmail: email,
		Body: req.Body, Subject: req.Subject, Attachments: req.Attachments, Metadata: req.Metadata,
		Status: messages.StatusSuppressed, ErrorCode: sender.CodeOptedOut,
		Error: "not sent: the recipient is on the suppression list (source " + source + ")",
		CRM:   lead.CRM, LeadCreated: created, Test: ws.TestKey,
	}
	if o.OnSuppressed != nil {
		m.CreatedAt, m.UpdatedAt = time.Now().UTC(), time.Now().UTC()
		if err := o.OnSuppressed(ctx, *m); err != nil {
			return Answer{}, err
		}
	}
	if err := o.Messages.Insert(ctx, m); errors.Is(err, messages.ErrFenced) {
		// A keyed request's id was fenced (its claim was taken over):
		// whoever fenced it answers instead.
		return pending("", time.Second, 0), nil
	} else if err != nil {
		return Answer{}, err
	}
	if err := o.Messages.Index(ctx, m, created); err != nil {
		log.Error().Err(err).Str("event", events.IndexFailed).Str("messageId", m.ID).Msg("message not added to the listing index")
	}
	log.Info().Str("event", events.Suppressed).Str("workspaceId", ws.ID).Str("messageId", m.ID).
		Str("channel", m.Channel).Str("source", source).Msg("recipient opted out: not sent")
	if sm, ok := o.Metrics.(SuppressedMetrics); ok {
		sm.Suppressed(m.Channel)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return Answer{Status: status, Body: sentOf(*m, lead.ID, lead.CRM), SendStage: true, Refused: true}, nil
}

// prefetch reads, in one round trip, the documents the steps after it read
// by _id first (store.Prefetch): the recipient's suppression (the consent
// check), the dedup lock (the guard's first read) and the lead (unless the
// request named it, and it was read already). Each step still reads the
// store itself if the prefetch failed, if it reads the document again, or
// if it comes to read it more than store.PrefetchMaxAge later (a
// duplicate that waited for its original).
func (s *Service) prefetch(ctx context.Context, workspaceID string, req Request, lead *messages.Lead, gk guard.Key, address string) context.Context {
	o := s.o
	if o.Store == nil {
		return ctx
	}
	docs := []store.Doc{guard.LockDoc(gk)}
	if o.Suppressed != nil && o.SuppressionDoc != nil && address != "" {
		docs = append(docs, o.SuppressionDoc(workspaceID, address))
	}
	if lead == nil {
		docs = append(docs, messages.LeadDoc(workspaceID, req.RecipientPhone, req.RecipientEmail))
	}
	return o.Store.Prefetch(ctx, docs...)
}

// testGuardPrefix separates test sends' dedup locks from live ones (a NUL
// never starts a valid body).
const testGuardPrefix = "\x00test\x00"

// InFlight lists the messages written but whose outcome is not recorded
// yet, as "workspaceId/messageId": what a shutdown that runs out of time
// abandons to the outcome sweeper.
func (s *Service) InFlight() []string {
	var out []string
	s.inflight.Range(func(k, v any) bool {
		out = append(out, v.(string)+"/"+k.(string))
		return true
	})
	return out
}

// DeleteLock frees a dedup lock of the workspace (an operator's DELETE
// /api/dedup-locks/{lockId}), so the same text can be sent again at once.
func (s *Service) DeleteLock(ctx context.Context, workspaceID, lockID string) error {
	return s.o.Guard.Delete(ctx, workspaceID, lockID)
}

// recordDuplicate records the message.duplicate_blocked event (one insert).
func (s *Service) recordDuplicate(ctx context.Context, workspaceID, blockedID, lockID string, sibling messages.Message) {
	if s.o.OnDuplicate == nil {
		return
	}
	if err := s.o.OnDuplicate(ctx, workspaceID, blockedID, lockID, sibling); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("lockId", lockID).Msg("could not record the duplicate_blocked event")
	}
}

func (s *Service) metricDuplicate(mode string) {
	if s.o.Metrics != nil {
		s.o.Metrics.Duplicate(mode)
	}
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
