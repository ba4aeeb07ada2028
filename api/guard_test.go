package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgapi/msgapi/api/apitest"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/guard"
)

// storm fires n copies of body at once (released by one barrier) against
// the given servers in turn and returns the answers.
func storm(t *testing.T, envs []*apitest.Env, key, body string, n int) []apitest.Response {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	out := make([]apitest.Response, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			out[i] = envs[i%len(envs)].Do(http.MethodPost, "/api/messages", key, body, nil)
		}(i)
	}
	close(start)
	wg.Wait()
	return out
}

// checkStorm asserts one send and n-1 duplicates, all naming one message.
func checkStorm(t *testing.T, answers []apitest.Response) {
	t.Helper()
	sent, dups := 0, 0
	ids := map[string]int{}
	for i, r := range answers {
		if r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Errorf("answer %d: %d %s", i, r.Status, r.Body)
			continue
		}
		got := r.JSON()
		if got["duplicateOnly"] == true {
			dups++
		} else {
			sent++
		}
		m, _ := got["message"].(map[string]any)
		if m == nil {
			t.Errorf("answer %d has no message (pending): %s", i, r.Body)
			continue
		}
		ids[m["id"].(string)]++
	}
	if sent != 1 || dups != len(answers)-1 {
		t.Errorf("%d sends and %d duplicates, want 1 and %d", sent, dups, len(answers)-1)
	}
	if len(ids) != 1 {
		t.Errorf("answers name %d different messages, want 1: %v", len(ids), ids)
	}
}

func TestDuplicateStormOneSend(t *testing.T) {
	// A long wait: on a loaded machine the original can take seconds, and a
	// duplicate that stops waiting gets the pending answer, not the message.
	e := apitest.New(t, apitest.Options{DedupWait: 20 * time.Second})
	e.Sender.Delay = 50 * time.Millisecond
	answers := storm(t, []*apitest.Env{e}, e.Key, `{"channel":"sms","recipientPhone":"+15550100000","body":"Your appointment is at 3pm"}`, 50)
	checkStorm(t, answers)
	if n := e.Sender.Count(); n != 1 {
		t.Errorf("sender saw %d messages, want 1", n)
	}
	// The duplicate answer has SPEC's shape and names the lock.
	for _, r := range answers {
		got := r.JSON()
		if got["duplicateOnly"] != true {
			continue
		}
		for _, k := range append([]string{"success", "duplicateMessage", "lockId", "message"}, crmKeys...) {
			if _, ok := got[k]; !ok {
				t.Errorf("duplicate answer lacks %q: %s", k, r.Body)
			}
		}
		if !strings.Contains(got["duplicateMessage"].(string), "seconds ago") || got["leadId"] == nil {
			t.Errorf("duplicate answer = %s", r.Body)
		}
		break
	}
	if !strings.Contains(e.Logs.String(), `"event":"message.api.duplicate_blocked"`) {
		t.Error("no duplicate_blocked event logged")
	}
}

// Two servers with their own guards and store clients, one database: the
// storm split across them still sends once.
func TestDuplicateStormTwoServers(t *testing.T) {
	a := apitest.New(t, apitest.Options{DedupWait: 20 * time.Second})
	a.Sender.Delay = 50 * time.Millisecond
	b := apitest.New(t, apitest.Options{Store: apitest.SecondStore(t, a.Store), Sender: a.Sender, DedupWait: 20 * time.Second})
	answers := storm(t, []*apitest.Env{a, b}, a.Key, `{"channel":"sms","recipientPhone":"+15550100000","body":"Split storm"}`, 40)
	checkStorm(t, answers)
	if n := a.Sender.Count(); n != 1 {
		t.Errorf("senders saw %d messages in all, want 1", n)
	}
}

