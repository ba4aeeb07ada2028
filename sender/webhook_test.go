package sender

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgapi/msgapi/stdwebhook"
)

// relay is a webhook receiver that checks every request the way a real relay
// would and counts deliveries.
type relay struct {
	t       *testing.T
	secret  string
	status  int
	reply   string
	stall   bool // hold the request until the client gives up
	calls   atomic.Int32
	payload atomic.Value // map[string]json.RawMessage of the last request
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rl.calls.Add(1)
	t := rl.t
	if r.Method != http.MethodPost || r.URL.Path != "/hook" {
		t.Errorf("got %s %s, want POST /hook", r.Method, r.URL.Path)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("read body: %v", err)
	}
	legacy := ""
	if !strings.HasPrefix(rl.secret, stdwebhook.Prefix) {
		legacy = Sign([]byte(rl.secret), body)
	}
	for h, want := range map[string]string{
		"Content-Type":       "application/json",
		"Idempotency-Key":    "msg-1",
		"Webhook-Id":         "msg-1",
		"User-Agent":         "msgapi",
		"X-Msgapi-Signature": legacy,
	} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	// As a relay with any Standard Webhooks library would.
	secret, err := stdwebhook.ParseSecret(rl.secret)
	if err != nil {
		t.Errorf("relay secret: %v", err)
	} else if err := stdwebhook.Verify(secret, r.Header, body, time.Now(), stdwebhook.Tolerance); err != nil {
		t.Errorf("webhook-signature does not verify: %v", err)
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(body, &p); err != nil {
		t.Errorf("body is not a JSON object: %v", err)
	}
	rl.payload.Store(p)

	if rl.stall {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	}
	if rl.status/100 == 3 {
		w.Header().Set("Location", "/moved") // must not be followed
	}
	w.WriteHeader(rl.status)
	io.WriteString(w, rl.reply)
}

func TestWebhookSend(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		reply      string
		stall      bool
		want       Status
		wantID     string
		wantErrHas string
	}{
		{name: "accepted with id", status: 200, reply: `{"id":"r-1"}`, want: Sent, wantID: "r-1"},
		{name: "accepted without body", status: 204, want: Sent},
		{name: "refused", status: 422, reply: `{"error":"recipient unknown"}`, want: Failed, wantErrHas: "422"},
		{name: "refused, long reply", status: 400, reply: strings.Repeat("x", 100<<10), want: Failed, wantErrHas: "400"},
		{name: "server error", status: 503, reply: "down", want: Unknown, wantErrHas: "503"},
		{name: "redirect is not acceptance", status: 302, want: Unknown, wantErrHas: "302"},
		{name: "slower than the timeout", stall: true, want: Unknown, wantErrHas: "deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rl := &relay{t: t, secret: "s3cret", status: tc.status, reply: tc.reply, stall: tc.stall}
			srv := httptest.NewServer(rl)
			defer srv.Close()
			w, err := NewWebhook(WebhookOptions{URL: srv.URL + "/hook", Secret: "s3cret", Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}

			got := w.Send(context.Background(), testMessage())

			if got.Status != tc.want || got.ProviderMessageID != tc.wantID {
				t.Errorf("Send = %+v, want status %s, provider id %q", got, tc.want, tc.wantID)
			}
			if !strings.Contains(got.Error, tc.wantErrHas) {
				t.Errorf("Error = %q, want it to contain %q", got.Error, tc.wantErrHas)
			}
			if len(got.Error) > 2*maxSnippet {
				t.Errorf("Error is %d bytes, want a bounded snippet", len(got.Error))
			}
			if n := rl.calls.Load(); n != 1 {
				t.Errorf("relay saw %d requests, want exactly 1", n)
			}
		})
	}
}

func TestWebhookPayload(t *testing.T) {
	rl := &relay{t: t, secret: "s3cret", status: 200}
	srv := httptest.NewServer(rl)
	defer srv.Close()
	w, err := NewWebhook(WebhookOptions{URL: srv.URL + "/hook", Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	m := testMessage()
	if got := w.Send(context.Background(), m); got.Status != Sent {
		t.Fatalf("Send = %+v, want Sent", got)
	}

	p, _ := rl.payload.Load().(map[string]json.RawMessage)
	var keys []string
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	wantKeys := []string{"attachments", "body", "channel", "messageId", "metadata", "recipientEmail", "recipientPhone", "subject", "workspaceId"}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("payload keys = %v, want %v", keys, wantKeys)
	}

	var got struct {
		MessageID, WorkspaceID, Channel, RecipientPhone, RecipientEmail, Body, Subject string
		Attachments                                                                    []Attachment
		Metadata                                                                       map[string]any
	}
	raw, _ := json.Marshal(p)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := []any{m.ID, m.WorkspaceID, m.Channel, m.RecipientPhone, m.RecipientEmail, m.Body, m.Subject, m.Attachments, m.Metadata}
	have := []any{got.MessageID, got.WorkspaceID, got.Channel, got.RecipientPhone, got.RecipientEmail, got.Body, got.Subject, got.Attachments, got.Metadata}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("payload values = %v, want %v", have, want)
	}
}

