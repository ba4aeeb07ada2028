package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/guard"
)

// update rewrites the golden files from what the server answers now:
//
//	go test ./api -run TestGolden -update
//
// then review the diff: every change in testdata/golden is a change of the
// wire contract that callers see.
var update = flag.Bool("update", false, "rewrite testdata/golden from the server's answers")

// The wire contract, pinned: the answers of POST /api/messages (a send, a
// duplicate, a still-in-flight duplicate), the problem documents and the
// event payloads, byte for byte after the values that differ on every run
// (ids, times, ages) are replaced by placeholders. A test elsewhere checks
// each field's meaning; this one catches a field renamed, dropped, added or
// moved, or a problem type or title reworded, which no schema check sees.
func TestGolden(t *testing.T) {
	e := apitest.New(t, apitest.Options{Events: true, DedupWait: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Outbox.Run(ctx) // the dispatcher logs the recorded events (no endpoint: nothing is delivered)
	sms := `{"channel":"sms","recipientPhone":"+1 (555) 010-0000","body":"Your appointment is at 3pm","ghlContactId":"c_1","hsContactId":"h_1","metadata":{"booking":"b_42"}}`

	check := func(name string, r apitest.Response, wantStatus int) {
		t.Helper()
		if r.Status != wantStatus {
			t.Fatalf("%s: status %d, want %d: %s", name, r.Status, wantStatus, r.Body)
		}
		golden(t, name, r.Body)
	}

	check("send", e.Send(sms), http.StatusCreated)
	check("duplicate", e.Send(sms), http.StatusOK)

	// Still in flight: a lock held by an original that has not written its
	// message yet (as TestPendingWhenMessageNotWritten sets it up).
	lockID := guard.LockID(guard.Key{WorkspaceID: e.WSID, Phone: "+15550100009", Body: "In flight"})
	now := time.Now()
	if _, err := e.Store.Collection("message_dedup_locks").InsertOne(ctx, bson.D{
		{Key: "_id", Value: lockID}, {Key: "workspaceId", Value: e.WSID}, {Key: "messageId", Value: "msg_inflight"},
		{Key: "createdAt", Value: now}, {Key: "expiresAt", Value: now.Add(15 * time.Minute)},
	}); err != nil {
		t.Fatal(err)
	}
	check("pending", e.Send(`{"channel":"sms","recipientPhone":"+15550100009","body":"In flight"}`), http.StatusOK)

	// Problem documents: one per kind of refusal a caller meets first.
	check("problem-validation", e.Send(`{"channel":"sms","recipientPhone":"+15550100000"}`), http.StatusBadRequest)
	check("problem-bad-json", e.Send(`{"channel":`), http.StatusBadRequest)
	check("problem-unauthenticated", e.Do(http.MethodPost, "/api/messages", "mk_wrong", sms, nil), http.StatusUnauthorized)
	check("problem-not-found", e.Do(http.MethodGet, "/api/messages/msg_nope", e.Key, "", nil), http.StatusNotFound)
	key := map[string]string{"Idempotency-Key": "golden-1"}
	if r := e.Do(http.MethodPost, "/api/messages", e.Key, `{"channel":"email","recipientEmail":"ann@example.com","subject":"Hi","body":"One"}`, key); r.Status != http.StatusCreated {
		t.Fatalf("keyed send: %d %s", r.Status, r.Body)
	}
	check("problem-key-reused", e.Do(http.MethodPost, "/api/messages", e.Key, `{"channel":"email","recipientEmail":"ann@example.com","subject":"Hi","body":"Two"}`, key), http.StatusUnprocessableEntity)

	// The event payloads the sends above recorded: the SMS sent, its
	// duplicate, the email sent.
	const wantEvents = 3
	// The event payloads the sends above recorded, oldest first, as the
	// endpoints receive them.
	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := e.Do(http.MethodGet, "/api/events?limit=100", e.Key, "", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET /api/events: %d %s", r.Status, r.Body)
		}
		r.Decode(&page)
		if len(page.Events) >= wantEvents {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events logged after 10 s, want %d: %s", len(page.Events), wantEvents, r.Body)
		}
	}
	seen := map[string]bool{}
	for i := len(page.Events) - 1; i >= 0; i-- {
		var ev struct{ ID, Type string }
		if err := json.Unmarshal(page.Events[i], &ev); err != nil {
			t.Fatal(err)
		}
		if seen[ev.Type] {
			continue
		}
		seen[ev.Type] = true
		// The stored payload is the exact body an endpoint receives (the
		// listing re-encodes it).
		var stored struct {
			Payload string `bson:"payload"`
		}
		if err := e.Store.Collection("outbox_events").FindOne(ctx, bson.D{{Key: "_id", Value: ev.ID}}).Decode(&stored); err != nil {
			t.Fatalf("event %s: %v", ev.ID, err)
		}
		golden(t, "event-"+ev.Type, []byte(stored.Payload))
	}
	if len(seen) < 2 {
		t.Errorf("event types pinned: %v, want message.sent and message.duplicate_blocked at least", seen)
	}
}

// volatile matches the members whose values differ on every run; their
// values become placeholders. Everything else is compared as it is.
var (
	volatileString = regexp.MustCompile(`"(id|messageId|leadId|conversationId|lockId|dedupLockId|workspaceId|originalMessageId|providerMessageId|instance|requestId|eventId)":"[^"]*"`)
	volatileTime   = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`)
	volatileNumber = regexp.MustCompile(`"(originalAgeMs|retryAfterSeconds|ageSeconds)":\d+`)
	volatileAge    = regexp.MustCompile(`\d+ (second|millisecond)s? ago`)
)

func normalize(b []byte) []byte {
	b = volatileString.ReplaceAll(b, []byte(`"$1":"<$1>"`))
	b = volatileTime.ReplaceAll(b, []byte(`"<time>"`))
	b = volatileNumber.ReplaceAll(b, []byte(`"$1":0`))
	b = volatileAge.ReplaceAll(b, []byte(`N ${1}s ago`))
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return b // not JSON: compared as it is (and the diff shows why)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// golden compares body, normalized, with testdata/golden/<name>.json (or
// writes it under -update).
func golden(t *testing.T, name string, body []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".json")
	got := normalize(bytes.TrimSpace(body))
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (run go test ./api -run TestGolden -update to write it)", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (the wire contract changed; if on purpose, rerun with -update and review the diff):\ngot:\n%s\nwant:\n%s", name, path, got, want)
	}
}
