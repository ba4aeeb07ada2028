// Package consent keeps each workspace's suppression list: the phone
// numbers and email addresses that said "no more messages", and decides
// whether a send may go to a recipient.
//
// What it decides, and how, on MongoDB and the embedded engine alike:
//
//   - A suppression's _id is a hash of (workspace, normalised address), so
//     the send path's check is one read by _id (the one lookup the embedded
//     engine indexes), whatever the list holds. A phone number covers sms
//     and imessage: one human, one phone.
//   - Recording is idempotent: a suppression that is already active stays
//     as first recorded (its source and evidence), and the same evidence
//     (an inbound message id) never suppresses twice, so a vendor's
//     redelivery of a STOP records nothing new. Lifting (START, DELETE)
//     keeps the document, marked inactive, for the record.
//   - Once Suppress has returned, every check that starts afterwards, in any
//     process, reads the active document: the check is a read of the
//     document the write acknowledged, not a cache.
//   - Listing walks a per-workspace log of dense slots ("W:n", the pattern
//     of notify's event log), newest first, showing each active
//     suppression at its latest slot only.
package consent

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/contact"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/store"
)

// Sources of a suppression (and of its lifting).
const (
	SourceKeyword     = "keyword"     // an inbound STOP (or START, lifting)
	SourceProvider    = "provider"    // the provider refused: the recipient opted out there (Twilio 21610)
	SourceUnsubscribe = "unsubscribe" // an email's one-click unsubscribe (RFC 8058)
	SourceAPI         = "api"         // POST/DELETE /api/suppressions
)

// Kinds of address.
const (
	KindPhone = "phone"
	KindEmail = "email"
)

// Actions of a Change.
const (
	ActionSuppressed = "suppressed"
	ActionLifted     = "lifted"
)

// Collections used by this package.
var Collections = []store.Collection{{Name: collSuppressions}, {Name: collLog}, {Name: collReplies}, {Name: collClaims}, {Name: collKeys}}

const (
	collSuppressions = "suppressions"
	collLog          = "suppression_log"
	collReplies      = "consent_replies"
	collClaims       = "consent_claims"
	collKeys         = "consent_keys"
)

// Evidence is why an address is suppressed.
type Evidence struct {
	// MessageID: the inbound message (keyword) or the refused outbound
	// message (provider).
	MessageID string `bson:"messageId,omitempty" json:"messageId,omitempty"`
	Channel   string `bson:"channel,omitempty" json:"channel,omitempty"`
	Keyword   string `bson:"keyword,omitempty" json:"keyword,omitempty"`
	// ProviderError is the provider's refusal, e.g. "twilio 21610".
	ProviderError string `bson:"providerError,omitempty" json:"providerError,omitempty"`
	Reason        string `bson:"reason,omitempty" json:"reason,omitempty"`
}

// Suppression is one address of a workspace's list.
type Suppression struct {
	ID          string    `bson:"_id" json:"-"`
	WorkspaceID string    `bson:"workspaceId" json:"-"`
	Address     string    `bson:"address" json:"address"`
	Kind        string    `bson:"kind" json:"kind"`
	Active      bool      `bson:"active" json:"-"`
	Source      string    `bson:"source" json:"source"`
	Evidence    Evidence  `bson:"evidence" json:"evidence"`
	CreatedAt   time.Time `bson:"createdAt" json:"createdAt"`
	Seq         int64     `bson:"seq" json:"-"`
	// The last lifting, kept when the address is suppressed again.
	LiftedAt     *time.Time `bson:"liftedAt,omitempty" json:"-"`
	LiftSource   string     `bson:"liftSource,omitempty" json:"-"`
	LiftEvidence *Evidence  `bson:"liftEvidence,omitempty" json:"-"`
}

// Change is a suppression recorded or lifted, for events and metrics.
type Change struct {
	Action      string // ActionSuppressed | ActionLifted
	Suppression Suppression
	Source      string // of this change
	Evidence    Evidence
	At          time.Time
}

// Options are the Store's dependencies.
type Options struct {
	Store *store.Store
	// OnChange, optional, runs after each change is written (the outbox
	// event, the metric). A failure is returned to the caller, whose retry
	// (the vendor's redelivery, the client's) runs it again: it must be
	// idempotent.
	OnChange func(ctx context.Context, c Change) error
	// Now is the clock (tests).
	Now func() time.Time
}

// Store is the suppression list.
type Store struct {
	sup, log, replies, claims, keys *mongo.Collection
	onChange                        func(ctx context.Context, c Change) error
	now                             func() time.Time
}