func TestWebhookEmptyListsAreNotNull(t *testing.T) {
	rl := &relay{t: t, secret: "s3cret", status: 200}
	srv := httptest.NewServer(rl)
	defer srv.Close()
	w, err := NewWebhook(WebhookOptions{URL: srv.URL + "/hook", Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	m := testMessage()
	m.Attachments, m.Metadata = nil, nil
	w.Send(context.Background(), m)

	p, _ := rl.payload.Load().(map[string]json.RawMessage)
	if got := string(p["attachments"]); got != "[]" {
		t.Errorf("attachments = %s, want []", got)
	}
	if got := string(p["metadata"]); got != "{}" {
		t.Errorf("metadata = %s, want {}", got)
	}
}

func TestWebhookClosedPort(t *testing.T) {
	w, err := NewWebhook(WebhookOptions{URL: "http://" + closedAddr(t) + "/hook", Secret: "s3cret", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := w.Send(context.Background(), testMessage())
	if got.Status != Unknown || got.Error == "" {
		t.Errorf("Send = %+v, want Unknown with an error", got)
	}
}

// closedAddr returns a loopback address on which nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestWebhookRejectsUnsendableID(t *testing.T) {
	rl := &relay{t: t, secret: "s3cret", status: 200}
	srv := httptest.NewServer(rl)
	defer srv.Close()
	w, err := NewWebhook(WebhookOptions{URL: srv.URL + "/hook", Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	m := testMessage()
	m.ID = "msg-1\r\nX-Injected: 1"
	if got := w.Send(context.Background(), m); got.Status != Failed {
		t.Errorf("Send = %+v, want Failed: nothing can have been sent", got)
	}
	if n := rl.calls.Load(); n != 0 {
		t.Errorf("relay saw %d requests, want 0", n)
	}
}

// The Standard Webhooks headers, exactly: the message id as webhook-id on
// every attempt, a fresh timestamp on each, the signature over
// "id.timestamp.body" with the whsec_ key. A whsec_ secret sends no
// deprecated X-Msgapi-Signature.
func TestWebhookStandardSignature(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	type seen struct {
		header http.Header
		body   []byte
	}
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.Header.Clone(), b})
		w.WriteHeader(http.StatusServiceUnavailable) // the caller will try again
	}))
	defer srv.Close()
	clock := time.Unix(1_700_000_000, 0)
	w, err := NewWebhook(WebhookOptions{URL: srv.URL, Secret: secret, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	m := testMessage()
	w.Send(context.Background(), m)
	clock = clock.Add(90 * time.Second)
	w.Send(context.Background(), m)

	if len(got) != 2 {
		t.Fatalf("relay saw %d requests, want 2", len(got))
	}
	key, _ := stdwebhook.ParseSecret(secret)
	for i, g := range got {
		ts := time.Unix(1_700_000_000+90*int64(i), 0)
		want := map[string]string{
			"Webhook-Id":         m.ID,
			"Webhook-Timestamp":  strconv.FormatInt(ts.Unix(), 10),
			"Webhook-Signature":  stdwebhook.Sign(key, m.ID, ts, g.body),
			"X-Msgapi-Signature": "",
		}
		for h, v := range want {
			if g.header.Get(h) != v {
				t.Errorf("attempt %d: %s = %q, want %q", i+1, h, g.header.Get(h), v)
			}
		}
		if err := stdwebhook.Verify(key, g.header, g.body, ts.Add(time.Minute), stdwebhook.Tolerance); err != nil {
			t.Errorf("attempt %d does not verify: %v", i+1, err)
		}
	}
}

func TestWebhookSecretForms(t *testing.T) {
	for _, tc := range []struct {
		secret  string
		wantErr bool
	}{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
		{stdwebhook.NewSecret(), false},
		{"plain legacy secret", false},
		{"", true},
		{"   ", true},
		{"whsec_not-base64!", true},
		{"whsec_c2hvcnQ=", true}, // 5 bytes: too short a key
	} {
		_, err := NewWebhook(WebhookOptions{URL: "https://relay.example.com/hook", Secret: tc.secret})
		if (err != nil) != tc.wantErr {
			t.Errorf("NewWebhook(secret %q) error = %v, want error %v", tc.secret, err, tc.wantErr)
		}
	}
}
