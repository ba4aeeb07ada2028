package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/events/loki"
)

func newEcho(m *Metrics) *echo.Echo {
	e := echo.New()
	e.Use(m.Middleware)
	e.GET("/api/messages/:id", func(c echo.Context) error { return c.String(http.StatusOK, c.Param("id")) })
	e.POST("/api/messages", func(c echo.Context) error {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "no")
	})
	e.GET("/metrics", echo.WrapHandler(m.Handler()))
	return e
}

func serve(e *echo.Echo, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func TestMiddlewareLabelsByRouteTemplate(t *testing.T) {
	m := New()
	e := newEcho(m)
	for _, id := range []string{"msg_1", "msg_2", "msg_3"} {
		serve(e, http.MethodGet, "/api/messages/"+id)
	}
	if rec := serve(e, http.MethodPost, "/api/messages"); rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("POST: status %d, want the handler's error rendered as 422", rec.Code)
	}
	serve(e, http.MethodGet, "/no/such/path/abc")
	serve(e, http.MethodGet, "/no/such/path/def")

	want := `
# HELP msgapi_http_requests_total HTTP requests by method, route template and status code.
# TYPE msgapi_http_requests_total counter
msgapi_http_requests_total{method="GET",route="/api/messages/:id",status="200"} 3
msgapi_http_requests_total{method="GET",route="unmatched",status="404"} 2
msgapi_http_requests_total{method="POST",route="/api/messages",status="422"} 1
`
	if err := testutil.CollectAndCompare(m.requests, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.latency); n != 3 {
		t.Errorf("latency has %d series, want 3 (one per method and route)", n)
	}
}

func TestSendPathAndStore(t *testing.T) {
	m := New()
	m.Sent("sms", "sent")
	m.Sent("sms", "sent")
	m.Sent("email", "failed")
	m.Duplicate(events.ModeLockResolved)
	m.Duplicate("pending")
	m.Idempotency("replayed")
	m.StoreCommand("insert", 2*time.Millisecond)
	m.StoreCommand("find", time.Millisecond)
	m.StoreCommand("find", 3*time.Millisecond)

	for _, tt := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.sends.WithLabelValues("sms", "sent")), 2, "sms sent"},
		{testutil.ToFloat64(m.sends.WithLabelValues("email", "failed")), 1, "email failed"},
		{testutil.ToFloat64(m.duplicates.WithLabelValues("lock_resolved")), 1, "lock_resolved"},
		{testutil.ToFloat64(m.duplicates.WithLabelValues("pending")), 1, "pending"},
		{testutil.ToFloat64(m.idempotency.WithLabelValues("replayed")), 1, "replayed"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.what, tt.got, tt.want)
		}
	}
	body := scrape(t, m)
	for _, want := range []string{
		`msgapi_store_command_duration_seconds_count{command="find"} 2`,
		`msgapi_store_command_duration_seconds_count{command="insert"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Events are counted from the log stream, as zerolog writes it.
func TestEventsFromLogLines(t *testing.T) {
	m := New()
	log := zerolog.New(zerolog.MultiLevelWriter(io.Discard, m.Events()))
	log.Warn().Str("event", events.DuplicateGuardError).Msg("guard store error")
	log.Info().Str("event", events.IdempotentReplay).Msg("replay")
	log.Info().Str("event", events.IdempotentReplay).Msg("replay")
	log.Info().Msg("no event")
	log.Info().Str("note", `"event": inside a value`).Msg("still no event")
	log.Info().Str("event", "Unbounded text with spaces").Msg("odd")

	want := `
# HELP msgapi_events_total Event lines logged, by event name (only lines at or above the log level).
# TYPE msgapi_events_total counter
msgapi_events_total{event="message.api.duplicate_guard_error"} 1
msgapi_events_total{event="message.api.idempotent_replay"} 2
msgapi_events_total{event="other"} 1
`
	if err := testutil.CollectAndCompare(m.events, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestLokiCounters(t *testing.T) {
	m := New()
	if body := scrape(t, m); !strings.Contains(body, `msgapi_loki_lines_dropped_total{reason="queue_full"} 0`) {
		t.Errorf("without Loki the dropped counters should read 0:\n%s", grep(body, "msgapi_loki"))
	}
	m.WatchLoki(func() loki.Stats {
		return loki.Stats{Queued: 7, QueuedBytes: 7000, Truncated: 5, QueueFull: 42, PushFailed: 3, Shutdown: 1}
	})
	body := scrape(t, m)
	for _, want := range []string{
		`msgapi_loki_lines_dropped_total{reason="queue_full"} 42`,
		`msgapi_loki_lines_dropped_total{reason="push_failed"} 3`,
		`msgapi_loki_lines_dropped_total{reason="shutdown"} 1`,
		`msgapi_loki_lines_queued 7`,
		`msgapi_loki_bytes_queued 7000`,
		`msgapi_loki_lines_truncated_total 5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grep(body, "msgapi_loki"))
		}
	}
}

