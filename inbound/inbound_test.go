package inbound_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/inbound"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/stdwebhook"
	"github.com/msgapi/msgapi/workspace"
)

// channelCase is one vendor with a real-shaped payload.
type channelCase struct {
	ch        string
	payload   []byte
	key       string
	medium    string
	leadPhone string
	leadEmail string
}

var channelCases = []channelCase{
	{inbound.ChannelSlack, slackMessage("Ev08MFMKH6", "1700000000.000100", "hello from slack"), "Ev08MFMKH6", "slack", "", "slack.t0001.u2147483697@slack.invalid"},
	{inbound.ChannelTwilio, twilioSMS("SM0123456789abcdef0123456789abcdef", "+14155550100", "hello by sms"), "SM0123456789abcdef0123456789abcdef", "sms", "+14155550100", ""},
	{inbound.ChannelTelegram, telegramUpdate(900001, 1111111, "hello from telegram"), "900001", "telegram", "", "telegram.1111111@telegram.invalid"},
	{inbound.ChannelEmail, relayEmail("<CAF-abc-1@mail.example.com>", "Ada Lovelace <Ada@Example.com>"), "CAF-abc-1@mail.example.com", "email", "", "ada@example.com"},
}

// Each channel: a signed payload is recorded once; eight redeliveries
// answer 200 and write nothing; a bad signature is 401 and writes nothing.
func TestChannels(t *testing.T) {
	for _, b := range backends {
		for _, tc := range channelCases {
			t.Run(b.name+"/"+tc.ch, func(t *testing.T) {
				e := newEnv(t, envOpts{redis: b.redis(t)})
				d := delivery{ch: tc.ch, body: tc.payload}
				wantID := inbound.MessageID(e.wsID, tc.ch, tc.key)

				r := e.deliver(d)
				if r.status != http.StatusOK {
					t.Fatalf("first delivery: %s", r)
				}
				if tc.ch == inbound.ChannelTwilio {
					if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/xml") || !strings.Contains(string(r.body), "<Response>") {
						t.Errorf("Twilio answer = %q %s, want empty TwiML", ct, r.body)
					}
				} else if dup, id := r.ack(t); dup || id != wantID {
					t.Errorf("first delivery: duplicate=%v messageId=%q, want false %q", dup, id, wantID)
				}
				m := e.message(wantID)
				if m.Direction != "inbound" || m.Status != "received" || m.Channel != tc.medium || m.Provider != tc.ch {
					t.Errorf("message: direction %q status %q channel %q provider %q, want inbound received %q %q",
						m.Direction, m.Status, m.Channel, m.Provider, tc.medium, tc.ch)
				}
				if want := messages.LeadID(e.wsID, tc.leadPhone, tc.leadEmail); m.LeadID != want {
					t.Errorf("message lead = %s, want %s (phone %q email %q)", m.LeadID, want, tc.leadPhone, tc.leadEmail)
				}
				if want := messages.ConversationID(e.wsID, tc.leadPhone, tc.leadEmail); m.ConversationID != want {
					t.Errorf("message conversation = %s, want %s", m.ConversationID, want)
				}

				before := e.writes()
				for i := range 8 {
					r := e.deliver(d)
					if r.status != http.StatusOK {
						t.Fatalf("redelivery %d: %s", i+1, r)
					}
					if tc.ch != inbound.ChannelTwilio {
						if dup, id := r.ack(t); !dup || id != wantID {
							t.Errorf("redelivery %d: duplicate=%v messageId=%q, want true %q", i+1, dup, id, wantID)
						}
					}
				}
				if got := e.writes() - before; got != 0 {
					t.Errorf("eight redeliveries wrote %d times, want 0", got)
				}

				bad := d
				bad.secret = "not-the-secret"
				bad.body = channelCases[0].payload // any body: refused before it is read as an event
				if tc.ch != inbound.ChannelSlack {
					bad.body = tc.payload
				}
				before = e.writes()
				assertProblem(t, e.deliver(bad), http.StatusUnauthorized, "unauthorized")
				missing := d
				missing.unsigned = true
				assertProblem(t, e.deliver(missing), http.StatusUnauthorized, "unauthorized")
				if got := e.writes() - before; got != 0 {
					t.Errorf("refused deliveries wrote %d times, want 0", got)
				}

				for coll, want := range map[string]int64{"messages": 1, "leads": 1, "conversations": 1, "inbound_events": 1} {
					if got := e.count(coll); got != want {
						t.Errorf("%s: %d documents, want %d", coll, got, want)
					}
				}
				if got := len(e.events(events.InboundReceived)); got != 1 {
					t.Errorf("%d %s events, want 1", got, events.InboundReceived)
				}
				dups := e.events(events.InboundDuplicate)
				if len(dups) != 8 {
					t.Fatalf("%d %s events, want 8", len(dups), events.InboundDuplicate)
				}
				wantLayer := inbound.LayerStore
				if b.name == "redis" {
					wantLayer = inbound.LayerFastpath
				}
				for _, ev := range dups {
					if ev["layer"] != wantLayer || ev["channel"] != tc.ch || ev["workspaceId"] != e.wsID {
						t.Errorf("duplicate event %v: want layer %q channel %q workspace %q", ev, wantLayer, tc.ch, e.wsID)
					}
				}
				if got := len(e.events(events.InboundSignatureInvalid)); got != 2 {
					t.Errorf("%d %s events, want 2", got, events.InboundSignatureInvalid)
				}
				if strings.Contains(e.logs.String(), secrets[tc.ch]) {
					t.Error("the channel secret appears in the logs")
				}
			})
		}
	}
}

