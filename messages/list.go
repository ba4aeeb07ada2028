package messages

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

// Listing limits.
const (
	DefaultLimit = 20
	MaxLimit     = 100
	// MaxScan bounds the index entries one list request examines. Filters
	// the feeds are not keyed on (direction, channel, status, since, until,
	// a lead inside a conversation) are applied to the entries read; a
	// sparse filter may fill less than a page within this bound, and the
	// page then ends early with hasMore and a cursor to go on from.
	MaxScan = 250
	// clockSlack: entries are in recording order, and createdAt follows it
	// to within the clock difference of msgapi processes; since stops the
	// scan only once entries are this much older.
	clockSlack = time.Minute
)

// The values the filters take.
var (
	directions = []string{"outbound", "inbound"}
	channels   = []string{ChannelSMS, ChannelIMessage, ChannelEmail, "whatsapp", "slack", "telegram"}
	// listable are the states a listed message can be in (never a tombstone).
	listable = []string{StatusScheduled, StatusCanceled, StatusSending, StatusSent, StatusFailed, StatusUnknown, StatusDelivered, StatusUndelivered, StatusRead, StatusReceived, StatusSuppressed}
)

// ListFilter selects messages. Zero fields do not filter.
type ListFilter struct {
	LeadID, ConversationID     string
	Direction, Status, Channel string
	Since, Until               time.Time // createdAt ≥ Since, ≤ Until
}

// ListQuery is a validated list request.
type ListQuery struct {
	ListFilter
	Limit  int
	cursor int64 // the slot to read first; 0: the head
}

// Page is one page of a listing, newest first.
type Page struct {
	Data       []Message `json:"data"`
	HasMore    bool      `json:"hasMore"`
	NextCursor *string   `json:"nextCursor"`
}

// ParseListQuery validates list parameters (all of them at once). allowed
// names the parameters the route takes; any other is an error, so a typo
// (lead_id) never silently lists everything.
func ParseListQuery(q map[string][]string, allowed ...string) (ListQuery, error) {
	var (
		lq   = ListQuery{Limit: DefaultLimit}
		errs []msgapi.FieldError
		bad  = func(field, msg string) { errs = append(errs, msgapi.FieldError{Field: field, Message: msg}) }
	)
	names := slices.Sorted(maps.Keys(q))
	var rawCursor string
	for _, name := range names {
		vals := q[name]
		if !slices.Contains(allowed, name) {
			bad(name, "unknown parameter; this route takes "+strings.Join(allowed, ", "))
			continue
		}
		if len(vals) != 1 {
			bad(name, "give it once")
			continue
		}
		v := vals[0]
		switch name {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxLimit {
				bad(name, fmt.Sprintf("an integer from 1 to %d", MaxLimit))
			}
			lq.Limit = n
		case "cursor":
			rawCursor = v
		case "leadId":
			lq.LeadID = v
			if v == "" || len(v) > 200 {
				bad(name, "a lead id")
			}
		case "conversationId":
			lq.ConversationID = v
			if v == "" || len(v) > 200 {
				bad(name, "a conversation id")
			}
		case "direction":
			lq.Direction = v
			if !slices.Contains(directions, v) {
				bad(name, "one of "+strings.Join(directions, ", "))
			}
		case "status":
			lq.Status = v
			if !slices.Contains(listable, v) {
				bad(name, "one of "+strings.Join(listable, ", "))
			}
		case "channel":
			lq.Channel = v
			if !slices.Contains(channels, v) {
				bad(name, "one of "+strings.Join(channels, ", "))
			}
		case "since", "until":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				bad(name, "an RFC 3339 date-time, e.g. 2026-12-02T13:20:01Z")
			}
			if name == "since" {
				lq.Since = t
			} else {
				lq.Until = t
			}
		}
	}
	if !lq.Since.IsZero() && !lq.Until.IsZero() && lq.Until.Before(lq.Since) {
		bad("until", "must not be before since")
	}
	if rawCursor != "" && len(errs) == 0 {
		slot, err := lq.decodeCursor(rawCursor)
		if err != "" {
			bad("cursor", err)
		}
		lq.cursor = slot
	} else if _, given := q["cursor"]; given && rawCursor == "" {
		bad("cursor", "empty; omit it for the first page")
	}
	if len(errs) > 0 {
		return ListQuery{}, &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the query has invalid parameters; see errors", Fields: errs}
	}
	return lq, nil
}

