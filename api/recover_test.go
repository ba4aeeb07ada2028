package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/store"
)

// A panic in a handler is a problem+json 500 with the request id and an
// error event with the stack; a panic before the send stage releases the
// request's Idempotency-Key claim; and the process keeps serving.
func TestPanicIsA500AndReleasesTheKey(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	body := `{"channel":"sms","recipientPhone":"+15550100000","body":"panics once"}`
	hdr := map[string]string{"Idempotency-Key": "panic-1", "X-Request-Id": "req-panic-test"}
	var armed atomic.Bool
	armed.Store(true)
	e.Store.RoundTrips.Before(func(_ context.Context, ev *event.CommandStartedEvent) {
		// The lead is read in the send's prefetch (store.Prefetch), or
		// alone by a find where the prefetch does not run.
		lead := ev.CommandName == store.GetCommand && strings.Contains(ev.Command.String(), `"leads"`)
		if v, err := ev.Command.LookupErr("find"); err == nil && v.StringValue() == "leads" {
			lead = true
		}
		if lead && armed.CompareAndSwap(true, false) {
			panic("a bug in the lead lookup")
		}
	})
	t.Cleanup(func() { e.Store.RoundTrips.Before(nil) })

	r := e.Do(http.MethodPost, "/api/messages", e.Key, body, hdr)
	p := r.JSON()
	if r.Status != http.StatusInternalServerError || r.Header.Get("Content-Type") != "application/problem+json" ||
		p["requestId"] != "req-panic-test" || p["code"] != "internal_error" || strings.Contains(string(r.Body), "a bug") {
		t.Fatalf("panic answered %d %s %s, want a problem+json 500 with the request id and no detail", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	logs := e.Logs.String()
	if !strings.Contains(logs, `"event":"http.panic"`) || !strings.Contains(logs, "a bug in the lead lookup") || !strings.Contains(logs, `"stack":`) {
		t.Errorf("no panic event with its stack in the log:\n%s", logs)
	}
	// The key was released: the retry runs (and sends), not 409.
	retry := e.Do(http.MethodPost, "/api/messages", e.Key, body, hdr)
	if retry.Status != http.StatusCreated || retry.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry with the key after the panic: %d %s, want a fresh 201", retry.Status, retry.Body)
	}
	if n := e.Sender.Count(); n != 1 {
		t.Errorf("sender saw %d, want 1", n)
	}
}

// A client that hangs up is not a server error: the access log records
// nginx's 499 at info level.
func TestClientHangUpIs499(t *testing.T) {
	e := apitest.New(t, apitest.Options{DedupWait: 5 * time.Second})
	body := `{"channel":"sms","recipientPhone":"+15550100000","body":"slow original"}`
	held, release := stall(t, e.Store, insertInto("messages"))
	orig := async(e, e.Key, body, nil)
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/api/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.Key)
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the duplicate answered within 300ms; it should be waiting for the original")
	}
	waitFor(t, func() bool { return strings.Contains(e.Logs.String(), `"status":499`) })
	release()
	wait(t, orig)
	for _, line := range strings.Split(e.Logs.String(), "\n") {
		if strings.Contains(line, `"status":499`) {
			if !strings.Contains(line, `"level":"info"`) {
				t.Errorf("499 access line not at info: %s", line)
			}
		}
		if strings.Contains(line, `"status":500`) || strings.Contains(line, `"status":503`) {
			t.Errorf("a hang-up logged as a server error: %s", line)
		}
	}
}