func TestSlackFallsBackToEventTS(t *testing.T) {
	e := newEnv(t, envOpts{})
	d := delivery{ch: inbound.ChannelSlack, body: slackMessage("", "1700000000.000200", "no event_id")}
	wantID := inbound.MessageID(e.wsID, inbound.ChannelSlack, "ts:C2147483705:1700000000.000200")

	if dup, id := e.deliver(d).ack(t); dup || id != wantID {
		t.Fatalf("first: duplicate=%v id=%q, want false %q", dup, id, wantID)
	}
	if dup, _ := e.deliver(d).ack(t); !dup {
		t.Error("the same event_ts again was not a duplicate")
	}
	other := delivery{ch: inbound.ChannelSlack, body: slackMessage("", "1700000000.000300", "no event_id")}
	if dup, _ := e.deliver(other).ack(t); dup {
		t.Error("another event_ts was taken for a duplicate")
	}
	if got := e.count("messages"); got != 2 {
		t.Errorf("messages = %d, want 2", got)
	}
}

func TestSlackURLVerification(t *testing.T) {
	e := newEnv(t, envOpts{})
	body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	before := e.writes()
	r := e.deliver(delivery{ch: inbound.ChannelSlack, body: body})
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"`) {
		t.Errorf("url_verification = %s, want 200 with the challenge", r)
	}
	// The challenge is answered only to a signed request.
	assertProblem(t, e.deliver(delivery{ch: inbound.ChannelSlack, body: body, secret: "wrong"}), http.StatusUnauthorized, "unauthorized")
	if got := e.writes() - before; got != 0 {
		t.Errorf("url_verification wrote %d times, want 0", got)
	}
}

func TestSlackStaleTimestamp(t *testing.T) {
	e := newEnv(t, envOpts{})
	body := slackMessage("EvStale", "1700000000.000400", "replayed")
	for _, at := range []time.Time{time.Now().Add(-6 * time.Minute), time.Now().Add(6 * time.Minute)} {
		assertProblem(t, e.deliver(delivery{ch: inbound.ChannelSlack, body: body, slackTime: at}), http.StatusUnauthorized, "unauthorized")
	}
	for _, ev := range e.events(events.InboundSignatureInvalid) {
		if !strings.Contains(ev["reason"].(string), "timestamp") {
			t.Errorf("reason = %q, want the timestamp named", ev["reason"])
		}
	}
	if got := e.count("messages"); got != 0 {
		t.Errorf("messages = %d, want 0", got)
	}
	if r := e.deliver(delivery{ch: inbound.ChannelSlack, body: body, slackTime: time.Now().Add(-4 * time.Minute)}); r.status != http.StatusOK {
		t.Errorf("4 minutes old: %s, want 200", r)
	}
}

