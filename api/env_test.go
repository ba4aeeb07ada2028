package api_test

import (
	"bytes"
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
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/sender"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
	"github.com/msgapi/msgapi/workspace"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const adminToken = "test-admin-token"

// countingSender is the far side of a send: it counts what arrives.
type countingSender struct {
	mu      sync.Mutex
	got     []sender.Message
	result  sender.Result // zero value → sent
	delay   time.Duration
	release chan struct{} // when set, Send blocks until it is closed
}

func (s *countingSender) Name() string { return "counting" }

func (s *countingSender) Send(ctx context.Context, m sender.Message) sender.Result {
	if s.release != nil {
		<-s.release
	}
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m)
	if s.result.Status != "" {
		return s.result
	}
	return sender.Result{Status: sender.Sent, ProviderMessageID: "p-" + m.ID}
}

func (s *countingSender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// env is one msgapi server on a fresh database, with a workspace and key.
type env struct {
	t      *testing.T
	st     *store.Store
	url    string
	key    string
	wsID   string
	sender *countingSender
	logs   *syncBuffer
}

type envOpts struct {
	dedupWait  time.Duration
	dedupLease time.Duration
	window     time.Duration
	st         *store.Store    // share a store (a second server on the same database)
	sender     *countingSender // share a sender (count across servers)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var allCollections = func() []store.Collection {
	var c []store.Collection
	for _, cs := range [][]store.Collection{workspace.Collections, messages.Collections, guard.Collections, idempotency.Collections} {
		c = append(c, cs...)
	}
	return c
}()

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	st := o.st
	if st == nil {
		st = storetest.New(t, allCollections...)
	}
	if o.dedupWait == 0 {
		o.dedupWait = 3 * time.Second
	}
	if o.dedupLease == 0 {
		o.dedupLease = 30 * time.Second
	}
	if o.window == 0 {
		o.window = 15 * time.Minute
	}
	logs := &syncBuffer{}
	log := zerolog.New(logs)
	snd := o.sender
	if snd == nil {
		snd = &countingSender{}
	}
	ms := messages.NewStore(st)
	g := guard.New(guard.Options{Store: st, Window: o.window, Wait: o.dedupWait, Lease: o.dedupLease, Sibling: api.SiblingReader(ms)})
	idem := idempotency.New(idempotency.Options{Store: st, WorkspaceID: api.WorkspaceID, Body: api.Body})
	srv := api.New(api.Options{
		Log: log, Store: st, Workspaces: workspace.NewStore(st, time.Minute), AdminToken: adminToken,
		Idempotency: idem.Middleware,
		Send: api.SendOptions{Messages: ms, Guard: g, DefaultRegion: "US",
			Senders: map[string]api.Sender{"sms": snd, "imessage": snd, "email": snd}},
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e := &env{t: t, st: st, url: hs.URL, sender: snd, logs: logs}
	if o.st == nil {
		var out struct{ WorkspaceID, APIKey string }
		e.do(http.MethodPost, "/admin/workspaces", adminToken, `{"name":"Acme"}`, nil).decode(&out)
		e.key, e.wsID = out.APIKey, out.WorkspaceID
		if e.key == "" {
			t.Fatal("no API key from POST /admin/workspaces")
		}
	}
	return e
}

// response is a finished HTTP exchange.
type response struct {
	t      *testing.T
	status int
	header http.Header
	body   []byte
}

func (r response) decode(v any) {
	r.t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		r.t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r response) json() map[string]any {
	r.t.Helper()
	var m map[string]any
	r.decode(&m)
	return m
}

// do sends one request; token "" sends no Authorization header.
func (e *env) do(method, path, token, body string, hdr map[string]string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewBufferString(body))
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
	return response{t: e.t, status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) send(body string) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/api/messages", e.key, body, nil)
}

// countDocs counts the documents of a collection.
func (e *env) countDocs(coll string) int64 {
	e.t.Helper()
	n, err := e.st.Collection(coll).CountDocuments(context.Background(), map[string]any{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}
