package notify

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/egress"
	"github.com/msgapi/msgapi/secrets"
	"github.com/msgapi/msgapi/stdwebhook"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// fast is a schedule that retries within a test's patience.
var fast = []time.Duration{0, 50 * time.Millisecond, 50 * time.Millisecond}

// hit is one request an endpoint got.
type hit struct {
	id, ts, sig, typ string
	body             []byte
	answered         int
}

// header is the hit's Standard Webhooks headers.
func (h hit) header() http.Header {
	hd := http.Header{}
	hd.Set(stdwebhook.HeaderID, h.id)
	hd.Set(stdwebhook.HeaderTimestamp, h.ts)
	hd.Set(stdwebhook.HeaderSignature, h.sig)
	return hd
}

// endpoint is the far side: a local server that records each request and
// answers with answer(n) for the n-th (from 0).
type endpoint struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(n int) int
}

func newEndpoint(t *testing.T, answer func(n int) int) *endpoint {
	e := &endpoint{answer: answer}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p struct{ Type string }
		_ = json.Unmarshal(b, &p)
		e.mu.Lock()
		code := e.answer(len(e.hits))
		e.hits = append(e.hits, hit{r.Header.Get(stdwebhook.HeaderID), r.Header.Get(stdwebhook.HeaderTimestamp), r.Header.Get(stdwebhook.HeaderSignature), p.Type, b, code})
		e.mu.Unlock()
		if code == http.StatusFound {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, fmt.Sprintf("answer %d", code))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) got() []hit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]hit(nil), e.hits...)
}

