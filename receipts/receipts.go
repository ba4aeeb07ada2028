// Package receipts turns providers' delivery receipts into message status
// changes: Twilio status callbacks (POST /api/receipts/twilio, signed with
// the Twilio auth token) and the webhook relay's status callbacks (POST
// /api/receipts/webhook, Standard Webhooks signature with the relay secret).
//
// Receipts repeat and arrive out of order, so a receipt decides nothing by
// updating. Each (message, vendor id, status) is recorded once, by a unique
// insert; the message's status is then the highest-ranked recorded status
// (messages.Rank), written through messages.Store.RecordOutcome, which
// records its event first and never moves a message backwards (its move is
// conditional on the status it read, atomic on both engines). A move can
// lose to a concurrent one, so after writing the handler reads the message
// again and repeats until it shows a status at least as high as every
// recorded one: two receipts racing converge on the highest.
package receipts

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/store"
)

const collReceipts = "message_receipts"

// Collections used by this package: one document per distinct receipt.
var Collections = []store.Collection{{Name: collReceipts, ExpiresField: "expiresAt"}}

// retention of receipt records: longer than any vendor's callback retries.
const retention = 30 * 24 * time.Hour

// receiptStatuses are the statuses a receipt can carry, as msgapi states.
var receiptStatuses = []string{messages.StatusSent, messages.StatusDelivered, messages.StatusUndelivered, messages.StatusFailed, messages.StatusRead}

// Receipt is one status report of a provider about one message.
type Receipt struct {
	MessageID string
	Provider  string // "twilio", "webhook"
	VendorID  string // the provider's message id (Twilio MessageSid)
	Status    string // a msgapi state (messages.Status*)
	At        time.Time
	ErrorCode string
}

