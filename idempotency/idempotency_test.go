package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const (
	path = "/api/messages"
	wsA  = "ws_a"
	wsB  = "ws_b"
	ttl  = 24 * time.Hour
)

// clock is a fake time source that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
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

// lines returns the decoded log lines whose event is name.
func (s *syncBuffer) events(t *testing.T, name string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(s.b.Bytes(), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %s is not JSON: %v", l, err)
		}
		if m["event"] == name {
			out = append(out, m)
		}
	}
	return out
}

// app is a tiny echo server shaped like the real send path: auth sets the
// workspace, the body is read once, the Idempotency-Key middleware runs, and
// the handler validates, marks the send stage and "sends" (counted at the
// far side).
type app struct {
	store *store.Store
	clock *clock
	logs  *syncBuffer
	srv   *httptest.Server
	sends atomic.Int64
	calls atomic.Int64
	// delay makes the handler slow enough for requests to overlap.
	delay time.Duration
	// hold, when set, runs in the handler before the send stage.
	hold func(call int64)
}

const lease = time.Minute

func newApp(t *testing.T) *app {
	t.Helper()
	a := &app{
		store: storetest.New(t, idempotency.Collections...),
		clock: &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)},
		logs:  &syncBuffer{},
	}
	keys := idempotency.New(idempotency.Options{
		Store: a.store,
		TTL:   ttl,
		Lease: lease,
		Now:   a.clock.Now,
		WorkspaceID: func(c echo.Context) string {
			ws, _ := c.Get("ws").(string)
			return ws
		},
		Body: func(c echo.Context) []byte {
			b, _ := c.Get("body").([]byte)
			return b
		},
	})
	e := echo.New()
	e.HideBanner = true
	e.HTTPErrorHandler = problem
	log := zerolog.New(a.logs)
	withLogger := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.SetRequest(c.Request().WithContext(log.WithContext(c.Request().Context())))
			return next(c)
		}
	}
	auth := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ws := c.Request().Header.Get("X-Workspace")
			if ws == "" {
				return msgapi.Errorf(msgapi.CodeUnauthorized, "no workspace")
			}
			c.Set("ws", ws)
			return next(c)
		}
	}
	readBody := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			b, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, 1<<20))
			if err != nil {
				return msgapi.Errorf(msgapi.CodeTooLarge, "too large")
			}
			c.Set("body", b)
			c.Request().Body = io.NopCloser(bytes.NewReader(b))
			return next(c)
		}
	}
	e.POST(path, keys.Wrap(a.send), withLogger, auth, readBody)
	a.srv = httptest.NewServer(e)
	t.Cleanup(a.srv.Close)
	return a
}

// send is the handler. {"text": ...} is required; "fail" answers 500 after
// the send stage, "unavailable" a 503 before it.
func (a *app) send(c echo.Context, _ string) (sendStage bool, err error) {
	call := a.calls.Add(1)
	var req struct {
		Text        string `json:"text"`
		Fail        bool   `json:"fail"`
		Unavailable bool   `json:"unavailable"`
	}
	if err := json.NewDecoder(c.Request().Body).Decode(&req); err != nil || req.Text == "" {
		return false, &msgapi.Error{Code: msgapi.CodeInvalid, Message: "text is required", Fields: []msgapi.FieldError{{Field: "text", Message: "required"}}}
	}
	if req.Unavailable {
		return false, msgapi.Unavailable(errors.New("store down"))
	}
	if a.hold != nil {
		a.hold(call)
	}
	time.Sleep(a.delay)
	// The message document is written here: from now on a retry must not send.
	a.sends.Add(1)
	if req.Fail {
		return true, errors.New("sender crashed after the message was written")
	}
	return true, c.JSON(http.StatusCreated, map[string]any{"success": true, "id": msgapi.NewID("msg"), "text": req.Text})
}

var statusOf = map[msgapi.Code]int{
	msgapi.CodeInvalid:             http.StatusBadRequest,
	msgapi.CodeUnauthorized:        http.StatusUnauthorized,
	msgapi.CodeIdempotencyInFlight: http.StatusConflict,
	msgapi.CodeTooLarge:            http.StatusRequestEntityTooLarge,
	msgapi.CodeIdempotencyMismatch: http.StatusUnprocessableEntity,
	msgapi.CodeUnavailable:         http.StatusServiceUnavailable,
}