// run starts an Outbox's dispatcher until the test ends.
func run(t *testing.T, st *store.Store, o Options) *Outbox {
	t.Helper()
	o.Store, o.Log = st, zerolog.Nop()
	if o.Egress == nil { // the far sides are loopback servers
		o.Egress = egress.New(egress.Options{AllowLoopback: true})
	}
	if o.Schedule == nil {
		o.Schedule = fast
	}
	if o.PollInterval == 0 {
		o.PollInterval = 20 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	ob := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ob.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ob
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func mustEndpoint(t *testing.T, ob *Outbox, ws, url string, types ...string) Endpoint {
	t.Helper()
	ep, err := ob.CreateEndpoint(context.Background(), ws, EndpointInput{URL: url, EventTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func fact(ws, subject string) Fact {
	return Fact{WorkspaceID: ws, Type: TypeMessageSent, SubjectID: subject, Data: map[string]any{"message": map[string]string{"id": subject}}}
}

func TestRecordOnce(t *testing.T) {
	st := storetest.New(t, Collections...)
	ob := New(Options{Store: st, Log: zerolog.Nop()})
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	created := make(chan bool, n)
	for range n {
		wg.Go(func() {
			c, err := ob.Record(ctx, fact("ws_a", "msg_1"))
			if err != nil {
				t.Error(err)
			}
			created <- c
		})
	}
	wg.Wait()
	close(created)
	wins := 0
	for c := range created {
		if c {
			wins++
		}
	}
	cnt, _ := st.Collection(collPending).CountDocuments(ctx, bson.D{})
	if wins != 1 || cnt != 1 {
		t.Errorf("%d concurrent records: %d created, %d stored; want 1 and 1", n, wins, cnt)
	}
	if _, err := ob.Record(ctx, Fact{WorkspaceID: "ws_a", Type: "message.nope", SubjectID: "x"}); err == nil {
		t.Error("an unknown type was recorded")
	}
}

// A failing endpoint is retried with the same webhook-id and a valid
// signature each time, until it answers 2xx; the attempts are listed.
func TestDeliverRetrySigned(t *testing.T) {
	st := storetest.New(t, Collections...)
	ep := newEndpoint(t, func(n int) int {
		if n == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	ob := run(t, st, Options{})
	e := mustEndpoint(t, ob, "ws_a", ep.srv.URL)
	ctx := context.Background()
	if _, err := ob.Record(ctx, fact("ws_a", "msg_1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a 2xx answer", func() bool { h := ep.got(); return len(h) >= 2 })
	hits := ep.got()
	key, _ := stdwebhook.ParseSecret(e.Secret)
	want := EventID("ws_a", TypeMessageSent, "msg_1")
	for i, h := range hits {
		if h.id != want {
			t.Errorf("attempt %d: webhook-id %s, want %s", i+1, h.id, want)
		}
		if err := stdwebhook.Verify(key, h.header(), h.body, time.Now(), stdwebhook.Tolerance); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
	}
	if len(hits) != 2 {
		t.Errorf("%d attempts, want 2 (500, then 204)", len(hits))
	}
	waitFor(t, "the backlog to drain", func() bool {
		n, _ := st.Collection(collDeliveries).CountDocuments(ctx, bson.D{})
		return n == 0
	})
	v, err := ob.GetEvent(ctx, "ws_a", want)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Attempts) != 2 || v.Attempts[0].Status != "failed" || *v.Attempts[0].StatusCode != 500 || v.Attempts[1].Status != "succeeded" ||
		v.Attempts[0].NextAttemptAt == nil || *v.Attempts[0].ResponseBody != "answer 500" {
		b, _ := json.Marshal(v.Attempts)
		t.Errorf("attempts %s, want a failed 500 with a next attempt, then a success", b)
	}

	// Manual redelivery: a new attempt, the same webhook-id.
	eps, err := ob.Redeliver(ctx, "ws_a", want)
	if err != nil || len(eps) != 1 {
		t.Fatalf("redeliver: %v %v", eps, err)
	}
	waitFor(t, "the redelivery", func() bool { return len(ep.got()) == 3 })
	if h := ep.got()[2]; h.id != want {
		t.Errorf("redelivery webhook-id %s, want %s", h.id, want)
	}
	waitFor(t, "the redelivery to be listed", func() bool {
		v, _ := ob.GetEvent(ctx, "ws_a", want)
		return len(v.Attempts) == 3 && v.Attempts[2].Manual && v.Attempts[2].Status == "succeeded"
	})
	if _, err := ob.GetEvent(ctx, "ws_b", want); err == nil {
		t.Error("another workspace read the event")
	}
}

// With a keyring the store never holds the secret as written (it is sealed
// and bound to its endpoint), deliveries are still signed with it, and
// RotateSecrets moves it to a new key.
func TestSealedSecrets(t *testing.T) {
	st := storetest.New(t, Collections...)
	ep := newEndpoint(t, func(int) int { return http.StatusOK })
	keyA, keyB := testKey(t), testKey(t)
	krA, err := secrets.NewKeyring(keyA, nil)
	if err != nil {
		t.Fatal(err)
	}
	ob := run(t, st, Options{Keyring: krA})
	e := mustEndpoint(t, ob, "ws_a", ep.srv.URL)
	ctx := context.Background()
	raw := func() string {
		var r Endpoint
		if err := st.Collection(collEndpoints).FindOne(ctx, store.ByID(e.ID)).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r.Secret
	}
	if s := raw(); strings.Contains(s, "whsec_") || secrets.StoredKeyID(s) != krA.CurrentID() {
		t.Fatalf("stored secret %.8q…: not sealed under the current key", s)
	}
	if _, err := ob.Record(ctx, fact("ws_a", "msg_1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delivery", func() bool { return len(ep.got()) == 1 })
	key, _ := stdwebhook.ParseSecret(e.Secret)
	if h := ep.got()[0]; stdwebhook.Verify(key, h.header(), h.body, time.Now(), stdwebhook.Tolerance) != nil {
		t.Error("the delivery is not signed with the endpoint's secret")
	}

	krB, err := secrets.NewKeyring(keyB, []string{keyA})
	if err != nil {
		t.Fatal(err)
	}
	rot := New(Options{Store: st, Log: zerolog.Nop(), Keyring: krB})
	if r, err := rot.RotateSecrets(ctx); err != nil || r.Resealed != 1 {
		t.Fatalf("rotate: %+v %v, want 1 resealed", r, err)
	}
	if s := raw(); secrets.StoredKeyID(s) != krB.CurrentID() {
		t.Errorf("after rotation the secret is under key %s, want %s", secrets.StoredKeyID(s), krB.CurrentID())
	}
	if rep, err := ob.CheckSecrets(ctx); err != nil || len(rep.Unreadable) != 1 {
		t.Errorf("key A alone: %+v %v, want key B unreadable", rep, err)
	}
	// A sealed secret copied to another endpoint does not open there.
	if _, _, err := krB.Open(raw(), endpointAAD("ws_a", "we_other")); err == nil {
		t.Error("a sealed secret opened for another endpoint")
	}
}

func testKey(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func TestGoneRedirectAndExhaustion(t *testing.T) {
	st := storetest.New(t, Collections...)
	ctx := context.Background()
	ob := run(t, st, Options{})
	gone := newEndpoint(t, func(int) int { return http.StatusGone })
	redirect := newEndpoint(t, func(int) int { return http.StatusFound })
	watcher := newEndpoint(t, func(int) int { return http.StatusOK })
	g := mustEndpoint(t, ob, "ws_a", gone.srv.URL)
	mustEndpoint(t, ob, "ws_a", redirect.srv.URL, TypeMessageSent)
	mustEndpoint(t, ob, "ws_a", watcher.srv.URL, TypeEndpointDisabled)
	if _, err := ob.Record(ctx, fact("ws_a", "msg_1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the redirecting endpoint's attempts to run out", func() bool { return len(redirect.got()) == len(fast) })
	waitFor(t, "the disabled event", func() bool { return len(watcher.got()) == 1 })
	if n := len(gone.got()); n != 1 {
		t.Errorf("410 endpoint got %d attempts, want 1", n)
	}
	if h := watcher.got()[0]; h.typ != TypeEndpointDisabled {
		t.Errorf("watcher got %s, want %s", h.typ, TypeEndpointDisabled)
	}
	eps, _ := ob.ListEndpoints(ctx, "ws_a")
	for _, e := range eps {
		if (e.ID == g.ID) != (e.DisabledAt != nil) {
			t.Errorf("endpoint %s disabled=%v", e.URL, e.DisabledAt != nil)
		}
		if e.Secret != "" {
			t.Error("ListEndpoints returned a secret")
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(redirect.got()); n != len(fast) {
		t.Errorf("redirecting endpoint: %d attempts, want exactly %d (redirects are failures, not followed)", n, len(fast))
	}
}

// Two dispatchers on one store (two processes) deliver every event once
// when the endpoint succeeds: each attempt is claimed by one insert.
func TestTwoDispatchersDeliverOnce(t *testing.T) {
	st := storetest.New(t, Collections...)
	ep := newEndpoint(t, func(int) int { return http.StatusOK })
	a := run(t, st, Options{})
	b := run(t, st, Options{})
	mustEndpoint(t, a, "ws_a", ep.srv.URL)
	ctx := context.Background()
	const n = 16
	for i := range n {
		ob := a
		if i%2 == 1 {
			ob = b
		}
		if _, err := ob.Record(ctx, fact("ws_a", fmt.Sprintf("msg_%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every event", func() bool { return len(ep.got()) >= n })
	time.Sleep(300 * time.Millisecond)
	seen := map[string]int{}
	for _, h := range ep.got() {
		seen[h.id]++
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("event %s delivered %d times", id, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct events delivered, want %d", len(seen), n)
	}
}

func TestListEvents(t *testing.T) {
	st := storetest.New(t, Collections...)
	ob := run(t, st, Options{})
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 12 {
		f := fact("ws_a", fmt.Sprintf("msg_%02d", i))
		if i%4 == 0 {
			f.Type = TypeMessageFailed
		}
		f.At = base.Add(time.Duration(i) * time.Minute)
		if _, err := ob.Record(ctx, f); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the event in the log", func() bool { // one by one, so the log order is known
			_, err := ob.events.FindOne(ctx, store.ByID(EventID("ws_a", f.Type, f.SubjectID))).Raw()
			return err == nil
		})
	}
	waitFor(t, "the pending events to be scheduled", func() bool {
		n, _ := st.Collection(collPending).CountDocuments(ctx, bson.D{})
		return n == 0
	})
	var all []EventView
	cursor := ""
	for pages := 0; ; pages++ {
		p, err := ob.ListEvents(ctx, "ws_a", ListQuery{Limit: 5, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Events...)
		if cursor = p.NextCursor; cursor == "" || pages > 5 {
			break
		}
	}
	if len(all) != 12 {
		t.Fatalf("%d events over the pages, want 12", len(all))
	}
	for i := 1; i < len(all); i++ {
		if !all[i].CreatedAt.Before(all[i-1].CreatedAt) {
			t.Errorf("not newest first at %d: %s after %s", i, all[i].CreatedAt, all[i-1].CreatedAt)
		}
	}
	failed, err := ob.ListEvents(ctx, "ws_a", ListQuery{Limit: 100, Type: TypeMessageFailed})
	if err != nil || len(failed.Events) != 3 {
		t.Errorf("type filter: %d events (%v), want 3", len(failed.Events), err)
	}
	since, err := ob.ListEvents(ctx, "ws_a", ListQuery{Limit: 100, Since: base.Add(9 * time.Minute)})
	if err != nil || len(since.Events) != 3 {
		t.Errorf("since: %d events (%v), want 3", len(since.Events), err)
	}
	other, err := ob.ListEvents(ctx, "ws_b", ListQuery{Limit: 100})
	if err != nil || len(other.Events) != 0 {
		t.Errorf("another workspace: %d events (%v), want 0", len(other.Events), err)
	}
	if _, err := ob.ListEvents(ctx, "ws_a", ListQuery{Limit: 10, Cursor: "nope"}); err == nil {
		t.Error("a bad cursor was accepted")
	}
}

func TestEndpointValidation(t *testing.T) {
	st := storetest.New(t, Collections...)
	ob := New(Options{Store: st, Log: zerolog.Nop()})
	ctx := context.Background()
	tests := []struct {
		url   string
		types []string
		ok    bool
	}{
		{"https://hooks.example.com/x", nil, true},
		{"http://127.0.0.1:9/x", []string{TypeMessageSent}, false},
		{"http://localhost:9/x", nil, false},
		{"http://hooks.example.com/x", nil, false},
		{"ftp://hooks.example.com/x", nil, false},
		{"https://user:pw@hooks.example.com/x", nil, false},
		{"/relative", nil, false},
		{"", nil, false},
		{"https://hooks.example.com/x", []string{"message.nope"}, false},
	}
	for _, tt := range tests {
		_, err := ob.CreateEndpoint(ctx, "ws_a", EndpointInput{URL: tt.url, EventTypes: tt.types})
		if (err == nil) != tt.ok {
			t.Errorf("CreateEndpoint(%q, %v): err %v, want ok=%v", tt.url, tt.types, err, tt.ok)
		}
	}
}
