package test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/guard"
)

// relay is the far side of the webhook provider for the callers' tests: it
// counts deliveries by body, refuses (400: a definite refusal, "failed") a
// body containing REFUSE, and holds a body containing SLOW for hold.
type relay struct {
	srv  *httptest.Server
	hold time.Duration
	mu   sync.Mutex
	got  []string
}

func newRelay(t *testing.T, hold time.Duration) *relay {
	r := &relay{hold: hold}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, string(b))
		r.mu.Unlock()
		if strings.Contains(string(b), "SLOW") {
			time.Sleep(r.hold)
		}
		if strings.Contains(string(b), "REFUSE") {
			http.Error(w, `{"error":"refused"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"relay-1"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// count is how many deliveries carried text.
func (r *relay) count(text string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range r.got {
		if strings.Contains(b, text) {
			n++
		}
	}
	return n
}

func callersEnv(t *testing.T, rl *relay) map[string]string {
	env := embeddedEnv(t, t.TempDir())
	for k, v := range map[string]string{
		"MSGAPI_SENDER_SMS": "webhook", "MSGAPI_WEBHOOK_URL": rl.srv.URL, "MSGAPI_WEBHOOK_SECRET": "callers-relay-secret",
		"MSGAPI_SEND_TIMEOUT": "5s", "MSGAPI_DEDUP_WAIT": "100ms", "MSGAPI_KEY_CACHE_TTL": "0s", "MSGAPI_LOG_LEVEL": "warn",
	} {
		env[k] = v
	}
	return env
}

// post sends body to POST /api/messages with the given headers.
func callerPost(t *testing.T, p *proc, body string, h map[string]string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.url+"/api/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r := reply{res.StatusCode, res.Header, b}
	if r.status/100 == 2 {
		checkOneShape(t, r)
	}
	return r
}

// checkOneShape: every 2xx of POST /api/messages has the same members.
func checkOneShape(t *testing.T, r reply) {
	t.Helper()
	m := r.json(t)
	for _, k := range []string{"success", "status", "duplicateOnly", "pending", "message", "leadId", "ghlContactId", "ghlLocationId", "hsContactId", "hsPortalId"} {
		if _, ok := m[k]; !ok {
			t.Errorf("2xx answer lacks %q: %s", k, r.body)
		}
	}
	if s, ok := m["status"].(string); !ok || s == "" {
		t.Errorf("2xx answer's status %v, want a string: %s", m["status"], r.body)
	}
	if m["pending"] == true && m["status"] != "pending" {
		t.Errorf("pending answer's status %v, want pending", m["status"])
	}
	if m["duplicateOnly"] == false && m["pending"] != false {
		t.Errorf("a send's pending %v, want false", m["pending"])
	}
}

func retryAfter(t *testing.T, r reply) int {
	t.Helper()
	n, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil {
		t.Errorf("Retry-After %q on %d %s", r.header.Get("Retry-After"), r.status, r.body)
	}
	return n
}

// Each preset (and the default) answers pending, refused, key in flight
// and rate limited with its documented status and an honest Retry-After,
// set per workspace and per request.
func TestCallersAnswerProfiles(t *testing.T) {
	rl := newRelay(t, 1500*time.Millisecond)
	env := callersEnv(t, rl)
	p := start(t, env)
	db := connectStore(t, engineURI(env))

	type want struct{ pending, refused, inFlight int }
	cases := []struct {
		preset string
		want   want
	}{
		{"", want{200, 201, 409}}, // today's defaults
		{"hubspot", want{429, 422, 429}},
		{"highlevel", want{429, 422, 429}},
		{"zapier", want{503, 422, 503}},
		{"make", want{429, 422, 429}},
		{"n8n", want{503, 422, 503}},
	}
	for i, tc := range cases {
		for _, via := range []string{"workspace", "header"} {
			if tc.preset == "" && via == "header" {
				continue
			}
			t.Run(tc.preset+"/"+via, func(t *testing.T) {
				ws, key := p.createWorkspace(admin)
				h := map[string]string{"Authorization": "Bearer " + key}
				if tc.preset != "" && via == "workspace" {
					wantStatus(t, p.do(http.MethodPatch, "/admin/workspaces/"+ws, admin, `{"answerProfile":"`+tc.preset+`"}`), 200)
				}
				if via == "header" {
					h["Msgapi-Answer-Profile"] = tc.preset
				}
				phone := fmt.Sprintf("+1555020%02d00", i)

				// Pending: a lock whose holder started 2 s ago and has not
				// written its message; the send timeout is 5 s, so a retry
				// is worth it in about 3 s (not the lease's 28).
				text := "Pending " + via
				lockID := guard.LockID(guard.Key{WorkspaceID: ws, Phone: phone, Body: text})
				born := time.Now().UTC().Add(-2 * time.Second)
				if _, err := db.Collection("message_dedup_locks").InsertOne(context.Background(), bson.D{
					{Key: "_id", Value: lockID}, {Key: "workspaceId", Value: ws}, {Key: "messageId", Value: msgapi.NewID("msg")},
					{Key: "createdAt", Value: born}, {Key: "expiresAt", Value: born.Add(15 * time.Minute)},
				}); err != nil {
					t.Fatal(err)
				}
				r := callerPost(t, p, fmt.Sprintf(`{"channel":"sms","recipientPhone":%q,"body":%q}`, phone, text), h)
				if r.status != tc.want.pending || r.json(t)["pending"] != true {
					t.Errorf("pending: %d %s, want %d with pending: true", r.status, r.body, tc.want.pending)
				}
				if ra := retryAfter(t, r); ra < 2 || ra > 3 {
					t.Errorf("pending Retry-After %d, want 2..3 (send timeout 5 s minus the original's 2 s)", ra)
				}

				// Refused: the provider definitively refuses.
				r = callerPost(t, p, fmt.Sprintf(`{"channel":"sms","recipientPhone":%q,"body":"REFUSE %s"}`, phone, via), h)
				if r.status != tc.want.refused || r.json(t)["status"] != "failed" {
					t.Errorf("refused: %d %s, want %d with status failed", r.status, r.body, tc.want.refused)
				}

				// Key in flight: the first request holds the key while its
				// provider is slow.
				hk := map[string]string{"Idempotency-Key": "k-" + via}
				for k, v := range h {
					hk[k] = v
				}
				slow := fmt.Sprintf(`{"channel":"sms","recipientPhone":%q,"body":"SLOW %s %s"}`, phone, tc.preset, via)
				done := make(chan reply, 1)
				go func() { done <- callerPost(t, p, slow, hk) }()
				time.Sleep(500 * time.Millisecond)
				r = callerPost(t, p, slow, hk)
				if r.status != tc.want.inFlight || r.json(t)["code"] != "idempotency_key_in_use" {
					t.Errorf("key in flight: %d %s, want %d idempotency_key_in_use", r.status, r.body, tc.want.inFlight)
				}
				if ra := retryAfter(t, r); ra < 1 || ra > 5 {
					t.Errorf("key in flight Retry-After %d, want 1..5", ra)
				}
				if first := <-done; first.status != 200 {
					t.Errorf("the first keyed request: %d %s", first.status, first.body)
				}
				if n := rl.count("SLOW " + tc.preset + " " + via); n != 1 {
					t.Errorf("the slow text reached the provider %d times, want 1", n)
				}

				// Rate limited: 429 with Retry-After whatever the profile.
				wantStatus(t, p.do(http.MethodPatch, "/admin/workspaces/"+ws, admin, `{"rateLimit":{"perSecond":1,"burst":1}}`), 200)
				callerPost(t, p, fmt.Sprintf(`{"channel":"sms","recipientPhone":%q,"body":"Limit 1"}`, phone), h)
				r = callerPost(t, p, fmt.Sprintf(`{"channel":"sms","recipientPhone":%q,"body":"Limit 2"}`, phone), h)
				if r.status != 429 || retryAfter(t, r) < 1 {
					t.Errorf("rate limited: %d %s, want 429 with Retry-After", r.status, r.body)
				}
				if r.header.Get("RateLimit-Policy") == "" || r.header.Get("RateLimit") == "" {
					t.Errorf("429 without RateLimit-Policy / RateLimit headers: %v", r.header)
				}
			})
		}
	}

	t.Run("header members and errors", func(t *testing.T) {
		ws, key := p.createWorkspace(admin)
		wantStatus(t, p.do(http.MethodPatch, "/admin/workspaces/"+ws, admin, `{"answerProfile":"hubspot","refusedStatus":424}`), 200)
		h := map[string]string{"Authorization": "Bearer " + key}
		if r := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550209900","body":"REFUSE ws"}`, h); r.status != 424 {
			t.Errorf("refusedStatus 424 over the hubspot preset: %d", r.status)
		}
		h["Msgapi-Answer-Profile"] = "hubspot, refused=200"
		if r := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550209900","body":"REFUSE hdr"}`, h); r.status != 200 {
			t.Errorf("header refused=200: %d, want the send's own 200", r.status)
		}
		h["Msgapi-Answer-Profile"] = "pending=418"
		if r := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550209900","body":"x"}`, h); r.status != 400 {
			t.Errorf("pending=418: %d, want 400", r.status)
		}
		wantStatus(t, p.do(http.MethodPatch, "/admin/workspaces/"+ws, admin, `{"answerProfile":"nope"}`), 400)
		wantStatus(t, p.do(http.MethodPatch, "/admin/workspaces/"+ws, admin, `{"pendingStatus":201}`), 400)
		r := wantStatus(t, p.do(http.MethodPatch, "/admin/workspaces/"+ws, admin, `{"answerProfile":null,"refusedStatus":null}`), 200)
		if s := r.json(t)["settings"].(map[string]any); s["answerProfile"] != nil || s["refusedStatus"] != nil {
			t.Errorf("null did not reset: %v", s)
		}
		delete(h, "Msgapi-Answer-Profile")
		if r := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550209900","body":"REFUSE reset"}`, h); r.status != 200 {
			t.Errorf("after reset, refused: %d, want 200", r.status)
		}
	})
}

