package test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgapi/msgapi/notify"
	"github.com/msgapi/msgapi/receipts"
	"github.com/msgapi/msgapi/stdwebhook"
	"github.com/msgapi/msgapi/vendorsig"
)

// hookHit is one request the workspace's endpoint got.
type hookHit struct {
	id, typ, messageID string
	valid              bool
	answered           int
	at                 time.Time
}

// hookReceiver is a workspace's event endpoint: it checks each delivery's
// Standard Webhooks signature with the endpoint secret and answers 500 to
// the very first request, 200 after.
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	key    *stdwebhook.Secret
	hits   []hookHit
	failed bool
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p struct {
			Type string
			Data struct{ Message struct{ ID string } }
		}
		_ = json.Unmarshal(b, &p)
		h.mu.Lock()
		defer h.mu.Unlock()
		valid := h.key != nil && stdwebhook.Verify(*h.key, r.Header, b, time.Now(), stdwebhook.Tolerance) == nil
		code := http.StatusOK
		if !h.failed {
			h.failed, code = true, http.StatusInternalServerError
		}
		h.hits = append(h.hits, hookHit{r.Header.Get("webhook-id"), p.Type, p.Data.Message.ID, valid, code, time.Now()})
		w.WriteHeader(code)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) setSecret(t *testing.T, secret string) {
	k, err := stdwebhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.key = &k
	h.mu.Unlock()
}

// of returns the hits of one event type.
func (h *hookReceiver) of(typ string) []hookHit {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookHit
	for _, x := range h.hits {
		if x.typ == typ {
			out = append(out, x)
		}
	}
	return out
}

// fakeTwilio is Twilio's Messages API: it checks the request and keeps
// the StatusCallback of each message.
type fakeTwilio struct {
	srv       *httptest.Server
	mu        sync.Mutex
	callbacks []string
}

