package messages

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// feedEnv is one workspace on a fresh database.
type feedEnv struct {
	t  testing.TB
	st *store.Store
	s  *Store
	ws string
}

func newFeedEnv(t testing.TB) *feedEnv {
	st := storetest.New(t, Collections...)
	return &feedEnv{t: t, st: st, s: NewStore(st), ws: msgapi.NewID("ws")}
}

// message is a new message to phone through s, its lead and conversation
// found or created; created says the lead was.
func (e *feedEnv) message(s *Store, phone, direction, channel, status string) (m *Message, created bool) {
	e.t.Helper()
	ctx := context.Background()
	lead, created, err := s.FindOrCreateLead(ctx, e.ws, phone, "", CRMRefs{})
	if err != nil {
		e.t.Fatal(err)
	}
	conv, err := s.EnsureConversation(ctx, e.ws, lead.ID, phone, "", created)
	if err != nil {
		e.t.Fatal(err)
	}
	return &Message{ID: msgapi.NewID("msg"), WorkspaceID: e.ws, LeadID: lead.ID, ConversationID: conv,
		Channel: channel, Direction: direction, RecipientPhone: phone, Body: "b", Status: status}, created
}

// write inserts and indexes one message to phone through s.
func (e *feedEnv) write(s *Store, phone, direction, channel string) Message {
	e.t.Helper()
	status := StatusSent
	if direction == "inbound" {
		status = StatusReceived
	}
	m, created := e.message(s, phone, direction, channel, status)
	if err := s.Insert(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
	if err := s.Index(context.Background(), m, created); err != nil {
		e.t.Fatal(err)
	}
	return *m
}

// send writes an outbound message as the send path does: InsertIndexed,
// then its outcome.
func (e *feedEnv) send(s *Store, phone string) Message {
	e.t.Helper()
	m, created := e.message(s, phone, "outbound", ChannelSMS, StatusSending)
	indexErr, err := s.InsertIndexed(context.Background(), m, created)
	if err != nil || indexErr != nil {
		e.t.Fatal(err, indexErr)
	}
	m.Status = StatusSent
	if err := s.RecordOutcome(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
	return *m
}

func (e *feedEnv) query(params string) ListQuery {
	e.t.Helper()
	v, err := url.ParseQuery(params)
	if err != nil {
		e.t.Fatal(err)
	}
	q, err := ParseListQuery(v, "leadId", "conversationId", "direction", "status", "channel", "since", "until", "limit", "cursor")
	if err != nil {
		e.t.Fatalf("ParseListQuery(%q): %v", params, err)
	}
	return q
}

// all follows nextCursor from the first page to the last and returns the
// ids in order, and the page sizes.
func (e *feedEnv) all(params string, between func(page int)) ([]string, []int) {
	e.t.Helper()
	var ids []string
	var sizes []int
	cursor := ""
	for page := 0; ; page++ {
		p := params
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		got, err := e.s.List(context.Background(), e.ws, e.query(p))
		if err != nil {
			e.t.Fatal(err)
		}
		for _, m := range got.Data {
			ids = append(ids, m.ID)
		}
		sizes = append(sizes, len(got.Data))
		if got.HasMore != (got.NextCursor != nil) {
			e.t.Fatalf("page %d: hasMore %v with nextCursor %v", page, got.HasMore, got.NextCursor)
		}
		if !got.HasMore {
			return ids, sizes
		}
		if page > 1000 {
			e.t.Fatal("no end of pages")
		}
		cursor = *got.NextCursor
		if between != nil {
			between(page)
		}
	}
}

func reversed(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[len(ms)-1-i] = m.ID
	}
	return out
}

func TestListNewestFirstPagedAndFiltered(t *testing.T) {
	e := newFeedEnv(t)
	var all, ann, inbound, email []Message
	for i := 0; i < 25; i++ {
		phone, dir, ch := "+15550100001", "outbound", ChannelSMS
		if i%3 == 0 {
			phone = "+15550100002"
		}
		if i%5 == 0 {
			dir = "inbound"
		}
		if i%4 == 0 {
			ch = ChannelIMessage
		}
		m := e.write(e.s, phone, dir, ch)
		all = append(all, m)
		if phone == "+15550100002" {
			ann = append(ann, m)
		}
		if dir == "inbound" {
			inbound = append(inbound, m)
		}
		if ch == ChannelIMessage {
			email = append(email, m)
		}
	}
	ids, sizes := e.all("limit=10", nil)
	if diff := cmp.Diff(reversed(all), ids); diff != "" {
		t.Errorf("all messages, newest first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{10, 10, 5}, sizes); diff != "" {
		t.Errorf("page sizes (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		params string
		want   []Message
	}{
		{"leadId=" + ann[0].LeadID, ann},
		{"conversationId=" + ann[0].ConversationID, ann},
		{"conversationId=" + ann[0].ConversationID + "&leadId=" + all[1].LeadID, nil}, // not this conversation's lead
		{"direction=inbound", inbound},
		{"channel=imessage", email},
		{"status=received", inbound},
		{"leadId=lead_00000000000000000000000000000000", nil},
	} {
		ids, _ := e.all(tc.params+"&limit=3", nil)
		if diff := cmp.Diff(reversed(tc.want), ids, cmpEmpty); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.params, diff)
		}
	}
	// Another workspace sees none of them, whatever it asks for.
	other := &feedEnv{t: t, st: e.st, s: e.s, ws: msgapi.NewID("ws")}
	if ids, _ := other.all("leadId="+ann[0].LeadID, nil); len(ids) != 0 {
		t.Errorf("another workspace listed %v", ids)
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") })

// New messages written while a client pages never make a page skip or
// repeat one: every message that existed at the first page is listed once.
func TestCursorStableWhileMessagesArrive(t *testing.T) {
	e := newFeedEnv(t)
	var before []Message
	for i := 0; i < 23; i++ {
		before = append(before, e.write(e.s, fmt.Sprintf("+1555010%04d", i%4), "outbound", ChannelSMS))
	}
	var during []Message
	ids, _ := e.all("limit=5", func(page int) {
		for i := 0; i < 3; i++ { // three new messages between every two pages
			during = append(during, e.write(e.s, "+15550100009", "outbound", ChannelSMS))
		}
	})
	if diff := cmp.Diff(reversed(before), ids); diff != "" {
		t.Errorf("paging while messages arrive (-want +got):\n%s", diff)
	}
	// A new first page starts with what arrived.
	first, err := e.s.List(context.Background(), e.ws, e.query("limit=3"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids3(first.Data), reversed(during)[:3]; !cmp.Equal(got, want) {
		t.Errorf("new first page %v, want the newest arrivals %v", got, want)
	}
}

func ids3(ms []Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// Entries whose message is missing or a tombstone, and fillers, are never
// listed; the page goes on past them.
func TestListSkipsTombstonesMissingAndFillers(t *testing.T) {
	e := newFeedEnv(t)
	ctx := context.Background()
	keep := e.write(e.s, "+15550100001", "outbound", ChannelSMS)
	tomb := e.write(e.s, "+15550100001", "outbound", ChannelSMS)
	gone := e.write(e.s, "+15550100001", "outbound", ChannelSMS)
	if _, err := e.st.Collection("messages").UpdateOne(ctx, store.ByID(tomb.ID), bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: StatusTombstone}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Collection("messages").DeleteOne(ctx, store.ByID(gone.ID)); err != nil {
		t.Fatal(err)
	}
	// Neither a tombstone nor a missing message has an outcome.
	for _, id := range []string{tomb.ID, gone.ID} {
		if _, err := e.st.Collection(OutcomesCollection).DeleteOne(ctx, store.ByID(id)); err != nil {
			t.Fatal(err)
		}
	}
	// A slot reserved and then filled (the writer could not use it).
	feed := feedKey(e.ws, feedWorkspace, e.ws)
	e.s.fill(ctx, [3]string{feed}, [3]int64{e.s.heads.reserve(feed)}, []int{0})
	last := e.write(e.s, "+15550100001", "outbound", ChannelSMS)

	ids, _ := e.all("limit=1", nil)
	if diff := cmp.Diff([]string{last.ID, keep.ID}, ids); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	if _, err := ParseListQuery(url.Values{"status": {StatusTombstone}}, "status"); msgapi.ErrorCode(err) != msgapi.CodeInvalid {
		t.Errorf("status=tombstone: %v, want invalid_request", err)
	}
}

// Two processes (two Stores, each with its own memory of the heads and its
// own insert batches) and many concurrent sends per process write one
// workspace's feeds: every message lands in exactly one slot of each feed,
// and the slots are dense — through Index (ordered, marker first) and
// through a send's InsertIndexed (unordered, batched, beside the message
// insert).
func TestConcurrentIndexingAcrossProcesses(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("insertIndexed=%v", own), func(t *testing.T) { concurrentIndexing(t, own) })
	}
}

func concurrentIndexing(t *testing.T, own bool) {
	e := newFeedEnv(t)
	procs := []*Store{e.s, NewStore(storetest.Second(t, e.st))}
	e.write(procs[1], "+15550100001", "outbound", ChannelSMS) // both know the lead
	const perProc = 12
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wrote []string
		start = make(chan struct{})
	)
	for _, p := range procs {
		for i := 0; i < perProc; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var m Message
				if own {
					m = e.send(p, "+15550100001")
				} else {
					m = e.write(p, "+15550100001", "outbound", ChannelSMS)
				}
				mu.Lock()
				wrote = append(wrote, m.ID)
				mu.Unlock()
			}()
		}
	}
	close(start)
	wg.Wait()
	for _, params := range []string{"limit=100", "leadId=" + lead(t, e), "conversationId=" + ConversationID(e.ws, "+15550100001", "")} {
		ids, _ := e.all(params, nil)
		seen := map[string]int{}
		for _, id := range ids {
			seen[id]++
		}
		for _, id := range wrote {
			if seen[id] != 1 {
				t.Errorf("%s: message %s listed %d times, want 1", params, id, seen[id])
			}
		}
		if len(ids) != 2*perProc+1 {
			t.Errorf("%s: %d listed, want %d", params, len(ids), 2*perProc+1)
		}
	}
	// Dense: every slot up to the head is taken (fillers included).
	feed := feedKey(e.ws, feedWorkspace, e.ws)
	head, err := NewStore(e.st).findHead(context.Background(), feed)
	if err != nil {
		t.Fatal(err)
	}
	for n := int64(1); n <= head; n++ {
		if ok, _ := e.s.slotTaken(context.Background(), feed, n); !ok {
			t.Errorf("slot %d of %d is free", n, head)
		}
	}
	if head < 2*perProc+1 {
		t.Errorf("head %d, want at least %d", head, 2*perProc+1)
	}
}

func lead(t *testing.T, e *feedEnv) string { return LeadID(e.ws, "+15550100001", "") }

// An inbound redelivery indexes its message once, however often it asks.
func TestIndexOnce(t *testing.T) {
	e := newFeedEnv(t)
	m := e.write(e.s, "+15550100001", "inbound", ChannelSMS)
	fresh := NewStore(e.st) // another process: no memory of the feed
	for i := 0; i < 3; i++ {
		if err := fresh.IndexOnce(context.Background(), m.ID); err != nil {
			t.Fatal(err)
		}
	}
	ids, _ := e.all("", nil)
	if diff := cmp.Diff([]string{m.ID}, ids); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	// A message written but never indexed (the process died in between)
	// is indexed by the redelivery.
	lost := &Message{ID: msgapi.NewID("msg"), WorkspaceID: e.ws, LeadID: m.LeadID, ConversationID: m.ConversationID,
		Channel: ChannelSMS, Direction: "inbound", Status: StatusReceived, Body: "b"}
	if err := e.s.Insert(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	if err := fresh.IndexOnce(context.Background(), lost.ID); err != nil {
		t.Fatal(err)
	}
	ids, _ = e.all("", nil)
	if diff := cmp.Diff([]string{lost.ID, m.ID}, ids); diff != "" {
		t.Errorf("after repair (-want +got):\n%s", diff)
	}
}

// A sparse filter examines at most MaxScan entries per request and then
// answers a short page with a cursor that goes on from there.
func TestSparseFilterIsBounded(t *testing.T) {
	e := newFeedEnv(t)
	first := e.seed(MaxScan+11, func(i int, m *Message) {
		if i == 0 {
			m.Direction, m.Status = "inbound", StatusReceived
		}
	})[0]
	ctx := context.Background()
	before := e.st.RoundTrips.Total()
	p, err := e.s.List(ctx, e.ws, e.query("direction=inbound"))
	if err != nil {
		t.Fatal(err)
	}
	// One probe of the head, the entries in reads of a page and one each
	// (the default limit 20 + 1: 12 reads for 250), no message read.
	if got, want := e.st.RoundTrips.Total()-before, int64(1+12); got != want {
		t.Errorf("first page cost %d round trips, want %d", got, want)
	}
	if len(p.Data) != 0 || !p.HasMore || p.NextCursor == nil {
		t.Fatalf("first page: %d messages, hasMore %v, want 0, true and a cursor", len(p.Data), p.HasMore)
	}
	p, err = e.s.List(ctx, e.ws, e.query("direction=inbound&cursor="+url.QueryEscape(*p.NextCursor)))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Data) != 1 || p.Data[0].ID != first.ID || p.HasMore {
		t.Errorf("second page: %v hasMore %v, want only %s and no more", ids3(p.Data), p.HasMore, first.ID)
	}
}

// A page costs the same round trips at any collection size: one probe of
// the head, then one read of its entries and one of its messages (limit+1
// of each, the extra one telling hasMore; by {_id: {$in}}). The messages
// are stored as their outcome left them, so one read finds them all.
func TestListRoundTrips(t *testing.T) {
	e := newFeedEnv(t)
	for i := 0; i < 30; i++ {
		e.write(e.s, "+15550100001", "outbound", ChannelSMS)
	}
	before := e.st.RoundTrips.Total()
	p, err := e.s.List(context.Background(), e.ws, e.query("limit=10"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.st.RoundTrips.Total()-before, int64(1+1+1); got != want || len(p.Data) != 10 || !p.HasMore {
		t.Errorf("page: %d round trips, %d messages, hasMore %v; want %d, 10, true", got, len(p.Data), p.HasMore, want)
	}
	// Writing a message to a known lead costs one insert command.
	before = e.st.RoundTrips.Total()
	m := &Message{ID: msgapi.NewID("msg"), WorkspaceID: e.ws, LeadID: LeadID(e.ws, "+15550100001", ""),
		ConversationID: ConversationID(e.ws, "+15550100001", ""), Channel: ChannelSMS, Direction: "outbound", Status: StatusSent}
	if err := e.s.Index(context.Background(), m, false); err != nil {
		t.Fatal(err)
	}
	if got := e.st.RoundTrips.Total() - before; got != 1 {
		t.Errorf("Index cost %d round trips, want 1", got)
	}
}

func TestListSince(t *testing.T) {
	e := newFeedEnv(t)
	old := e.write(e.s, "+15550100001", "outbound", ChannelSMS)
	// Age the first message past the clock slack, entry and message alike.
	ctx := context.Background()
	past := old.CreatedAt.Add(-2 * clockSlack)
	feed := feedKey(e.ws, feedWorkspace, e.ws)
	for _, c := range []struct{ coll, id string }{{"messages", old.ID}, {IndexCollection, slotID(feed, 1)}} {
		if _, err := e.st.Collection(c.coll).UpdateOne(ctx, store.ByID(c.id), bson.D{{Key: "$set", Value: bson.D{{Key: "createdAt", Value: past}}}}); err != nil {
			t.Fatal(err)
		}
	}
	var recent []Message
	for i := 0; i < 3; i++ {
		recent = append(recent, e.write(e.s, "+15550100001", "outbound", ChannelSMS))
	}
	since := recent[0].CreatedAt.Add(-time.Second).Format(time.RFC3339Nano)
	ids, _ := e.all("since="+url.QueryEscape(since), nil)
	if diff := cmp.Diff(reversed(recent), ids); diff != "" {
		t.Errorf("since (-want +got):\n%s", diff)
	}
	until := past.Add(time.Second).Format(time.RFC3339Nano)
	ids, _ = e.all("until="+url.QueryEscape(until), nil)
	if diff := cmp.Diff([]string{old.ID}, ids); diff != "" {
		t.Errorf("until (-want +got):\n%s", diff)
	}
}

func TestParseListQuery(t *testing.T) {
	all := []string{"leadId", "conversationId", "direction", "status", "channel", "since", "until", "limit", "cursor"}
	good, err := ParseListQuery(url.Values{"leadId": {"lead_1"}}, all...)
	if err != nil {
		t.Fatal(err)
	}
	cursor := good.encodeCursor(7)
	for _, tc := range []struct {
		query      string
		wantFields []string // nil: valid
	}{
		{"", nil},
		{"limit=1&direction=inbound&status=received&channel=whatsapp&since=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00.5%2B02:00", nil},
		{"leadId=lead_1&cursor=" + cursor, nil},
		{"limit=0", []string{"limit"}},
		{"limit=101", []string{"limit"}},
		{"limit=ten", []string{"limit"}},
		{"direction=sideways&status=tombstone&channel=fax", []string{"channel", "direction", "status"}},
		{"since=yesterday", []string{"since"}},
		{"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", []string{"until"}},
		{"lead_id=x", []string{"lead_id"}},
		{"limit=1&limit=2", []string{"limit"}},
		{"cursor=", []string{"cursor"}},
		{"cursor=garbage", []string{"cursor"}},
		{"cursor=c1.%21%21", []string{"cursor"}},
		{"leadId=lead_2&cursor=" + cursor, []string{"cursor"}}, // issued for other filters
		{"cursor=" + cursor, []string{"cursor"}},
	} {
		v, _ := url.ParseQuery(tc.query)
		_, err := ParseListQuery(v, all...)
		var got []string
		if err != nil {
			e, ok := err.(*msgapi.Error)
			if !ok || e.Code != msgapi.CodeInvalid {
				t.Errorf("%q: %v, want invalid_request", tc.query, err)
				continue
			}
			for _, f := range e.Fields {
				got = append(got, f.Field)
			}
		}
		if diff := cmp.Diff(tc.wantFields, got); diff != "" {
			t.Errorf("%q: fields (-want +got):\n%s", tc.query, diff)
		}
	}
}