// X-API-Key authenticates like Bearer, and the body member idempotencyKey
// is the Idempotency-Key: a replay is byte-identical, a different body
// 422, both present and different 400; counted at the provider.
func TestCallersKeysEnginesCanSend(t *testing.T) {
	rl := newRelay(t, 0)
	p := start(t, callersEnv(t, rl))
	_, key := p.createWorkspace(admin)
	xk := map[string]string{"X-API-Key": key}

	first := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550300000","body":"Body key","idempotencyKey":"wf-1"}`, xk)
	if first.status != 201 {
		t.Fatalf("X-API-Key with body idempotencyKey: %d %s", first.status, first.body)
	}
	// Past the duplicate guard: only the key can answer it.
	if err := p.deleteLock(key, first); err != nil {
		t.Fatal(err)
	}
	again := callerPost(t, p, `{"idempotencyKey":"wf-1","body":"Body key","channel":"sms","recipientPhone":"+15550300000"}`, xk)
	if again.status != first.status || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay by body key: %d %s, want the first answer byte for byte", again.status, again.body)
	}
	// The header with the same key and the member left out: the same request.
	hdr := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550300000","body":"Body key"}`, map[string]string{"Authorization": "Bearer " + key, "Idempotency-Key": "wf-1"})
	if string(hdr.body) != string(first.body) {
		t.Errorf("header key after body key: %d %s, want the replay", hdr.status, hdr.body)
	}
	if r := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550300000","body":"Other","idempotencyKey":"wf-1"}`, xk); r.status != 422 {
		t.Errorf("body key reused with another body: %d %s, want 422", r.status, r.body)
	}
	both := map[string]string{"X-API-Key": key, "Idempotency-Key": "wf-2"}
	if r := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550300000","body":"Both","idempotencyKey":"wf-3"}`, both); r.status != 400 {
		t.Errorf("header and body keys differ: %d %s, want 400", r.status, r.body)
	}
	if r := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550300000","body":"Bad","idempotencyKey":5}`, xk); r.status != 400 {
		t.Errorf("idempotencyKey 5: %d, want 400", r.status)
	}
	if n := rl.count("Body key"); n != 1 {
		t.Errorf("the keyed text reached the provider %d times, want 1", n)
	}
	if r := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550300000","body":"x"}`, map[string]string{"X-API-Key": "mk_wrong"}); r.status != 401 {
		t.Errorf("wrong X-API-Key: %d, want 401", r.status)
	}
	if r := callerPost(t, p, `{"channel":"sms","recipientPhone":"+15550300000","body":"x"}`, map[string]string{"X-API-Key": key, "Authorization": "Bearer mk_other"}); r.status != 401 {
		t.Errorf("X-API-Key and Bearer differ: %d, want 401", r.status)
	}
}