func TestRefusals(t *testing.T) {
	e := newEnv(t, envOpts{})
	bare, _, err := workspace.NewStore(e.st, 0).Create(context.Background(), "No secrets")
	if err != nil {
		t.Fatal(err)
	}
	big := relayEmail("<big@x>", "a@example.com", attachment("big.bin", "application/octet-stream", make([]byte, inbound.MaxBody)))
	tests := []struct {
		name   string
		d      delivery
		status int
		code   string
	}{
		{"no secret for the channel", delivery{ch: inbound.ChannelTelegram, body: telegramUpdate(1, 2, "x"), path: "/api/webhooks/" + bare.ID + "/telegram"}, http.StatusUnauthorized, "unauthorized"},
		{"unknown workspace", delivery{ch: inbound.ChannelTelegram, body: telegramUpdate(1, 2, "x"), path: "/api/webhooks/" + msgapi.NewID("ws") + "/telegram"}, http.StatusUnauthorized, "unauthorized"},
		{"malformed workspace id", delivery{ch: inbound.ChannelTelegram, body: telegramUpdate(1, 2, "x"), path: "/api/webhooks/ws_nope/telegram"}, http.StatusNotFound, "not_found"},
		{"unknown channel", delivery{ch: "fax", body: []byte(`{}`), path: e.path("fax")}, http.StatusNotFound, "not_found"},
		{"secret of another channel", delivery{ch: inbound.ChannelEmail, body: relayEmail("<1@x>", "a@example.com"), secret: secrets[inbound.ChannelSlack]}, http.StatusUnauthorized, "unauthorized"},
		{"slack without a key", delivery{ch: inbound.ChannelSlack, body: []byte(`{"type":"event_callback","team_id":"T1","event":{"type":"message","user":"U1","text":"x"}}`)}, http.StatusBadRequest, "invalid_request"},
		{"twilio without MessageSid", delivery{ch: inbound.ChannelTwilio, body: []byte("From=%2B14155550100&Body=x")}, http.StatusBadRequest, "invalid_request"},
		{"telegram without update_id", delivery{ch: inbound.ChannelTelegram, body: []byte(`{"message":{"message_id":1,"chat":{"id":1},"from":{"id":1}}}`)}, http.StatusBadRequest, "invalid_request"},
		{"email without Message-ID", delivery{ch: inbound.ChannelEmail, body: relayEmail("", "a@example.com")}, http.StatusBadRequest, "invalid_request"},
		{"body over 1 MiB", delivery{ch: inbound.ChannelEmail, body: big}, http.StatusRequestEntityTooLarge, "request_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.writes()
			assertProblem(t, e.deliver(tt.d), tt.status, tt.code)
			if got := e.writes() - before; got != 0 {
				t.Errorf("wrote %d times, want 0", got)
			}
		})
	}
	if got := e.count("messages"); got != 0 {
		t.Errorf("messages = %d, want 0", got)
	}
}

// Concurrent redeliveries of one event, split across two servers with
// their own store clients on one database, make one inbound message.
func TestConcurrentRedeliveriesAcrossTwoServers(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			rc := b.redis(t)
			a := newEnv(t, envOpts{redis: rc})
			z := a.twin(rc)
			d := delivery{ch: inbound.ChannelEmail, body: relayEmail("<race-1@mail.example.com>", "race@example.com",
				attachment("contract.pdf", "application/pdf", []byte("%PDF-1.7 the contract")))}

			const n = 16
			start := make(chan struct{})
			var wg sync.WaitGroup
			res := make([]response, n)
			for i := range n {
				srv := a
				if i%2 == 1 {
					srv = z
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res[i] = srv.deliver(d)
				}()
			}
			close(start)
			wg.Wait()

			var fresh int
			for i, r := range res {
				if r.status != http.StatusOK {
					t.Fatalf("delivery %d: %s", i, r)
				}
				if dup, _ := r.ack(t); !dup {
					fresh++
				}
			}
			if fresh != 1 {
				t.Errorf("%d deliveries answered as new, want 1", fresh)
			}
			for coll, want := range map[string]int64{"messages": 1, "leads": 1, "conversations": 1, "inbound_events": 1, "inbound_attachments": 1} {
				if got := a.count(coll); got != want {
					t.Errorf("%s: %d documents, want %d", coll, got, want)
				}
			}
			want := inbound.MessageID(a.wsID, inbound.ChannelEmail, "race-1@mail.example.com")
			if got := a.listed(); len(got) != 1 || got[0] != want {
				t.Errorf("listed %v, want the one message %s once", got, want)
			}
			if got := len(a.events(events.InboundReceived)) + len(z.events(events.InboundReceived)); got != 1 {
				t.Errorf("%d %s events across both servers, want 1", got, events.InboundReceived)
			}
			if got := len(a.events(events.InboundContentDuplicate)) + len(z.events(events.InboundContentDuplicate)); got != 0 {
				t.Errorf("%d content duplicates within one event, want 0", got)
			}
		})
	}
}