func newFakeTwilio(t *testing.T) *fakeTwilio {
	f := &fakeTwilio{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if u, p, _ := r.BasicAuth(); u != "ACtest" || p != "twilio-auth-token" || !strings.HasSuffix(r.URL.Path, "/Accounts/ACtest/Messages.json") {
			http.Error(w, `{"code":20003,"message":"auth"}`, http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		f.callbacks = append(f.callbacks, r.PostForm.Get("StatusCallback"))
		n := len(f.callbacks)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"sid":"SM%032d","status":"queued"}`, n)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(25 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
	}
}

// The "Done when", against the real binary:
//   - an endpoint registered, a send, SIGKILL right after it, a restart:
//     exactly one message.sent event arrives (one webhook-id, one 2xx),
//     signed, and its webhook-id is the same on the forced retry (the
//     endpoint answers 500 once);
//   - an inbound Twilio message delivered three times: one message.received;
//   - a Twilio status callback twice and out of order: the message ends
//     delivered, with one message.delivered event.
func TestEventWebhooksAcrossACrash(t *testing.T) {
	hooks := newHookReceiver(t)
	tw := newFakeTwilio(t)
	env := embeddedEnv(t, t.TempDir())
	addr := freeAddr(t)
	public := "http://" + addr
	for k, v := range map[string]string{
		"MSGAPI_ADDR": addr, "MSGAPI_PUBLIC_URL": public, "MSGAPI_LOG_LEVEL": "warn",
		"MSGAPI_SENDER_SMS": "twilio", "MSGAPI_TWILIO_ACCOUNT_SID": "ACtest", "MSGAPI_TWILIO_AUTH_TOKEN": "twilio-auth-token",
		"MSGAPI_TWILIO_FROM": "+15550009999", "MSGAPI_TWILIO_BASE_URL": tw.srv.URL,
		"MSGAPI_ENV": "development", "MSGAPI_EGRESS_ALLOW_LOOPBACK": "true", // the receiver is a loopback server
		"MSGAPI_EVENTS_RETRY_SCHEDULE": "0s,300ms,300ms,300ms", "MSGAPI_EVENTS_POLL_INTERVAL": "100ms", "MSGAPI_EVENTS_TIMEOUT": "2s",
	} {
		env[k] = v
	}
	p1 := start(t, env)
	ws, key := p1.createWorkspace(admin)
	r := p1.do(http.MethodPost, "/api/webhook-endpoints", key, `{"url":"`+hooks.srv.URL+`/hooks"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("register endpoint: %d %s", r.status, r.body)
	}
	secret, _ := r.json(t)["endpoint"].(map[string]any)["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("endpoint secret %q, want whsec_…", secret)
	}
	hooks.setSecret(t, secret)
	if l := p1.do(http.MethodGet, "/api/webhook-endpoints", key, ""); strings.Contains(string(l.body), secret) {
		t.Error("GET /api/webhook-endpoints shows the secret again")
	}

	// Send, then SIGKILL at once: no graceful anything.
	s := p1.do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+15550100042","body":"Crash after me"}`)
	if s.status != http.StatusCreated {
		t.Fatalf("send: %d %s", s.status, s.body)
	}
	if err := p1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p1.done
	msgID := s.json(t)["message"].(map[string]any)["id"].(string)
	if strings.Contains(p1.Logs(), secret) {
		t.Error("the endpoint secret was logged")
	}

	p2 := start(t, env)
	waitUntil(t, "a 2xx delivery of message.sent", 20*time.Second, func() bool {
		for _, h := range hooks.of(notify.TypeMessageSent) {
			if h.answered == http.StatusOK {
				return true
			}
		}
		return false
	})
	time.Sleep(700 * time.Millisecond) // room for a wrong extra delivery to show
	sent := hooks.of(notify.TypeMessageSent)
	ok := 0
	for i, h := range sent {
		if h.id != sent[0].id || !h.valid || h.messageID != msgID {
			t.Errorf("delivery %d: webhook-id %s (first %s), signature valid %v, message %s (want %s)", i, h.id, sent[0].id, h.valid, h.messageID, msgID)
		}
		if h.answered == http.StatusOK {
			ok++
		}
	}
	if len(sent) < 2 || sent[0].answered != http.StatusInternalServerError || ok != 1 {
		t.Errorf("message.sent deliveries %+v: want the forced 500, then exactly one 200, same webhook-id", sent)
	}
	list := p2.do(http.MethodGet, "/api/events?type=message.sent", key, "").json(t)
	evs, _ := list["events"].([]any)
	if len(evs) != 1 || evs[0].(map[string]any)["id"] != sent[0].id {
		t.Fatalf("GET /api/events?type=message.sent: %v, want exactly the one event %s", list, sent[0].id)
	}
	ev := p2.do(http.MethodGet, "/api/events/"+sent[0].id, key, "").json(t)["event"].(map[string]any)
	if atts, _ := ev["attempts"].([]any); len(atts) != len(sent) {
		t.Errorf("GET /api/events/{id}: %d attempts, the endpoint saw %d", len(atts), len(sent))
	}

	met := string(p2.do(http.MethodGet, "/metrics", "", "").body)
	for _, want := range []string{`msgapi_webhook_backlog{kind="deliveries"}`, `msgapi_webhook_backlog{kind="events"}`, `msgapi_webhook_attempts_total{outcome="succeeded"} `} {
		if !strings.Contains(met, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	t.Run("inbound Twilio delivered three times", func(t *testing.T) {
		if r := p2.do(http.MethodPut, "/admin/workspaces/"+ws+"/secrets/twilio", admin, `{"secret":"events-inbound-twilio-token"}`); r.status != http.StatusNoContent {
			t.Fatalf("set secret: %d %s", r.status, r.body)
		}
		path := "/api/webhooks/" + ws + "/twilio"
		form := url.Values{"MessageSid": {"SMinbound0001"}, "From": {"+15550100042"}, "To": {"+15550009999"}, "Body": {"Hi back"}}
		sig := base64.StdEncoding.EncodeToString(vendorsig.TwilioSignature("events-inbound-twilio-token", public+path, form))
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, p2.url+path, strings.NewReader(form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("X-Twilio-Signature", sig)
				res, err := http.DefaultClient.Do(req)
				if err != nil || res.StatusCode != http.StatusOK {
					t.Errorf("inbound delivery: %v %v", err, res)
				}
				if res != nil {
					res.Body.Close()
				}
			})
		}
		wg.Wait()
		waitUntil(t, "message.received delivered", 10*time.Second, func() bool { return len(hooks.of(notify.TypeMessageReceived)) > 0 })
		time.Sleep(500 * time.Millisecond)
		if got := hooks.of(notify.TypeMessageReceived); len(got) != 1 || !got[0].valid {
			t.Errorf("message.received deliveries %+v, want exactly one, signed", got)
		}
		if evs, _ := p2.do(http.MethodGet, "/api/events?type=message.received", key, "").json(t)["events"].([]any); len(evs) != 1 {
			t.Errorf("%d message.received events listed, want 1", len(evs))
		}
	})

	t.Run("Twilio status callback twice and out of order", func(t *testing.T) {
		tw.mu.Lock()
		cb := tw.callbacks
		tw.mu.Unlock()
		want := public + receipts.TwilioPath + "?messageId=" + msgID
		if len(cb) != 1 || cb[0] != want {
			t.Fatalf("StatusCallback %v, want [%s]", cb, want)
		}
		callback := func(status string) int {
			form := url.Values{"MessageSid": {"SM00000000000000000000000000000001"}, "MessageStatus": {status}, "AccountSid": {"ACtest"}}
			if status == "delivered" {
				form.Set("RawDlrDoneDate", "2612031015")
			}
			sig := base64.StdEncoding.EncodeToString(vendorsig.TwilioSignature("twilio-auth-token", cb[0], form))
			req, _ := http.NewRequest(http.MethodPost, p2.url+strings.TrimPrefix(cb[0], public), strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Twilio-Signature", sig)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		for _, st := range []string{"delivered", "delivered", "sent"} {
			if code := callback(st); code != http.StatusOK {
				t.Errorf("callback %s: %d", st, code)
			}
		}
		// A forged callback changes nothing.
		req, _ := http.NewRequest(http.MethodPost, p2.url+receipts.TwilioPath+"?messageId="+msgID, strings.NewReader("MessageSid=SMx&MessageStatus=undelivered"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Twilio-Signature", "Zm9yZ2Vk")
		if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
			t.Errorf("forged callback: %v %v, want 401", err, res)
		}

		m := p2.do(http.MethodGet, "/api/messages/"+msgID, key, "").json(t)["message"].(map[string]any)
		if m["status"] != "delivered" || m["statusAt"] != "2026-12-03T10:15:00Z" {
			t.Errorf("message status %v at %v, want delivered at the carrier's 2026-12-03T10:15:00Z", m["status"], m["statusAt"])
		}
		waitUntil(t, "message.delivered delivered", 10*time.Second, func() bool { return len(hooks.of(notify.TypeMessageDelivered)) > 0 })
		time.Sleep(500 * time.Millisecond)
		if got := hooks.of(notify.TypeMessageDelivered); len(got) != 1 || !got[0].valid || got[0].messageID != msgID {
			t.Errorf("message.delivered deliveries %+v, want exactly one, signed, for %s", got, msgID)
		}
		if evs, _ := p2.do(http.MethodGet, "/api/events?type=message.delivered", key, "").json(t)["events"].([]any); len(evs) != 1 {
			t.Errorf("%d message.delivered events listed, want 1", len(evs))
		}
		if n := len(hooks.of(notify.TypeMessageSent)); n != len(sent) {
			t.Errorf("the late 'sent' callback caused %d more message.sent deliveries", n-len(sent))
		}
	})
}