// Two Metrics in one process do not collide: nothing is global.
func TestNoGlobalRegistry(t *testing.T) {
	a, b := New(), New()
	a.Sent("sms", "sent")
	if got := testutil.ToFloat64(b.sends.WithLabelValues("sms", "sent")); got != 0 {
		t.Errorf("b sees a's send: %v", got)
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	e := echo.New()
	e.GET("/metrics", echo.WrapHandler(m.Handler()))
	rec := serve(e, http.MethodGet, "/metrics")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func grep(s, substr string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			fmt.Fprintln(&b, l)
		}
	}
	return b.String()
}

// Any token is a valid HTTP method and any path can be asked for: neither
// may add series. 1,000 made-up methods on made-up paths once grew /metrics
// to 301 MB.
func TestLabelsBoundedUnderMadeUpRequests(t *testing.T) {
	m := New()
	e := newEcho(m)
	serve(e, http.MethodGet, "/api/messages/msg_0")
	before := len(scrape(t, m))
	for i := range 1000 {
		method := fmt.Sprintf("M%04d%s", i, strings.Repeat("X", 200))
		for _, path := range []string{"/api/messages", "/api/messages/msg_" + fmt.Sprint(i), fmt.Sprintf("/nope/%d/%s", i, strings.Repeat("p", 200))} {
			serve(e, method, path)
		}
	}
	for _, method := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "get"} {
		serve(e, method, "/api/messages/msg_1")
	}

	allowedMethod := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true, "other": true}
	allowedRoute := map[string]bool{"/api/messages": true, "/api/messages/:id": true, "/metrics": true, "unmatched": true}
	series := 0
	for _, l := range strings.Split(scrape(t, m), "\n") {
		if !strings.HasPrefix(l, "msgapi_http_requests_total{") {
			continue
		}
		series++
		method := between(l, `method="`, `"`)
		route := between(l, `route="`, `"`)
		if !allowedMethod[method] || !allowedRoute[route] {
			t.Errorf("series with an unbounded label: %s", l)
		}
	}
	// Methods (8) × routes (4) × a handful of statuses is the ceiling.
	if series == 0 || series > 40 {
		t.Errorf("msgapi_http_requests_total has %d series, want 1..40", series)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("other", "/api/messages/:id", "405")) +
		testutil.ToFloat64(m.requests.WithLabelValues("other", "/api/messages/:id", "404")); got < 1000 {
		t.Errorf("made-up methods on /api/messages/:id counted %v times under method=other, want ≥ 1000", got)
	}
	if after := len(scrape(t, m)); after > before+64<<10 {
		t.Errorf("/metrics grew from %d to %d bytes, want under 64 KiB of growth (raw methods: megabytes)", before, after)
	}
}

// Should a line's "event" field ever carry input, the event label still
// has at most maxEventNames values.
func TestEventNamesCapped(t *testing.T) {
	m := New()
	log := zerolog.New(m.Events())
	log.Info().Str("event", events.Sent).Msg("")
	for i := range maxEventNames + 100 {
		log.Info().Str("event", fmt.Sprintf("made.up_%d", i)).Msg("")
	}
	log.Info().Str("event", events.Sent).Msg("")
	if n := testutil.CollectAndCount(m.events); n > maxEventNames+1 {
		t.Errorf("msgapi_events_total has %d series, want at most %d", n, maxEventNames+1)
	}
	if got := testutil.ToFloat64(m.events.WithLabelValues(events.Sent)); got != 2 {
		t.Errorf("%s counted %v, want 2 (names seen before the cap keep counting)", events.Sent, got)
	}
	if got := testutil.ToFloat64(m.events.WithLabelValues("other")); got < 100 {
		t.Errorf("other = %v, want ≥ 100", got)
	}
}

