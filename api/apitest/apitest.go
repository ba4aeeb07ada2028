// Package apitest runs a real msgapi HTTP server in-process on a fresh
// database of the shared test store, with a workspace, an API key and a
// sender that counts what reaches it. The api tests and the whole-system
// round-trip budget tests share it.
package apitest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/api"
	"github.com/msgapi/msgapi/app"
	"github.com/msgapi/msgapi/consent"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/notify"
	"github.com/msgapi/msgapi/ratelimit"
	"github.com/msgapi/msgapi/send"
	"github.com/msgapi/msgapi/sender"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
	"github.com/msgapi/msgapi/workspace"
)

// AdminToken is the admin token of every Env.
const AdminToken = "test-admin-token"

// CountingSender is the far side of a send: it counts what arrives.
type CountingSender struct {
	mu  sync.Mutex
	got []sender.Message
	// Result is what Send answers; the zero value means sent.
	Result sender.Result
	// Delay imitates provider latency.
	Delay time.Duration
}

func (s *CountingSender) Name() string { return "counting" }

func (s *CountingSender) Send(ctx context.Context, m sender.Message) sender.Result {
	time.Sleep(s.Delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m)
	if s.Result.Status != "" {
		return s.Result
	}
	return sender.Result{Status: sender.Sent, ProviderMessageID: "p-" + m.ID}
}

// Count is how many messages reached the sender.
func (s *CountingSender) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// Env is one msgapi server on a fresh database, with a workspace and key.
type Env struct {
	t      testing.TB
	Store  *store.Store
	URL    string
	Key    string
	WSID   string
	Sender *CountingSender
	Logs   *SyncBuffer
	Guard  *guard.Guard
	// Workspaces is the server's workspace store (Wait for its background
	// writes before counting round trips).
	Workspaces *workspace.Store
	// Outbox is the event outbox when Options.Events is set.
	Outbox *notify.Outbox
	// Consent is the suppression list every send checks, as in production.
	Consent *consent.Store
	// Scheduler sends scheduled messages; it is not run (call Pass).
	Scheduler *send.Scheduler
}

// Options tune an Env; zero values take the production defaults.
type Options struct {
	DedupWait  time.Duration
	DedupLease time.Duration
	Window     time.Duration
	Store      *store.Store    // share a store (a second server on the same database)
	Sender     *CountingSender // share a sender (count across servers)
	// IdemLease is the Idempotency-Key lease (default 60s).
	IdemLease time.Duration
	// Now is this server's clock for the guard and the Idempotency-Key
	// layer (default time.Now): a skewed or advanced clock.
	Now func() time.Time
	// RateLimit is the default per-workspace limit on POST /api/messages;
	// the zero value limits only workspaces that have their own limit.
	RateLimit ratelimit.Limit
	// OnRateLimited observes each 429.
	OnRateLimited func(route, workspaceID string)
	// Limiter replaces the in-process limiter (e.g. one with a frozen clock).
	Limiter api.RateLimiter
	// Events wires the event outbox (package notify) as production does:
	// outcome and duplicate events recorded on the send path, the events
	// routes mounted. Its dispatcher is not run (Env.Outbox.Run does).
	Events bool
}

// SyncBuffer collects log lines from concurrent requests.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// AllCollections is every collection the server uses (app.Collections).
var AllCollections = app.Collections()

// New starts an Env. Without Options.Store it opens a fresh database and
// creates a workspace and key through the admin API.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	st := o.Store
	if st == nil {
		st = storetest.New(t, AllCollections...)
	}
	if o.DedupWait == 0 {
		o.DedupWait = 3 * time.Second
	}
	if o.DedupLease == 0 {
		o.DedupLease = 30 * time.Second
	}
	if o.Window == 0 {
		o.Window = 15 * time.Minute
	}
	logs := &SyncBuffer{}
	log := zerolog.New(logs)
	snd := o.Sender
	if snd == nil {
		snd = &CountingSender{}
	}
	ms := messages.NewStore(st)
	wss := workspace.NewStore(st, time.Minute)
	cs := consent.New(consent.Options{Store: st})
	tokens, err := cs.Tokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ob *notify.Outbox
	if o.Events {
		ob = notify.New(notify.Options{Store: st, Log: log})
	}
	a, err := app.New(app.Options{
		Store: st, Workspaces: wss, Messages: ms, Log: log, AdminToken: AdminToken,
		Senders: map[string]send.Sender{"sms": snd, "imessage": snd, "email": snd}, DefaultRegion: "US",
		Guard:       guard.Options{Window: o.Window, Wait: o.DedupWait, Lease: o.DedupLease, Now: o.Now},
		Idempotency: idempotency.Options{Lease: o.IdemLease, Now: o.Now},
		Outbox:      ob, Consent: cs, Unsubscribe: tokens,
		Limiter: cmp.Or[api.RateLimiter](o.Limiter, ratelimit.New(ratelimit.Options{})), RateLimit: o.RateLimit, OnRateLimited: o.OnRateLimited,
		OutcomeAfter: 40 * time.Second, // the sweeper and the scheduler exist; neither is run
	})
	if err != nil {
		t.Fatal(err)
	}
	g, srv := a.Guard, a.Server
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e := &Env{t: t, Store: st, URL: hs.URL, Sender: snd, Logs: logs, Guard: g, Workspaces: wss, Outbox: ob, Consent: cs, Scheduler: a.Scheduler}
	if o.Store == nil {
		var out struct{ WorkspaceID, APIKey string }
		e.Do(http.MethodPost, "/admin/workspaces", AdminToken, `{"name":"Acme"}`, nil).Decode(&out)
		e.Key, e.WSID = out.APIKey, out.WorkspaceID
		if e.Key == "" {
			t.Fatal("no API key from POST /admin/workspaces")
		}
	}
	return e
}

// Response is a finished HTTP exchange.
type Response struct {
	t      testing.TB
	Status int
	Header http.Header
	Body   []byte
}

// Decode unmarshals the body into v.
func (r Response) Decode(v any) {
	r.t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		r.t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// JSON is the body as a generic JSON object.
func (r Response) JSON() map[string]any {
	r.t.Helper()
	var m map[string]any
	r.Decode(&m)
	return m
}

// Do sends one request; token "" sends no Authorization header.
func (e *Env) Do(method, path, token, body string, hdr map[string]string) Response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.URL+path, bytes.NewBufferString(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return Response{t: e.t, Status: res.StatusCode, Header: res.Header, Body: b}
}

// Send posts body to /api/messages with the Env's key.
func (e *Env) Send(body string) Response {
	e.t.Helper()
	return e.Do(http.MethodPost, "/api/messages", e.Key, body, nil)
}

// CountDocs counts the documents of a collection.
func (e *Env) CountDocs(coll string) int64 {
	e.t.Helper()
	n, err := e.Store.Collection(coll).CountDocuments(context.Background(), map[string]any{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// SecondStore opens another client on st's database: what a second msgapi
// process would have.
func SecondStore(t testing.TB, st *store.Store) *store.Store {
	t.Helper()
	return storetest.Second(t, st)
}