// problem is a minimal HTTPErrorHandler: problem+json with the code's status.
func problem(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, code, detail := http.StatusInternalServerError, msgapi.CodeInternal, "internal error"
	var e *msgapi.Error
	if errors.As(err, &e) {
		code, detail = e.Code, e.Message
		if s, ok := statusOf[e.Code]; ok {
			status = s
		}
		if e.RetryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(e.RetryAfter.Seconds())))))
		}
	}
	b, _ := json.Marshal(map[string]any{"status": status, "code": code, "detail": detail, "success": false})
	_ = c.Blob(status, "application/problem+json", b)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

func (r response) code() string {
	var p struct{ Code string }
	_ = json.Unmarshal(r.body, &p)
	return p.Code
}

// post sends body as workspace ws with one Idempotency-Key header per key.
func (a *app) post(t *testing.T, ws, body string, keys ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Workspace", ws)
	for _, k := range keys {
		req.Header.Add("Idempotency-Key", k)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// roundTrips returns the store round trips f costs.
func (a *app) roundTrips(f func()) int64 {
	before := a.store.RoundTrips.Total()
	f()
	return a.store.RoundTrips.Total() - before
}

func (a *app) record(t *testing.T, ws, key string) (bson.M, bool) {
	t.Helper()
	var m bson.M
	err := a.store.Collection("idempotency_keys").FindOne(context.Background(), bson.D{{Key: "_id", Value: idempotency.RecordID(ws, http.MethodPost, path, key)}}).Decode(&m)
	if store.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return m, true
}

// putRecord writes a record as another process would have left it.
func (a *app) putRecord(t *testing.T, ws, key, body, state string, claimed, leaseUntil, created time.Time) {
	t.Helper()
	_, err := a.store.Collection("idempotency_keys").InsertOne(context.Background(), bson.D{
		{Key: "_id", Value: idempotency.RecordID(ws, http.MethodPost, path, key)},
		{Key: "workspaceId", Value: ws},
		{Key: "method", Value: http.MethodPost},
		{Key: "path", Value: path},
		{Key: "fingerprint", Value: idempotency.Fingerprint(http.MethodPost, path, []byte(body))},
		{Key: "state", Value: state},
		{Key: "token", Value: "token-of-a-process-that-died"},
		{Key: "claimedAt", Value: claimed},
		{Key: "leaseUntil", Value: leaseUntil},
		{Key: "createdAt", Value: created},
		{Key: "expiresAt", Value: created.Add(ttl)},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func wantStatus(t *testing.T, what string, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.status, status, r.body)
	}
}

func (a *app) wantSends(t *testing.T, want int64) {
	t.Helper()
	if got := a.sends.Load(); got != want {
		t.Fatalf("sends = %d, want %d", got, want)
	}
}

const msg = `{"text":"hello","to":"+15550100000"}`

func TestReplaySameKeySameBody(t *testing.T) {
	a := newApp(t)
	var first, second response
	firstRT := a.roundTrips(func() { first = a.post(t, wsA, msg, "key-1") })
	replayRT := a.roundTrips(func() { second = a.post(t, wsA, msg, "key-1") })

	wantStatus(t, "first", first, http.StatusCreated)
	if first.replayed() {
		t.Error("first response is marked Idempotent-Replayed")
	}
	if second.status != first.status || !bytes.Equal(second.body, first.body) {
		t.Errorf("replay = %d %s, want %d %s byte for byte", second.status, second.body, first.status, first.body)
	}
	if ct, want := second.header.Get("Content-Type"), first.header.Get("Content-Type"); ct != want {
		t.Errorf("replay Content-Type %q, want %q", ct, want)
	}
	if !second.replayed() {
		t.Errorf("replay lacks Idempotent-Replayed: true (headers %v)", second.header)
	}
	a.wantSends(t, 1)
	if firstRT != 3 {
		t.Errorf("first request cost %d round trips, want 3 (read, claim, store: a write conditional on the claim)", firstRT)
	}
	if replayRT != 1 {
		t.Errorf("replay cost %d round trips, want 1 (one read by _id)", replayRT)
	}

	ev := a.logs.events(t, "message.api.idempotent_replay")
	if len(ev) != 1 {
		t.Fatalf("%d idempotent_replay events, want 1", len(ev))
	}
	if ev[0]["workspaceId"] != wsA || ev[0]["idempotencyRecordId"] != idempotency.RecordID(wsA, "POST", path, "key-1") {
		t.Errorf("replay event %v lacks workspaceId %s or idempotencyRecordId", ev[0], wsA)
	}
}

func TestReplayCanonicalJSON(t *testing.T) {
	a := newApp(t)
	first := a.post(t, wsA, `{"text":"hello","to":"+15550100000","meta":{"a":1,"b":[1,2]}}`, "k")
	wantStatus(t, "first", first, http.StatusCreated)
	for _, body := range []string{
		`{"meta":{"b":[1,2],"a":1},"to":"+15550100000","text":"hello"}`,
		"{\n  \"text\": \"hello\",\n  \"to\": \"+15550100000\",\n  \"meta\": { \"a\": 1, \"b\": [ 1, 2 ] }\n}\n",
		`{"text":"h\u0065llo","to":"+15550100000","meta":{"a":1,"b":[1,2]}}`,
	} {
		got := a.post(t, wsA, body, "k")
		if !got.replayed() || !bytes.Equal(got.body, first.body) {
			t.Errorf("body %s: got %d %s (replayed=%v), want the replay", body, got.status, got.body, got.replayed())
		}
	}
	a.wantSends(t, 1)
}

func TestDifferentBodySameKeyIs422(t *testing.T) {
	a := newApp(t)
	wantStatus(t, "first", a.post(t, wsA, msg, "k"), http.StatusCreated)
	var got response
	rt := a.roundTrips(func() { got = a.post(t, wsA, `{"text":"hello!","to":"+15550100000"}`, "k") })
	wantStatus(t, "different body", got, http.StatusUnprocessableEntity)
	if got.code() != string(msgapi.CodeIdempotencyMismatch) || got.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("422 body %s (%s), want code %s as problem+json", got.body, got.header.Get("Content-Type"), msgapi.CodeIdempotencyMismatch)
	}
	if rt != 1 {
		t.Errorf("422 cost %d round trips, want 1", rt)
	}
	a.wantSends(t, 1)
	ev := a.logs.events(t, "message.api.idempotency_conflict")
	if len(ev) != 1 || ev[0]["reason"] != "fingerprint_mismatch" {
		t.Errorf("conflict events %v, want one with reason=fingerprint_mismatch", ev)
	}

	// Against a request still in progress, a different body is 422 as well.
	now := a.clock.Now()
	a.putRecord(t, wsA, "k2", msg, "in_progress", now, now.Add(lease), now)
	wantStatus(t, "different body while in progress", a.post(t, wsA, `{"text":"other"}`, "k2"), http.StatusUnprocessableEntity)
	a.wantSends(t, 1)
}

// postTogether sends n copies of one request with one key, released
// together by a barrier, and returns the answers.
func (a *app) postTogether(t *testing.T, n int, body, key string) []response {
	t.Helper()
	var (
		wg      sync.WaitGroup
		barrier = make(chan struct{})
		got     = make([]response, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-barrier
			got[i] = a.post(t, wsA, body, key)
		}()
	}
	close(barrier)
	wg.Wait()
	return got
}

func TestConcurrentSameKeyOneSend(t *testing.T) {
	a := newApp(t)
	a.delay = 300 * time.Millisecond
	const n = 20
	got := a.postTogether(t, n, msg, "race")

	a.wantSends(t, 1)
	var original []response
	for _, r := range got {
		if r.status == http.StatusCreated && !r.replayed() {
			original = append(original, r)
		}
	}
	if len(original) != 1 {
		t.Fatalf("%d original 201 responses, want exactly 1", len(original))
	}
	conflicts := 0
	for i, r := range got {
		switch {
		case r.status == http.StatusCreated && !r.replayed():
		case r.status == http.StatusCreated && r.replayed():
			if !bytes.Equal(r.body, original[0].body) {
				t.Errorf("request %d: replay %s differs from the original %s", i, r.body, original[0].body)
			}
		case r.status == http.StatusConflict:
			conflicts++
			if r.header.Get("Retry-After") == "" || r.code() != string(msgapi.CodeIdempotencyInFlight) {
				t.Errorf("request %d: 409 without Retry-After or code %s: %v %s", i, msgapi.CodeIdempotencyInFlight, r.header, r.body)
			}
		default:
			t.Errorf("request %d: %d %s, want 409 or the replay", i, r.status, r.body)
		}
	}
	if conflicts == 0 {
		t.Errorf("no request got 409 although all %d overlapped a %s handler", n, a.delay)
	}
	ev := a.logs.events(t, "message.api.idempotency_conflict")
	if len(ev) != conflicts || (len(ev) > 0 && ev[0]["reason"] != "in_flight") {
		t.Errorf("%d conflict events (first %v), want %d with reason=in_flight", len(ev), ev, conflicts)
	}
	if r := a.post(t, wsA, msg, "race"); !r.replayed() || !bytes.Equal(r.body, original[0].body) {
		t.Errorf("after the race: %d %s, want the replay of the original", r.status, r.body)
	}
}

func TestValidationErrorReleasesKey(t *testing.T) {
	a := newApp(t)
	var bad response
	rt := a.roundTrips(func() { bad = a.post(t, wsA, `{"to":"+15550100000"}`, "k") })
	wantStatus(t, "invalid request", bad, http.StatusBadRequest)
	if rt != 3 {
		t.Errorf("validation failure cost %d round trips, want 3 (read, claim, delete conditional on the claim)", rt)
	}
	if rec, ok := a.record(t, wsA, "k"); ok {
		t.Fatalf("a request that failed validation left a record: %v", rec)
	}
	// The same invalid request again runs again (nothing was stored) ...
	wantStatus(t, "invalid request again", a.post(t, wsA, `{"to":"+15550100000"}`, "k"), http.StatusBadRequest)
	// ... and the corrected request with the same key sends.
	fixed := a.post(t, wsA, msg, "k")
	wantStatus(t, "corrected request", fixed, http.StatusCreated)
	if fixed.replayed() {
		t.Error("corrected request was replayed")
	}
	a.wantSends(t, 1)
}

func TestFailureBeforeSendStageReleasesKey(t *testing.T) {
	a := newApp(t)
	wantStatus(t, "store down before the send stage", a.post(t, wsA, `{"text":"x","unavailable":true}`, "k"), http.StatusServiceUnavailable)
	if _, ok := a.record(t, wsA, "k"); ok {
		t.Fatal("a request that stopped before the send stage left a record")
	}
	wantStatus(t, "retry", a.post(t, wsA, `{"text":"x"}`, "k"), http.StatusCreated)
	a.wantSends(t, 1)
}

// A 5xx after the message was written is not stored, and the claim is kept
// until its lease ends: an immediate retry gets 409 and cannot send again.
// Past the lease the retry runs; in msgapi the duplicate guard then returns
// the original message (15-minute window, far longer than the lease).
func TestServerErrorAfterSendStageKeepsClaim(t *testing.T) {
	a := newApp(t)
	const body = `{"text":"x","fail":true}`
	wantStatus(t, "first", a.post(t, wsA, body, "k"), http.StatusInternalServerError)
	a.wantSends(t, 1)
	rec, ok := a.record(t, wsA, "k")
	if !ok || rec["state"] != "in_progress" || rec["body"] != nil {
		t.Fatalf("record after a 5xx past the send stage: %v, want in_progress with no stored response", rec)
	}

	a.clock.Advance(lease - time.Second)
	retry := a.post(t, wsA, body, "k")
	wantStatus(t, "retry within the lease", retry, http.StatusConflict)
	if retry.header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}
	a.wantSends(t, 1)

	a.clock.Advance(2 * time.Second)
	wantStatus(t, "retry past the lease", a.post(t, wsA, body, "k"), http.StatusInternalServerError)
	a.wantSends(t, 2)
}

func TestExpiredRecordIsNew(t *testing.T) {
	a := newApp(t)
	first := a.post(t, wsA, msg, "k")
	wantStatus(t, "first", first, http.StatusCreated)

	a.clock.Advance(ttl) // expiresAt == now: expired
	if rec, ok := a.record(t, wsA, "k"); !ok || rec["state"] != "completed" {
		t.Fatalf("expired record should still be stored (no reaper ran): %v", rec)
	}
	var again response
	if rt := a.roundTrips(func() { again = a.post(t, wsA, msg, "k") }); rt != 3 {
		t.Errorf("request over an expired record cost %d round trips, want 3 (read, conditional rewrite, conditional store)", rt)
	}
	wantStatus(t, "same request after the TTL", again, http.StatusCreated)
	if again.replayed() || bytes.Equal(again.body, first.body) {
		t.Errorf("request after the TTL was replayed: %s", again.body)
	}
	a.wantSends(t, 2)
	// The new record counts 24 h from this request and replays it.
	if r := a.post(t, wsA, msg, "k"); !r.replayed() || !bytes.Equal(r.body, again.body) {
		t.Errorf("got %d %s, want the replay of the second send", r.status, r.body)
	}

	// A different body after expiry is a new request too, not 422.
	a.clock.Advance(ttl + time.Second)
	wantStatus(t, "different body after the TTL", a.post(t, wsA, `{"text":"new"}`, "k"), http.StatusCreated)
	a.wantSends(t, 3)
}

func TestCrashedHolderIsTakenOver(t *testing.T) {
	a := newApp(t)
	now := a.clock.Now()

	// Within its lease a holder is protected, even one that died.
	a.putRecord(t, wsA, "alive", msg, "in_progress", now.Add(-10*time.Second), now.Add(lease-10*time.Second), now.Add(-10*time.Second))
	r := a.post(t, wsA, msg, "alive")
	wantStatus(t, "holder within its lease", r, http.StatusConflict)
	if r.header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}
	a.wantSends(t, 0)

	// Past its lease, exactly one of 8 concurrent takers runs the request.
	created := now.Add(-2 * time.Minute)
	a.putRecord(t, wsA, "dead", msg, "in_progress", created, created.Add(lease), created)
	a.delay = 200 * time.Millisecond
	const n = 8
	got := a.postTogether(t, n, msg, "dead")
	a.wantSends(t, 1)
	originals := 0
	for i, r := range got {
		switch {
		case r.status == http.StatusCreated && !r.replayed():
			originals++
		case r.status == http.StatusCreated, r.status == http.StatusConflict:
		default:
			t.Errorf("taker %d: %d %s, want 201, its replay or 409", i, r.status, r.body)
		}
	}
	if originals != 1 {
		t.Errorf("%d takers ran the request, want 1", originals)
	}
	rec, ok := a.record(t, wsA, "dead")
	if !ok || rec["state"] != "completed" {
		t.Fatalf("record after the takeover: %v, want completed", rec)
	}
	// The key still lives 24 h from the first request, not from the takeover.
	if got := rec["expiresAt"].(bson.DateTime).Time(); !got.Equal(created.Add(ttl)) {
		t.Errorf("expiresAt %s, want %s (first request + TTL)", got, created.Add(ttl))
	}
}