// Redis losing its keys (FLUSHALL, a restart without persistence) never lets
// a duplicate through: MongoDB still refuses it, and Redis is refilled.
func TestRedisForgetsMongoDecides(t *testing.T) {
	rs := startRedis(t)
	e := newEnv(t, envOpts{redis: rs.client()})
	d := delivery{ch: inbound.ChannelTwilio, body: twilioSMS("SMflush", "+14155550101", "hi")}
	if r := e.deliver(d); r.status != http.StatusOK {
		t.Fatalf("first: %s", r)
	}
	ctl := rs.client()
	forget := map[string]func(){
		"flushall": func() {
			if err := ctl.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		},
		"restart": rs.restart,
	}
	for _, how := range []string{"flushall", "restart"} {
		forget[how]()
		before := len(e.events(events.InboundDuplicate))
		w := e.writes()
		for range 2 {
			if r := e.deliver(d); r.status != http.StatusOK {
				t.Fatalf("%s: redelivery %s", how, r)
			}
		}
		if got := e.writes() - w; got != 0 {
			t.Errorf("%s: redeliveries wrote %d times, want 0", how, got)
		}
		dups := e.events(events.InboundDuplicate)[before:]
		if len(dups) != 2 || dups[0]["layer"] != inbound.LayerStore || dups[1]["layer"] != inbound.LayerFastpath {
			t.Errorf("%s: duplicate layers %v, want store (Redis forgot) then fastpath (refilled)", how, dups)
		}
	}
	if got := e.count("messages"); got != 1 {
		t.Errorf("messages = %d, want 1", got)
	}
}

// With Redis down, MongoDB alone decides, and the outage is an event.
func TestRedisDown(t *testing.T) {
	down := redisClient(t, "redis://127.0.0.1:"+strconv.Itoa(freePort(t))+"/0") // nothing listens there
	e := newEnv(t, envOpts{redis: down})
	d := delivery{ch: inbound.ChannelTelegram, body: telegramUpdate(424242, 77, "redis is down")}
	if dup, _ := e.deliver(d).ack(t); dup {
		t.Fatal("first delivery answered as a duplicate")
	}
	w := e.writes()
	for range 3 {
		if dup, _ := e.deliver(d).ack(t); !dup {
			t.Error("redelivery answered as new")
		}
	}
	if got := e.writes() - w; got != 0 {
		t.Errorf("redeliveries wrote %d times, want 0", got)
	}
	if got := e.count("messages"); got != 1 {
		t.Errorf("messages = %d, want 1", got)
	}
	if got := len(e.events(events.InboundFastpathError)); got < 4 {
		t.Errorf("%d %s events, want one per delivery at least", got, events.InboundFastpathError)
	}
	for _, ev := range e.events(events.InboundDuplicate) {
		if ev["layer"] != inbound.LayerStore {
			t.Errorf("duplicate layer %v, want store", ev["layer"])
		}
	}
}