func TestAllowedAndBlockedCases(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	send := func(body string) map[string]any { return e.Send(body).JSON() }

	// The same template to 20 different leads: 20 sends.
	for i := 0; i < 20; i++ {
		if got := send(fmt.Sprintf(`{"channel":"sms","recipientPhone":"+1555010%04d","body":"Template"}`, i)); got["duplicateOnly"] == true {
			t.Fatalf("lead %d blocked: %v", i, got)
		}
	}
	// One character of difference is a different message.
	if got := send(`{"channel":"sms","recipientPhone":"+15550100000","body":"Template!"}`); got["duplicateOnly"] == true {
		t.Error("a body differing by one character was blocked")
	}
	// Another workspace, same text and recipient.
	var other struct{ APIKey string }
	e.Do(http.MethodPost, "/admin/workspaces", apitest.AdminToken, `{"name":"Other"}`, nil).Decode(&other)
	if got := e.Do(http.MethodPost, "/api/messages", other.APIKey, `{"channel":"sms","recipientPhone":"+15550100000","body":"Template"}`, nil).JSON(); got["duplicateOnly"] == true {
		t.Error("the same message in another workspace was blocked")
	}
	if n := e.Sender.Count(); n != 22 {
		t.Errorf("sender saw %d messages, want 22", n)
	}

	// Two leads that share one phone get the same text: one human, blocked.
	leadA := send(`{"channel":"email","recipientEmail":"a@example.com","body":"hello a"}`)["leadId"].(string)
	leadB := send(`{"channel":"email","recipientEmail":"b@example.com","body":"hello b"}`)["leadId"].(string)
	first := send(fmt.Sprintf(`{"channel":"sms","leadId":%q,"recipientPhone":"+15550109999","body":"Shared phone"}`, leadA))
	second := send(fmt.Sprintf(`{"channel":"sms","leadId":%q,"recipientPhone":"+15550109999","body":"Shared phone"}`, leadB))
	if first["duplicateOnly"] == true || second["duplicateOnly"] != true {
		t.Errorf("shared phone: first duplicateOnly=%v, second=%v; want false, true", first["duplicateOnly"], second["duplicateOnly"])
	}
}

// After the window the same message sends again, even though the expired
// lock is still in the store (no TTL monitor or reaper has run).
func TestSameMessageAfterWindow(t *testing.T) {
	e := apitest.New(t, apitest.Options{Window: 300 * time.Millisecond})
	body := `{"channel":"sms","recipientPhone":"+15550100000","body":"Again later"}`
	e.Send(body)
	time.Sleep(400 * time.Millisecond)
	if n := e.CountDocs("message_dedup_locks"); n != 1 {
		t.Fatalf("%d locks in the store, want the expired one still there", n)
	}
	if got := e.Send(body).JSON(); got["duplicateOnly"] == true {
		t.Fatalf("blocked after the Window: %v", got)
	}
	if n := e.Sender.Count(); n != 2 {
		t.Errorf("sender saw %d, want 2", n)
	}
}