// A holder that outlives its lease loses the key to a taker; its late
// response must not overwrite the taker's.
func TestLateHolderDoesNotOverwriteTaker(t *testing.T) {
	a := newApp(t)
	release := make(chan struct{})
	entered := make(chan struct{})
	a.hold = func(call int64) {
		if call == 1 {
			close(entered)
			<-release
		}
	}
	slow := make(chan response)
	go func() { slow <- a.post(t, wsA, msg, "k") }()
	<-entered
	a.clock.Advance(lease + time.Second)
	taker := a.post(t, wsA, msg, "k")
	wantStatus(t, "taker", taker, http.StatusCreated)
	close(release)
	late := <-slow
	wantStatus(t, "late holder", late, http.StatusCreated)
	a.wantSends(t, 2) // the lease was too short for this holder; the duplicate guard covers this case
	if r := a.post(t, wsA, msg, "k"); !r.replayed() || !bytes.Equal(r.body, taker.body) {
		t.Errorf("replay %s, want the taker's response %s", r.body, taker.body)
	}
}

func TestWorkspacesAreIndependent(t *testing.T) {
	a := newApp(t)
	ra := a.post(t, wsA, msg, "shared-key")
	rb := a.post(t, wsB, msg, "shared-key")
	wantStatus(t, "workspace A", ra, http.StatusCreated)
	wantStatus(t, "workspace B", rb, http.StatusCreated)
	if rb.replayed() || bytes.Equal(ra.body, rb.body) {
		t.Errorf("workspace B got workspace A's response: %s", rb.body)
	}
	a.wantSends(t, 2)
}