// The same bytes under a new event id and another file name are a content
// duplicate: recorded on the message, pointed at the earlier one, not
// processed again.
func TestContentDuplicate(t *testing.T) {
	e := newEnv(t, envOpts{})
	pdf := []byte("%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n%%EOF")
	first := delivery{ch: inbound.ChannelEmail, body: relayEmail("<doc-1@mail.example.com>", "ada@example.com", attachment("invoice.pdf", "application/pdf", pdf))}
	again := delivery{ch: inbound.ChannelEmail, body: relayEmail("<doc-2@mail.example.com>", "ada@example.com", attachment("Copy of invoice (1).PDF", "application/octet-stream", pdf))}
	other := delivery{ch: inbound.ChannelEmail, body: relayEmail("<doc-3@mail.example.com>", "ada@example.com", attachment("invoice.pdf", "application/pdf", append(pdf, ' ')))}

	_, id1 := e.deliver(first).ack(t)
	dup, id2 := e.deliver(again).ack(t)
	if dup {
		t.Fatal("a new event id was answered as a duplicate event")
	}
	if got := e.count("inbound_attachments"); got != 1 {
		t.Errorf("inbound_attachments = %d after the same bytes twice, want 1", got)
	}
	files, _ := e.message(id2).Metadata["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["duplicateOf"] != id1 {
		t.Errorf("second message files = %v, want duplicateOf %s", files, id1)
	}
	if files, _ := e.message(id1).Metadata["files"].([]any); len(files) != 1 || files[0].(map[string]any)["duplicateOf"] != nil {
		t.Errorf("first message files = %v, want no duplicateOf", files)
	}
	cds := e.events(events.InboundContentDuplicate)
	if len(cds) != 1 || cds[0]["earlierMessageId"] != id1 || cds[0]["messageId"] != id2 {
		t.Errorf("content duplicate events = %v, want one naming %s as the earlier message of %s", cds, id1, id2)
	}
	var rec struct {
		Dups []struct {
			MessageID string `bson:"messageId"`
		} `bson:"contentDuplicates"`
	}
	err := e.st.Collection("inbound_events").FindOne(context.Background(),
		bson.D{{Key: "_id", Value: inbound.EventID(e.wsID, inbound.ChannelEmail, "doc-2@mail.example.com")}}).Decode(&rec)
	if err != nil || len(rec.Dups) != 1 || rec.Dups[0].MessageID != id1 {
		t.Errorf("event record duplicates = %+v (%v), want the earlier message %s", rec.Dups, err, id1)
	}

	e.deliver(again) // a redelivery of the second event reports nothing new
	if got := len(e.events(events.InboundContentDuplicate)); got != 1 {
		t.Errorf("%d content duplicate events after a redelivery, want still 1", got)
	}
	if dup, _ := e.deliver(other).ack(t); dup {
		t.Error("different bytes under the same file name were a duplicate")
	}
	if got := e.count("inbound_attachments"); got != 2 {
		t.Errorf("inbound_attachments = %d, want 2", got)
	}
}

// A crash after the inbound message is written but before completion is
// recorded: the redelivery completes the event, without a second message
// and without calling its own attachment a duplicate.
func TestCrashBeforeCompletionIsRepaired(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			var crashes atomic.Int32
			crashOnce := func() error {
				if crashes.Add(1) == 1 {
					return msgapi.Unavailable(errors.New("simulated crash between message and completion"))
				}
				return nil
			}
			e := newEnv(t, envOpts{redis: b.redis(t), crash: crashOnce})
			d := delivery{ch: inbound.ChannelEmail, body: relayEmail("<crash-1@mail.example.com>", "ada@example.com",
				attachment("scan.png", "image/png", []byte("\x89PNG the scan")))}

			if r := e.deliver(d); r.status != http.StatusServiceUnavailable {
				t.Fatalf("crashing delivery: %s, want 503 so the vendor retries", r)
			}
			if got, gotEv := e.count("messages"), e.count("inbound_events"); got != 1 || gotEv != 0 {
				t.Fatalf("after the crash: %d messages, %d completion records; want 1 and 0", got, gotEv)
			}

			r := e.deliver(d)
			if r.status != http.StatusOK {
				t.Fatalf("redelivery after the crash: %s", r)
			}
			if dup, id := r.ack(t); !dup || id != inbound.MessageID(e.wsID, inbound.ChannelEmail, "crash-1@mail.example.com") {
				t.Errorf("redelivery: duplicate=%v id=%s, want the existing message", dup, id)
			}
			for coll, want := range map[string]int64{"messages": 1, "inbound_events": 1, "inbound_attachments": 1, "leads": 1, "conversations": 1} {
				if got := e.count(coll); got != want {
					t.Errorf("%s: %d documents, want %d", coll, got, want)
				}
			}
			if got, want := e.listed(), inbound.MessageID(e.wsID, inbound.ChannelEmail, "crash-1@mail.example.com"); len(got) != 1 || got[0] != want {
				t.Errorf("listed %v, want the one message %s once", got, want)
			}
			dups := e.events(events.InboundDuplicate)
			if len(dups) != 1 || dups[0]["layer"] != inbound.LayerStore || dups[0]["completedHere"] != true {
				t.Errorf("duplicate events = %v, want one from the store that completed the event", dups)
			}
			if got := len(e.events(events.InboundContentDuplicate)); got != 0 {
				t.Errorf("the event's own attachment was reported as a content duplicate %d times", got)
			}

			w := e.writes()
			if dup, _ := e.deliver(d).ack(t); !dup {
				t.Error("a third delivery was new")
			}
			if got := e.writes() - w; got != 0 {
				t.Errorf("a delivery after completion wrote %d times, want 0", got)
			}
		})
	}
}