// An original slower than the wait gives the "still in flight" answer; a
// retry after its message was written gets the sibling; after an operator
// deletes the lock, the same text sends again.
func TestPendingWhenMessageNotWritten(t *testing.T) {
	e := apitest.New(t, apitest.Options{DedupWait: 200 * time.Millisecond})
	ctx := context.Background()
	// A lock held by an original that has not written its message yet.
	lockID := guard.LockID(guard.Key{WorkspaceID: e.WSID, Phone: "+15550100000", Body: "In flight"})
	now := time.Now()
	_, err := e.Store.Collection("message_dedup_locks").InsertOne(ctx, bson.D{
		{Key: "_id", Value: lockID}, {Key: "workspaceId", Value: e.WSID}, {Key: "messageId", Value: "msg_inflight"},
		{Key: "createdAt", Value: now}, {Key: "expiresAt", Value: now.Add(15 * time.Minute)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"In flight"}`)
	got := r.JSON()
	if r.Status != http.StatusOK || got["duplicateOnly"] != true || got["message"] != nil || got["leadId"] != nil {
		t.Fatalf("answer %d %s, want the still-in-flight shape", r.Status, r.Body)
	}
	// Not a finished request: it says so, and when to retry (the holder's
	// lease, 30 s, ends then).
	if got["pending"] != true {
		t.Errorf("pending answer %s lacks pending: true", r.Body)
	}
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 30 {
		t.Errorf("Retry-After %q, want 1..30 seconds", r.Header.Get("Retry-After"))
	}
	if age, ok := got["originalAgeMs"].(float64); !ok || age < 0 {
		t.Errorf("originalAgeMs = %v, want the lock's age", got["originalAgeMs"])
	}
	for _, k := range crmKeys {
		if v, ok := got[k]; !ok || v != nil {
			t.Errorf("key %s = %v (present %v), want null", k, v, ok)
		}
	}
	if !strings.Contains(e.Logs.String(), `"event":"message.api.duplicate_pending"`) {
		t.Error("no duplicate_pending event")
	}
	if n := e.Sender.Count(); n != 0 {
		t.Errorf("sender saw %d, want 0", n)
	}
	// The original writes its message; the retry gets it as the sibling.
	_, err = e.Store.Collection("messages").InsertOne(ctx, bson.D{
		{Key: "_id", Value: "msg_inflight"}, {Key: "workspaceId", Value: e.WSID}, {Key: "leadId", Value: "lead_x"},
		{Key: "channel", Value: "sms"}, {Key: "body", Value: "In flight"}, {Key: "status", Value: "sent"}, {Key: "createdAt", Value: now},
	})
	if err != nil {
		t.Fatal(err)
	}
	got = e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"In flight"}`).JSON()
	if m, _ := got["message"].(map[string]any); got["duplicateOnly"] != true || m == nil || m["id"] != "msg_inflight" {
		t.Fatalf("retry after the original finished = %v, want the sibling msg_inflight", got)
	}
	// The operator deletes the lock; the retry sends.
	del := e.Do(http.MethodDelete, "/api/dedup-locks/"+lockID, e.Key, "", nil)
	if del.Status != http.StatusOK {
		t.Fatalf("DELETE lock: %d %s", del.Status, del.Body)
	}
	if got := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"In flight"}`).JSON(); got["duplicateOnly"] == true {
		t.Errorf("after the lock was deleted: %v", got)
	}
}

func TestDeleteLockOtherWorkspace(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	r := e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"x"}`)
	lockID, _ := r.JSON()["message"].(map[string]any)["dedupLockId"].(string)
	if lockID == "" {
		t.Fatalf("message has no dedupLockId: %s", r.Body)
	}
	var other struct{ APIKey string }
	e.Do(http.MethodPost, "/admin/workspaces", apitest.AdminToken, `{"name":"Other"}`, nil).Decode(&other)
	if d := e.Do(http.MethodDelete, "/api/dedup-locks/"+lockID, other.APIKey, "", nil); d.Status != http.StatusNotFound {
		t.Errorf("another workspace deleting the lock: %d, want 404", d.Status)
	}
	if d := e.Do(http.MethodDelete, "/api/dedup-locks/"+lockID, e.Key, "", nil); d.Status != http.StatusOK {
		t.Errorf("own lock: %d %s", d.Status, d.Body)
	}
}

// A rejected sibling reached no one: a retry of the same text sends.
func TestFailedSiblingDoesNotBlock(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	body := `{"channel":"sms","recipientPhone":"+15550100000","body":"Retry me"}`
	e.Sender.Result.Status = "failed"
	if got := e.Send(body).JSON(); got["status"] != "failed" {
		t.Fatalf("first send: %v", got)
	}
	e.Sender.Result.Status = ""
	if got := e.Send(body).JSON(); got["duplicateOnly"] == true || got["status"] != "sent" {
		t.Fatalf("retry after a rejection: %v", got)
	}
	e.Sender.Result.Status = "unknown"
	body2 := `{"channel":"sms","recipientPhone":"+15550100000","body":"Maybe delivered"}`
	e.Send(body2)
	if got := e.Send(body2).JSON(); got["duplicateOnly"] != true {
		t.Errorf("retry after an unknown outcome was not blocked: %v", got)
	}
}

func TestValidationFailureHoldsNoLock(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	e.Send(`{"channel":"sms","recipientPhone":"+15550100000","body":"x","attachments":[{"url":"ftp://nope"}]}`)
	if n := e.CountDocs("message_dedup_locks"); n != 0 {
		t.Errorf("%d locks after a validation failure, want 0", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
