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
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	for h, want := range map[string]string{
		"Content-Type":       "application/json",
		"Idempotency-Key":    "msg-1",
		"User-Agent":         "msgapi",
		"X-Msgapi-Signature": Sign([]byte(rl.secret), body),
	} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
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