type record struct {
	ID        string    `bson:"_id"`
	MessageID string    `bson:"messageId"`
	Provider  string    `bson:"provider"`
	VendorID  string    `bson:"vendorId,omitempty"`
	Status    string    `bson:"status"`
	At        time.Time `bson:"at"`
	ErrorCode string    `bson:"errorCode,omitempty"`
	CreatedAt time.Time `bson:"createdAt"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

func recordID(messageID, provider, status string) string {
	return "rcpt_" + msgapi.HashID(messageID, provider, status)
}

// Options are the Handler's dependencies.
type Options struct {
	Store    *store.Store
	Messages *messages.Store
	// TwilioAuthToken verifies Twilio's callbacks; empty refuses them all.
	TwilioAuthToken string
	// RelaySecret verifies the webhook relay's callbacks; empty refuses them.
	RelaySecret string
	// PublicBaseURL is the origin Twilio calls (MSGAPI_PUBLIC_URL), for its
	// signature; empty: from the request and X-Forwarded-Proto/Host.
	PublicBaseURL string
	// TrustedProxies: X-Forwarded-Proto/Host are believed only from these
	// peers (MSGAPI_TRUSTED_PROXIES), as for inbound webhooks.
	TrustedProxies []netip.Prefix
	// OnStatus, optional, records the event of a status the message passed
	// through (notify.Outbox.RecordMessage): when a later status won the
	// race (read before delivered), the earlier one still gets its event.
	OnStatus func(ctx context.Context, m messages.Message) error
	Now      func() time.Time
}

// Handler serves the receipt routes.
type Handler struct {
	opts Options
	recs *mongo.Collection
	now  func() time.Time
}

// New returns a Handler.
func New(o Options) *Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Handler{opts: o, recs: o.Store.Collection(collReceipts), now: func() time.Time { return o.Now().UTC().Truncate(time.Millisecond) }}
}

// Outcome says what one receipt did.
type Outcome struct {
	MessageID string `json:"messageId"`
	Status    string `json:"status"`    // the message's status after it
	Duplicate bool   `json:"duplicate"` // this receipt was recorded before
}

// Apply records one receipt and moves its message to the highest recorded
// status. The message must be an outbound message of the provider.
func (h *Handler) Apply(ctx context.Context, r Receipt) (Outcome, error) {
	log := zerolog.Ctx(ctx).With().Str("messageId", r.MessageID).Str("provider", r.Provider).Str("receiptStatus", r.Status).Logger()
	m, found, err := h.opts.Messages.Get(ctx, r.MessageID)
	if err != nil {
		return Outcome{}, err
	}
	if !found || m.Direction != "outbound" || m.Status == messages.StatusTombstone {
		return Outcome{}, msgapi.Errorf(msgapi.CodeNotFound, "message %q does not exist", r.MessageID)
	}
	// A receipt is about one send: the provider that made it, and the id
	// the provider gave it (when the send outcome has recorded one; before
	// that, the receipt's id becomes the message's). A mismatch looks like
	// an unknown message, so a receipt cannot probe other messages.
	if m.Provider != r.Provider || (m.ProviderMessageID != "" && m.ProviderMessageID != r.VendorID) {
		log.Warn().Str("event", events.ReceiptMismatch).Str("messageProvider", m.Provider).Msg("delivery receipt refused: another provider's, or another send's provider id")
		return Outcome{}, msgapi.Errorf(msgapi.CodeNotFound, "message %q does not exist", r.MessageID)
	}
	now := h.now()
	if r.At.IsZero() {
		r.At = now
	}
	rec := record{ID: recordID(r.MessageID, r.Provider, r.Status), MessageID: r.MessageID, Provider: r.Provider, VendorID: r.VendorID,
		Status: r.Status, At: r.At.UTC().Truncate(time.Millisecond), ErrorCode: r.ErrorCode, CreatedAt: now, ExpiresAt: now.Add(retention)}
	_, err = h.recs.InsertOne(ctx, rec)
	dup := store.IsDuplicateKey(err)
	if err != nil && !dup {
		return Outcome{}, msgapi.Unavailable(fmt.Errorf("record receipt: %w", err))
	}

	// Converge: write the best recorded status until the message shows it.
	for range 5 {
		best, ok, err := h.best(ctx, r.MessageID, r.Provider)
		if err != nil {
			return Outcome{}, err
		}
		if !ok || !messages.CanMove(m.Status, best.Status) {
			break
		}
		next := m
		next.Status, next.ErrorCode, next.Error = best.Status, best.ErrorCode, ""
		if best.ErrorCode != "" {
			next.Error = r.Provider + " error " + best.ErrorCode
		}
		at := best.At
		next.StatusAt = &at
		if m.ProviderMessageID == "" && best.VendorID != "" {
			next.ProviderMessageID = best.VendorID
		}
		if err := h.opts.Messages.RecordOutcome(ctx, &next); err != nil {
			return Outcome{}, msgapi.Unavailable(err)
		}
		if m, found, err = h.opts.Messages.Get(ctx, r.MessageID); err != nil || !found {
			return Outcome{}, msgapi.Unavailable(fmt.Errorf("re-read message %s: %v", r.MessageID, err))
		}
	}
	// The message passed through (or is at) this receipt's status even if a
	// higher one was written first, or it was written without an event: its
	// event too (idempotent by _id, so a repeat records nothing).
	if h.opts.OnStatus != nil && (r.Status == m.Status || messages.CanMove(r.Status, m.Status)) {
		passed := m
		passed.Status = r.Status
		if err := h.opts.OnStatus(ctx, passed); err != nil {
			return Outcome{}, msgapi.Unavailable(err)
		}
	}
	ev := log.Info().Str("event", events.ReceiptRecorded)
	if dup {
		ev = log.Info().Str("event", events.ReceiptDuplicate)
	}
	ev.Str("status", m.Status).Str("workspaceId", m.WorkspaceID).Msg("delivery receipt")
	return Outcome{MessageID: m.ID, Status: m.Status, Duplicate: dup}, nil
}

// best is the highest-ranked receipt recorded for a message (one lookup by
// _id per possible status).
func (h *Handler) best(ctx context.Context, messageID, provider string) (record, bool, error) {
	var best record
	found := false
	for _, st := range receiptStatuses {
		var r record
		err := h.recs.FindOne(ctx, bson.D{{Key: "_id", Value: recordID(messageID, provider, st)}}).Decode(&r)
		if store.IsNotFound(err) {
			continue
		}
		if err != nil {
			return record{}, false, msgapi.Unavailable(fmt.Errorf("read receipt: %w", err))
		}
		if !found || messages.Rank(r.Status) > messages.Rank(best.Status) {
			best, found = r, true
		}
	}
	return best, found, nil
}