// A cursor is "c1." + base64url(slot "." filter hash): the slot to read
// next, bound to the filters it was issued for, so a cursor used with other
// filters is refused rather than silently mixing two listings.
func (q ListQuery) encodeCursor(slot int64) string {
	return "c1." + base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(slot, 10)+"."+q.filterHash()))
}

func (q ListQuery) decodeCursor(c string) (int64, string) {
	const invalid = "not a cursor this API issued; pass nextCursor back unchanged"
	raw, ok := strings.CutPrefix(c, "c1.")
	if !ok || len(raw) > 64 {
		return 0, invalid
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return 0, invalid
	}
	slotPart, hash, ok := strings.Cut(string(b), ".")
	slot, err := strconv.ParseInt(slotPart, 10, 64)
	if !ok || err != nil || slot < 1 {
		return 0, invalid
	}
	if hash != q.filterHash() {
		return 0, "issued for other filters; use the same leadId, conversationId, direction, status, channel, since and until as the first page"
	}
	return slot, ""
}

func (q ListQuery) filterHash() string {
	f := q.ListFilter
	h := sha256.Sum256([]byte(msgapi.HashID(f.LeadID, f.ConversationID, f.Direction, f.Status, f.Channel,
		timeKey(f.Since), timeKey(f.Until))))
	return hex.EncodeToString(h[:6])
}

func timeKey(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// List returns one page of a workspace's messages, newest first (in the
// order they were recorded). Cost: a read of the slot above the remembered
// head for a first page, then for each examined slot one read of its entry,
// and for each entry that passes the filters one read of its message —
// independent of how many messages are stored; at most MaxScan entries.
func (s *Store) List(ctx context.Context, workspaceID string, q ListQuery) (Page, error) {
	kind, id := feedWorkspace, workspaceID
	switch {
	case q.ConversationID != "":
		kind, id = feedConversation, q.ConversationID
	case q.LeadID != "":
		kind, id = feedLead, q.LeadID
	}
	feed := feedKey(workspaceID, kind, id)

	pos := q.cursor
	if pos == 0 {
		head, err := s.findHead(ctx, feed)
		if err != nil {
			return Page{}, err
		}
		pos = head
	}

	page := Page{Data: []Message{}}
	examined := 0
	// want one more than the limit: finding it is how hasMore is known.
	for pos >= 1 && examined < MaxScan {
		want := q.Limit + 1 - len(page.Data)
		n := min(int64(want), pos, int64(MaxScan-examined))
		slots := make([]int64, n)
		for i := range slots {
			slots[i] = pos - int64(i)
		}
		found, stop, err := s.readSlots(ctx, workspaceID, feed, slots, q.ListFilter)
		if err != nil {
			return Page{}, err
		}
		examined += int(n)
		for _, f := range found {
			if len(page.Data) == q.Limit {
				// A further match: there is more, and it starts here.
				page.HasMore = true
				c := q.encodeCursor(f.slot)
				page.NextCursor = &c
				return page, nil
			}
			page.Data = append(page.Data, f.msg)
		}
		pos -= n
		if stop {
			return page, nil
		}
	}
	if pos >= 1 {
		// The scan bound was reached with slots left: go on from there.
		page.HasMore = true
		c := q.encodeCursor(pos)
		page.NextCursor = &c
	}
	return page, nil
}

type slotMessage struct {
	slot int64
	msg  Message
}

// readSlots reads the entries of slots (descending), filters them, reads
// the messages of those that pass, and returns the matches in slot order.
// stop says an entry older than f.Since was reached: nothing further down
// can match. The entries are one read ({_id: {$in}}), the messages one or
// two (GetMany), on both engines: the embedded engine finds $in on _id
// through its index (third_party/ferretdb/PATCHES.md, patch 5).
func (s *Store) readSlots(ctx context.Context, workspaceID, feed string, slots []int64, f ListFilter) ([]slotMessage, bool, error) {
	ids := make([]string, len(slots))
	for i, n := range slots {
		ids[i] = slotID(feed, n)
	}
	var found []indexEntry
	if err := store.FindIDs(ctx, s.idx, ids, &found); err != nil {
		return nil, false, msgapi.Unavailable(fmt.Errorf("read feed slots: %w", err))
	}
	byID := make(map[string]*indexEntry, len(found))
	for i := range found {
		byID[found[i].ID] = &found[i]
	}
	entries := make([]*indexEntry, len(slots)) // nil: not written yet (a concurrent send): skipped
	var want []string
	stop := false
	for i, id := range ids {
		e := byID[id]
		switch {
		case e == nil || e.filler():
			continue
		case stop || !f.Since.IsZero() && e.CreatedAt.Before(f.Since.Add(-clockSlack)):
			stop = true
			continue
		case !f.matchEntry(e):
			continue
		}
		entries[i] = e
		want = append(want, e.MessageID)
	}
	msgs, err := s.GetMany(ctx, want)
	if err != nil {
		return nil, false, err
	}
	var out []slotMessage
	for i, e := range entries {
		if e == nil {
			continue
		}
		m, ok := msgs[e.MessageID] // a missing message is skipped
		if !ok || m.WorkspaceID != workspaceID || m.Status == StatusTombstone || !f.matchMessage(&m) {
			continue
		}
		out = append(out, slotMessage{slots[i], m})
	}
	return out, stop, nil
}

// matchEntry applies the filters an entry can answer without its message.
func (f ListFilter) matchEntry(e *indexEntry) bool {
	return (f.LeadID == "" || e.LeadID == f.LeadID) &&
		(f.ConversationID == "" || e.ConversationID == f.ConversationID) &&
		(f.Direction == "" || e.Direction == f.Direction) &&
		(f.Channel == "" || e.Channel == f.Channel) &&
		(f.Since.IsZero() || !e.CreatedAt.Before(f.Since)) &&
		(f.Until.IsZero() || !e.CreatedAt.After(f.Until))
}

// matchMessage applies the filters that need the message (its status
// changes after it is indexed).
func (f ListFilter) matchMessage(m *Message) bool {
	return f.Status == "" || m.Status == f.Status
}

// MarshalJSON is a lead's API shape: every key present, null when empty.
func (l Lead) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID            string    `json:"id"`
		WorkspaceID   string    `json:"workspaceId"`
		Phone         *string   `json:"phone"`
		Email         *string   `json:"email"`
		GHLContactID  *string   `json:"ghlContactId"`
		GHLLocationID *string   `json:"ghlLocationId"`
		HSContactID   *string   `json:"hsContactId"`
		HSPortalID    *string   `json:"hsPortalId"`
		CreatedAt     time.Time `json:"createdAt"`
		UpdatedAt     time.Time `json:"updatedAt"`
	}{l.ID, l.WorkspaceID, null(l.Phone), null(l.Email), null(l.CRM.GHLContactID), null(l.CRM.GHLLocationID),
		null(l.CRM.HSContactID), null(l.CRM.HSPortalID), l.CreatedAt, l.UpdatedAt})
}