// An expired completion record counts as absent even before the reaper
// deletes it; the retry then finds the message by its derived id, so a
// very late replay still writes no second message.
func TestExpiredRecordIsAbsent(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := newEnv(t, envOpts{now: now})
	d := delivery{ch: inbound.ChannelTelegram, body: telegramUpdate(31337, 9, "late replay")}
	e.deliver(d)
	id := inbound.EventID(e.wsID, inbound.ChannelTelegram, "31337")
	expiresAt := func() time.Time {
		var rec struct {
			ExpiresAt time.Time `bson:"expiresAt"`
		}
		if err := e.st.Collection("inbound_events").FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&rec); err != nil {
			t.Fatal(err)
		}
		return rec.ExpiresAt
	}
	first := expiresAt()

	offset.Store(int64(25 * time.Hour))
	if dup, _ := e.deliver(d).ack(t); !dup {
		t.Error("a replay after 24 h wrote a new message")
	}
	if got := e.count("messages"); got != 1 {
		t.Errorf("messages = %d, want 1", got)
	}
	if renewed := expiresAt(); !renewed.After(first.Add(24 * time.Hour)) {
		t.Errorf("expiresAt = %s, want renewed past %s", renewed, first.Add(24*time.Hour))
	}
}

// Twilio signs the public URL it called; behind a trusted proxy that URL
// comes from X-Forwarded-Proto and X-Forwarded-Host.
func TestTwilioBehindProxy(t *testing.T) {
	e := newEnv(t, envOpts{proxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	body := twilioSMS("SMproxy", "+14155550102", "via the load balancer")
	public := "https://hooks.acme.example" + e.path(inbound.ChannelTwilio)
	fwd := http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"hooks.acme.example"}}

	assertProblem(t, e.deliver(delivery{ch: inbound.ChannelTwilio, body: body, signedURL: public}), http.StatusUnauthorized, "unauthorized")
	if r := e.deliver(delivery{ch: inbound.ChannelTwilio, body: body, signedURL: public, header: fwd}); r.status != http.StatusOK {
		t.Errorf("signed for the public URL, forwarded headers set: %s, want 200", r)
	}
}

// A client-sent workspace id of any length never reaches a logger or the
// store: 60 KB ids once grew the Loki queue by hundreds of megabytes.
func TestMalformedWorkspaceIDNeitherLoggedNorLookedUp(t *testing.T) {
	e := newEnv(t, envOpts{})
	huge := "ws_" + strings.Repeat("w", 60_000)
	for _, ch := range []string{inbound.ChannelEmail, inbound.ChannelTelegram, "fax"} {
		before := e.st.RoundTrips.Total()
		r := e.deliver(delivery{ch: ch, body: relayEmail("<1@x>", "a@example.com"), path: "/api/webhooks/" + huge + "/" + ch})
		assertProblem(t, r, http.StatusNotFound, "not_found")
		if got := e.st.RoundTrips.Total() - before; got != 0 {
			t.Errorf("%s: %d store round trips, want 0", ch, got)
		}
	}
	logs := e.logs.String()
	if strings.Contains(logs, "wwwwwwww") {
		t.Errorf("the id reached the log (%d bytes of log)", len(logs))
	}
	if n := len(e.events(events.HTTPRequest)); n != 3 {
		t.Errorf("%d access-log lines, want 3 (the requests are still logged)", n)
	}
}