// New returns a Store.
func New(o Options) *Store {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Store{
		sup: o.Store.Collection(collSuppressions), log: o.Store.Collection(collLog),
		replies: o.Store.Collection(collReplies), claims: o.Store.Collection(collClaims), keys: o.Store.Collection(collKeys),
		onChange: o.OnChange,
		now:      func() time.Time { return now().UTC().Truncate(time.Millisecond) },
	}
}

// ID is the _id of the suppression of an address in a workspace.
func ID(workspaceID, address string) string {
	return "sup_" + msgapi.HashID("suppression", workspaceID, address)
}

// Doc names the suppression document of address, which Check reads: what a
// send prefetches (store.Prefetch).
func Doc(workspaceID, address string) store.Doc {
	return store.Doc{Collection: collSuppressions, ID: ID(workspaceID, address)}
}

// Normalize turns an address as a caller wrote it into the list's form: a
// phone number in E.164 (region for numbers without a country code) or a
// lower-case email address.
func Normalize(raw, region string) (address, kind string, err error) {
	raw = strings.TrimSpace(raw)
	if strings.Contains(raw, "@") {
		e, err := contact.NormalizeEmail(raw)
		if err != nil {
			return "", "", msgapi.Errorf(msgapi.CodeInvalid, "the address is neither an E.164 phone number nor an email address")
		}
		return e, KindEmail, nil
	}
	p, err := contact.NormalizePhone(raw, region)
	if err != nil {
		return "", "", msgapi.Errorf(msgapi.CodeInvalid, "the address is neither an E.164 phone number nor an email address")
	}
	return p, KindPhone, nil
}

func kindOf(address string) string {
	if strings.Contains(address, "@") {
		return KindEmail
	}
	return KindPhone
}

// Check reports whether address (already normalised) is suppressed in the
// workspace: one read by _id.
func (s *Store) Check(ctx context.Context, workspaceID, address string) (Suppression, bool, error) {
	if address == "" {
		return Suppression{}, false, nil
	}
	sp, found, err := s.read(ctx, ID(workspaceID, address))
	if err != nil || !found || !sp.Active {
		return Suppression{}, false, err
	}
	return sp, true, nil
}

// Get returns the active suppression of address, or CodeNotFound.
func (s *Store) Get(ctx context.Context, workspaceID, address string) (Suppression, error) {
	sp, ok, err := s.Check(ctx, workspaceID, address)
	if err != nil {
		return Suppression{}, err
	}
	if !ok {
		return Suppression{}, msgapi.Errorf(msgapi.CodeNotFound, "the address is not suppressed")
	}
	return sp, nil
}

func (s *Store) read(ctx context.Context, id string) (Suppression, bool, error) {
	var sp Suppression
	// A send's check may be answered by its prefetch (store.Prefetch, Doc).
	err := store.FindByID(ctx, s.sup, id).Decode(&sp)
	switch {
	case store.IsNotFound(err):
		return Suppression{}, false, nil
	case err != nil:
		return Suppression{}, false, msgapi.Unavailable(fmt.Errorf("read suppression %s: %w", id, err))
	}
	return sp, true, nil
}

// Suppress puts address (already normalised) on the workspace's list and
// reports whether this call changed anything. An address already
// suppressed keeps its first record; evidence naming a message that
// already suppressed it once (a redelivered STOP after a START) changes
// nothing either.
func (s *Store) Suppress(ctx context.Context, workspaceID, address, source string, ev Evidence) (Suppression, bool, error) {
	id := ID(workspaceID, address)
	cur, found, err := s.read(ctx, id)
	if err != nil {
		return Suppression{}, false, err
	}
	if found && (cur.Active || (ev.MessageID != "" && cur.Evidence.MessageID == ev.MessageID)) {
		return cur, false, nil
	}
	// Concurrent deliveries of one STOP (or one refused message) all get
	// here: the one whose claim insert wins records it, once.
	if won, err := s.claim(ctx, ActionSuppressed, workspaceID, address, ev.MessageID); err != nil || !won {
		if err == nil {
			cur, _, err = s.read(ctx, id)
		}
		return cur, false, err
	}
	now := s.now()
	seq, err := s.appendLog(ctx, workspaceID, id, now)
	if err != nil {
		return Suppression{}, false, err
	}
	sp := Suppression{ID: id, WorkspaceID: workspaceID, Address: address, Kind: kindOf(address), Active: true,
		Source: source, Evidence: ev, CreatedAt: now, Seq: seq}
	if found {
		sp.LiftedAt, sp.LiftSource, sp.LiftEvidence = cur.LiftedAt, cur.LiftSource, cur.LiftEvidence
	}
	// Every writer writes a fact (this address said no, now): the last
	// one standing is as good as any, so a plain replace by _id suffices.
	if _, err := s.sup.ReplaceOne(ctx, store.ByID(id), sp, options.Replace().SetUpsert(true)); err != nil {
		return Suppression{}, false, msgapi.Unavailable(fmt.Errorf("write suppression %s: %w", id, err))
	}
	s.logChange(ctx, ActionSuppressed, sp, source, ev)
	return sp, true, s.changed(ctx, Change{Action: ActionSuppressed, Suppression: sp, Source: source, Evidence: ev, At: now})
}

