package test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	netmail "net/mail"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/msgapi/msgapi/vendorsig"
)

// optOutTwilio is Twilio's Messages API as msgapi calls it: it counts every
// message per recipient and refuses numbers that opted out with 21610.
type optOutTwilio struct {
	*httptest.Server
	mu       sync.Mutex
	sent     map[string][]string // To → bodies
	optedOut map[string]bool
}

func newOptOutTwilio(t *testing.T) *optOutTwilio {
	f := &optOutTwilio{sent: map[string][]string{}, optedOut: map[string]bool{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		to := r.PostForm.Get("To")
		f.mu.Lock()
		f.sent[to] = append(f.sent[to], r.PostForm.Get("Body"))
		refuse := f.optedOut[to]
		n := len(f.sent[to])
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if refuse {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"code":21610,"message":"Attempt to send to unsubscribed recipient","more_info":"https://www.twilio.com/docs/errors/21610","status":400}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"sid":"SM`+strings.TrimPrefix(to, "+")+strconv.Itoa(n)+`","status":"queued"}`)
	}))
	t.Cleanup(f.Close)
	return f
}

// calls is how many messages reached the fake provider for to.
func (f *optOutTwilio) calls(to string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent[to]...)
}

// fakeSMTP keeps every message it accepts.
type fakeSMTP struct {
	mu   sync.Mutex
	msgs [][]byte
}

func (f *fakeSMTP) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{f: f}, nil }

type smtpSession struct{ f *fakeSMTP }

func (s *smtpSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *smtpSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *smtpSession) Reset()                               {}
func (s *smtpSession) Logout() error                        { return nil }
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.f.mu.Lock()
	s.f.msgs = append(s.f.msgs, b)
	s.f.mu.Unlock()
	return err
}

func (f *fakeSMTP) accepted() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.msgs...)
}

func startFakeSMTP(t *testing.T) (*fakeSMTP, int) {
	f := &fakeSMTP{}
	srv := smtp.NewServer(f)
	srv.Domain = "localhost"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return f, l.Addr().(*net.TCPAddr).Port
}

const consentTwilioSecret = "consent-twilio-webhook-secret"

// stopSignal POSTs a signed Twilio inbound SMS to p.
func twilioInbound(t *testing.T, p *proc, wsID, sid, from, body string) int {
	t.Helper()
	path := "/api/webhooks/" + wsID + "/twilio"
	form := url.Values{"MessageSid": {sid}, "From": {from}, "To": {"+15550109999"}, "Body": {body}, "NumMedia": {"0"}}
	// MSGAPI_PUBLIC_URL is a's origin: every process checks the signature
	// against the URL Twilio was given.
	sig := base64.StdEncoding.EncodeToString(vendorsig.TwilioSignature(consentTwilioSecret, p.publicURL+path, form))
	req, _ := http.NewRequest(http.MethodPost, p.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", sig)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func sendSMS(t *testing.T, p *proc, key, to, body string) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"channel": "sms", "recipientPhone": to, "body": body})
	r := p.do(http.MethodPost, "/api/messages", key, string(b))
	if r.status != http.StatusOK && r.status != http.StatusCreated {
		t.Fatalf("send to %s: %d %s", to, r.status, r.body)
	}
	return r.json(t)
}

// Consent against the real binary, two processes on one store: a STOP
// recorded through one process stops sends from both before any provider
// call; START lifts it; a redelivered STOP records once and confirms once;
// Twilio's 21610 suppresses; an email's one-click unsubscribe suppresses
// and a tampered token is 404; the suppression API is workspace-scoped.
func TestConsent(t *testing.T) {
	tw := newOptOutTwilio(t)
	mail, smtpPort := startFakeSMTP(t)
	addrA := freeAddr(t)
	public := "http://" + addrA
	providers := map[string]string{
		"MSGAPI_SENDER_SMS": "twilio", "MSGAPI_TWILIO_ACCOUNT_SID": "ACconsent", "MSGAPI_TWILIO_AUTH_TOKEN": "consent-auth-token",
		"MSGAPI_TWILIO_FROM": "+15550109999", "MSGAPI_TWILIO_BASE_URL": tw.URL,
		"MSGAPI_SENDER_EMAIL": "smtp", "MSGAPI_SMTP_HOST": "127.0.0.1", "MSGAPI_SMTP_PORT": strconv.Itoa(smtpPort),
		"MSGAPI_SMTP_TLS": "none", "MSGAPI_SMTP_FROM": "noreply@example.com",
		"MSGAPI_PUBLIC_URL": public, "MSGAPI_KEY_CACHE_TTL": "0s",
	}
	envA := embeddedEnv(t, t.TempDir())
	envA["MSGAPI_ADDR"] = addrA
	for k, v := range providers {
		envA[k] = v
	}
	a := start(t, envA)
	envB := map[string]string{"MONGODB_URI": engineURI(envA), "MSGAPI_ADMIN_TOKEN": admin}
	for k, v := range providers {
		envB[k] = v
	}
	b := start(t, envB)
	a.publicURL, b.publicURL = public, public

	wsID, key := a.createWorkspace(admin)
	otherWS, otherKey := a.createWorkspace(admin)
	for _, w := range []string{wsID, otherWS} {
		if r := a.do(http.MethodPut, "/admin/workspaces/"+w+"/secrets/twilio", admin, `{"secret":"`+consentTwilioSecret+`"}`); r.status != http.StatusNoContent {
			t.Fatalf("twilio secret: %d %s", r.status, r.body)
		}
	}

	t.Run("STOP then a send, from either process", func(t *testing.T) {
		const ann = "+15550100001"
		if got := twilioInbound(t, a, wsID, "SMstop1", ann, "  sToP \n"); got != http.StatusOK {
			t.Fatalf("inbound STOP: %d", got)
		}
		for _, p := range []*proc{a, b} {
			got := sendSMS(t, p, key, ann, "Your appointment is at 3pm")
			m := got["message"].(map[string]any)
			if got["status"] != "suppressed" || got["code"] != "recipient_opted_out" || m["status"] != "suppressed" {
				t.Errorf("send after STOP: %v", got)
			}
		}
		if n := len(tw.calls(ann)); n != 0 {
			t.Errorf("Twilio got %d messages to a number that said STOP, want 0", n)
		}
		// Another workspace never heard the STOP.
		if got := sendSMS(t, b, otherKey, ann, "From another workspace"); got["status"] != "sent" {
			t.Errorf("another workspace's send: %v", got)
		}
		if n := len(tw.calls(ann)); n != 1 {
			t.Errorf("Twilio got %d messages, want 1 (the other workspace's)", n)
		}

		t.Run("START lifts it", func(t *testing.T) {
			if got := twilioInbound(t, b, wsID, "SMstart1", ann, "START"); got != http.StatusOK {
				t.Fatalf("inbound START: %d", got)
			}
			if got := sendSMS(t, a, key, ann, "Welcome back"); got["status"] != "sent" {
				t.Errorf("send after START: %v", got)
			}
			if calls := tw.calls(ann); len(calls) != 2 || calls[1] != "Welcome back" {
				t.Errorf("Twilio got %v, want the other workspace's message and Welcome back, once", calls)
			}
		})
	})

	t.Run("a redelivered STOP records once and confirms once", func(t *testing.T) {
		const bob = "+15550100002"
		const reply = "You are unsubscribed from Acme. Reply START to resubscribe."
		if r := a.do(http.MethodPatch, "/admin/workspaces/"+wsID, admin, `{"optOutReply":"`+reply+`"}`); r.status != http.StatusOK {
			t.Fatalf("PATCH optOutReply: %d %s", r.status, r.body)
		}
		var wg sync.WaitGroup
		for i, p := range []*proc{a, b, a, b} {
			wg.Go(func() {
				if got := twilioInbound(t, p, wsID, "SMstop2", bob, "Stop"); got != http.StatusOK {
					t.Errorf("delivery %d: %d", i, got)
				}
			})
		}
		wg.Wait()
		if got := twilioInbound(t, b, wsID, "SMstop2", bob, "Stop"); got != http.StatusOK {
			t.Errorf("late redelivery: %d", got)
		}
		if calls := tw.calls(bob); len(calls) != 1 || calls[0] != reply {
			t.Errorf("Twilio got %q, want exactly one confirmation", calls)
		}
		list := a.do(http.MethodGet, "/api/suppressions?limit=100", key, "").json(t)
		n := 0
		for _, s := range list["data"].([]any) {
			if s.(map[string]any)["address"] == bob {
				n++
				if ev := s.(map[string]any)["evidence"].(map[string]any); ev["keyword"] != "STOP" || ev["messageId"] == nil {
					t.Errorf("evidence %v", ev)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d suppressions of %s listed, want 1", n, bob)
		}
		if got := sendSMS(t, b, key, bob, "Promo"); got["status"] != "suppressed" {
			t.Errorf("send after STOP: %v", got)
		}
		if calls := tw.calls(bob); len(calls) != 1 {
			t.Errorf("Twilio got %d messages, want only the confirmation", len(calls))
		}
		a.do(http.MethodPatch, "/admin/workspaces/"+wsID, admin, `{"optOutReply":null}`)
	})

	t.Run("Twilio 21610 suppresses the number", func(t *testing.T) {
		const cy = "+15550100003"
		tw.mu.Lock()
		tw.optedOut[cy] = true // Cy replied STOP to Twilio itself
		tw.mu.Unlock()
		got := sendSMS(t, a, key, cy, "First")
		m := got["message"].(map[string]any)
		if got["status"] != "failed" || got["code"] != "recipient_opted_out" || m["errorCode"] != "recipient_opted_out" {
			t.Errorf("send refused with 21610: %v", got)
		}
		sp := b.do(http.MethodGet, "/api/suppressions/"+url.PathEscape(cy), key, "")
		if sp.status != http.StatusOK || sp.json(t)["suppression"].(map[string]any)["source"] != "provider" {
			t.Errorf("suppression after 21610: %d %s", sp.status, sp.body)
		}
		if got := sendSMS(t, b, key, cy, "Second"); got["status"] != "suppressed" {
			t.Errorf("send after 21610: %v", got)
		}
		if n := len(tw.calls(cy)); n != 1 {
			t.Errorf("Twilio got %d messages to %s, want 1 (the refused one)", n, cy)
		}
	})

	t.Run("email one-click unsubscribe", func(t *testing.T) {
		send := func(body string) map[string]any {
			r := a.do(http.MethodPost, "/api/messages", key, `{"channel":"email","recipientEmail":"Dee@Example.com","subject":"News","body":"`+body+`"}`)
			if r.status != http.StatusOK && r.status != http.StatusCreated {
				t.Fatalf("email: %d %s", r.status, r.body)
			}
			return r.json(t)
		}
		if got := send("Issue 1"); got["status"] != "sent" {
			t.Fatalf("email: %v", got)
		}
		msgs := mail.accepted()
		if len(msgs) != 1 {
			t.Fatalf("SMTP got %d messages, want 1", len(msgs))
		}
		em, err := netmail.ReadMessage(bytes.NewReader(msgs[0]))
		if err != nil {
			t.Fatal(err)
		}
		if got := em.Header.Get("List-Unsubscribe-Post"); got != "List-Unsubscribe=One-Click" {
			t.Errorf("List-Unsubscribe-Post %q", got)
		}
		lu := strings.Join(strings.Fields(em.Header.Get("List-Unsubscribe")), "")
		u := strings.TrimSuffix(strings.TrimPrefix(lu, "<"), ">")
		if !strings.HasPrefix(u, public+"/unsubscribe/") {
			t.Fatalf("List-Unsubscribe %q, want a URL on %s", lu, public)
		}
		postForm := func(target string) int {
			res, err := http.Post(target, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		tampered := []byte(u)
		tampered[len(tampered)-5] ^= 1
		if got := postForm(string(tampered)); got != http.StatusNotFound {
			t.Errorf("tampered token: %d, want 404", got)
		}
		if r := a.do(http.MethodGet, "/api/suppressions/dee@example.com", key, ""); r.status != http.StatusNotFound {
			t.Errorf("a tampered token wrote a suppression: %d %s", r.status, r.body)
		}
		// A GET (a mail scanner following the link) changes nothing.
		if res, err := http.Get(u); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET the page: %v %v", res, err)
		} else {
			res.Body.Close()
		}
		if got := send("Issue 2"); got["status"] != "sent" {
			t.Errorf("email after a GET of the page: %v", got)
		}
		// The one-click POST, through the other process.
		if got := postForm(strings.Replace(u, public, b.url, 1)); got != http.StatusOK {
			t.Fatalf("one-click POST: %d", got)
		}
		if got := send("Issue 3"); got["status"] != "suppressed" {
			t.Errorf("email after unsubscribe: %v", got)
		}
		if n := len(mail.accepted()); n != 2 {
			t.Errorf("SMTP got %d messages, want 2 (before the unsubscribe)", n)
		}
	})

	t.Run("the suppression API is workspace-scoped", func(t *testing.T) {
		const eve = "+15550100005"
		if r := b.do(http.MethodPost, "/api/suppressions", key, `{"address":"`+eve+`"}`); r.status != http.StatusCreated {
			t.Fatalf("POST: %d %s", r.status, r.body)
		}
		if got := sendSMS(t, a, key, eve, "Hi Eve"); got["status"] != "suppressed" {
			t.Errorf("send after POST: %v", got)
		}
		if data := a.do(http.MethodGet, "/api/suppressions", otherKey, "").json(t)["data"].([]any); len(data) != 0 {
			t.Errorf("another workspace lists %v", data)
		}
		if r := a.do(http.MethodGet, "/api/suppressions/"+url.PathEscape(eve), otherKey, ""); r.status != http.StatusNotFound {
			t.Errorf("another workspace GET: %d", r.status)
		}
		if r := a.do(http.MethodDelete, "/api/suppressions/"+url.PathEscape(eve), otherKey, ""); r.status != http.StatusNotFound {
			t.Errorf("another workspace DELETE: %d", r.status)
		}
		if r := a.do(http.MethodDelete, "/api/suppressions/"+url.PathEscape(eve), key, ""); r.status != http.StatusOK {
			t.Errorf("DELETE: %d %s", r.status, r.body)
		}
		if got := sendSMS(t, b, key, eve, "Hi Eve"); got["status"] != "sent" {
			t.Errorf("send after DELETE: %v", got)
		}
		if n := len(tw.calls(eve)); n != 1 {
			t.Errorf("Twilio got %d messages to %s, want 1", n, eve)
		}
	})

	// Operators: the opt-outs are counted per source on /metrics.
	res, err := http.Get(a.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`msgapi_consent_changes_total{action="suppressed",source="keyword"}`, `msgapi_sends_suppressed_total{channel="sms"}`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(a.Logs()+b.Logs(), `"event":"message.api.suppressed"`) || !strings.Contains(a.Logs()+b.Logs(), `"event":"consent.opted_out"`) {
		t.Error("no message.api.suppressed / consent.opted_out events logged")
	}
}
