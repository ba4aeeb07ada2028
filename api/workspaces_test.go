package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/ratelimit"
)

func admin(e *apitest.Env, method, path, body string) apitest.Response {
	return e.Do(method, "/admin/workspaces/"+e.WSID+path, apitest.AdminToken, body, nil)
}

// The admin API lists a workspace's keys (never the key), revokes one, and
// disables and enables the whole workspace; each takes effect at once in
// the process that made the change.
func TestAdminKeysAndDisable(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	send := func(key string) apitest.Response {
		return e.Do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+15550100001","body":"hi `+key[len(key)-4:]+`"}`, nil)
	}
	if r := send(e.Key); r.Status != http.StatusCreated {
		t.Fatalf("first key: %d %s", r.Status, r.Body)
	}
	var second struct{ APIKey, KeyID, Prefix string }
	admin(e, http.MethodPost, "/keys", "").Decode(&second)
	if !strings.HasPrefix(second.KeyID, "key_") || second.Prefix != second.APIKey[:7]+"..."+second.APIKey[len(second.APIKey)-4:] {
		t.Errorf("new key: id %q prefix %q, want key_… and mk_XXXX...YYYY of %q", second.KeyID, second.Prefix, second.APIKey)
	}
	e.Workspaces.Wait()

	r := admin(e, http.MethodGet, "/keys", "")
	if r.Status != http.StatusOK {
		t.Fatalf("list keys: %d %s", r.Status, r.Body)
	}
	for _, k := range []string{e.Key, second.APIKey} {
		if strings.Contains(string(r.Body), k) || strings.Contains(string(r.Body), k[7:len(k)-4]) {
			t.Fatalf("the key list shows a key: %s", r.Body)
		}
	}
	var list struct {
		Keys []struct {
			ID, Prefix string
			CreatedAt  string
			LastUsedAt *string
		}
	}
	r.Decode(&list)
	if len(list.Keys) != 2 || list.Keys[1].ID != second.KeyID || list.Keys[0].LastUsedAt == nil || list.Keys[1].LastUsedAt != nil {
		t.Fatalf("keys %+v, want the first (used) and then the second (never used, %s)", list.Keys, second.KeyID)
	}

	// Revoke the first key: refused at once, the second still works.
	if r := admin(e, http.MethodDelete, "/keys/"+list.Keys[0].ID, ""); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	if r := send(e.Key); r.Status != http.StatusUnauthorized {
		t.Errorf("revoked key: %d, want 401", r.Status)
	}
	if r := send(second.APIKey); r.Status != http.StatusOK {
		t.Errorf("the other key: %d %s, want 200", r.Status, r.Body)
	}
	if r := admin(e, http.MethodDelete, "/keys/"+list.Keys[0].ID, ""); r.Status != http.StatusNotFound {
		t.Errorf("revoke again: %d, want 404", r.Status)
	}

	// Disable: every key refused, with a detail that says why; enable.
	r = admin(e, http.MethodPost, "/disable", "")
	if r.Status != http.StatusOK || r.JSON()["disabled"] != true {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	r = send(second.APIKey)
	if p := assertProblem(t, r, "unauthorized"); r.Status != http.StatusUnauthorized || !strings.Contains(p["detail"].(string), "disabled") {
		t.Errorf("disabled workspace: %d %s, want 401 saying it is disabled", r.Status, r.Body)
	}
	if r := admin(e, http.MethodPost, "/enable", ""); r.Status != http.StatusOK || r.JSON()["disabled"] != false {
		t.Fatalf("enable: %d %s", r.Status, r.Body)
	}
	if r := e.Do(http.MethodGet, "/api/messages/msg_nope", second.APIKey, "", nil); r.Status != http.StatusNotFound {
		t.Errorf("enabled again: %d %s, want past authentication (404)", r.Status, r.Body)
	}
	for _, p := range []string{"/admin/workspaces/ws_nope/disable", "/admin/workspaces/ws_nope/enable"} {
		if r := e.Do(http.MethodPost, p, apitest.AdminToken, "", nil); r.Status != http.StatusNotFound {
			t.Errorf("POST %s: %d, want 404", p, r.Status)
		}
	}
	if r := e.Do(http.MethodGet, "/admin/workspaces/ws_nope/keys", apitest.AdminToken, "", nil); r.Status != http.StatusNotFound {
		t.Errorf("keys of an unknown workspace: %d, want 404", r.Status)
	}
}

// GET and PATCH /admin/workspaces/{id}: settings within bounds, null back
// to the default, every bad field at once, no secrets shown; the
// workspace's default region is the one its sends use.
func TestWorkspaceSettings(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	if r := admin(e, http.MethodPut, "/secrets/telegram", `{"secret":"tg-very-secret-token"}`); r.Status != http.StatusNoContent {
		t.Fatal(r.Status)
	}
	r := admin(e, http.MethodGet, "", "")
	want := map[string]any{
		"workspaceId": e.WSID, "name": "Acme", "disabled": false,
		"settings": map[string]any{"dedupWindow": nil, "dedupWait": nil, "rateLimit": nil, "defaultRegion": nil, "optOutReply": nil,
			"pendingStatus": nil, "refusedStatus": nil, "answerProfile": nil, "quietHours": nil},
		"webhookSecrets": []any{"telegram"},
	}
	got := r.JSON()
	delete(got, "createdAt")
	if diff := cmp.Diff(want, got); r.Status != http.StatusOK || diff != "" {
		t.Errorf("GET: %d (-want +got):\n%s", r.Status, diff)
	}
	if strings.Contains(string(r.Body), "tg-very-secret-token") {
		t.Error("GET shows a secret")
	}

	// A UK number in national form is not a US number.
	gb := `{"channel":"sms","recipientPhone":"020 7946 0018","body":"Hello London"}`
	if r := e.Send(gb); r.Status != http.StatusBadRequest {
		t.Fatalf("a UK national number under the US default: %d %s, want 400", r.Status, r.Body)
	}
	r = admin(e, http.MethodPatch, "", `{"dedupWindow":"30m","dedupWait":"0s","rateLimit":{"perSecond":5,"burst":10},"defaultRegion":"gb","optOutReply":"You are unsubscribed. Reply START to resubscribe."}`)
	wantSettings := map[string]any{"dedupWindow": "30m", "dedupWait": "0s", "rateLimit": map[string]any{"perSecond": 5.0, "burst": 10.0}, "defaultRegion": "GB",
		"optOutReply": "You are unsubscribed. Reply START to resubscribe.", "pendingStatus": nil, "refusedStatus": nil, "answerProfile": nil, "quietHours": nil}
	if diff := cmp.Diff(wantSettings, r.JSON()["settings"]); r.Status != http.StatusOK || diff != "" {
		t.Errorf("PATCH: %d (-want +got):\n%s", r.Status, diff)
	}
	r = e.Send(gb)
	if m, _ := r.JSON()["message"].(map[string]any); r.Status != http.StatusCreated || m["recipientPhone"] != "+442079460018" {
		t.Errorf("after defaultRegion GB: %d %s, want +442079460018", r.Status, r.Body)
	}

	r = admin(e, http.MethodPatch, "", `{"dedupWindow":"10s","dedupWait":"1h","rateLimit":{"perSecond":0,"burst":1},"defaultRegion":"XX","colour":"red","optOutReply":""}`)
	p := assertProblem(t, r, "invalid_request")
	var fields []string
	for _, f := range p["errors"].([]any) {
		fields = append(fields, f.(map[string]any)["field"].(string))
	}
	if diff := cmp.Diff([]string{"colour", "dedupWait", "dedupWindow", "defaultRegion", "optOutReply", "rateLimit"}, fields); diff != "" {
		t.Errorf("invalid PATCH: fields (-want +got):\n%s", diff)
	}
	if r := admin(e, http.MethodGet, "", ""); cmp.Diff(wantSettings, r.JSON()["settings"]) != "" {
		t.Errorf("an invalid PATCH changed settings: %s", r.Body)
	}
	r = admin(e, http.MethodPatch, "", `{"defaultRegion":null,"rateLimit":null}`)
	if s := r.JSON()["settings"].(map[string]any); s["defaultRegion"] != nil || s["rateLimit"] != nil || s["dedupWindow"] != "30m" {
		t.Errorf("PATCH null: %s, want region and rate limit back to default, window kept", r.Body)
	}
	for _, tc := range []struct {
		path, body, ct string
		want           int
	}{
		{"/admin/workspaces/ws_nope", `{}`, "", http.StatusNotFound},
		{"/admin/workspaces/" + e.WSID, `[]`, "", http.StatusBadRequest},
		{"/admin/workspaces/" + e.WSID, `dedupWindow=1m`, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
	} {
		hdr := map[string]string{}
		if tc.ct != "" {
			hdr["Content-Type"] = tc.ct
		}
		if r := e.Do(http.MethodPatch, tc.path, apitest.AdminToken, tc.body, hdr); r.Status != tc.want {
			t.Errorf("PATCH %s %s: %d, want %d", tc.path, tc.body, r.Status, tc.want)
		}
	}
	if r := e.Do(http.MethodGet, "/admin/workspaces/ws_nope", apitest.AdminToken, "", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET unknown: %d, want 404", r.Status)
	}
}

// Past its limit a workspace gets 429 with Retry-After, before any store
// work; other workspaces are not affected; the admin API changes the limit.
func TestRateLimit(t *testing.T) {
	var limited atomic.Int64
	frozen := time.Now()
	e := apitest.New(t, apitest.Options{RateLimit: ratelimit.Limit{PerSecond: 1, Burst: 3},
		Limiter: ratelimit.New(ratelimit.Options{Now: func() time.Time { return frozen }}), // no token comes back during the test
		OnRateLimited: func(route, workspaceID string) {
			if route == "/api/messages" && workspaceID != "" {
				limited.Add(1)
			}
		}})
	body := func(i int) string {
		return fmt.Sprintf(`{"channel":"sms","recipientPhone":"+15550100001","body":"message %d"}`, i)
	}
	// A burst of 10 released together: exactly the 3 of the burst pass.
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	gate := make(chan struct{})
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			r := e.Send(body(i))
			switch r.Status {
			case http.StatusCreated, http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
				if r.Header.Get("Retry-After") != "1" {
					t.Errorf("429 Retry-After %q, want 1", r.Header.Get("Retry-After"))
				}
				if p := assertProblem(t, r, "rate_limited"); !strings.Contains(p["detail"].(string), "1 messages a second") {
					t.Errorf("429 detail %q, want the limit", p["detail"])
				}
			default:
				t.Errorf("send: %d %s", r.Status, r.Body)
			}
		}()
	}
	close(gate)
	wg.Wait()
	if ok.Load() != 3 || ok.Load()+refused.Load() != 10 || e.Sender.Count() != int(ok.Load()) {
		t.Errorf("%d sent, %d refused, sender saw %d; want at most the burst of 3 sent, the rest 429", ok.Load(), refused.Load(), e.Sender.Count())
	}
	if limited.Load() != refused.Load() {
		t.Errorf("metrics hook saw %d 429s, want %d", limited.Load(), refused.Load())
	}

	// A refused request costs the store nothing, whatever its body.
	e.Workspaces.Wait()
	before := e.Store.RoundTrips.Total()
	if r := e.Do(http.MethodPost, "/api/messages", e.Key, body(99), map[string]string{"Idempotency-Key": "k-429"}); r.Status != http.StatusTooManyRequests {
		t.Fatalf("over the limit with an Idempotency-Key: %d, want 429", r.Status)
	}
	if n := e.Store.RoundTrips.Total() - before; n != 0 {
		t.Errorf("a 429 cost %d store round trips, want 0", n)
	}
	// Reads are not limited.
	if r := e.Do(http.MethodGet, "/api/messages/msg_nope", e.Key, "", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET while over the send limit: %d, want 404", r.Status)
	}

	// Another workspace has its own bucket.
	var other struct{ APIKey string }
	e.Do(http.MethodPost, "/admin/workspaces", apitest.AdminToken, `{"name":"Other"}`, nil).Decode(&other)
	if r := e.Do(http.MethodPost, "/api/messages", other.APIKey, body(100), nil); r.Status != http.StatusCreated {
		t.Errorf("another workspace: %d %s, want 201", r.Status, r.Body)
	}

	// The admin raises this workspace's limit: it applies at once.
	if r := admin(e, http.MethodPatch, "", `{"rateLimit":{"perSecond":1000,"burst":1000}}`); r.Status != http.StatusOK {
		t.Fatalf("PATCH rateLimit: %d %s", r.Status, r.Body)
	}
	for i := range 20 {
		if r := e.Send(body(200 + i)); r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("after raising the limit, send %d: %d %s", i, r.Status, r.Body)
		}
	}
}