// Lift takes address off the list (START, DELETE) and reports whether it
// was on it.
func (s *Store) Lift(ctx context.Context, workspaceID, address, source string, ev Evidence) (bool, error) {
	id := ID(workspaceID, address)
	cur, found, err := s.read(ctx, id)
	if err != nil || !found || !cur.Active {
		return false, err
	}
	if won, err := s.claim(ctx, ActionLifted, workspaceID, address, ev.MessageID); err != nil || !won {
		return false, err
	}
	now := s.now()
	cur.Active, cur.LiftedAt, cur.LiftSource, cur.LiftEvidence = false, &now, source, &ev
	if _, err := s.sup.ReplaceOne(ctx, store.ByID(id), cur); err != nil {
		return false, msgapi.Unavailable(fmt.Errorf("lift suppression %s: %w", id, err))
	}
	s.logChange(ctx, ActionLifted, cur, source, ev)
	return true, s.changed(ctx, Change{Action: ActionLifted, Suppression: cur, Source: source, Evidence: ev, At: now})
}

func (s *Store) changed(ctx context.Context, c Change) error {
	if s.onChange == nil {
		return nil
	}
	return s.onChange(ctx, c)
}

// logChange writes the Loki event of a change. The address is in the line
// (the operator's question is "who opted out"), never in a label.
func (s *Store) logChange(ctx context.Context, action string, sp Suppression, source string, ev Evidence) {
	name := events.ConsentOptedOut
	if action == ActionLifted {
		name = events.ConsentOptedIn
	}
	zerolog.Ctx(ctx).Info().Str("event", name).Str("workspaceId", sp.WorkspaceID).Str("address", sp.Address).
		Str("kind", sp.Kind).Str("source", source).Str("evidenceMessageId", ev.MessageID).
		Str("keyword", ev.Keyword).Str("providerError", ev.ProviderError).Msg("suppression list changed")
}

// claim decides which of concurrent callers records a change that names
// its evidence (an inbound message, a refused message): the one whose
// insert of (action, workspace, address, message) wins. Changes without
// evidence (the API) are not claimed: a repeat of them is a new fact.
func (s *Store) claim(ctx context.Context, action, workspaceID, address, messageID string) (bool, error) {
	if messageID == "" {
		return true, nil
	}
	id := "cc_" + msgapi.HashID("claim", action, workspaceID, address, messageID)
	_, err := s.claims.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "workspaceId", Value: workspaceID}, {Key: "createdAt", Value: s.now()}})
	switch {
	case err == nil:
		return true, nil
	case store.IsDuplicateKey(err):
		return false, nil
	}
	return false, msgapi.Unavailable(fmt.Errorf("claim consent change %s: %w", id, err))
}

// ClaimReply decides, once per inbound event, who sends the confirmation
// reply to a keyword: the one caller whose insert of the claim wins.
func (s *Store) ClaimReply(ctx context.Context, workspaceID, inboundMessageID string) (bool, error) {
	id := "cr_" + msgapi.HashID("reply", workspaceID, inboundMessageID)
	_, err := s.replies.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "workspaceId", Value: workspaceID},
		{Key: "messageId", Value: inboundMessageID}, {Key: "createdAt", Value: s.now()}})
	switch {
	case err == nil:
		return true, nil
	case store.IsDuplicateKey(err):
		return false, nil
	}
	return false, msgapi.Unavailable(fmt.Errorf("claim consent reply %s: %w", id, err))
}

// The log of a workspace's suppressions, for listing: entry n of workspace
// W has _id "W:n", n = 1, 2, … without gaps (a slot is taken by inserting
// it). The head hint "W:head" is raised after each append; the true head
// is found by reading forward from it.

type logEntry struct {
	ID            string    `bson:"_id"`
	WorkspaceID   string    `bson:"workspaceId"`
	Seq           int64     `bson:"seq"`
	SuppressionID string    `bson:"suppressionId"`
	At            time.Time `bson:"at"`
}

type logHead struct {
	ID  string `bson:"_id"`
	Seq int64  `bson:"seq"`
}

func logID(ws string, n int64) string { return ws + ":" + strconv.FormatInt(n, 10) }
func headID(ws string) string         { return ws + ":head" }