// MarshalJSON is a conversation's API shape.
func (c Conversation) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID          string    `json:"id"`
		WorkspaceID string    `json:"workspaceId"`
		LeadID      string    `json:"leadId"`
		Phone       *string   `json:"phone"`
		Email       *string   `json:"email"`
		CreatedAt   time.Time `json:"createdAt"`
	}{c.ID, c.WorkspaceID, c.LeadID, null(c.Phone), null(c.Email), c.CreatedAt})
}

// FindLead returns the lead of a normalised phone (else email), found by
// its derived _id in one read; found=false when the workspace has none.
func (s *Store) FindLead(ctx context.Context, workspaceID, phone, email string) (Lead, bool, error) {
	l, err := s.GetLead(ctx, workspaceID, LeadID(workspaceID, phone, email))
	if msgapi.ErrorCode(err) == msgapi.CodeLeadNotFound {
		return Lead{}, false, nil
	}
	return l, err == nil, err
}

// GetConversation reads a workspace's conversation; another workspace's is
// not found.
func (s *Store) GetConversation(ctx context.Context, workspaceID, id string) (Conversation, error) {
	var c Conversation
	err := s.convs.FindOne(ctx, store.ByID(id)).Decode(&c)
	switch {
	case store.IsNotFound(err), err == nil && c.WorkspaceID != workspaceID:
		return Conversation{}, msgapi.Errorf(msgapi.CodeNotFound, "conversation %q does not exist in this workspace", id)
	case err != nil:
		return Conversation{}, msgapi.Unavailable(fmt.Errorf("read conversation %s: %w", id, err))
	}
	return c, nil
}