// deleteLock frees the dedup lock of a send's answer.
func (p *proc) deleteLock(key string, r reply) error {
	m, _ := r.json(p.t)["message"].(map[string]any)
	id, _ := m["dedupLockId"].(string)
	if d := p.do(http.MethodDelete, "/api/dedup-locks/"+id, key, ""); d.status != 200 {
		return fmt.Errorf("delete lock %s: %d %s", id, d.status, d.body)
	}
	return nil
}

// A test key's sends run the whole path and never reach the provider; its
// messages say test: true, and a test send does not make the live send of
// the same text a duplicate.
func TestCallersTestKey(t *testing.T) {
	rl := newRelay(t, 0)
	p := start(t, callersEnv(t, rl))
	ws, live := p.createWorkspace(admin)
	r := wantStatus(t, p.do(http.MethodPost, "/admin/workspaces/"+ws+"/keys", admin, `{"test":true}`), 201)
	test, _ := r.json(t)["apiKey"].(string)
	if !strings.HasPrefix(test, "mk_test_") || r.json(t)["test"] != true {
		t.Fatalf("test key %s", r.body)
	}
	body := `{"channel":"sms","recipientPhone":"+15550400000","body":"Try the workflow"}`
	a := callerPost(t, p, body, map[string]string{"Authorization": "Bearer " + test})
	if a.status != 201 {
		t.Fatalf("test send: %d %s", a.status, a.body)
	}
	m := a.json(t)["message"].(map[string]any)
	if m["test"] != true || m["provider"] != "log" || m["status"] != "sent" {
		t.Errorf("test message: %v, want test: true on the log provider", m)
	}
	if d := callerPost(t, p, body, map[string]string{"Authorization": "Bearer " + test}); d.json(t)["duplicateOnly"] != true {
		t.Errorf("a test send's duplicate: %s, want duplicateOnly (the guard runs)", d.body)
	}
	if n := rl.count("Try the workflow"); n != 0 {
		t.Errorf("a test key's send reached the provider %d times", n)
	}
	l := callerPost(t, p, body, map[string]string{"Authorization": "Bearer " + live})
	if l.json(t)["duplicateOnly"] != false || l.json(t)["message"].(map[string]any)["test"] != false {
		t.Errorf("the live send after a test send: %s, want a send", l.body)
	}
	if n := rl.count("Try the workflow"); n != 1 {
		t.Errorf("the live send reached the provider %d times, want 1", n)
	}
	keys := p.do(http.MethodGet, "/admin/workspaces/"+ws+"/keys", admin, "").json(t)["keys"].([]any)
	tests := 0
	for _, k := range keys {
		if k.(map[string]any)["test"] == true {
			tests++
		}
	}
	if tests != 1 {
		t.Errorf("%d test keys listed, want 1", tests)
	}
}
