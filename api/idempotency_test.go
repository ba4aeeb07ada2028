package api_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/msgapi/msgapi/api/apitest"
)

// The Idempotency-Key middleware as mounted on the real route, with the
// duplicate guard behind it.
func TestIdempotencyKeyOnTheSendRoute(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	body := `{"channel":"sms","recipientPhone":"+15550100000","body":"Order 42 shipped"}`
	key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }

	first := e.Do(http.MethodPost, "/api/messages", e.Key, body, key("k-1"))
	again := e.Do(http.MethodPost, "/api/messages", e.Key, body, key("k-1"))
	if first.Status != http.StatusCreated || again.Status != first.Status || !bytes.Equal(first.Body, again.Body) {
		t.Fatalf("replay: %d %s, first %d %s; want identical", again.Status, again.Body, first.Status, first.Body)
	}
	if again.Header.Get("Idempotent-Replayed") != "true" || first.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("Idempotent-Replayed: first %q, replay %q", first.Header.Get("Idempotent-Replayed"), again.Header.Get("Idempotent-Replayed"))
	}

	// Reordered keys and whitespace: the same request.
	reordered := `{ "body": "Order 42 shipped", "recipientPhone": "+15550100000", "channel": "sms" }`
	if r := e.Do(http.MethodPost, "/api/messages", e.Key, reordered, key("k-1")); r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("reordered JSON: %d %s, want a replay", r.Status, r.Body)
	}
	// Same key, different request.
	r := e.Do(http.MethodPost, "/api/messages", e.Key, `{"channel":"sms","recipientPhone":"+15550100000","body":"Other"}`, key("k-1"))
	if r.Status != http.StatusUnprocessableEntity {
		t.Errorf("different body: %d, want 422", r.Status)
	}
	assertProblem(t, r, "idempotency_key_reused")

	// Another key, same message: the duplicate guard answers, and that
	// answer is what the new key replays.
	dup := e.Do(http.MethodPost, "/api/messages", e.Key, body, key("k-2"))
	if dup.JSON()["duplicateOnly"] != true {
		t.Fatalf("same message under a new key: %s, want duplicateOnly", dup.Body)
	}
	if r := e.Do(http.MethodPost, "/api/messages", e.Key, body, key("k-2")); !bytes.Equal(r.Body, dup.Body) {
		t.Errorf("replay of a duplicate answer differs:\n%s\n%s", r.Body, dup.Body)
	}

	// A validation failure stores nothing: the corrected request with the
	// same key sends.
	bad := e.Do(http.MethodPost, "/api/messages", e.Key, `{"channel":"sms","recipientPhone":"nope","body":"Fixed later"}`, key("k-3"))
	if bad.Status != http.StatusBadRequest {
		t.Fatalf("bad request: %d", bad.Status)
	}
	good := e.Do(http.MethodPost, "/api/messages", e.Key, `{"channel":"sms","recipientPhone":"+15550100003","body":"Fixed later"}`, key("k-3"))
	if good.Status != http.StatusCreated || good.JSON()["status"] != "sent" {
		t.Errorf("corrected request with the same key: %d %s", good.Status, good.Body)
	}

	// An invalid key is a 400 before anything runs.
	if r := e.Do(http.MethodPost, "/api/messages", e.Key, body, key(strings.Repeat("k", 256))); r.Status != http.StatusBadRequest {
		t.Errorf("invalid key: %d, want 400", r.Status)
	}
	if n := e.Sender.Count(); n != 2 {
		t.Errorf("sender saw %d messages, want 2", n)
	}
}