func (s *Store) appendLog(ctx context.Context, ws, supID string, at time.Time) (int64, error) {
	h, err := s.headHint(ctx, ws)
	if err != nil {
		return 0, err
	}
	for n := h + 1; n < h+100000; n++ {
		_, err := s.log.InsertOne(ctx, logEntry{ID: logID(ws, n), WorkspaceID: ws, Seq: n, SuppressionID: supID, At: at})
		if err == nil {
			_, _ = s.log.UpdateOne(ctx, store.ByID(headID(ws)), bson.D{{Key: "$max", Value: bson.D{{Key: "seq", Value: n}}}}, options.UpdateOne().SetUpsert(true))
			return n, nil
		}
		if !store.IsDuplicateKey(err) {
			return 0, msgapi.Unavailable(fmt.Errorf("append to the suppression log: %w", err))
		}
	}
	return 0, fmt.Errorf("append to the suppression log: no free slot")
}

func (s *Store) headHint(ctx context.Context, ws string) (int64, error) {
	var h logHead
	err := s.log.FindOne(ctx, store.ByID(headID(ws))).Decode(&h)
	if err != nil && !store.IsNotFound(err) {
		return 0, msgapi.Unavailable(fmt.Errorf("read suppression log head: %w", err))
	}
	return h.Seq, nil
}

func (s *Store) head(ctx context.Context, ws string) (int64, error) {
	h, err := s.headHint(ctx, ws)
	if err != nil {
		return 0, err
	}
	for {
		err := s.log.FindOne(ctx, store.ByID(logID(ws, h+1))).Err()
		if store.IsNotFound(err) {
			return h, nil
		}
		if err != nil {
			return 0, msgapi.Unavailable(fmt.Errorf("read suppression log: %w", err))
		}
		h++
	}
}

// Page is one page of suppressions, newest first.
type Page struct {
	Suppressions []Suppression
	NextCursor   string // "" on the last page
}

// maxScan bounds the log entries one page reads (entries of lifted
// suppressions are skipped); the page then ends early with a cursor.
const maxScan = 1000

// List returns a page of the workspace's active suppressions, newest first.
func (s *Store) List(ctx context.Context, ws, cursor string, limit int) (Page, error) {
	var from int64
	if cursor != "" {
		n, err := decodeCursor(cursor)
		if err != nil {
			return Page{}, err
		}
		from = n
	} else {
		h, err := s.head(ctx, ws)
		if err != nil {
			return Page{}, err
		}
		from = h
	}
	page := Page{Suppressions: []Suppression{}}
	n := from
	const batch = 16
	for scanned := 0; n > 0 && len(page.Suppressions) < limit && scanned < maxScan; {
		k := min(int64(batch), n)
		sups := make([]Suppression, k)
		ok := make([]bool, k)
		errs := make([]error, k)
		var wg sync.WaitGroup
		for i := range k {
			wg.Go(func() {
				var en logEntry
				if err := s.log.FindOne(ctx, store.ByID(logID(ws, n-i))).Decode(&en); err != nil {
					if !store.IsNotFound(err) {
						errs[i] = err
					}
					return
				}
				sp, found, err := s.read(ctx, en.SuppressionID)
				errs[i] = err
				ok[i] = found && sp.Active && sp.Seq == en.Seq && sp.WorkspaceID == ws
				sups[i] = sp
			})
		}
		wg.Wait()
		for i := range k {
			if errs[i] != nil {
				return Page{}, msgapi.Unavailable(fmt.Errorf("read suppression log: %w", errs[i]))
			}
			n, scanned = n-1, scanned+1
			if ok[i] {
				page.Suppressions = append(page.Suppressions, sups[i])
				if len(page.Suppressions) == limit {
					break
				}
			}
		}
	}
	if n > 0 {
		page.NextCursor = encodeCursor(n)
	}
	return page, nil
}

func encodeCursor(n int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("sup1:" + strconv.FormatInt(n, 10)))
}

func decodeCursor(c string) (int64, error) {
	bad := &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the cursor is invalid",
		Fields: []msgapi.FieldError{{Field: "cursor", Message: "use the nextCursor of a previous page"}}}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, bad
	}
	v, ok := strings.CutPrefix(string(b), "sup1:")
	if !ok {
		return 0, bad
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, bad
	}
	return n, nil
}

// Suppressed is Check as the send path consumes it (send.Options.Suppressed).
func (s *Store) Suppressed(ctx context.Context, workspaceID, address string) (string, bool, error) {
	sp, ok, err := s.Check(ctx, workspaceID, address)
	return sp.Source, ok, err
}
