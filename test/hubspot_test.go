package test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/msgapi/msgapi/vendorsig"
)

// fakeHubSpot is HubSpot's callback API as its docs describe it: POST
// /automation/v4/actions/callbacks/{callbackId}/complete with a Bearer
// token and {"outputFields": {...}}, answered 204. It checks the exact
// request and answers 503 to the first n completions of fail's callbacks.
type fakeHubSpot struct {
	srv   *httptest.Server
	token string
	mu    sync.Mutex
	done  map[string][]map[string]any // callbackId → outputFields of each acknowledged completion
	calls map[string]int
	fail  map[string]int
	bad   []string
}

func newFakeHubSpot(t *testing.T, token string) *fakeHubSpot {
	f := &fakeHubSpot{token: token, done: map[string][]map[string]any{}, calls: map[string]int{}, fail: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		const prefix, suffix = "/automation/v4/actions/callbacks/", "/complete"
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, prefix), suffix)
		var body struct {
			OutputFields map[string]any `json:"outputFields"`
		}
		b, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, prefix) || !strings.HasSuffix(r.URL.Path, suffix):
			f.bad = append(f.bad, r.Method+" "+r.URL.Path)
		case r.Header.Get("Authorization") != "Bearer "+f.token:
			f.bad = append(f.bad, "Authorization "+r.Header.Get("Authorization"))
		case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") || json.Unmarshal(b, &body) != nil || body.OutputFields == nil:
			f.bad = append(f.bad, "body "+string(b))
		default:
			f.calls[id]++
			if f.fail[id] > 0 {
				f.fail[id]--
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			f.done[id] = append(f.done[id], body.OutputFields)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeHubSpot) completions(id string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.done[id]...)
}

const (
	hubspotSecret = "0f3c9a7e-hubspot-app-client-secret"
	hubspotToken  = "pat-na1-hubspot-access-token-for-tests"
)

// hubspotCall posts HubSpot's action call for callbackId, signed v2 (as
// HubSpot's custom action guide says) with secret; sign may change the
// headers after signing.
func hubspotCall(t *testing.T, p *proc, wsID, secret, callbackID, text string, sign func(http.Header)) reply {
	t.Helper()
	r, err := hubspotTry(p, wsID, secret, callbackID, text, sign)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// hubspotTry is hubspotCall for another goroutine: the error is returned.
func hubspotTry(p *proc, wsID, secret, callbackID, text string, sign func(http.Header)) (reply, error) {
	body := fmt.Sprintf(`{"callbackId":%q,"origin":{"portalId":4242,"actionDefinitionId":7,"actionDefinitionVersion":1},`+
		`"context":{"source":"WORKFLOWS","workflowId":99},"object":{"objectId":615,"objectType":"CONTACT"},`+
		`"inputFields":{"channel":"sms","phone":"+14155550142","email":"","body":%q}}`, callbackID, text)
	u := p.url + "/integrations/hubspot/" + wsID + "/actions/send"
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(vendorsig.HeaderHubSpotVersion, "v2")
	req.Header.Set(vendorsig.HeaderHubSpotSignature, hex.EncodeToString(vendorsig.HubSpotV2(secret, http.MethodPost, u, []byte(body))))
	if sign != nil {
		sign(req.Header)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{res.StatusCode, res.Header, b}, nil
}

func outputs(t *testing.T, r reply) map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("action call: %d %s, want 200", r.status, r.body)
	}
	o, _ := r.json(t)["outputFields"].(map[string]any)
	if o == nil {
		t.Fatalf("no outputFields: %s", r.body)
	}
	return o
}