// The email relay signs under Standard Webhooks; the old, untimed
// X-Msgapi-Signature was accepted for one release and is retired (issue 25
// finding 9): a call signed only with it is refused and writes nothing.
func TestRelaySignatureSchemes(t *testing.T) {
	e := newEnv(t, envOpts{})
	n := 0
	mail := func() []byte { n++; return relayEmail(fmt.Sprintf("<scheme-%d@x>", n), "a@example.com") }
	tests := []struct {
		name   string
		d      delivery
		ok     bool
		reason string
	}{
		{"standard", delivery{ch: inbound.ChannelEmail, body: mail()}, true, ""},
		{"standard, 4 minutes old", delivery{ch: inbound.ChannelEmail, body: mail(), relayTime: time.Now().Add(-4 * time.Minute)}, true, ""},
		{"retired X-Msgapi-Signature", delivery{ch: inbound.ChannelEmail, body: mail(), legacyRelay: true}, false, "retired"},
		{"standard, 6 minutes old", delivery{ch: inbound.ChannelEmail, body: mail(), relayTime: time.Now().Add(-6 * time.Minute)}, false, "timestamp"},
		{"standard, 6 minutes ahead", delivery{ch: inbound.ChannelEmail, body: mail(), relayTime: time.Now().Add(6 * time.Minute)}, false, "timestamp"},
		{"standard, wrong secret", delivery{ch: inbound.ChannelEmail, body: mail(), secret: "not-the-secret"}, false, "does not match"},
		{"standard, webhook-id changed after signing", delivery{ch: inbound.ChannelEmail, body: mail(), header: http.Header{"Webhook-Id": {"other-id"}}}, false, "does not match"},
		{"a standard header forbids falling back to the legacy one", delivery{ch: inbound.ChannelEmail, body: mail(), legacyRelay: true, header: http.Header{"Webhook-Signature": {"v1,AAAA"}}}, false, "missing"},
		{"unsigned", delivery{ch: inbound.ChannelEmail, body: mail(), unsigned: true}, false, "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, inv := e.writes(), len(e.events(events.InboundSignatureInvalid))
			r := e.deliver(tt.d)
			if !tt.ok {
				assertProblem(t, r, http.StatusUnauthorized, "unauthorized")
				if got := e.writes() - before; got != 0 {
					t.Errorf("wrote %d times, want 0", got)
				}
				evs := e.events(events.InboundSignatureInvalid)
				if len(evs) != inv+1 || !strings.Contains(evs[len(evs)-1]["reason"].(string), tt.reason) {
					t.Errorf("want one %s event with a reason containing %q, got %v", events.InboundSignatureInvalid, tt.reason, evs[inv:])
				}
			} else if r.status != http.StatusOK {
				t.Fatalf("status = %s, want 200", r)
			}
		})
	}
}

// A whsec_ secret: the HMAC key is its base64-decoded bytes.
func TestRelayWhsecSecret(t *testing.T) {
	e := newEnv(t, envOpts{})
	secret := stdwebhook.NewSecret()
	if err := workspace.NewStore(e.st, 0).SetSecret(context.Background(), e.wsID, inbound.ChannelEmail, secret); err != nil {
		t.Fatal(err)
	}
	if r := e.deliver(delivery{ch: inbound.ChannelEmail, body: relayEmail("<whsec-1@x>", "a@example.com"), secret: secret}); r.status != http.StatusOK {
		t.Errorf("signed with the decoded key: %s, want 200", r)
	}
	// Keyed with the string itself (a relay that forgot to decode it): refused.
	r := e.deliver(delivery{ch: inbound.ChannelEmail, body: relayEmail("<whsec-2@x>", "a@example.com"), secret: "raw:" + secret})
	assertProblem(t, r, http.StatusUnauthorized, "unauthorized")
}

// From a peer that is not a trusted proxy the forwarded headers are
// ignored: a signature made for the URL they claim is refused, and one for
// the URL the request really reached still passes.
func TestForwardedHeadersFromUntrustedPeerIgnored(t *testing.T) {
	e := newEnv(t, envOpts{proxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	body := twilioSMS("SMspoof", "+14155550103", "spoofed host")
	claimed := "https://hooks.acme.example" + e.path(inbound.ChannelTwilio)
	fwd := http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"hooks.acme.example"}}
	assertProblem(t, e.deliver(delivery{ch: inbound.ChannelTwilio, body: body, signedURL: claimed, header: fwd}), http.StatusUnauthorized, "unauthorized")
	if got := e.count("messages"); got != 0 {
		t.Errorf("messages = %d after a refused delivery, want 0", got)
	}
	if r := e.deliver(delivery{ch: inbound.ChannelTwilio, body: body, header: fwd}); r.status != http.StatusOK {
		t.Errorf("signed for the URL actually called, spoofed headers set: %s, want 200", r)
	}
}

