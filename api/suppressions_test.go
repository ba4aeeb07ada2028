package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/msgapi/msgapi/api"
	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/consent"
)

func TestSuppressionAPI(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	var other struct{ APIKey string }
	e.Do(http.MethodPost, "/admin/workspaces", apitest.AdminToken, `{"name":"Other"}`, nil).Decode(&other)

	r := e.Do(http.MethodPost, "/api/suppressions", e.Key, `{"address":"+1 (555) 010-0000","reason":"asked by phone"}`, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST: %d %s", r.Status, r.Body)
	}
	sp := r.JSON()["suppression"].(map[string]any)
	if sp["address"] != "+15550100000" || sp["source"] != "api" || sp["kind"] != "phone" {
		t.Errorf("suppression %v", sp)
	}
	if r := e.Do(http.MethodPost, "/api/suppressions", e.Key, `{"address":"+15550100000"}`, nil); r.Status != http.StatusOK || r.JSON()["created"] != false {
		t.Errorf("POST again: %d %s, want 200 created false", r.Status, r.Body)
	}
	e.Do(http.MethodPost, "/api/suppressions", e.Key, `{"address":"Ann@Example.com"}`, nil)
	for _, bad := range []string{`{"address":"nope"}`, `{"address":""}`, `{"adress":"+15550100000"}`} {
		if r := e.Do(http.MethodPost, "/api/suppressions", e.Key, bad, nil); r.Status != http.StatusBadRequest {
			t.Errorf("POST %s: %d, want 400", bad, r.Status)
		}
	}

	for _, path := range []string{"/api/suppressions/+15550100000", "/api/suppressions/%2B15550100000", "/api/suppressions/ann@example.com"} {
		if r := e.Do(http.MethodGet, path, e.Key, "", nil); r.Status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
		if r := e.Do(http.MethodGet, path, other.APIKey, "", nil); r.Status != http.StatusNotFound {
			t.Errorf("GET %s from another workspace: %d, want 404", path, r.Status)
		}
	}
	list := e.Do(http.MethodGet, "/api/suppressions?limit=1", e.Key, "", nil).JSON()
	if data := list["data"].([]any); len(data) != 1 || list["hasMore"] != true || data[0].(map[string]any)["address"] != "ann@example.com" {
		t.Errorf("first page %v", list)
	}
	next := e.Do(http.MethodGet, "/api/suppressions?limit=1&cursor="+list["nextCursor"].(string), e.Key, "", nil).JSON()
	if data := next["data"].([]any); len(data) != 1 || data[0].(map[string]any)["address"] != "+15550100000" {
		t.Errorf("second page %v", next)
	}
	if data := e.Do(http.MethodGet, "/api/suppressions", other.APIKey, "", nil).JSON()["data"].([]any); len(data) != 0 {
		t.Errorf("another workspace lists %v", data)
	}
	if r := e.Do(http.MethodGet, "/api/suppressions?limit=0&x=1", e.Key, "", nil); r.Status != http.StatusBadRequest {
		t.Errorf("bad query: %d", r.Status)
	}

	// A send to the suppressed number: suppressed, never sent, no lock.
	body := `{"channel":"sms","recipientPhone":"+15550100000","body":"Your appointment"}`
	s := e.Do(http.MethodPost, "/api/messages", e.Key, body, map[string]string{"Idempotency-Key": "k-1"})
	got := s.JSON()
	if s.Status != http.StatusCreated || got["status"] != "suppressed" || got["code"] != "recipient_opted_out" {
		t.Fatalf("send: %d %s", s.Status, s.Body)
	}
	msg := got["message"].(map[string]any)
	if msg["status"] != "suppressed" || msg["errorCode"] != "recipient_opted_out" || msg["dedupLockId"] != nil {
		t.Errorf("message %v", msg)
	}
	replay := e.Do(http.MethodPost, "/api/messages", e.Key, body, map[string]string{"Idempotency-Key": "k-1"})
	if replay.Header.Get("Idempotent-Replayed") != "true" || string(replay.Body) != string(s.Body) || replay.Status != s.Status {
		t.Errorf("replay: %d %s, want the first answer replayed", replay.Status, replay.Body)
	}
	if r := e.Do(http.MethodGet, "/api/messages/"+msg["id"].(string), e.Key, "", nil); r.JSON()["message"].(map[string]any)["status"] != "suppressed" {
		t.Errorf("GET message: %s", r.Body)
	}
	if data := e.Do(http.MethodGet, "/api/messages?status=suppressed", e.Key, "", nil).JSON()["data"].([]any); len(data) != 1 {
		t.Errorf("listed suppressed messages: %d, want 1", len(data))
	}
	if n := e.CountDocs("message_dedup_locks"); n != 0 {
		t.Errorf("%d dedup locks, want none", n)
	}
	// Another workspace sends to the same number.
	if r := e.Do(http.MethodPost, "/api/messages", other.APIKey, body, nil); r.JSON()["status"] != "sent" {
		t.Errorf("another workspace's send: %s", r.Body)
	}
	if n := e.Sender.Count(); n != 1 {
		t.Errorf("the provider saw %d messages, want 1 (the other workspace's)", n)
	}

	// Lift it; the next send goes out.
	if r := e.Do(http.MethodDelete, "/api/suppressions/%2B15550100000", e.Key, "", nil); r.Status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	if r := e.Do(http.MethodDelete, "/api/suppressions/+15550100000", e.Key, "", nil); r.Status != http.StatusNotFound {
		t.Errorf("DELETE again: %d, want 404", r.Status)
	}
	if r := e.Send(body); r.JSON()["status"] != "sent" {
		t.Errorf("send after DELETE: %s", r.Body)
	}
	if n := e.Sender.Count(); n != 2 {
		t.Errorf("the provider saw %d messages, want 2", n)
	}
}

func TestUnsubscribePage(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	tokens, err := e.Consent.Tokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tok := tokens.Make(e.WSID, "ann@example.com")
	post := func(tok string) *http.Response {
		t.Helper()
		resp, err := http.Post(e.URL+api.UnsubscribePath+tok, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// GET shows a page and changes nothing.
	resp, err := http.Get(e.URL + api.UnsubscribePath + tok)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "ann@example.com") || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET: %d %s", resp.StatusCode, page)
	}
	if _, ok, _ := e.Consent.Check(context.Background(), e.WSID, "ann@example.com"); ok {
		t.Fatal("GET suppressed")
	}
	// A tampered token: 404, nothing written.
	b := []byte(tok)
	b[len(b)/2] ^= 2
	if r := post(string(b)); r.StatusCode != http.StatusNotFound {
		t.Errorf("tampered POST: %d, want 404", r.StatusCode)
	}
	if n := e.CountDocs("suppressions"); n != 0 {
		t.Errorf("%d suppressions after a tampered token, want 0", n)
	}
	if r := post(tok); r.StatusCode != http.StatusOK {
		t.Errorf("POST: %d", r.StatusCode)
	}
	sp, ok, _ := e.Consent.Check(context.Background(), e.WSID, "ann@example.com")
	if !ok || sp.Source != consent.SourceUnsubscribe {
		t.Fatalf("after the one-click POST: %+v %v", sp, ok)
	}
	if r := e.Send(`{"channel":"email","recipientEmail":"ANN@example.com","body":"Newsletter"}`); r.JSON()["status"] != "suppressed" {
		t.Errorf("email after unsubscribe: %s", r.Body)
	}
	if n := e.Sender.Count(); n != 0 {
		t.Errorf("the provider saw %d messages, want 0", n)
	}
}