// The HubSpot custom workflow action against the binary: a bad or stale
// signature is 401 and writes nothing; a retried call with the same
// callbackId sends once; a duplicate of a message still in flight is
// BLOCK, completed exactly once at the (fake) HubSpot API once the outcome
// is known — after a 503 from HubSpot, and across a SIGKILL of msgapi.
func TestHubSpotCustomAction(t *testing.T) {
	rl := newRelay(t, 1500*time.Millisecond)
	hs := newFakeHubSpot(t, hubspotToken)
	env := callersEnv(t, rl)
	env["MSGAPI_ADDR"] = freeAddr(t) // the restart keeps the URL HubSpot signs
	env["MSGAPI_HUBSPOT_API_URL"] = hs.srv.URL
	env["MSGAPI_OUTCOME_MARGIN"], env["MSGAPI_SWEEP_INTERVAL"] = "1s", "300ms"
	p := start(t, env)
	wsID, key := p.createWorkspace(admin)
	for name, v := range map[string]string{"hubspot": hubspotSecret, "hubspot-token": hubspotToken} {
		if r := p.do(http.MethodPut, "/admin/workspaces/"+wsID+"/secrets/"+name, admin, `{"secret":"`+v+`"}`); r.status != http.StatusNoContent {
			t.Fatalf("set the %s secret: %d %s", name, r.status, r.body)
		}
	}

	// Bad and stale signatures: 401, nothing written, nothing sent.
	refused := map[string]reply{
		"wrong secret": hubspotCall(t, p, wsID, "not-the-app-secret-at-all", "cb-bad", "hs bad", nil),
		"v1 signature": hubspotCall(t, p, wsID, hubspotSecret, "cb-bad", "hs bad", func(h http.Header) { h.Set(vendorsig.HeaderHubSpotVersion, "v1") }),
		"stale v3": hubspotCall(t, p, wsID, hubspotSecret, "cb-bad", "hs bad", func(h http.Header) {
			old := strconv.FormatInt(time.Now().Add(-6*time.Minute).UnixMilli(), 10)
			h.Set(vendorsig.HeaderHubSpotTimestamp, old)
			h.Set(vendorsig.HeaderHubSpotSignatureV3, base64.StdEncoding.EncodeToString(sha256.New().Sum(nil)))
		}),
	}
	for name, r := range refused {
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, r.status, r.body)
		}
	}
	if n := rl.count("hs bad"); n != 0 {
		t.Errorf("refused calls sent %d messages", n)
	}
	if r := p.do(http.MethodGet, "/api/messages", key, ""); r.status != 200 || len(r.json(t)["data"].([]any)) != 0 {
		t.Errorf("refused calls wrote messages: %d %s", r.status, r.body)
	}

	// One execution, retried by HubSpot: one send, the same outputs.
	first := outputs(t, hubspotCall(t, p, wsID, hubspotSecret, "cb-1", "hs one", nil))
	again := hubspotCall(t, p, wsID, hubspotSecret, "cb-1", "hs one", nil)
	if first["hs_execution_state"] != "SUCCESS" || first["status"] != "sent" || first["duplicateOnly"] != false {
		t.Errorf("first call's outputs %v, want SUCCESS, sent, not a duplicate", first)
	}
	if o := outputs(t, again); o["messageId"] != first["messageId"] || o["hs_execution_state"] != "SUCCESS" {
		t.Errorf("the retried call's outputs %v, want those of the first (%v)", o, first)
	}
	if n := rl.count("hs one"); n != 1 {
		t.Errorf("one execution retried: %d sends, want 1", n)
	}
	m := p.do(http.MethodGet, "/api/messages/"+first["messageId"].(string), key, "").json(t)["message"].(map[string]any)
	lead := p.do(http.MethodGet, "/api/leads/"+m["leadId"].(string), key, "").json(t)["lead"].(map[string]any)
	if lead["hsContactId"] != "615" || lead["hsPortalId"] != "4242" {
		t.Errorf("the lead's HubSpot ids %v/%v, want 615/4242 (object.objectId, origin.portalId)", lead["hsContactId"], lead["hsPortalId"])
	}

	// Another execution with the same text while the first is in flight:
	// BLOCK, then completed once the original is sent (HubSpot's first
	// answer to the completion is a 503: it is retried).
	block := func(orig, dup, text string) map[string]any {
		t.Helper()
		done := make(chan reply, 1)
		go func() { r, _ := hubspotTry(p, wsID, hubspotSecret, orig, text, nil); done <- r }() // the kill may cut it
		for deadline := time.Now().Add(10 * time.Second); rl.count(text) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the original never reached the provider")
			}
		}
		o := outputs(t, hubspotCall(t, p, wsID, hubspotSecret, dup, text, nil))
		if o["hs_execution_state"] != "BLOCK" || o["hs_expiration_duration"] == nil || o["messageId"] == "" {
			t.Fatalf("a duplicate of a message in flight: %v, want BLOCK with an expiration and the original's id", o)
		}
		t.Cleanup(func() { <-done })
		return o
	}
	hs.mu.Lock()
	hs.fail["cb-3"] = 1
	hs.mu.Unlock()
	b := block("cb-2", "cb-3", "SLOW hs two")
	waitUntil(t, "cb-3's completion", 20*time.Second, func() bool { return len(hs.completions("cb-3")) > 0 })
	time.Sleep(2500 * time.Millisecond) // a few more passes: no second completion
	if c := hs.completions("cb-3"); len(c) != 1 || c[0]["hs_execution_state"] != "SUCCESS" || c[0]["status"] != "sent" ||
		c[0]["messageId"] != b["messageId"] || c[0]["duplicateOnly"] != true {
		t.Errorf("cb-3's completions %v, want one: SUCCESS, sent, duplicate of %v", c, b["messageId"])
	}
	if n := rl.count("SLOW hs two"); n != 1 {
		t.Errorf("two executions of one text: %d sends, want 1", n)
	}

	// The same across a SIGKILL: the BLOCK is durable, the restarted
	// process completes it once the original's outcome is decided (the
	// kill lost it: unknown, so FAIL_CONTINUE).
	b = block("cb-4", "cb-5", "SLOW hs three")
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.done <- <-p.done
	p2 := start(t, env)
	waitUntil(t, "cb-5's completion after the restart", 30*time.Second, func() bool { return len(hs.completions("cb-5")) > 0 })
	time.Sleep(2500 * time.Millisecond)
	if c := hs.completions("cb-5"); len(c) != 1 || c[0]["hs_execution_state"] != "FAIL_CONTINUE" || c[0]["status"] != "unknown" || c[0]["messageId"] != b["messageId"] {
		t.Errorf("cb-5's completions %v, want one: FAIL_CONTINUE, unknown, %v", c, b["messageId"])
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.bad) > 0 {
		t.Errorf("requests HubSpot's API would refuse: %v", hs.bad)
	}
	if hs.calls["cb-3"] != 2 {
		t.Errorf("cb-3: %d completion calls, want 2 (a 503, then the completion)", hs.calls["cb-3"])
	}
	_ = p2
}