// A workspace's own dedup window and wait are the guard's for its sends.
func TestWorkspaceDedupWindowAndWait(t *testing.T) {
	clk := newClock(0)
	e := apitest.New(t, apitest.Options{Now: clk.Now}) // the global window: 15 minutes
	if r := admin(e, http.MethodPatch, "", `{"dedupWindow":"1m","dedupWait":"0s"}`); r.Status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.Status, r.Body)
	}
	body := `{"channel":"sms","recipientPhone":"+15550100000","body":"per-workspace window"}`
	if r := e.Send(body); r.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	clk.Advance(30 * time.Second)
	if got := e.Send(body).JSON(); got["duplicateOnly"] != true {
		t.Fatalf("within the workspace's 1m window: %v, want a duplicate", got)
	}
	clk.Advance(time.Minute) // past 1m, well within the global 15m
	if got := e.Send(body).JSON(); got["duplicateOnly"] == true {
		t.Fatalf("past the workspace's 1m window: %v, want a send", got)
	}
	if n := e.Sender.Count(); n != 2 {
		t.Errorf("sender saw %d, want 2", n)
	}
	// A wait of 0: a duplicate of an original that has not written its
	// message answers pending at once.
	held, release := stall(t, e.Store, insertInto("messages"))
	other := `{"channel":"sms","recipientPhone":"+15550100000","body":"no wait"}`
	orig := async(e, e.Key, other, nil)
	<-held
	start := time.Now()
	r := e.Send(other)
	if r.JSON()["pending"] != true || time.Since(start) >= 3*time.Second { // the global wait is 3s
		t.Errorf("duplicate with a 0s wait: %s after %s, want pending at once", r.Body, time.Since(start))
	}
	release()
	wait(t, orig)
}