// A server without the key the secrets were sealed with never checks a
// signature against a wrong secret: the delivery fails as a server error
// whose log names the missing key, and nothing is written.
func TestSealedSecretWithoutKey(t *testing.T) {
	e := newEnv(t, envOpts{})
	keyless := newEnv(t, envOpts{st: e.st, wsID: e.wsID, noKey: true})
	assertProblem(t, keyless.deliver(delivery{ch: inbound.ChannelTwilio, body: twilioSMS("SMnokey", "+14155550104", "hi")}), http.StatusInternalServerError, "internal_error")
	if got := e.count("messages"); got != 0 {
		t.Errorf("messages = %d, want 0", got)
	}
	if logs := keyless.logs.String(); !strings.Contains(logs, "MSGAPI_SECRET_KEY") || strings.Contains(logs, secrets[inbound.ChannelTwilio]) {
		t.Errorf("log does not name the missing key, or shows the secret:\n%s", logs)
	}
	if r := e.deliver(delivery{ch: inbound.ChannelTwilio, body: twilioSMS("SMnokey", "+14155550104", "hi")}); r.status != http.StatusOK {
		t.Errorf("the server with the key: %s, want 200", r)
	}
}

// countingBody is a request body of n bytes that counts what was read.
type countingBody struct {
	left int
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), b.left)
	for i := range n {
		p[i] = 'a'
	}
	b.left -= n
	b.read.Add(int64(n))
	return n, nil
}

func (b *countingBody) Close() error { return nil }

// A call whose signature cannot be right is refused before its body is read
// (issue 25 finding 9: a known workspace id cost a 1 MiB body read per
// unauthenticated request): missing, malformed or stale signature headers,
// a wrong Telegram token, the retired relay header, a channel without a
// secret. A call whose headers are right has its body read and its MAC
// checked, and is refused for a wrong one.
func TestSignatureCheckedBeforeTheBodyIsRead(t *testing.T) {
	e := newEnv(t, envOpts{})
	stale := strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10)
	fresh := strconv.FormatInt(time.Now().Unix(), 10)
	const size = inbound.MaxBody - 1
	for _, tt := range []struct {
		name, ch   string
		hd         http.Header
		bodyIsRead bool
	}{
		{"slack, unsigned", inbound.ChannelSlack, nil, false},
		{"slack, stale timestamp", inbound.ChannelSlack, http.Header{"X-Slack-Request-Timestamp": {stale}, "X-Slack-Signature": {"v0=00"}}, false},
		{"slack, malformed signature", inbound.ChannelSlack, http.Header{"X-Slack-Request-Timestamp": {fresh}, "X-Slack-Signature": {"v1=zz"}}, false},
		{"twilio, unsigned", inbound.ChannelTwilio, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, false},
		{"twilio, not a SHA-1 MAC", inbound.ChannelTwilio, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "X-Twilio-Signature": {"AAAA"}}, false},
		{"telegram, wrong token", inbound.ChannelTelegram, http.Header{"X-Telegram-Bot-Api-Secret-Token": {"guess"}}, false},
		{"email, retired header", inbound.ChannelEmail, http.Header{"X-Msgapi-Signature": {"sha256=00"}}, false},
		{"email, stale", inbound.ChannelEmail, http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {stale}, "Webhook-Signature": {"v1,AAAA"}}, false},
		{"slack, well-formed and fresh but wrong", inbound.ChannelSlack, http.Header{"X-Slack-Request-Timestamp": {fresh}, "X-Slack-Signature": {"v0=" + strings.Repeat("00", 32)}}, true},
		{"email, well-formed and fresh but wrong", inbound.ChannelEmail, http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {fresh}, "Webhook-Signature": {"v1,AAAA"}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := e.writes()
			body := &countingBody{left: size}
			req := httptest.NewRequest(http.MethodPost, "/api/webhooks/"+e.wsID+"/"+tt.ch, body)
			req.ContentLength = size
			for k, v := range tt.hd {
				req.Header[k] = v
			}
			if req.Header.Get("Content-Type") == "" {
				req.Header.Set("Content-Type", "application/json")
			}
			rec := httptest.NewRecorder()
			e.handler.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status %d %s, want 401", rec.Code, rec.Body)
			}
			if got := body.read.Load(); tt.bodyIsRead != (got > 0) {
				t.Errorf("read %d of %d body bytes; want the body read: %v", got, size, tt.bodyIsRead)
			}
			if got := e.writes() - before; got != 0 {
				t.Errorf("wrote %d times, want 0", got)
			}
		})
	}
}