func TestNoHeaderPassesThrough(t *testing.T) {
	a := newApp(t)
	rt := a.roundTrips(func() {
		for range 2 {
			r := a.post(t, wsA, msg)
			wantStatus(t, "no header", r, http.StatusCreated)
			if r.replayed() {
				t.Error("a request without the header was replayed")
			}
		}
	})
	if rt != 0 {
		t.Errorf("requests without the header cost %d round trips, want 0", rt)
	}
	a.wantSends(t, 2)
}

func TestInvalidKeysAre400(t *testing.T) {
	a := newApp(t)
	for name, keys := range map[string][]string{
		"empty":         {""},
		"256 chars":     {strings.Repeat("k", 256)},
		"non-ASCII":     {"ключ-1"},
		"tab inside":    {"a\tb"},
		"two headers":   {"a", "b"},
		"empty quoted":  {`""`},
		"bad sf-string": {`"a"b"`},
	} {
		var r response
		rt := a.roundTrips(func() { r = a.post(t, wsA, msg, keys...) })
		if r.status != http.StatusBadRequest || r.code() != string(msgapi.CodeInvalid) {
			t.Errorf("%s: %d %s, want 400 %s", name, r.status, r.body, msgapi.CodeInvalid)
		}
		if rt != 0 {
			t.Errorf("%s: cost %d round trips, want 0", name, rt)
		}
	}
	a.wantSends(t, 0)
	wantStatus(t, "255 chars", a.post(t, wsA, msg, strings.Repeat("k", 255)), http.StatusCreated)
}