func between(s, start, end string) string {
	_, rest, _ := strings.Cut(s, start)
	v, _, _ := strings.Cut(rest, end)
	return v
}

func TestRateLimited(t *testing.T) {
	m := New()
	m.RateLimited("/api/messages", "ws_a")
	m.RateLimited("/api/messages", "ws_a")
	m.RateLimited("/api/messages", "ws_b")
	m.RateLimited("/api/messages", "not a workspace id")
	body := serve(newEcho(m), http.MethodGet, "/metrics").Body.String()
	for _, want := range []string{
		`msgapi_rate_limited_total{route="/api/messages",workspace_id="ws_a"} 2`,
		`msgapi_rate_limited_total{route="/api/messages",workspace_id="ws_b"} 1`,
		`msgapi_rate_limited_total{route="/api/messages",workspace_id="other"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// The latency histogram reaches past the slowest request: with the
// defaults (10 s send timeout + 3 s duplicate wait) a 13 s request lands
// in a finite bucket, and a longer configured timeout widens the range.
func TestLatencyBucketsReachPastTheSlowestRequest(t *testing.T) {
	for _, slowest := range []time.Duration{0, 13 * time.Second, 45 * time.Second, 5 * time.Minute} {
		m := New(SlowestRequest(slowest))
		h := m.latency.WithLabelValues("POST", "/api/messages")
		h.Observe(slowest.Seconds())
		rec := serve(newEcho(m), http.MethodGet, "/metrics")
		top := 0.0
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			var le float64
			var n int
			if _, err := fmt.Sscanf(line, `msgapi_http_request_duration_seconds_bucket{method="POST",route="/api/messages",le="%g"} %d`, &le, &n); err == nil && !math.IsInf(le, 1) {
				top = le
				if le >= slowest.Seconds() && n != 1 {
					t.Errorf("slowest %v: bucket le=%g holds %d, want the observation", slowest, le, n)
				}
			}
		}
		if top < 30 || top < 2*slowest.Seconds() {
			t.Errorf("slowest %v: top finite bucket %gs, want at least 30s and twice the slowest request", slowest, top)
		}
	}
}

// duplicate_pending events are counted per workspace (the pending-flood
// alert), with the label set bounded.
func TestPendingByWorkspace(t *testing.T) {
	m := New()
	log := zerolog.New(zerolog.MultiLevelWriter(io.Discard, m.Events()))
	for i := 0; i < 3; i++ {
		log.Info().Str("event", events.DuplicatePending).Str("workspaceId", "ws_a").Msg("pending")
	}
	log.Info().Str("event", events.DuplicatePending).Str("workspaceId", "ws_b").Msg("pending")
	log.Info().Str("event", events.DuplicateBlocked).Str("workspaceId", "ws_c").Msg("blocked")
	log.Info().Str("event", events.DuplicatePending).Str("workspaceId", `ws"}{`).Msg("pending")
	if n := testutil.CollectAndCount(m.pendingByWorkspace); n != 3 {
		t.Errorf("%d series, want ws_a, ws_b and other (a blocked duplicate is not pending)", n)
	}
	for ws, want := range map[string]float64{"ws_a": 3, "ws_b": 1, "other": 1} {
		if got := testutil.ToFloat64(m.pendingByWorkspace.WithLabelValues(ws)); got != want {
			t.Errorf("msgapi_duplicate_pending_total{workspace_id=%q} = %v, want %v", ws, got, want)
		}
	}
	for i := 0; i < maxWorkspaceLabels+5; i++ {
		log.Info().Str("event", events.DuplicatePending).Str("workspaceId", fmt.Sprintf("ws_%d", i)).Msg("pending")
	}
	if n := testutil.CollectAndCount(m.pendingByWorkspace); n > maxWorkspaceLabels+1 {
		t.Errorf("%d series, want at most %d workspaces and other", n, maxWorkspaceLabels)
	}
}
