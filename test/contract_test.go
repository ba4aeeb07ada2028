package test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/consent"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/openapi"
	"github.com/msgapi/msgapi/receipts"
	"github.com/msgapi/msgapi/stdwebhook"
	"github.com/msgapi/msgapi/vendorsig"
)

// TestContract drives the real binary through every operation and every
// documented status of openapi/openapi.yaml and validates each response
// (status, headers, body) against the document. It fails on any response
// the document does not allow, and on any documented (operation, status)
// that was never answered unless it is excluded, with its reason, in
// contract_check_test.go.
//
// Three processes share one store: a owns the embedded engine; b connects
// to it with a slow provider (for 409) and a short store timeout (for 503
// once a, and with it the engine, is stopped); off runs without an admin
// token (the admin API answers 404).
func TestContract(t *testing.T) {
	c := newContract(t)
	envA := embeddedEnv(t, t.TempDir())
	envA["MSGAPI_DEDUP_WAIT"] = "100ms"
	envA["MSGAPI_LOG_LEVEL"] = "warn"
	envA["MSGAPI_ENV"], envA["MSGAPI_EGRESS_ALLOW_LOOPBACK"] = "development", "true" // the event receiver is a loopback server
	envA["MSGAPI_TWILIO_AUTH_TOKEN"], envA["MSGAPI_WEBHOOK_SECRET"] = twilioToken, relaySecret
	a := start(t, envA)
	engine := engineURI(envA)
	onEngine := func(extra map[string]string) map[string]string {
		env := map[string]string{"MONGODB_URI": engine, "MSGAPI_LOG_LEVEL": "warn"}
		maps.Copy(env, extra)
		return env
	}
	b := start(t, onEngine(map[string]string{
		"MSGAPI_ADMIN_TOKEN": admin, "MSGAPI_LOG_SENDER_DELAY": "2s",
		"MSGAPI_STORE_TIMEOUT": "2s", "MSGAPI_KEY_CACHE_TTL": "10m",
		"MSGAPI_TWILIO_AUTH_TOKEN": twilioToken, "MSGAPI_WEBHOOK_SECRET": relaySecret,
	}))
	off := start(t, onEngine(nil))
	db := connectStore(t, engine)

	const tgSecret = "contract-telegram-secret"
	var ws, key string
	t.Run("health and docs", func(t *testing.T) {
		c.do(t, a, call{method: "GET", path: "/healthz"})
		c.do(t, a, call{method: "GET", path: "/readyz"})
		c.do(t, a, call{method: "GET", path: "/metrics"})
		if r := c.do(t, a, call{method: "GET", path: "/openapi.yaml"}); !bytes.Equal(r.body, openapi.YAML()) {
			t.Error("GET /openapi.yaml is not the embedded document")
		}
		if r := c.do(t, a, call{method: "GET", path: "/docs"}); !bytes.Contains(r.body, []byte(`id="error-invalid_request"`)) {
			t.Error("GET /docs has no Errors section")
		}
		asset := wantStatus(t, c.do(t, a, call{method: "GET", path: "/docs/assets/swagger-ui.css"}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/docs/assets/swagger-ui.css", header: map[string]string{"If-None-Match": asset.header.Get("ETag")}}), 304)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/docs/assets/docs.js"}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/docs/assets/swagger-ui-LICENSE"}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/docs/assets/no-such-file.js"}), 404)
		r := c.do(t, a, call{method: "GET", path: "/healthz", header: map[string]string{"X-Request-Id": "contract-1"}})
		if got := r.header.Get("X-Request-Id"); got != "contract-1" {
			t.Errorf("X-Request-Id %q, want the caller's contract-1", got)
		}
		// Not operations, but problem documents with documented codes.
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: "/healthz"}), http.StatusMethodNotAllowed)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/no-such-route"}), http.StatusNotFound)
	})

	t.Run("admin", func(t *testing.T) {
		r := wantStatus(t, c.do(t, a, call{method: "POST", path: "/admin/workspaces", token: admin, body: `{"name":"Contract"}`}), 201)
		m := r.json(t)
		ws, key = m["workspaceId"].(string), m["apiKey"].(string)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/admin/workspaces", token: admin, body: `{"name":"  "}`}), 400)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/admin/workspaces", token: admin, body: `{"name":5}`}), 400)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/admin/workspaces", token: "wrong", body: `{"name":"x"}`}), 401)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/admin/workspaces", token: admin, body: tooLarge(), chunked: true}), 413)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/admin/workspaces", token: admin, body: "name=x", contentType: "application/x-www-form-urlencoded"}), 415)
		wantStatus(t, c.do(t, off, call{method: "POST", path: "/admin/workspaces", token: admin, body: `{"name":"x"}`}), 404)

		keys := "/admin/workspaces/" + ws + "/keys"
		wantStatus(t, c.do(t, a, call{method: "POST", path: keys, token: admin}), 201)
		wantStatus(t, c.do(t, a, call{method: "POST", path: keys, token: admin, body: `{"test":true}`}), 201)
		wantStatus(t, c.do(t, a, call{method: "POST", path: keys, token: admin, body: `{"test":"yes"}`}), 400)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/admin/workspaces/ws_nope/keys", token: admin}), 404)
		wantStatus(t, c.do(t, a, call{method: "POST", path: keys}), 401)
		wantStatus(t, c.do(t, off, call{method: "POST", path: keys, token: admin}), 404)

		secret := "/admin/workspaces/" + ws + "/secrets/telegram"
		wantStatus(t, c.do(t, a, call{method: "PUT", path: secret, token: admin, body: `{"secret":"` + tgSecret + `"}`}), 204)
		wantStatus(t, c.do(t, a, call{method: "PUT", path: secret, token: admin, body: `{"secret":""}`}), 400)
		wantStatus(t, c.do(t, a, call{method: "PUT", path: secret, token: admin, body: `{"secret":"x"}`}), 400) // shorter than 16 bytes
		wantStatus(t, c.do(t, a, call{method: "PUT", path: "/admin/workspaces/" + ws + "/secrets/fax", token: admin, body: `{"secret":"x"}`}), 404)
		wantStatus(t, c.do(t, a, call{method: "PUT", path: "/admin/workspaces/ws_nope/secrets/telegram", token: admin, body: `{"secret":"` + tgSecret + `"}`}), 404)
		wantStatus(t, c.do(t, a, call{method: "PUT", path: secret, token: "wrong", body: `{"secret":"x"}`}), 401)
		wantStatus(t, c.do(t, a, call{method: "PUT", path: secret, token: admin, body: tooLarge(), chunked: true}), 413)
		wantStatus(t, c.do(t, a, call{method: "PUT", path: secret, token: admin, body: "x", contentType: "text/plain"}), 415)
		relaySecret := "/admin/workspaces/" + ws + "/secrets/email"
		wantStatus(t, c.do(t, a, call{method: "PUT", path: relaySecret, token: admin, body: `{"secret":"whsec_not base64"}`}), 400)
		wantStatus(t, c.do(t, a, call{method: "PUT", path: relaySecret, token: admin, body: `{"secret":"` + stdwebhook.NewSecret() + `"}`}), 204)

		// A workspace's settings, keys, and disable / enable.
		wsPath := "/admin/workspaces/" + ws
		got := wantStatus(t, c.do(t, a, call{method: "GET", path: wsPath, token: admin}), 200).json(t)
		if s, _ := got["webhookSecrets"].([]any); len(s) != 2 || s[0] != "telegram" || s[1] != "email" || strings.Contains(fmt.Sprint(got), tgSecret) {
			t.Errorf("GET workspace %v: want the telegram and email channels named and no secret", got)
		}
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/admin/workspaces/ws_nope", token: admin}), 404)
		wantStatus(t, c.do(t, a, call{method: "GET", path: wsPath, token: "wrong"}), 401)
		patched := wantStatus(t, c.do(t, a, call{method: "PATCH", path: wsPath, token: admin, body: `{"dedupWindow":"20m","defaultRegion":"us"}`}), 200).json(t)
		if st := patched["settings"].(map[string]any); st["dedupWindow"] != "20m" || st["defaultRegion"] != "US" {
			t.Errorf("PATCH: settings %v", st)
		}
		wantStatus(t, c.do(t, a, call{method: "PATCH", path: wsPath, token: admin, body: `{"dedupWindow":null,"defaultRegion":null}`}), 200)
		wantStatus(t, c.do(t, a, call{method: "PATCH", path: wsPath, token: admin, body: `{"dedupWait":"1h"}`}), 400)
		wantStatus(t, c.do(t, a, call{method: "PATCH", path: "/admin/workspaces/ws_nope", token: admin, body: `{}`}), 404)
		wantStatus(t, c.do(t, a, call{method: "PATCH", path: wsPath, token: "wrong", body: `{}`}), 401)
		wantStatus(t, c.do(t, a, call{method: "PATCH", path: wsPath, token: admin, body: tooLarge(), chunked: true}), 413)
		wantStatus(t, c.do(t, a, call{method: "PATCH", path: wsPath, token: admin, body: "x", contentType: "text/plain"}), 415)

		// A second workspace to revoke keys of, disable and rate-limit.
		m2 := wantStatus(t, c.do(t, a, call{method: "POST", path: "/admin/workspaces", token: admin, body: `{"name":"Contract two"}`}), 201).json(t)
		ws2, key2 := m2["workspaceId"].(string), m2["apiKey"].(string)
		ws2Path := "/admin/workspaces/" + ws2
		extra := wantStatus(t, c.do(t, a, call{method: "POST", path: ws2Path + "/keys", token: admin}), 201).json(t)
		list := wantStatus(t, c.do(t, a, call{method: "GET", path: ws2Path + "/keys", token: admin}), 200).json(t)
		if k, _ := list["keys"].([]any); len(k) != 2 || strings.Contains(fmt.Sprint(list), key2) {
			t.Errorf("key list %v: want 2 keys, never a key", list)
		}
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/admin/workspaces/ws_nope/keys", token: admin}), 404)
		wantStatus(t, c.do(t, a, call{method: "GET", path: ws2Path + "/keys", token: "wrong"}), 401)
		revoke := ws2Path + "/keys/" + extra["keyId"].(string)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: revoke, token: admin}), 204)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: revoke, token: admin}), 404)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: revoke, token: "wrong"}), 401)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages", token: extra["apiKey"].(string), body: `{"channel":"sms","recipientPhone":"+15550100090","body":"Revoked"}`}), 401)

		two := `{"channel":"sms","recipientPhone":"+15550100091","body":"Workspace two"}`
		if d := wantStatus(t, c.do(t, a, call{method: "POST", path: ws2Path + "/disable", token: admin}), 200).json(t); d["disabled"] != true {
			t.Errorf("disable: %v", d)
		}
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages", token: key2, body: two}), 401)
		wantStatus(t, c.do(t, a, call{method: "POST", path: ws2Path + "/enable", token: admin}), 200)
		for _, op := range []string{"/disable", "/enable"} {
			wantStatus(t, c.do(t, a, call{method: "POST", path: "/admin/workspaces/ws_nope" + op, token: admin}), 404)
			wantStatus(t, c.do(t, a, call{method: "POST", path: ws2Path + op, token: "wrong"}), 401)
		}

		// Its own rate limit, one request at a time: the second is 429.
		wantStatus(t, c.do(t, a, call{method: "PATCH", path: ws2Path, token: admin, body: `{"rateLimit":{"perSecond":1,"burst":1}}`}), 200)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages", token: key2, body: two}), 201)
		if r := wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages", token: key2, body: two}), 429); r.header.Get("Retry-After") != "1" {
			t.Errorf("429 Retry-After %q, want 1", r.header.Get("Retry-After"))
		}
		if r := c.do(t, a, call{method: "GET", path: "/metrics"}); !bytes.Contains(r.body, []byte(`msgapi_rate_limited_total{route="/api/messages",workspace_id="`+ws2+`"} 1`)) {
			t.Error("/metrics does not count the 429")
		}
	})
	if ws == "" {
		t.Fatal("no workspace: the rest cannot run")
	}

	send := func(t *testing.T, p *proc, body string, hdr map[string]string) reply {
		t.Helper()
		return c.do(t, p, call{method: "POST", path: "/api/messages", token: key, body: body, header: hdr})
	}
	var msg1, lock1 string
	t.Run("send", func(t *testing.T) {
		first := `{"channel":"sms","recipientPhone":"+1 (555) 010-0001","body":"Contract one","ghlContactId":"g-1"}`
		m := wantStatus(t, send(t, a, first, nil), 201).json(t)["message"].(map[string]any)
		msg1, _ = m["id"].(string)
		lock1, _ = m["dedupLockId"].(string)
		wantStatus(t, send(t, a, `{"channel":"sms","recipientPhone":"+15550100001","body":"Contract two"}`, nil), 200)
		dup := wantStatus(t, send(t, a, first, nil), 200).json(t)
		if dup["duplicateOnly"] != true || dup["message"].(map[string]any)["id"] != msg1 {
			t.Errorf("duplicate answer %v, want duplicateOnly and message %s", dup, msg1)
		}

		// HubSpot sends its ids as JSON numbers: accepted, stored and
		// echoed as strings.
		hs := wantStatus(t, send(t, a, `{"channel":"sms","recipientPhone":"+15550100016","body":"HubSpot ids","hsPortalId":4411,"hsContactId":9007199254740991}`, nil), 201).json(t)
		if hs["hsPortalId"] != "4411" || hs["hsContactId"] != "9007199254740991" {
			t.Errorf("HubSpot ids echoed as %#v / %#v, want the strings \"4411\" / \"9007199254740991\"", hs["hsPortalId"], hs["hsContactId"])
		}
		wantStatus(t, send(t, a, `{"channel":"sms","recipientPhone":"+15550100016","body":"HubSpot ids","hsPortalId":44.5}`, nil), 400)

		bad := wantStatus(t, send(t, a, `{"channel":"sms","recipientPhone":"nope","body":"","attachments":[{"url":"http://x.example/a"}]}`, nil), 400).json(t)
		if errs, _ := bad["errors"].([]any); len(errs) != 3 {
			t.Errorf("errors %v, want one per bad field (3)", bad["errors"])
		}
		wantStatus(t, send(t, a, `{"channel":`, nil), 400)
		badKey := wantStatus(t, send(t, a, first, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}), 400).json(t)
		if errs, _ := badKey["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "Idempotency-Key" {
			t.Errorf("bad Idempotency-Key: errors %v, want the header named", badKey["errors"])
		}
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages", body: first}), 401)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages", token: "mk_wrong", body: first}), 401)
		wantStatus(t, send(t, a, `{"channel":"sms","leadId":"lead_00000000000000000000000000000000","body":"Hi"}`, nil), 404)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages", token: key, body: tooLarge(), chunked: true}), 413)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages", token: key, body: first, contentType: "text/plain"}), 415)
	})

	t.Run("idempotency key", func(t *testing.T) {
		k := map[string]string{"Idempotency-Key": "contract-" + msgapi.NewID("k")}
		body := `{"channel":"email","recipientEmail":"Keyed@Example.com","body":"Keyed"}`
		orig := wantStatus(t, send(t, a, body, k), 201)
		again := wantStatus(t, send(t, a, body, k), 201)
		if again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, orig.body) {
			t.Errorf("replay: Idempotent-Replayed %q, same body %v", again.header.Get("Idempotent-Replayed"), bytes.Equal(again.body, orig.body))
		}
		wantStatus(t, send(t, a, `{"channel":"email","recipientEmail":"keyed@example.com","body":"Keyed, changed"}`, k), 422)

		// 409: the first request holds the key for the slow provider's 2 s.
		k2 := map[string]string{"Idempotency-Key": "contract-" + msgapi.NewID("k")}
		slow := `{"channel":"sms","recipientPhone":"+15550100003","body":"Slow provider"}`
		var wg sync.WaitGroup
		var first reply
		var firstErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, firstErr = c.send(t, b, call{method: "POST", path: "/api/messages", token: key, body: slow, header: k2})
		}()
		// Send the second once the first holds the key (its record is in
		// the store), not after a guessed delay.
		rec := idempotency.RecordID(ws, http.MethodPost, "/api/messages", k2["Idempotency-Key"])
		keys := db.Collection(idempotency.Collections[0].Name)
		claimed := false
		for deadline := time.Now().Add(10 * time.Second); !claimed && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			n, _ := keys.CountDocuments(context.Background(), bson.D{{Key: "_id", Value: rec}})
			claimed = n > 0
		}
		if !claimed {
			t.Error("the first request never claimed its Idempotency-Key")
		} else if r := wantStatus(t, send(t, a, slow, k2), 409); r.header.Get("Retry-After") == "" {
			t.Error("409 without Retry-After")
		}
		wg.Wait()
		if firstErr != nil || first.status != 201 {
			t.Errorf("the first request: %v %d %s", firstErr, first.status, first.body)
		}
	})

	t.Run("duplicate in flight", func(t *testing.T) {
		// A lock whose message was never written: its holder is still
		// between winning the lock and writing the message (here: a lock
		// inserted by hand, as guard writes it). The duplicate waits
		// MSGAPI_DEDUP_WAIT (100ms) for the message and answers "pending".
		phone, text := "+15550100005", "Still in flight"
		lockID := guard.LockID(guard.Key{WorkspaceID: ws, Phone: phone, Body: text})
		now := time.Now().UTC()
		_, err := db.Collection("message_dedup_locks").InsertOne(context.Background(), bson.D{
			{Key: "_id", Value: lockID}, {Key: "workspaceId", Value: ws}, {Key: "messageId", Value: msgapi.NewID("msg")},
			{Key: "createdAt", Value: now}, {Key: "expiresAt", Value: now.Add(15 * time.Minute)},
		})
		if err != nil {
			t.Fatal(err)
		}
		r := wantStatus(t, send(t, a, fmt.Sprintf(`{"channel":"sms","recipientPhone":%q,"body":%q}`, phone, text), nil), 200).json(t)
		if r["message"] != nil || r["lockId"] != lockID {
			t.Errorf("in flight: %v, want message null and lockId %s", r, lockID)
		}
	})

	t.Run("get message", func(t *testing.T) {
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/messages/" + msg1, token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/messages/msg_nope", token: key}), 404)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/messages/" + msg1}), 401)
	})

	t.Run("scheduled sends and cancels", func(t *testing.T) {
		at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		r := wantStatus(t, send(t, a, `{"channel":"sms","recipientPhone":"+15550100061","body":"Later","sendAt":"`+at+`","cancellationKey":"contract-k"}`, nil), 201).json(t)
		id := r["message"].(map[string]any)["id"].(string)
		cancel := "/api/messages/" + id + "/cancel"
		wantStatus(t, c.do(t, a, call{method: "POST", path: cancel, token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "POST", path: cancel, token: key}), 200) // canceled again: the same answer
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages/" + msg1 + "/cancel", token: key}), 409)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages/msg_nope/cancel", token: key}), 404)
		wantStatus(t, c.do(t, a, call{method: "POST", path: cancel}), 401)

		wantStatus(t, send(t, a, `{"channel":"sms","recipientPhone":"+15550100062","body":"Later too","sendAt":"`+at+`","cancellationKey":"contract-k"}`, nil), 201)
		byKey := wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages/cancel", token: key, body: `{"cancellationKey":"contract-k"}`}), 200).json(t)
		if n := len(byKey["canceled"].([]any)); n != 2 {
			t.Errorf("cancel by key canceled %d, want 2 (one already canceled)", n)
		}
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages/cancel", token: key, body: `{}`}), 400)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages/cancel", token: key, body: "cancellationKey=x", contentType: "application/x-www-form-urlencoded"}), 415)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages/cancel", body: `{"cancellationKey":"contract-k"}`}), 401)

		// 500: a scheduled message the server cannot render (a date past
		// year 9999), canceled by id and by its key.
		for i, k := range []string{"contract-bad-1", "contract-bad-2"} {
			r := wantStatus(t, send(t, a, fmt.Sprintf(`{"channel":"sms","recipientPhone":"+1555010007%d","body":"Unrenderable later","sendAt":%q,"cancellationKey":%q}`, i, at, k), nil), 201).json(t)
			bad := r["message"].(map[string]any)["id"].(string)
			if _, err := db.Collection("messages").UpdateOne(context.Background(), bson.D{{Key: "_id", Value: bad}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "createdAt", Value: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}}); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages/" + bad + "/cancel", token: key}), 500)
			} else {
				wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages/cancel", token: key, body: `{"cancellationKey":"` + k + `"}`}), 500)
			}
		}
	})

	t.Run("internal error", func(t *testing.T) {
		// A stored message the server cannot render (a date past year
		// 9999 has no RFC 3339 form) is an internal error: 500, with the
		// body saying only "internal error".
		body := `{"channel":"sms","recipientPhone":"+15550100006","body":"Unrenderable"}`
		id, _ := wantStatus(t, send(t, a, body, nil), 201).json(t)["message"].(map[string]any)["id"].(string)
		// The message as committed and as its outcome left it (what reads
		// return) alike.
		for _, coll := range []string{"messages", messages.OutcomesCollection} {
			_, err := db.Collection(coll).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: id}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "createdAt", Value: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		r := wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/messages/" + id, token: key}), 500)
		if d := r.json(t)["detail"]; d != "internal error" {
			t.Errorf("500 detail %q, want only \"internal error\"", d)
		}
		wantStatus(t, send(t, a, body, nil), 500) // the duplicate answer carries the same message
	})

	t.Run("dedup locks", func(t *testing.T) {
		if lock1 == "" {
			t.Fatal("the first send returned no dedupLockId")
		}
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: "/api/dedup-locks/" + lock1, token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: "/api/dedup-locks/" + lock1, token: key}), 404)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: "/api/dedup-locks/" + lock1}), 401)
	})

	hook := "/api/webhooks/" + ws + "/telegram"
	tg := map[string]string{"X-Telegram-Bot-Api-Secret-Token": tgSecret}
	t.Run("webhooks", func(t *testing.T) {
		update := `{"update_id":1001,"message":{"message_id":7,"from":{"id":42},"chat":{"id":42},"text":"Hello"}}`
		wantStatus(t, c.do(t, a, call{method: "POST", path: hook, body: update, header: tg}), 200)
		again := wantStatus(t, c.do(t, a, call{method: "POST", path: hook, body: update, header: tg}), 200).json(t)
		if again["duplicate"] != true {
			t.Errorf("redelivery: %v, want duplicate true", again)
		}
		wantStatus(t, c.do(t, a, call{method: "POST", path: hook, body: `{"message":{}}`, header: tg}), 400)
		wantStatus(t, c.do(t, a, call{method: "POST", path: hook, body: update, header: map[string]string{"X-Telegram-Bot-Api-Secret-Token": "wrong"}}), 401)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/webhooks/" + ws + "/fax", body: update, header: tg}), 404)
		wantStatus(t, c.do(t, a, call{method: "POST", path: hook, body: tooLarge(), chunked: true, header: tg}), 413)

		// Slack's url_verification gets its challenge back.
		wantStatus(t, c.do(t, a, call{method: "PUT", path: "/admin/workspaces/" + ws + "/secrets/slack", token: admin, body: `{"secret":"contract-slack-secret"}`}), 204)
		challenge := `{"type":"url_verification","challenge":"contract-challenge"}`
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/webhooks/" + ws + "/slack", body: challenge, header: map[string]string{
			"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + hex.EncodeToString(vendorsig.SlackSignature("contract-slack-secret", ts, []byte(challenge))),
		}}), 200)

		// Twilio gets TwiML.
		wantStatus(t, c.do(t, a, call{method: "PUT", path: "/admin/workspaces/" + ws + "/secrets/twilio", token: admin, body: `{"secret":"contract-twilio-token"}`}), 204)
		form := url.Values{"MessageSid": {"SM-contract-1"}, "From": {"+15550100099"}, "To": {"+15550100000"}, "Body": {"Hi"}}
		path := "/api/webhooks/" + ws + "/twilio"
		sig := vendorsig.TwilioSignature("contract-twilio-token", a.url+path, form)
		wantStatus(t, c.do(t, a, call{method: "POST", path: path, body: form.Encode(), contentType: "application/x-www-form-urlencoded",
			header: map[string]string{"X-Twilio-Signature": base64.StdEncoding.EncodeToString(sig)}}), 200)
	})

	t.Run("read", func(t *testing.T) {
		get := func(path, token string) reply {
			return c.do(t, a, call{method: "GET", path: path, token: token})
		}
		data := func(r reply) []any {
			d, _ := r.json(t)["data"].([]any)
			return d
		}
		// Inbound messages (the webhooks above: Telegram, Twilio) are listed,
		// newest first, a page at a time.
		p1 := wantStatus(t, get("/api/messages?direction=inbound&limit=1", key), 200).json(t)
		cursor, _ := p1["nextCursor"].(string)
		if p1["hasMore"] != true || cursor == "" {
			t.Fatalf("inbound page 1: %v, want hasMore and a cursor", p1)
		}
		p2 := wantStatus(t, get("/api/messages?direction=inbound&limit=1&cursor="+url.QueryEscape(cursor), key), 200)
		var bodies []string
		for _, m := range append(p1["data"].([]any), data(p2)...) {
			bodies = append(bodies, m.(map[string]any)["body"].(string))
		}
		if strings.Join(bodies, ",") != "Hi,Hello" {
			t.Errorf("inbound messages %v, want the Twilio one, then the Telegram one", bodies)
		}
		// Outbound, by lead; the lead by id and by phone; its conversation.
		lead := messages.LeadID(ws, "+15550100001", "")
		conv := messages.ConversationID(ws, "+15550100001", "")
		if got := data(wantStatus(t, get("/api/messages?leadId="+lead, key), 200)); len(got) != 2 {
			t.Errorf("messages of lead %s: %d, want 2", lead, len(got))
		}
		wantStatus(t, get("/api/messages?limit=0&status=nope", key), 400)
		wantStatus(t, get("/api/messages?cursor=c1.bm9wZQ", key), 400)
		wantStatus(t, get("/api/messages", ""), 401)
		wantStatus(t, get("/api/leads/"+lead, key), 200)
		wantStatus(t, get("/api/leads/lead_00000000000000000000000000000000", key), 404)
		wantStatus(t, get("/api/leads/"+lead, ""), 401)
		if got := data(wantStatus(t, get("/api/leads?phone="+url.QueryEscape("(555) 010-0001"), key), 200)); len(got) != 1 {
			t.Errorf("leads by phone: %v, want the lead", got)
		}
		wantStatus(t, get("/api/leads?phone=nope", key), 400)
		wantStatus(t, get("/api/leads?email=a%40example.com", ""), 401)
		r := wantStatus(t, get("/api/conversations/"+conv+"?limit=1", key), 200).json(t)
		if page, _ := r["messages"].(map[string]any); page == nil || page["hasMore"] != true {
			t.Errorf("conversation: %v, want a first page of 1 with more", r)
		}
		wantStatus(t, get("/api/conversations/"+conv+"?limit=500", key), 400)
		wantStatus(t, get("/api/conversations/conv_00000000000000000000000000000000", key), 404)
		wantStatus(t, get("/api/conversations/"+conv, ""), 401)

		// 500: the stored message the server cannot render (subtest
		// "internal error") is in this conversation; its lead gets an
		// unrenderable date too.
		phone6 := "+15550100006"
		_, err := db.Collection("leads").UpdateOne(context.Background(), bson.D{{Key: "_id", Value: messages.LeadID(ws, phone6, "")}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "createdAt", Value: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}})
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, get("/api/messages?conversationId="+messages.ConversationID(ws, phone6, ""), key), 500)
		wantStatus(t, get("/api/conversations/"+messages.ConversationID(ws, phone6, ""), key), 500)
		wantStatus(t, get("/api/leads/"+messages.LeadID(ws, phone6, ""), key), 500)
		wantStatus(t, get("/api/leads?phone="+url.QueryEscape(phone6), key), 500)
	})

	t.Run("event webhooks", func(t *testing.T) {
		hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		defer hooks.Close()
		eps := "/api/webhook-endpoints"
		created := wantStatus(t, c.do(t, a, call{method: "POST", path: eps, token: key, body: `{"url":"` + hooks.URL + `","eventTypes":["message.sent"],"description":"contract"}`}), 201).json(t)
		epID, _ := created["endpoint"].(map[string]any)["id"].(string)
		bad := wantStatus(t, c.do(t, a, call{method: "POST", path: eps, token: key, body: `{"url":"http://hooks.example.com/x","eventTypes":["message.nope"]}`}), 400).json(t)
		if errs, _ := bad["errors"].([]any); len(errs) != 2 {
			t.Errorf("errors %v, want url and eventTypes[0]", bad["errors"])
		}
		wantStatus(t, c.do(t, a, call{method: "POST", path: eps, body: `{"url":"https://x.example"}`}), 401)
		wantStatus(t, c.do(t, a, call{method: "POST", path: eps, token: key, body: tooLarge(), chunked: true}), 413)
		wantStatus(t, c.do(t, a, call{method: "POST", path: eps, token: key, body: "url=x", contentType: "application/x-www-form-urlencoded"}), 415)
		wantStatus(t, c.do(t, a, call{method: "GET", path: eps, token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: eps}), 401)

		// msg1's message.sent event is listed once the dispatcher has moved it.
		var evID string
		for deadline := time.Now().Add(10 * time.Second); evID == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			r, err := c.send(t, a, call{method: "GET", path: "/api/events?type=message.sent&limit=100", token: key})
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := r.json(t)["events"].([]any)
			for _, e := range evs {
				if e.(map[string]any)["data"].(map[string]any)["message"].(map[string]any)["id"] == msg1 {
					evID = e.(map[string]any)["id"].(string)
				}
			}
		}
		if evID == "" {
			t.Fatal("no message.sent event for the first send")
		}
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/events?since=" + url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339)), token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/events?limit=0&type=nope", token: key}), 400)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/events"}), 401)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/events/" + evID, token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/events/evt_nope", token: key}), 404)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/events/" + evID}), 401)
		re := wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/events/" + evID + "/redeliver", token: key}), 202).json(t)
		if ids, _ := re["endpointIds"].([]any); len(ids) != 1 || ids[0] != epID {
			t.Errorf("redeliver endpointIds %v, want [%s]", re["endpointIds"], epID)
		}
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/events/evt_nope/redeliver", token: key}), 404)
		// Redelivery is rate-limited per workspace (1/s, bursts of 5).
		limited := false
		for range 10 {
			if r := c.do(t, a, call{method: "POST", path: "/api/events/" + evID + "/redeliver", token: key}); r.status == http.StatusTooManyRequests {
				limited = true
				break
			}
		}
		if !limited {
			t.Error("10 redeliveries in a row: none was 429")
		}
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/events/" + evID + "/redeliver"}), 401)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: eps + "/" + epID, token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: eps + "/" + epID, token: key}), 404)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: eps + "/" + epID}), 401)
	})

	var unsubToken string
	t.Run("suppressions", func(t *testing.T) {
		sup := "/api/suppressions"
		wantStatus(t, c.do(t, a, call{method: "POST", path: sup, token: key, body: `{"address":"+15550100090","reason":"contract"}`}), 201)
		wantStatus(t, c.do(t, a, call{method: "POST", path: sup, token: key, body: `{"address":"+15550100090"}`}), 200)
		wantStatus(t, c.do(t, a, call{method: "POST", path: sup, token: key, body: `{"address":"not an address"}`}), 400)
		wantStatus(t, c.do(t, a, call{method: "POST", path: sup, body: `{"address":"+15550100090"}`}), 401)
		wantStatus(t, c.do(t, a, call{method: "POST", path: sup, token: key, body: tooLarge(), chunked: true}), 413)
		wantStatus(t, c.do(t, a, call{method: "POST", path: sup, token: key, body: "address=x", contentType: "application/x-www-form-urlencoded"}), 415)
		wantStatus(t, c.do(t, a, call{method: "GET", path: sup + "?limit=10", token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: sup + "?limit=1000", token: key}), 400)
		wantStatus(t, c.do(t, a, call{method: "GET", path: sup}), 401)
		wantStatus(t, c.do(t, a, call{method: "GET", path: sup + "/%2B15550100090", token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: sup + "/nope", token: key}), 400)
		wantStatus(t, c.do(t, a, call{method: "GET", path: sup + "/+15550100091", token: key}), 404)
		wantStatus(t, c.do(t, a, call{method: "GET", path: sup + "/+15550100090"}), 401)
		// A send to it is suppressed: a 2xx with code recipient_opted_out.
		s := wantStatus(t, c.do(t, a, call{method: "POST", path: "/api/messages", token: key, body: `{"channel":"sms","recipientPhone":"+15550100090","body":"contract suppressed"}`}), 201).json(t)
		if s["status"] != "suppressed" || s["code"] != "recipient_opted_out" {
			t.Errorf("send to a suppressed number: %v", s)
		}
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: sup + "/+15550100090", token: key}), 200)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: sup + "/+15550100090", token: key}), 404)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: sup + "/nope", token: key}), 400)
		wantStatus(t, c.do(t, a, call{method: "DELETE", path: sup + "/+15550100090"}), 401)

		// The one-click unsubscribe page, with a token made under the
		// store's key as an email's List-Unsubscribe carries it.
		var doc struct{ Key string }
		if err := db.Collection("consent_keys").FindOne(context.Background(), bson.D{{Key: "_id", Value: consent.TokenKeyID}}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		raw, _ := base64.StdEncoding.DecodeString(doc.Key)
		tk, err := consent.NewTokens(raw)
		if err != nil {
			t.Fatal(err)
		}
		unsubToken = tk.Make(ws, "contract@example.com")
		page := "/unsubscribe/" + unsubToken
		wantStatus(t, c.do(t, a, call{method: "GET", path: page}), 200)
		wantStatus(t, c.do(t, a, call{method: "GET", path: "/unsubscribe/forged"}), 404)
		wantStatus(t, c.do(t, a, call{method: "POST", path: page, body: "List-Unsubscribe=One-Click", contentType: "application/x-www-form-urlencoded"}), 200)
		wantStatus(t, c.do(t, a, call{method: "POST", path: "/unsubscribe/" + unsubToken[:len(unsubToken)-2] + "xx", body: "List-Unsubscribe=One-Click", contentType: "application/x-www-form-urlencoded"}), 404)
		wantStatus(t, c.do(t, a, call{method: "GET", path: sup + "/contract@example.com", token: key}), 200)
	})

	twilioReceipt := func(p *proc, messageID, status, token string) call {
		path := receipts.TwilioPath + "?messageId=" + url.QueryEscape(messageID)
		form := url.Values{"MessageSid": {"SMcontract"}, "MessageStatus": {status}}
		if status == "" {
			form.Del("MessageStatus")
		}
		sig := base64.StdEncoding.EncodeToString(vendorsig.TwilioSignature(token, p.url+path, form))
		return call{method: "POST", path: path, body: form.Encode(), contentType: "application/x-www-form-urlencoded", header: map[string]string{"X-Twilio-Signature": sig}}
	}
	relayReceipt := func(body, secret string) call {
		id, now := msgapi.NewID("rcpt"), time.Now()
		return call{method: "POST", path: receipts.RelayPath, body: body, header: map[string]string{
			"webhook-id": id, "webhook-timestamp": strconv.FormatInt(now.Unix(), 10), "webhook-signature": stdwebhook.Sign(mustSecret(t, secret), id, now, []byte(body)),
		}}
	}
	setProvider := func(t *testing.T, provider, id string) {
		t.Helper()
		// msg1 left through the log provider; a receipt applies only to a
		// message of the receipt's provider with its provider id (on the
		// message and on its outcome, which names the provider's id).
		for _, coll := range []string{"messages", messages.OutcomesCollection} {
			if _, err := db.Collection(coll).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: msg1}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "provider", Value: provider}, {Key: "providerMessageId", Value: id}}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("receipts", func(t *testing.T) {
		wantStatus(t, c.do(t, a, twilioReceipt(a, msg1, "delivered", twilioToken)), 404) // a log-provider message
		setProvider(t, "twilio", "SMcontract")
		wantStatus(t, c.do(t, a, twilioReceipt(a, msg1, "delivered", twilioToken)), 200)
		wantStatus(t, c.do(t, a, twilioReceipt(a, msg1, "delivered", "wrong-token")), 401)
		wantStatus(t, c.do(t, a, twilioReceipt(a, msg1, "", twilioToken)), 400)
		wantStatus(t, c.do(t, a, twilioReceipt(a, "msg_nope", "delivered", twilioToken)), 404)
		wantStatus(t, c.do(t, a, call{method: "POST", path: receipts.TwilioPath + "?messageId=" + msg1, body: tooLarge(), chunked: true, contentType: "application/x-www-form-urlencoded"}), 413)

		setProvider(t, "webhook", "relay-contract")
		wantStatus(t, c.do(t, a, relayReceipt(`{"messageId":"`+msg1+`","status":"read","providerMessageId":"another"}`, relaySecret)), 404)
		wantStatus(t, c.do(t, a, relayReceipt(`{"messageId":"`+msg1+`","status":"read","providerMessageId":"relay-contract"}`, relaySecret)), 200)
		wantStatus(t, c.do(t, a, relayReceipt(`{"messageId":"`+msg1+`","status":"read"}`, "wrong")), 401)
		wantStatus(t, c.do(t, a, relayReceipt(`{"messageId":"`+msg1+`","status":"lost"}`, relaySecret)), 400)
		wantStatus(t, c.do(t, a, relayReceipt(`{"messageId":"msg_nope","status":"read"}`, relaySecret)), 404)
		wantStatus(t, c.do(t, a, call{method: "POST", path: receipts.RelayPath, body: tooLarge(), chunked: true}), 413)
		m := wantStatus(t, c.do(t, a, call{method: "GET", path: "/api/messages/" + msg1, token: key}), 200).json(t)["message"].(map[string]any)
		if m["status"] != "read" {
			t.Errorf("after delivered and read receipts: status %v, want read", m["status"])
		}
	})

	hsPath := "/integrations/hubspot/" + ws + "/actions/send"
	hsCall := func(p *proc, path, secret, body string) call {
		return call{method: "POST", path: path, body: body, header: map[string]string{
			vendorsig.HeaderHubSpotVersion:   "v2",
			vendorsig.HeaderHubSpotSignature: hex.EncodeToString(vendorsig.HubSpotV2(secret, "POST", p.url+path, []byte(body))),
		}}
	}
	hsBody := func(cb, text string) string {
		return `{"callbackId":"` + cb + `","origin":{"portalId":4242},"object":{"objectId":615,"objectType":"CONTACT"},` +
			`"inputFields":{"channel":"sms","phone":"+15550100061","body":"` + text + `"}}`
	}
	t.Run("hubspot action", func(t *testing.T) {
		wantStatus(t, c.do(t, a, call{method: "PUT", path: "/admin/workspaces/" + ws + "/secrets/hubspot", token: admin, body: `{"secret":"` + hubspotSecret + `"}`}), 204)
		o := wantStatus(t, c.do(t, a, hsCall(a, hsPath, hubspotSecret, hsBody("cb-contract-1", "HubSpot contract"))), 200).json(t)["outputFields"].(map[string]any)
		if o["hs_execution_state"] != "SUCCESS" {
			t.Errorf("outputs %v, want SUCCESS", o)
		}
		wantStatus(t, c.do(t, a, hsCall(a, hsPath, hubspotSecret, `{"inputFields":{}}`)), 400)
		wantStatus(t, c.do(t, a, hsCall(a, hsPath, "not-the-app-secret", hsBody("cb-contract-2", "HubSpot contract 2"))), 401)
		wantStatus(t, c.do(t, a, hsCall(a, "/integrations/hubspot/ws_nope/actions/send", hubspotSecret, hsBody("cb-contract-2", "x"))), 404)
		wantStatus(t, c.do(t, a, call{method: "POST", path: hsPath, body: tooLarge(), chunked: true}), 413)
		// The same execution twice at once on b (its provider takes 2 s):
		// the second is 429 with Retry-After, which HubSpot retries.
		slowCall := hsCall(b, hsPath, hubspotSecret, hsBody("cb-contract-3", "HubSpot contract slow"))
		done := make(chan struct{})
		go func() { defer close(done); _, _ = c.send(t, b, slowCall) }()
		time.Sleep(300 * time.Millisecond)
		r := wantStatus(t, c.do(t, b, slowCall), 429)
		if r.header.Get("Retry-After") == "" {
			t.Error("the 429 has no Retry-After")
		}
		<-done
	})

	t.Run("store down", func(t *testing.T) {
		// b caches the API key, so it gets past authentication to the
		// store; then a stops, and the engine with it.
		wantStatus(t, c.do(t, b, call{method: "GET", path: "/api/messages/" + msg1, token: key}), 200)
		if err := db.Client().Disconnect(context.Background()); err != nil {
			t.Log(err)
		}
		if err := a.stop(); err != nil {
			t.Fatalf("stop a: %v", err)
		}
		calls := []call{
			{method: "GET", path: "/readyz"},
			{method: "POST", path: "/api/messages", token: key, body: `{"channel":"sms","recipientPhone":"+15550100007","body":"Store down"}`},
			{method: "GET", path: "/api/messages/" + msg1, token: key},
			{method: "GET", path: "/api/messages?limit=1", token: key},
			{method: "GET", path: "/api/leads/" + messages.LeadID(ws, "+15550100001", ""), token: key},
			{method: "GET", path: "/api/leads?phone=%2B15550100001", token: key},
			{method: "GET", path: "/api/conversations/" + messages.ConversationID(ws, "+15550100001", ""), token: key},
			{method: "DELETE", path: "/api/dedup-locks/" + lock1, token: key},
			{method: "POST", path: "/api/messages/" + msg1 + "/cancel", token: key},
			{method: "POST", path: "/api/messages/cancel", token: key, body: `{"cancellationKey":"contract-k"}`},
			{method: "POST", path: "/admin/workspaces", token: admin, body: `{"name":"Down"}`},
			{method: "POST", path: "/admin/workspaces/" + ws + "/keys", token: admin},
			{method: "PUT", path: "/admin/workspaces/" + ws + "/secrets/telegram", token: admin, body: `{"secret":"` + tgSecret + `"}`},
			{method: "GET", path: "/admin/workspaces/" + ws, token: admin},
			{method: "PATCH", path: "/admin/workspaces/" + ws, token: admin, body: `{"dedupWait":"1s"}`},
			{method: "POST", path: "/admin/workspaces/" + ws + "/disable", token: admin},
			{method: "POST", path: "/admin/workspaces/" + ws + "/enable", token: admin},
			{method: "GET", path: "/admin/workspaces/" + ws + "/keys", token: admin},
			{method: "DELETE", path: "/admin/workspaces/" + ws + "/keys/key_aaaaaaaaaaaaaaaaaaaaaaaaaa", token: admin},
			{method: "POST", path: hook, body: `{"update_id":1002}`, header: tg},
			{method: "POST", path: "/api/webhook-endpoints", token: key, body: `{"url":"https://hooks.example.com/x"}`},
			{method: "GET", path: "/api/webhook-endpoints", token: key},
			{method: "DELETE", path: "/api/webhook-endpoints/we_nope", token: key},
			{method: "GET", path: "/api/events", token: key},
			{method: "GET", path: "/api/events/evt_nope", token: key},
			{method: "POST", path: "/api/events/evt_nope/redeliver", token: key},
			{method: "GET", path: "/api/suppressions", token: key},
			{method: "POST", path: "/api/suppressions", token: key, body: `{"address":"+15550100092"}`},
			{method: "GET", path: "/api/suppressions/+15550100092", token: key},
			{method: "DELETE", path: "/api/suppressions/+15550100092", token: key},
			{method: "POST", path: "/unsubscribe/" + unsubToken, body: "List-Unsubscribe=One-Click", contentType: "application/x-www-form-urlencoded"},
			twilioReceipt(b, msg1, "delivered", twilioToken),
			relayReceipt(`{"messageId":"`+msg1+`","status":"delivered"}`, relaySecret),
			hsCall(b, hsPath, hubspotSecret, hsBody("cb-contract-down", "Store down")),
		}
		var wg sync.WaitGroup
		for _, cl := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.send(t, b, cl)
				if err != nil || r.status != http.StatusServiceUnavailable {
					t.Errorf("%s %s with the store down: %v %d %s", cl.method, cl.path, err, r.status, truncate(r.body))
				}
			}()
		}
		wg.Wait()
	})

	c.verify(t)
}

// Provider secrets of the contract's processes (delivery receipts).
const (
	twilioToken = "contract-twilio-auth-token"
	relaySecret = "contract-relay-secret"
)

// wantStatus fails t unless r has the status; it returns r.
func wantStatus(t *testing.T, r reply, status int) reply {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d, want %d: %s", r.status, status, truncate(r.body))
	}
	return r
}

// tooLarge is a body one byte over the 1 MiB limit.
func tooLarge() string { return `{"x":"` + strings.Repeat("a", 1<<20) + `"}` }

// connectStore opens the embedded engine's database with the MongoDB
// driver, as another process would.
func connectStore(t *testing.T, uri string) *mongo.Database {
	t.Helper()
	cl, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	return cl.Database("msgapi")
}

// mustSecret parses a relay or endpoint secret.
func mustSecret(t *testing.T, s string) stdwebhook.Secret {
	t.Helper()
	k, err := stdwebhook.ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
